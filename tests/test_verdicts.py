import pytest

from perflab.results import ResultsLog
from perflab.verdicts import Measured, judge


@pytest.mark.parametrize("m, kw, want", [
    (Measured(5.2, 4.9, 5.6), dict(at_least=4.0), "holds"),
    (Measured(4.1, 3.8, 4.5), dict(at_least=4.0), "within noise"),
    (Measured(3.9, 3.8, 4.5), dict(at_least=4.0), "within noise"),     # the median alone would say "does not hold"
    (Measured(2.1, 1.9, 2.3), dict(at_least=4.0, partly=1.05), "partly holds"),
    (Measured(1.0, 0.9, 1.1), dict(at_least=4.0, partly=1.05), "does not hold"),
    (Measured.exact(0), dict(at_most=0), "holds"),                     # a count: "no recompiles"
    (Measured.exact(3), dict(at_most=0), "does not hold"),
    (Measured(0.3, 0.25, 0.35), dict(at_most=0.2, partly=0.5), "partly holds"),
    (None, dict(at_least=2.0), "not tested here"),
    (Measured(9.0, 8.0, 10.0), dict(at_least=5.0, needs="cuda", device_type="cpu"), "not tested here"),
    (Measured(9.0, 8.0, 10.0), dict(at_least=5.0, needs="cuda", device_type="cuda"), "holds"),
])
def test_judge(m, kw, want):
    assert judge(m, **kw) == want


def test_bad_uses_are_refused(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        judge(Measured.exact(1), at_least=1, at_most=2)
    with pytest.raises(ValueError, match="low <= value <= high"):
        Measured(1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="is not one of"):
        ResultsLog(tmp_path / "r.jsonl", study="s", stamp={}).claim("c", seed="", measured="", verdict="sorta")


def test_log_claims_logs_every_row_and_the_headline(tmp_path, capsys):
    from perflab.verdicts import log_claims

    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    rows = [{"claim": "a", "seed": "2x", "measured": "2.1x", "verdict": "holds", "variant": "v"},
            {"claim": "b", "seed": "3x", "measured": "1.0x", "verdict": "does not hold", "source": "seed 002"}]
    log_claims(log, rows, headline="b")
    claims = log.rows(kind="claim")
    assert [r["claim"] for r in claims] == ["a", "b"] and claims[0]["variant"] == "v" and "source" not in claims[0]
    assert claims[1]["source"] == "seed 002" and "variant" not in claims[1]
    assert log.rows(kind="note")[0]["text"] == "b: 1.0x [does not hold]"
    out = capsys.readouterr().out
    assert "[holds] a\n    claimed: 2x\n" in out and "[does not hold] b (seed 002)\n" in out
    assert claims[0]["claimed"] == "2x"  # rows given with the old key "seed" are logged as "claimed"
    with pytest.raises(KeyError, match="no claim 'c'"):
        log_claims(log, rows, headline="c")


def test_log_claims_keeps_a_rows_rule_and_interval(tmp_path, capsys):
    from perflab.verdicts import log_claims

    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    log_claims(log, [{"claim": "a", "seed": "2x", "measured": "0x", "verdict": "does not hold", "rule": "x >= 2",
                      "value": 0.0, "low": 0.0, "high": 0.5}])
    [row] = log.rows(kind="claim")
    assert (row["rule"], row["value"], row["low"], row["high"]) == ("x >= 2", 0.0, 0.0, 0.5)
    assert "    rule: x >= 2" in capsys.readouterr().out


def test_log_claims_leaves_out_a_value_that_is_not_a_plain_number(tmp_path):
    from perflab.verdicts import Measured, log_claims

    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    log_claims(log, [{"claim": "a", "seed": "", "measured": "", "verdict": "holds", "value": Measured.exact(2.0)}])
    assert "value" not in log.rows(kind="claim")[0]
