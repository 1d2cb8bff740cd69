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
        ResultsLog(tmp_path / "r.jsonl", study="s", stamp={}).claim("c", claimed="", measured="", verdict="sorta")


def _recorded(monkeypatch):
    """The verdicts' calls into perflab.kit.deciding, recorded instead of run: (engine, args, keywords)."""
    from perflab.kit import verdicts

    calls = []
    for engine in ("paired", "samples", "timed"):
        monkeypatch.setattr(verdicts, engine, lambda *a, _e=engine, **kw: calls.append((_e, a, kw)) or "decision")
    return verdicts, calls


def test_each_decide_call_hands_every_argument_and_its_own_name_to_the_engine(monkeypatch):
    # a threshold, a device or a seed dropped on the way would be judged silently as the default (a GPU unsynced)
    verdicts, calls = _recorded(monkeypatch)
    b, o, once, clock, waited = (lambda: None), (lambda: None), (lambda: 1.0), (lambda: 0.0), (lambda: 0.0)
    common = dict(at_least=None, at_most=2.5, partly=4.0, max_run_time=7.0, confidence=0.9)
    timing = dict(block=0.01, device="cpu", clock=clock, waited=waited)
    assert verdicts.decide_speedup(b, o, scale=3.0, min_rounds=4, seed=5, quantity="times the floor", **common,
                                   **timing) == "decision"
    verdicts.decide_saving(b, o, per=6.0, min_rounds=4, seed=5, **common, **timing)
    verdicts.decide_time(once, scale=1e3, quantity="ms", drift=0.02, **dict(common, at_least=3.0, at_most=None,
                                                                             partly=2.0), **timing)
    verdicts.decide_value(once, quantity="bytes", warmup=3, min_rounds=4, drift=0.01, clock=clock, **common)
    verdicts.decide_rate(once, quantity="rows/s", warmup=3, min_rounds=4, drift=0.01, clock=clock, **common)
    rule = dict(at_least=None, at_most=2.5, partly=4.0)
    pair = dict(rule, max_run_time=7.0, confidence=0.9, min_rounds=4, seed=5, **timing)
    sampled = dict(max_run_time=7.0, confidence=0.9, warmup=3, min_rounds=4, clock=clock, drift=0.01, rule=rule)
    assert calls == [
        ("paired", ("decide_speedup", "times the floor", b, o), dict(pair, of="ratio", scale=3.0)),
        ("paired", ("decide_saving", "saving", b, o), dict(pair, of="saving", scale=6.0)),
        ("timed", (once,), dict(rule=dict(at_least=3.0, at_most=None, partly=2.0), scale=1e3, quantity="ms",
                                max_run_time=7.0, confidence=0.9, drift=0.02, **timing)),
        ("samples", ("decide_value", once), dict(sampled, quantity="bytes", rate=False)),
        ("samples", ("decide_rate", once), dict(sampled, quantity="rows/s", rate=True)),
    ]


def test_the_decide_calls_defaults(monkeypatch):
    # what a claim gets when it says nothing: 2 s of budget, one warm-up call, one round at least, seed 0, no scale
    verdicts, calls = _recorded(monkeypatch)
    f = lambda: None  # noqa: E731
    for decide in (verdicts.decide_speedup, verdicts.decide_saving):
        decide(f, f, at_least=1.0)
    verdicts.decide_time(f, at_most=1.0)
    verdicts.decide_value(f, at_least=1.0)
    verdicts.decide_rate(f, at_least=1.0)
    rule = dict(at_least=1.0, at_most=None, partly=None)
    timing = dict(max_run_time=2.0, confidence=verdicts.CONFIDENCE, block=verdicts.BLOCK, device=None, clock=None,
                  waited=None)
    pair = dict(rule, **timing, min_rounds=1, seed=0)
    sampled = dict(rule=dict(rule, at_least=1.0), max_run_time=2.0, confidence=verdicts.CONFIDENCE, warmup=1,
                   min_rounds=1, clock=None)
    assert [c[1][:2] if c[0] == "paired" else c[1][:1] for c in calls][:2] == [("decide_speedup", "speedup"),
                                                                              ("decide_saving", "saving")]
    assert [c[2] for c in calls] == [
        dict(pair, of="ratio", scale=1.0), dict(pair, of="saving", scale=1.0),
        dict(rule=dict(rule, at_least=None, at_most=1.0), scale=1.0, quantity="seconds per call", drift=verdicts.DRIFT,
             **timing),
        dict(sampled, quantity="value", rate=False, drift=0.0),
        dict(sampled, quantity="per second", rate=True, drift=verdicts.DRIFT),
    ]


@pytest.mark.parametrize("decide, kw, message", [
    ("decide_speedup", dict(scale=0.0), "decide_speedup: scale must be a number > 0, got 0.0"),
    ("decide_saving", dict(per=-1.0), "decide_saving: per must be a number > 0, got -1.0"),
])
def test_a_bad_scale_is_refused_naming_the_call(decide, kw, message):
    from perflab.kit import verdicts

    with pytest.raises(ValueError, match=message):
        getattr(verdicts, decide)(lambda: None, lambda: None, at_least=1.0, **kw)
