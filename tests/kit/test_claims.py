"""The one claims kit (perflab.kit.claims): claim mistakes refused when the claims are built or judged, the setup a claim
is about, one meaning of partly and fixed, the log, the checks, the figure."""
import dataclasses
import math
from typing import Literal

import pytest

from perflab.kit.claims import Check, Claim, ClaimError, Claims, claims_figure, judged_text, report_checks, verdict_text
from perflab.kit.params import RunParams
from perflab.kit.results import ResultsLog
from perflab.kit.verdicts import Decision, Measured


@dataclasses.dataclass
class P:
    batch: int = 16
    compile: str = "off"


def claims(**kw):
    return Claims(Claim("speed", "at least 2x faster at batch 64", ">= 2x", at_least=2.0, setup={"batch": 64}),
                  Claim("syncs", "no host sync left", "0", at_most=0, fixed=True),
                  Claim("gpu", "10x on a GPU", "10x", at_least=10, partly=1.05, setup={"device": "cuda"},
                        why_not="a GPU target"),
                  headline="speed", params=P, **kw)


@dataclasses.dataclass
class RP(RunParams):
    batch: int = 1
    mode: Literal["head", "tail"] = "head"


@pytest.mark.parametrize("make, message", [
    (lambda: Claim("speed", "t", "2x", at_leats=2), "claim 'speed': unknown field 'at_leats'; a Claim takes"),
    (lambda: Claim("speed", "t", "2x"), "claim 'speed': give exactly one of at_least and at_most"),
    (lambda: Claim("speed", "t", "2x", at_least=2, partly=3), "claim 'speed': partly=3 must lie"),
    (lambda: Claim("sp eed", "t", "2x", at_least=2), "a claim's key must be a name"),
    (lambda: Claim("speed", "", "2x", at_least=2), "claim 'speed': text must be a non-empty string"),
    (lambda: Claim("speed", "t", "2x", at_least=2, setup={"device": "gpu"}), "device is a device type, one of"),
    (lambda: Claim("speed", "t", "2x", at_least=2, fixed="yes"), "fixed must be True or False"),
    (lambda: Claims(Claim("a", "t", "1", at_least=1), headline="sped"), "headline 'sped' is not among the claims: a"),
    (lambda: Claims(Claim("a", "t", "1", at_least=1), Claim("a", "u", "1", at_most=1)), "claims named twice: a"),
    (lambda: Claims(Claim("a", "t", "1", at_least=1, setup={"btach": 64}), params=P),
     "claim 'a': setup key 'btach' is not a parameter of P; allowed: device, batch, compile"),
    (lambda: Claims(Claim("a", "t", "1", at_least=1, setup={"batch": "64"}), params=P),
     "claim 'a': setup batch='64' is not an int, as P.batch is"),
    (lambda: Claims(Claim("a", "t", "1", at_least=1, setup={"mode": "max"}), params=RP),
     r"claim 'a': setup mode='max' is not one of 'head' \| 'tail', as RP.mode is"),  # | escaped: not an alternation
    (lambda: Claims(Claim("a", "t", "1", at_least=1, setup={"bach": 1}), params=RP),  # its device named once
     "claim 'a': setup key 'bach' is not a parameter of RP; allowed: device, out_dir, seed, threads, min_run_time, "
     "max_run_time, verdict_time, batch, mode$"),
])
def test_claim_mistakes_are_refused_when_the_claims_are_built(make, message):
    with pytest.raises(ClaimError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_judge_refuses_keys_that_do_not_match_and_a_decision_against_another_rule():
    c = claims()
    with pytest.raises(ClaimError, match="measured for no claim: sped; claims not measured: speed .*the claims: "
                                         "speed, syncs, gpu"):
        c.judge({"sped": (None, ""), "syncs": (None, ""), "gpu": (None, "")}, cfg=P(), device="cpu")
    d = Decision("holds", 3.0, 2.5, 3.5, 9, 0.1, 0.99, "speedup", at_least=1.5)
    with pytest.raises(ClaimError, match=r"claim 'speed' is \{'at_least': 2.0\} but its decision was made against"):
        c.judge({"speed": (d, ""), "syncs": (None, ""), "gpu": (None, "")}, cfg=P(batch=64), device="cpu")
    with pytest.raises(ClaimError, match="no claim 'sped'; the claims: speed, syncs, gpu"):
        c["sped"]
    with pytest.raises(ClaimError, match="is about batch: judge"):
        c.judge({"speed": (None, ""), "syncs": (None, ""), "gpu": (None, "")}, device="cpu")


def test_a_claim_measured_under_another_setup_is_not_tested_here_and_says_what_was_measured():
    c = claims()
    found = {"speed": (Measured(3.0, 2.5, 3.5), "3x"), "syncs": (Measured.exact(0), "0 syncs"),
             "gpu": (Measured(12.0, 11.0, 13.0), "12x")}
    rows = {r["key"]: r for r in c.judge(found, cfg=P(batch=16), device="cpu")}
    assert verdict_text(rows["speed"]) == "not tested here (measured at batch=16)"
    assert verdict_text(rows["gpu"]) == "not tested here (measured on cpu)"
    assert rows["syncs"]["verdict"] == "fixed"                       # fixed=True: "holds" reads "fixed"
    rows = {r["key"]: r for r in c.judge(found, cfg=P(batch=64), device="cuda")}
    assert rows["speed"]["verdict"] == "holds" and rows["gpu"]["verdict"] == "holds" and "why" not in rows["speed"]


@pytest.mark.parametrize("m, want", [
    (Measured(2.0, 1.5, 2.5), "partly holds"),       # the whole interval below 10 and above 1.05
    (Measured(1.2, 1.0, 1.4), "does not hold"),      # below 10; whether above 1.05 is not settled: no "partly"
    (Measured(9.0, 8.0, 11.0), "within noise"),
])
def test_partly_means_the_whole_interval_past_it(m, want):
    rows = claims().judge({"speed": (None, ""), "syncs": (None, ""), "gpu": (m, "")}, cfg=P(), device="cuda")
    assert rows[2]["verdict"] == want


def test_log_prints_and_logs_each_row_and_the_headline(tmp_path, capsys):
    c = claims()
    d = Decision("holds", 3.0, 2.5, 3.5, 12, 0.31, 0.99, "speedup", at_least=2.0, calls=(3, 8), typical=2.9,
                 typical_low=2.7, typical_high=3.1, block=0.005)
    rows = c.judge({"speed": (d, "one call at batch 64"), "syncs": (Measured.exact(0), "0 syncs"),
                    "gpu": (None, "no GPU here")}, cfg=P(batch=64), device="cpu")
    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    c.log(log, rows)
    logged = log.rows(kind="claim")
    assert [r["key"] for r in logged] == ["speed", "syncs", "gpu"]
    assert logged[0]["rounds"] == 12 and logged[0]["at_least"] == 2.0 and logged[2]["why"] == "measured on cpu"
    assert (logged[0]["calls"], logged[0]["typical"]) == ("3/8", 2.9)       # what was measured, in the log
    assert log.rows(kind="note")[0]["text"] == "at least 2x faster at batch 64: one call at batch 64 [holds]"
    out = capsys.readouterr().out
    assert "[holds] at least 2x faster at batch 64\n    claimed: >= 2x\n    here: one call at batch 64\n" in out
    assert ("judged: 3.00 [2.50, 3.50] against >= 2 (99% interval; mean of 12 paired rounds of 3 and 8 calls (blocks of 5 "
            "ms), typical 2.90; 0.31 s)") in out
    assert "[not tested here (measured on cpu)] 10x on a GPU" in out
    assert judged_text(rows[1]) == "0 (exact) against <= 0"


def test_report_checks_logs_prints_and_stops_on_a_failure(tmp_path, capsys):
    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    assert report_checks(log, [Check("a", True, "error 1e-7 (allowed 1e-5)")]) == [Check("a", True,
                                                                                         "error 1e-7 (allowed 1e-5)")]
    with pytest.raises(AssertionError, match=r"correctness checks failed: b \(error 3e-2 \(allowed 1e-5\)\)"):
        report_checks(log, [("b", False, "error 3e-2 (allowed 1e-5)"), ("c", True, "")])
    report_checks(log, {"d": False}, stop=False)
    assert [r["name"] for r in log.rows(kind="check")] == ["a", "b", "c", "d"]
    assert "FAIL  b (error 3e-2 (allowed 1e-5))" in capsys.readouterr().out


def _texts(fig) -> str:
    return "\n".join([ax.get_title("left") for ax in fig.axes]
                     + [t.get_text() for ax in fig.axes for t in [ax.xaxis.label, *ax.texts]])


def test_the_figure_reads_without_the_table_one_panel_per_claim_in_its_units(tmp_path):
    """Each claim judged on an interval has a panel: its full text heads it, its value, interval, rule and how it was
    measured are printed under it, the threshold is a line at its own value (issue 39: figures that read alone); a
    claim not tested here has none (issue 47: the verdict card lists it)."""
    import matplotlib

    matplotlib.use("Agg")
    long = "The optimized solver is at least 10x faster per LM iteration than the baseline, a claim worded at length " * 2
    c = Claims(Claim("speed", long, "10x", at_least=10.0), Claim("share", "a share at most 5%", "5%", at_most=0.05),
               Claim("gpu", "a GPU claim", "x", at_least=2.0, setup={"device": "cuda"}))
    rows = c.judge({"speed": (Measured(14.5, 13.6, 16.1), "14.5x"), "share": (Measured(0.03, 0.02, 0.04), "3%"),
                    "gpu": (None, "")}, device="cpu")
    rows[0] = dataclasses.replace(rows[0], how="mean of 40 paired rounds of 1 and 14 calls, typical 14.2", typical=14.2)
    fig = claims_figure(rows, title="s")
    assert len(fig.axes) == 2
    text = _texts(fig)
    assert long.strip() in text.replace("\n", " ")                      # whole, wrapped, not cut
    assert "holds · 14.5 [13.6, 16.1] against >= 10 · mean of 40 paired rounds of 1 and 14 calls" in text
    assert "holds · 0.0300 [0.0200, 0.0400] against <= 0.05" in text and "not tested here" not in text
    speed = fig.axes[0]
    assert speed.get_xscale() == "linear" and speed.get_xlim()[0] < 10 < speed.get_xlim()[1]   # spans < 3x
    assert any(list(line.get_xdata()) == [10.0, 10.0] for line in speed.lines)       # the threshold at 10
    assert any(line.get_marker() == "D" and list(line.get_xdata()) == [14.2] for line in speed.lines)   # typical
    fig.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    two = _texts(claims_figure({"A": rows, "B": rows}))
    assert "A: holds · 14.5" in two and "B: holds · 14.5" in two


def test_the_figure_reads_rows_as_the_log_holds_them():
    import matplotlib

    matplotlib.use("Agg")
    logged = [{"key": "a", "claim": "a", "verdict": "holds", "value": 3.0, "low": 2.5, "high": "inf", "at_least": 2.0,
               "rule": ">= 2"},
              {"key": "b", "claim": "b", "verdict": "holds"},                       # a row from before the kit
              {"key": "c", "claim": "c", "verdict": "not tested here", "why": "measured on cpu", "value": 1.0,
               "low": 0.5, "high": 1.5, "at_least": 5.0}]
    fig = claims_figure(logged)
    text = _texts(fig)
    assert "holds · 3.00 [2.50, inf] against >= 2" in text and len(fig.axes) == 1   # b and c: no interval to draw
    assert "no interval logged" not in text and "not tested here" not in text
    assert judged_text(logged[0]) == "3.00 [2.50, inf] against >= 2" and judged_text(logged[1]) == ""


def test_several_setup_keys_read_as_one_phrase_and_why_not_is_printed(tmp_path, capsys):
    c = Claims(Claim("a", "10x at the seed's shapes on a GPU", "10x", at_least=10,
                     setup={"device": "cuda", "batch": 64, "compile": "default"}, why_not="a GPU mechanism"), params=P)
    [row] = c.judge({"a": (Measured(3.0, 2.0, 4.0), "3x")}, cfg=P(batch=16), device="cpu")
    assert verdict_text(row) == "not tested here (measured on cpu at batch=16, compile=off)"
    c.log(ResultsLog(tmp_path / "r.jsonl", study="s", stamp={}), [row])
    out = capsys.readouterr().out
    assert "    why: a GPU mechanism" in out and "judged:" not in out


def test_a_setup_key_after_the_device_is_checked_too():
    with pytest.raises(ClaimError, match="claim 'a': setup key 'btach' is not a parameter of P"):
        Claims(Claim("a", "t", "1", at_least=1, setup={"device": "cuda", "btach": 64}), params=P)


def test_the_log_holds_what_each_row_says_and_the_printout_its_source(tmp_path, capsys):
    import types

    c = Claims(Claim("speed", "2x faster", ">= 2x", at_least=2.0, source="seed 002"),
               Claim("mem", "half the memory", "<= 0.5", at_most=0.5), headline="mem")
    rows = c.judge({"speed": (Measured(2.5, 2.2, 2.8), "2.5x"), "mem": (Measured.exact(0.4), "0.4 of it")})
    assert rows[1].note == "" and "note" not in rows[1]      # an empty field is not logged
    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    c.log(types.SimpleNamespace(log=log), rows)              # a run: its .log
    speed, mem = log.rows(kind="claim")
    assert (speed["claim"], speed["claimed"], speed["measured"], speed["verdict"]) == ("2x faster", ">= 2x", "2.5x",
                                                                                       "holds")
    assert speed["source"] == "seed 002" and "source" not in mem and "note" not in mem
    assert log.rows(kind="note")[0]["text"] == "half the memory: 0.4 of it [holds]"
    out = capsys.readouterr().out
    assert out == ("[holds] 2x faster (seed 002)\n    claimed: >= 2x\n    here: 2.5x\n"
                   "    judged: 2.50 [2.20, 2.80] against >= 2\n"
                   "[holds] half the memory\n    claimed: <= 0.5\n    here: 0.4 of it\n"
                   "    judged: 0.4 (exact) against <= 0.5\n")
    with pytest.raises(ClaimError, match=r"headline 'speed_2x' is not among the rows: speed, mem$"):
        c.log(log, rows, headline="speed_2x")


def test_report_checks_logs_and_prints_each_outcome_and_names_every_failure(tmp_path, capsys):
    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    run = type("Run", (), {"log": log})()
    checks = [Check("a", True, "gap 1e-7"), Check("b", False), Check("c", False, "gap 3e-2")]
    with pytest.raises(AssertionError, match=r"^correctness checks failed: b; c \(gap 3e-2\)$"):
        report_checks(run, checks)
    assert report_checks(run, {"d": 1, "e": 0}, stop=False) == [Check("d", True), Check("e", False)]
    assert [(r["name"], r["passed"], r["detail"]) for r in log.rows(kind="check")] == [
        ("a", True, "gap 1e-7"), ("b", False, ""), ("c", False, "gap 3e-2"), ("d", True, ""), ("e", False, "")]
    assert capsys.readouterr().out == "PASS  a (gap 1e-7)\nFAIL  b\nFAIL  c (gap 3e-2)\nPASS  d\nFAIL  e\n"


def test_a_setup_value_of_another_type_is_named_with_its_article():
    with pytest.raises(ClaimError, match="claim 'a': setup compile=1 is not a str, as P.compile is"):
        Claims(Claim("a", "t", "1", at_least=1, setup={"compile": 1}), params=P)


def test_judged_text_needs_a_value_and_a_rule_and_says_rounds_and_note():
    assert judged_text({"value": 1.0, "low": 1.0, "high": 1.0}) == ""             # no rule: nothing judged
    assert judged_text({"rule": ">= 2"}) == ""                                      # no value
    row = {"value": 2.5, "low": 2.0, "high": 3.0, "rule": ">= 2", "confidence": 0.99, "rounds": 12, "seconds": 0.5,
           "note": "budget spent"}
    assert judged_text(row) == "2.50 [2.00, 3.00] against >= 2 (99% interval; 12 rounds; 0.50 s); budget spent"


def test_judged_text_writes_the_numbers_in_the_claims_unit_as_the_rule_is():
    """A share is kept as a fraction: judged, it reads in percent beside its rule ('>= 66.6%'), not '0.817 against >= 66.6%'."""
    share = {"value": 0.817, "low": 0.779, "high": 0.855, "rule": ">= 66.6%", "unit": "%"}
    assert judged_text(share) == "81.7% [77.9, 85.5] against >= 66.6%"
    assert judged_text({"value": 0.238, "low": 0.238, "high": 0.238, "rule": "<= 40%", "unit": "%"}) == \
        "23.8% (exact) against <= 40%"
    assert judged_text({"value": 13.6, "low": 12.7, "high": 14.6, "rule": ">= 10x", "unit": "x"}) == \
        "13.6x [12.7, 14.6] against >= 10x"


def _marks(ax):
    """An axis' lines as (marker, x data, colour, line style, line width)."""
    import matplotlib.colors as mc

    return [(line.get_marker(), [float(x) for x in line.get_xdata()], mc.to_hex(line.get_color()), line.get_linestyle(),
             line.get_linewidth()) for line in ax.lines]


def test_the_figure_draws_each_interval_value_and_threshold_where_they_are():
    """Where each mark is, in data units: the interval as a bar from low to high in its verdict's colour (an unbounded
    end as an arrow at the edge), the value as a dot, the threshold a black line, partly a dashed one; linear where a
    number is not positive; the axes hold every number; several runs one row each."""
    import matplotlib

    from perflab.kit.claims import COLORS

    matplotlib.use("Agg")
    c = Claims(Claim("speed", "3x faster", "3x", at_least=3.0, partly=1.2),
               Claim("delta", "a change of at most 0.1", "0.1", at_most=0.1, partly=0.3),
               Claim("open", "a rate of at least 2", "2", at_least=2.0))
    rows = c.judge({"speed": (Measured(2.0, 1.5, 2.5), "2x"), "delta": (Measured(0.05, -0.2, 0.2), "0.05"),
                    "open": (Measured(3.0, -math.inf, math.inf), "3")})
    fig = claims_figure({"A": rows, "B": rows[:1]})
    speed, delta, open_ = fig.axes
    assert (speed.get_xscale(), delta.get_xscale()) == ("linear", "linear")  # 1.2-3: under 3x; delta's low is < 0
    partly, noise = COLORS["partly holds"], COLORS["within noise"]
    assert ("None", [1.5, 2.5], partly, "-", 5.0) in _marks(speed)           # run A's bar, and run B's (a row below)
    assert [m[1] for m in _marks(speed) if m[0] == "o"] == [[2.0], [2.0]]
    assert ("None", [3.0, 3.0], "#000000", "-", 1.2) in _marks(speed)        # the threshold
    assert ("None", [1.2, 1.2], "#f9a825", "--", 1.2) in _marks(speed)       # partly
    assert [list(line.get_ydata()) for line in speed.lines if line.get_marker() == "o"] == [[0], [-1]]
    assert speed.get_ylim() == (-1.6, 0.8)
    lo, hi = speed.get_xlim()
    assert lo < 1.2 and hi > 3.0 and lo > 0
    assert ("None", [-0.2, 0.2], noise, "-", 5.0) in _marks(delta)
    assert ("None", [0.3, 0.3], "#f9a825", "--", 1.2) in _marks(delta) and ("None", [0.1, 0.1], "#000000", "-", 1.2) \
        in _marks(delta)
    lo, hi = delta.get_xlim()
    assert lo < -0.2 and hi > 0.3
    # both ends unbounded: the bar from edge to edge, an arrow at each
    lo, hi = open_.get_xlim()
    arrows = [(m[0], m[1]) for m in _marks(open_) if m[0] in "<>"]
    assert arrows == [("<", [lo]), (">", [hi])] and lo < 2.0 < 3.0 < hi
    assert not any(m[0] == "D" for ax in fig.axes for m in _marks(ax))     # no typical round logged


def test_the_log_scale_is_for_positive_ratios():
    from perflab.kit.claims import _ratio_scale

    assert _ratio_scale({"value": 2.0, "low": 1.8, "high": 2.2, "at_least": 1.5, "at_most": None, "partly": None})
    assert _ratio_scale({"value": 0.2, "low": 0.1, "high": 0.5, "at_least": None, "at_most": 0.3, "partly": None})
    assert not _ratio_scale({"value": 1.2, "low": 1.1, "high": 1.3, "at_least": 1.4, "at_most": None, "partly": None})
    assert not _ratio_scale({"value": 2.0, "low": 0.0, "high": 4.0, "at_least": 1.5, "at_most": None, "partly": None})
    assert not _ratio_scale({"value": math.inf, "low": None, "high": None, "at_least": None})   # no finite number


def test_numbers_read_with_three_figures_and_commas_from_a_thousand():
    from perflab.kit.formatting import num, num_interval

    assert [num(x) for x in (-math.inf, math.inf, 999.0, 1000.0, 23456.7, 0.012345, 1e15)] == [
        "-inf", "inf", "999", "1,000", "23,457", "0.0123", "1e+15"]
    # a measured number's three figures say three are known: an interval [12.04, 15.96] is '[12.0, 16.0]', not
    # '[12, 16]'; an exact one (a count, a threshold) as short as it is
    assert [num(x, measured=True) for x in (12.04, 15.96, 1.1, 1.0, 3138.0, 0, 0.9996)] == [
        "12.0", "16.0", "1.10", "1.00", "3,138", "0", "1.00"]
    assert [num(x) for x in (12.04, 1.1, 1.0, 0.4)] == ["12", "1.1", "1", "0.4"]
    assert num_interval(13.93, 12.04, 15.96) == "13.9 [12.0, 16.0]" and num_interval(2, 1.5, 2.5, "x") == "2.00x [1.50, 2.50]"


def test_a_logged_row_reads_back_dropping_an_incomplete_interval_whole_and_keeping_the_rule():
    from perflab.kit.claims import ClaimRow

    row = ClaimRow.from_log({"claim": "a", "value": 2.0, "low": "-inf", "at_least": 1.5, "partly": None, "kind": "claim"})
    assert dict(row) == {"key": "a", "claim": "a", "at_least": 1.5}      # the log's own fields (kind) are not the row's
    row = ClaimRow.from_log({"claim": "b", "value": 2.0, "low": "-inf", "high": "inf", "rounds": 3, "setup": {"k": 4}})
    assert (row.value, row.low, row.high, row.rounds, row.setup) == (2.0, -math.inf, math.inf, 3, {"k": 4})
    # a row from before the claim kept its key and `claimed` (outputs/h100/1a70d9c): its text is its key, seed its claim
    old = ClaimRow.from_log({"claim": "2x faster", "seed": ">= 2x", "measured": "2.5x", "verdict": "holds"})
    assert (old.key, old.claimed, old["verdict"]) == ("2x faster", ">= 2x", "holds")


def test_a_row_names_the_sizes_it_ran_at_beside_its_setup():
    """`Claims(shown=...)`: the parameters every card row names as this run ran them (the card's setup column), a
    claim's own `shown` instead of them, a measurement's `at` for a shown key; a name that is no parameter refused."""
    import dataclasses
    import types

    from perflab.kit.card import setup_cell

    @dataclasses.dataclass
    class P:
        batch: int = 512
        rows: int = 64
        k: int = 3

    c = Claims(Claim("fast", "fast", ">= 2x", at_least=2.0, setup={"device": "cpu"}),
               Claim("count", "a count", "0", at_most=0, unit="syncs", shown=("k",)),
               params=P, shown=("batch", "rows"))
    cfg = types.SimpleNamespace(batch=512, rows=64, k=3)
    fast, count = c.judge({"fast": (Measured(3.0, 2.5, 3.5), "3x", {"batch": 128}),
                           "count": (Measured.exact(0), "0")}, cfg=cfg, device="cpu")
    assert fast.setup == {"device": "cpu", "batch": 128, "rows": 64} and fast.verdict == "holds"
    assert setup_cell(fast) == "batch=128 · rows=64" and setup_cell(count) == "k=3"
    with pytest.raises(ClaimError, match=r"claim 'b': shown 'nope' is not a parameter of P"):
        Claims(Claim("b", "b", "1", at_least=1, shown=("nope",)), params=P)
    with pytest.raises(ClaimError, match="shown is a tuple of parameter names"):
        Claims(Claim("b", "b", "1", at_least=1), shown="batch")


def test_a_row_records_the_setup_as_it_ran_and_round_trips_through_the_log(tmp_path):
    """The row's setup is what ran: the run's parameters, or the value a measurement gives for its own setup key
    (a search that ran at 2,048 rows while the notebook's batch said 512); the log holds it and reads it back."""
    import types

    from perflab.kit.claims import ClaimRow

    c = Claims(Claim("fast", "fast at batch 2048", ">= 2x", at_least=2.0, setup={"batch": 2048}),
               Claim("gpu", "on a GPU", ">= 2x", at_least=2.0, setup={"device": "cuda"}))
    cfg = types.SimpleNamespace(batch=512)
    rows = c.judge({"fast": (Measured(3.0, 2.5, 3.5), "3x", {"batch": 2048}), "gpu": (None, "-")}, cfg=cfg, device="cpu")
    assert rows[0].setup == {"batch": 2048} and rows[0].verdict == "holds"
    assert rows[1].setup == {"device": "cpu"} and rows[1].why == "measured on cpu"
    off = c.judge({"fast": (Measured(3.0, 2.5, 3.5), "3x"), "gpu": (None, "-")}, cfg=cfg, device="cpu")[0]
    assert (off.verdict, off.why, off.setup) == ("not tested here", "measured at batch=512", {"batch": 512})
    with pytest.raises(ClaimError, match=r"claim 'fast': measured at \['k'\], which is not in its setup or shown \(batch\)"):
        c.judge({"fast": (None, "-", {"k": 1}), "gpu": (None, "-")}, cfg=cfg, device="cpu")
    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    c.log(log, rows)
    back = [ClaimRow.from_log(r) for r in log.rows(kind="claim")]
    assert back == rows


@pytest.mark.parametrize("make, message", [
    (lambda: Claims(Claim("a", "t", "1", at_least=1), "b"), r"^Claims takes Claim objects, got \['Claim', 'str'\]$"),
    (lambda: Claims(*[Claim(k, "t", "1", at_least=1) for k in "abab"]), "^claims named twice: a, b$"),
    (lambda: Claims(Claim("a", "t", "1", at_least=1), Claim("b", "t", "1", at_least=1), headline="c"),
     "^headline 'c' is not among the claims: a, b$"),
    (lambda: Claim("a", "t", "1", at_least=1, x=1, y=2), "^claim 'a': unknown field 'x', 'y'; a Claim takes key, text, "
     "claimed and at_least, at_most, partly, fixed, setup, source, metric, why_not, unit, measured_by, shown$"),
    (lambda: Claim("a", "t", "", at_least=1), "^claim 'a': claimed must be a non-empty string, got ''$"),
    (lambda: Claim("a", "t", "1", at_least=1, setup=[("batch", 1)]),
     r"^claim 'a': setup must be a mapping of parameter name to value, got \[\('batch', 1\)\]$"),
    (lambda: Claim("a", "t", "1", at_least=1, setup={1: 2}), "^claim 'a': setup must be a mapping"),
])
def test_claim_mistakes_are_named_in_full(make, message):
    with pytest.raises(ClaimError, match=message):
        make()


def test_a_claims_optional_fields_default_to_empty_and_the_claims_iterate_in_order():
    a = Claim("a", "t", "1", at_least=1)
    b = Claim("b", "t", "1", at_most=1, source="seed 002", metric="ms per step", why_not="a GPU mechanism")
    assert (a.source, a.metric, a.why_not, a.fixed, a.setup) == ("", "", "", False, ())
    assert (b.source, b.metric, b.why_not) == ("seed 002", "ms per step", "a GPU mechanism")
    assert list(Claims(a, b)) == [a, b] and len(Claims(a, b)) == 2
    assert Claim("c", "t", "1", at_least=1, setup={"batch": 64}).off_setup(object()) == "at batch=None"  # no such field


@pytest.mark.parametrize("found, message", [
    ({"a": (None, ""), "x": (None, ""), "y": (None, "")},
     r"^measured for no claim: x, y; claims not measured: b, c \(give None for one not measured here\); the claims: a, b, c$"),
    ({"a": (None, ""), "b": (None, ""), "c": (None, ""), "x": (None, "")}, "^measured for no claim: x; the claims: a, b, c$"),
    ({"a": (None, "")}, r"^claims not measured: b, c \(give None for one not measured here\); the claims: a, b, c$"),
    ({"a": [None, ""], "b": (None, ""), "c": (None, "")},
     r"^claim 'a': give Evidence\(measurement or None, sentence\) or Evidence\(\.\.\., sentence, \{setup key: value it "
     r"ran at\}\), got \[None, ''\]$"),
    ({"a": (None, 5), "b": (None, ""), "c": (None, "")}, r"^claim 'a': give Evidence\(measurement or None, sentence\) or"),
    ({"a": (None, "", 3), "b": (None, ""), "c": (None, "")}, r"^claim 'a': give Evidence\(measurement or None, sentence\) or"),
    ({"a": (2.0, ""), "b": (None, ""), "c": (None, "")},
     "^claim 'a': a measurement is a Measured or a Decision, got float$"),
])
def test_judge_refuses_what_it_cannot_read_naming_it(found, message):
    c = Claims(*[Claim(k, "t", "1", at_least=1) for k in "abc"])
    with pytest.raises(ClaimError, match=message):
        c.judge(found)


def test_judge_reads_the_device_type_of_a_device_and_needs_one_only_for_a_device_claim():
    import torch

    c = Claims(Claim("cpu", "t", "1", at_least=1, setup={"device": "cpu"}), Claim("b", "t", "1", at_least=1,
                                                                                  setup={"batch": 16}), params=P)
    found = {"cpu": (Measured.exact(2.0), "2"), "b": (Measured.exact(2.0), "2")}
    assert [r["verdict"] for r in c.judge(found, cfg=P(), device=torch.device("cpu"))] == ["holds", "holds"]
    with pytest.raises(ClaimError, match=r"^claim 'cpu' is about a device type: judge\(..., device=run.device\)$"):
        c.judge(found, cfg=P())
    only_batch = Claims(Claim("b", "t", "1", at_least=1, setup={"batch": 16}), params=P)
    assert only_batch.judge({"b": (Measured.exact(2.0), "2")}, cfg=P())[0]["verdict"] == "holds"   # no device needed


def test_a_row_says_why_it_was_not_tested_and_what_a_decision_measured():
    c = Claims(Claim("a", "t", "1", at_least=1, why_not="a GPU target"), Claim("b", "t", "1", at_least=1),
               Claim("c", "t", "1", at_least=1, setup={"batch": 64}, why_not="the seed's batch"),
               Claim("d", "t", "1", at_least=1, why_not="said where not tested"), params=P)
    d = Decision("holds", 3.0, 2.5, 3.5, 12, 0.31, 0.99, "speedup", at_least=1, typical=2.9, typical_low=2.7,
                 typical_high=3.1, note="drift added")
    a, b, cc, dd = c.judge({"a": (None, ""), "b": (None, ""), "c": (None, ""), "d": (d, "3x")}, cfg=P())
    assert (a["why"], b["why"], cc["why"], cc["why_not"]) == ("a GPU target", "nothing measured", "measured at batch=16",
                                                              "the seed's batch")
    assert "why_not" not in a and "why" not in dd and "why_not" not in dd
    assert {k: dd[k] for k in ("quantity", "typical", "typical_low", "typical_high", "note", "value", "low", "high")} == {
        "quantity": "speedup", "typical": 2.9, "typical_low": 2.7, "typical_high": 3.1, "note": "drift added",
        "value": 3.0, "low": 2.5, "high": 3.5}


def test_a_panels_words_are_its_rows_words_wrapped_to_the_figures_width():
    """The title, the numbers under a drawn panel and the reason on an undrawn one: exactly the rows' words, wrapped at
    150 and 170 characters (the figure's width), an undrawn panel's text at its left, in axes units, the axes off."""
    import matplotlib

    from perflab.kit.claims import _label

    matplotlib.use("Agg")
    title = "a" * 75 + " " + "b" * 75                                  # 151 characters: two lines at 150
    how = "c" * 61 + " " + "d" * 68                                     # the label's line: 171 characters
    rows = [{"key": "s", "claim": title, "verdict": "holds", "value": 2.5, "low": 2.0, "high": 3.0, "at_least": 2.0,
             "rule": ">= 2", "how": how},
            {"key": "g", "claim": "on a GPU", "verdict": "not tested here", "why": "x" * 76 + " " + "y" * 76,
             "value": 1.0, "low": 0.5, "high": 1.5, "at_least": 5.0}]
    label = _label(rows[0], {k: rows[0].get(k) for k in ("value", "low", "high")}, "")
    assert label == "holds · 2.50 [2.00, 3.00] against >= 2 · " + how and len(label) == 171
    fig = claims_figure(rows)
    [drawn] = fig.axes                                                  # not tested: no panel (the card says why)
    assert drawn.get_title("left") == "a" * 75 + "\n" + "b" * 75
    assert drawn.xaxis.label.get_text() == "holds · 2.50 [2.00, 3.00] against >= 2 · " + "c" * 61 + "\n" + "d" * 68
    assert fig._suptitle is None                                        # no title given, none drawn
    assert _label({"verdict": "holds"}, {"value": 3.0, "low": 3.0, "high": 3.0}, "B") == "B: holds · 3 against "


def test_the_figure_reads_rows_by_claim_text_and_several_runs_each_where_it_has_the_claim():
    import matplotlib

    matplotlib.use("Agg")
    a = {"claim": "a", "verdict": "holds", "value": 2.0, "low": 1.5, "high": 2.5, "at_least": 1.2, "rule": ">= 1.2"}
    b = dict(a, claim="b", value=3.0, low=2.5, high=3.5)
    fig = claims_figure({"A": [a], "B": [a, b], "C": [b]}, title="three runs")
    assert [ax.get_title("left") for ax in fig.axes] == ["a", "b"]      # rows without a key: by their claim's text
    assert fig.axes[1].xaxis.label.get_text() == "B: holds · 3.00 [2.50, 3.50] against >= 1.2\nC: holds · 3.00 [2.50, 3.50] against >= 1.2"
    assert [list(line.get_ydata()) for line in fig.axes[1].lines if line.get_marker() == "o"] == [[-1], [-2]]
    assert fig._suptitle.get_text() == "three runs"
    one = claims_figure({"A": [a, b]}).get_size_inches()[1]
    assert one < fig.get_size_inches()[1]                               # each run a row: a taller panel


def test_the_scale_and_limits_hold_every_mark_at_the_edges_of_what_a_row_can_be():
    import matplotlib

    matplotlib.use("Agg")
    base = {"verdict": "holds", "rule": ""}
    rows = [dict(base, key="wide", claim="wide", value=1.0, low=0.1, high=10.0, at_least=0.5, typical=0.0),
            dict(base, key="ratio", claim="ratio", value=1.2, low=1.1, high=1.3, at_least=1.0, typical=5.0),
            dict(base, key="zero", claim="zero", value=0.0, low=0.0, high=0.0, at_most=0.0),
            dict(base, key="neg", claim="neg", value=-2.0, low=-3.0, high=-1.0, at_most=-0.5),
            dict(base, key="str", claim="str", value=2.0, low=1.0, high=3.0, at_least=1.5, typical="nan")]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")          # matplotlib refuses a limit <= 0 on a log axis with a warning
        wide, ratio, neg, typ = claims_figure(rows).axes               # an exact 0 against 0: no panel
    lo, hi = wide.get_xlim()
    assert wide.get_xscale() == "log" and 0 < lo < 0.1 and hi > 10.0     # a log axis starts above 0 (typical 0 left out)
    assert ratio.get_xscale() == "linear"                                 # a typical round does not choose the scale
    lo, hi = neg.get_xlim()
    assert lo < -3.0 and hi > -0.5                                        # all negative: every mark inside
    assert not any(line.get_marker() == "D" for line in typ.lines)        # a typical logged as text: not drawn
    gpu = {"key": "g", "claim": "g", "verdict": "not tested here", "why": "measured on cpu"}
    assert claims_figure({"A": [gpu], "B": [gpu]}) is None                # nothing to draw: no figure
    import matplotlib.colors as mc

    assert {mc.to_hex(line.get_color()) for line in ratio.lines if line.get_marker() in ("o", "None")} >= {"#2e7d32"}
    assert [mc.to_hex(line.get_color()) for line in ratio.lines if line.get_marker() == "o"] == ["#2e7d32"]
    wide.figure.canvas.draw()
    ticks = [t.get_text() for t in wide.get_xticklabels() if t.get_text()]
    assert ticks and all(t.replace(".", "").isdigit() for t in ticks), ticks     # _num's numbers, not 'None'


def test_unbounded_ends_are_arrows_in_the_bars_colour():
    import matplotlib
    import matplotlib.colors as mc

    matplotlib.use("Agg")
    row = {"key": "o", "claim": "o", "verdict": "within noise", "value": 3.0, "low": -math.inf, "high": math.inf,
           "at_least": 2.0, "rule": ">= 2"}
    [ax] = claims_figure([row]).axes
    assert [mc.to_hex(line.get_color()) for line in ax.lines if line.get_marker() in "<>"] == ["#757575", "#757575"]


def test_the_log_scale_boundaries_and_wrap():
    from perflab.kit.claims import _ratio_scale, _wrap

    def scale(lo, hi, **rule):
        return _ratio_scale({"value": (lo + hi) / 2, "low": lo, "high": hi, "at_least": None, "at_most": None,
                             "partly": None, **rule})

    assert not scale(1.0, 3.0, at_least=1.0) and scale(1.0, 3.5, at_least=1.0)   # more than a factor of 3
    assert scale(0.9, 1.1, at_most=1.5) and not scale(1.9, 2.1, at_least=1.0)    # a threshold >= 1.5, not a value
    assert _wrap("a b c", 1) == "a\nb\nc" and _wrap("", 5) == ""


def test_a_row_not_tested_prints_no_judged_line_and_a_keyless_row_goes_by_its_text(tmp_path, capsys):
    from perflab.kit.claims import log_rows

    log = ResultsLog(tmp_path / "r.jsonl", study="s", stamp={})
    rows = [{"claim": "on a GPU", "claimed": "10x", "measured": "not run", "verdict": "not tested here",
             "why": "measured on cpu"}]
    log_rows(log, rows)
    assert capsys.readouterr().out == "[not tested here (measured on cpu)] on a GPU\n    claimed: 10x\n    here: not run\n"
    with pytest.raises(ClaimError, match=r"^headline 'x' is not among the rows: on a GPU$"):
        log_rows(log, rows, headline="x")


def test_a_claim_decides_only_in_its_setup_and_spends_no_time_elsewhere():
    """`Claim.decide`: the rule's thresholds, the run's verdict_time and device reach the decide_* function in the
    claim's setup; on another device or at other parameters it is not called and the claim gets None."""
    import types

    import torch

    claim = Claim("fast", "2x faster at k=32 on a GPU", ">= 2x", at_least=2, partly=1.5,
                  setup={"k": 32, "device": "cuda"})
    calls = []

    def decide_fn(*args, **kw):
        calls.append((args, kw))
        return "decided"

    cfg = types.SimpleNamespace(k=32, verdict_time=7.0)
    assert claim.decide(decide_fn, "b", "o", cfg=cfg, device=torch.device("cpu")) is None
    assert claim.decide(decide_fn, "b", "o", cfg=types.SimpleNamespace(k=8, verdict_time=7.0), device="cuda") is None
    assert calls == []
    assert claim.decide(decide_fn, "b", "o", cfg=cfg, device="cuda:1", scale=3) == "decided"
    assert calls == [(("b", "o"), dict(at_least=2, partly=1.5, max_run_time=7.0, device="cuda:1", scale=3))]
