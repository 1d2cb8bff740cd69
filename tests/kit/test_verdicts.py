import pytest

from perflab.kit.results import ResultsLog
from perflab.kit.verdicts import Measured, judge


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
