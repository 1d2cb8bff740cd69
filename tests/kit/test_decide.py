"""decide_speedup / saving / time / value / rate: total time at steady state, paired rounds, the looks, the budget.

The statistics run on a simulated machine (`perflab.runner.simulate`: calls advance an injected clock and its run-queue
wait), so thousands of verdicts take seconds and a wrong one can be counted; the battery (tests/runner/test_battery.py)
does the same on real timings under a real load."""
import math
import random

import pytest

from perflab.kit import deciding as V
from perflab.kit.verdicts import (
    CONFIDENCE,
    Decision,
    Measured,
    decide_rate,
    decide_saving,
    decide_speedup,
    decide_time,
    decide_value,
)
from perflab.runner.simulate import LOADED, Machine, truth


def decide(base: dict, opt: dict, seed: int = 0, machine: dict | None = None, **kw) -> tuple[Decision, float]:
    m = Machine(seed, **(machine or {}))
    b, o = m.side(**base), m.side(**opt)
    kw.setdefault("max_run_time", 2.0)
    return decide_speedup(b, o, clock=m.clock, waited=m.waited, seed=seed, **kw), truth(b, o)


def test_the_value_is_the_ratio_of_mean_times_the_typical_call_beside_it():
    """The review's case: the baseline's every 10th call 10x slower (GC, allocator): total 4.75x, typical ~2.5x. The
    claim >= 3 holds on total time (the old median rule said "does not hold"), and the note names the side. Blocks of
    about one baseline call, so the median round is the typical call's."""
    d, t = decide(dict(cost=1e-3, slow_every=10, slow_factor=10), dict(cost=4e-4), at_least=3.0, block=1e-3)
    assert t == pytest.approx(4.75)
    assert d.verdict == "holds" and d.low <= 4.75 <= d.high and d.typical < 3.0
    assert "the baseline side's slow calls: typical 2.5" in d.note
    d, t = decide(dict(cost=4e-3), dict(cost=1e-3, slow_every=10, slow_factor=6), at_least=3.5)   # total 2.67x
    assert d.verdict == "does not hold" and d.high < 3.5


def test_a_slow_call_every_few_calls_is_seen_before_the_first_look_when_one_call_fills_a_block():
    """One call a block: the first look waits for MIN_CALLS calls of each side (8 rounds could miss every slow call)."""
    wrong = 0
    for seed in range(30):
        d, t = decide(dict(cost=16e-3), dict(cost=8e-3, slow_every=10, slow_factor=6), seed, at_least=1.4)
        assert t == pytest.approx(4 / 3)
        assert d.calls == (1, 2) or d.rounds == 0 or min(d.calls) * d.rounds >= V.MIN_CALLS
        wrong += d.verdict == "holds"
    assert wrong == 0


def test_a_lazy_init_is_warmed_away_and_an_a_a_pair_never_holds():
    """Finding 1: a 2 ms lazy init on one side's 2nd call sized its blocks from one call and read 7.6x "holds"."""
    for seed in range(20):
        d, _ = decide(dict(cost=5e-5, lazy_at=2, lazy=2e-3), dict(cost=5e-5), seed, at_least=1.05)
        assert d.verdict != "holds" and d.value == pytest.approx(1.0, abs=0.03)
        assert min(d.warmup_calls) >= 30 and d.calls[0] == pytest.approx(d.calls[1], abs=1)


def test_the_warm_up_lasts_tens_of_calls_and_names_a_side_that_never_settles():
    m = Machine(1)
    b = m.side(1e-3)
    slower = {"cost": 1e-4}

    def o():                       # 1% slower each call: never steady within 10% over windows of 10 calls
        slower["cost"] *= 1.01
        m.run(slower["cost"])
    d = decide_speedup(b, o, at_least=2.0, clock=m.clock, waited=m.waited, max_run_time=1.0)
    assert "warm-up not steady within its share of the budget: optimized" in d.note
    assert d.warmup_calls[0] >= 30


def test_a_plateau_of_slow_first_calls_is_caught_by_the_longer_blocks_and_the_rounds_begin_again():
    """100 calls 3x slower, then steady: a decision on the plateau is checked against longer blocks, which disagree;
    the rounds begin again with them and the verdict is the steady state's."""
    notes, wrong = [], 0
    for seed in range(20):
        d, t = decide(dict(cost=1e-3), dict(cost=3e-4, warm_calls=100, warm_factor=3), seed, machine=LOADED,
                      at_least=3.0, max_run_time=2.0)
        wrong += d.verdict == "does not hold"
        notes.append(d.note)
    assert wrong == 0
    assert any("the rounds begin again with blocks 4x longer" in n for n in notes)


def test_another_process_turns_are_taken_out_and_both_blocks_last_alike():
    """4 ms against 1 ms calls under 100 interruptions/s of 3 ms: equal blocks (4 calls against 1), and the waits
    removed: the ratio is the calls' own."""
    m = Machine(2, preempt_rate=100, preempt_s=0.003)
    b, o = m.side(4e-3), m.side(1e-3)
    d = decide_speedup(b, o, at_least=3.0, clock=m.clock, waited=m.waited, block=0.004)
    assert d.verdict == "holds" and d.calls == (1, 4) and d.value == pytest.approx(4.0, rel=0.03)
    assert d.waits_removed and d.block == pytest.approx(4e-3, rel=0.1)


def test_the_budget_is_wall_time_and_a_call_longer_than_it_says_so():
    for cost in (0.25, 0.1, 0.02, 1e-3):   # within 1.2x the budget, or one call of each side where that is longer
        d, _ = decide(dict(cost=cost * 2.5), dict(cost=cost), at_least=2.0, max_run_time=0.5)
        assert d.seconds <= max(0.6, 1.1 * (cost * 2.5 + cost)), (cost, d.seconds)
    d, _ = decide(dict(cost=2.0), dict(cost=1.0), at_least=1.5, max_run_time=0.5)
    assert d.verdict == "within noise" and d.rounds == 0 and "no round fit in the budget" in d.note
    d, _ = decide(dict(cost=0.2), dict(cost=0.08), at_least=2.0, max_run_time=1.0)
    assert d.verdict == "within noise" and d.rounds <= 2 and "the budget (1 s) ended after" in d.note


def test_a_clear_effect_is_decided_at_the_first_look_and_a_threshold_one_runs_the_budget():
    for ratio, rule, want in ((3.0, dict(at_least=2.0), "holds"), (1.5, dict(at_least=2.0), "does not hold"),
                              (1.5, dict(at_least=2.0, partly=1.1), "partly holds"),
                              (0.5, dict(at_most=0.8), "holds"), (1.5, dict(at_most=1.2, partly=2.0), "partly holds")):
        d, _ = decide(dict(cost=1e-3 * ratio, jitter=0.01), dict(cost=1e-3, jitter=0.01), **rule)
        assert d.verdict == want, (ratio, rule, d)
        # the first look: 2 x FEW rounds (the load's slope needs them), MIN_CALLS calls of each side, PAIRED_SPAN of
        # the budget in rounds
        span = math.ceil(V.PAIRED_SPAN * 2.0 / (d.block * 2)) + 2
        first = max(2 * V.FEW, math.ceil(V.MIN_CALLS / min(d.calls)))
        assert first <= d.rounds <= max(span, first)
        assert d.low <= ratio <= d.high
    d, _ = decide(dict(cost=2e-3), dict(cost=1e-3), at_least=2.0, max_run_time=1.0)
    assert d.verdict == "within noise" and d.low < 2.0 < d.high and 0.9 < d.seconds <= 1.0


def _wrong_at_threshold(n: int, budget: float = 0.3) -> int:
    """n verdicts of a loaded A/A-like 1.5x pair against thresholds a hair above and below the truth."""
    wrong = 0
    for i in range(n):
        up = i % 2 == 0
        d, t = decide(dict(cost=1.5e-3), dict(cost=1e-3), i, machine=LOADED, max_run_time=budget,
                      at_least=1.5 * (1 + 1e-9 if up else 1 - 1e-9))
        wrong += d.verdict == "holds" if up else d.verdict == "does not hold"
    return wrong


def test_the_error_rate_at_the_threshold_holds_over_the_looks():
    """Every decided verdict at the threshold is wrong; the spending over looks keeps them at (1 - CONFIDENCE) / 2 per
    side at most: 0.5%. 1,200 verdicts under a drifting, interrupted load; the bound leaves room for the draw."""
    n = 1200
    wrong = _wrong_at_threshold(n)
    assert (1 - CONFIDENCE) / 2 == pytest.approx(0.005)
    assert wrong / n <= 0.01, f"{wrong} wrong of {n}"


def test_without_the_spending_over_looks_the_error_rate_is_too_high(monkeypatch):
    """The test above has teeth: every look at the full level (no spending) gives several times more wrong verdicts."""
    monkeypatch.setattr(V, "_alpha", lambda k, alpha: alpha * 4)
    n = 600
    assert _wrong_at_threshold(n) / n > 0.01


def test_a_shorter_window_drifts_more():
    assert V.drift_over(0.05, 0.5) == pytest.approx(0.05 * 2)       # a quarter of DRIFT_WINDOW: twice the sd
    assert V.drift_over(0.05, V.DRIFT_WINDOW) == V.drift_over(0.05, 10.0) == 0.05
    assert V.drift_over(0.05, 1e-6) == V.drift_over(0.05, V.DRIFT_SHORT) == pytest.approx(0.05 * 4)   # at most 4x
    assert V.drift_over(0.05, 0.0) == 0.05 and V.drift_over(0.0, 0.1) == 0.0


def _paired(tb: list[float], to: list[float], seconds: float, budget: float = 2.0) -> V._Paired:
    """A paired decision's state with these rounds (each side's seconds per call), `seconds` of rounds so far."""
    p = object.__new__(V._Paired)
    p.of, p.scale, p.tb, p.to, p.notes = "ratio", 1.0, list(tb), list(to), []
    p.durations, p.budget, p.load_noted, p.drift_sd = [seconds / len(tb)] * len(tb), budget, False, V.DRIFT
    return p


def _one_side_follows_the_load(n: int = 32, seed: int = 3) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    load = [math.exp(0.2 * math.sin(i / 3) + rng.gauss(0, 0.05)) for i in range(n)]
    return [2e-3 * x * math.exp(rng.gauss(0, 0.01)) for x in load], [1e-3 * math.exp(rng.gauss(0, 0.01)) for _ in load]


def test_a_ratio_that_follows_the_load_gets_the_machines_drift_even_where_the_load_test_misses_it(monkeypatch):
    """The load test is weak over a short window: a ratio whose one side follows the load still gets the drift of a
    window that short (scaled by how far the ratio follows the load), not the paired interval alone."""
    tb, to = _one_side_follows_the_load()
    p = _paired(tb, to, seconds=0.5)
    monkeypatch.setattr(V._Paired, "load_bound", lambda self: False)
    level = 0.01
    m = p.interval(level)
    lo, hi = V.ratio_interval(tb, to, level)
    assert 0.5 < p.sensitivity() <= 1.0
    want = V.with_drift(m.value, lo, hi, V.drift_over(V.DRIFT, 0.5) * p.sensitivity(), level)
    assert (m.low, m.high) == pytest.approx(want) and m.low < lo and m.high > hi
    # both sides alike (a load that moves them together): nothing added
    same = _paired(tb, [x / 2 for x in tb], seconds=0.5)
    assert same.sensitivity() == pytest.approx(0.0, abs=1e-9)
    assert (same.interval(level).low, same.interval(level).high) == pytest.approx(V.ratio_interval(tb, same.to, level))


def test_once_the_ratio_is_seen_to_follow_the_load_it_stays_judged_so(monkeypatch):
    tb, to = _one_side_follows_the_load()
    p = _paired(tb, to, seconds=0.3)
    seen = iter([True, False, False])
    monkeypatch.setattr(V._Paired, "load_bound", lambda self: next(seen))
    for _ in range(3):    # before UNPAIRED_SPAN of the budget in rounds: no interval, at every look
        assert p.interval(0.01).low == -math.inf
    assert p.notes == ["the ratio moves with the machine's load (the sides respond to it differently): judged as a "
                       "quantity the load moves"]


def test_an_exact_value_at_the_threshold_is_within_noise():
    d, _ = decide(dict(cost=2e-3), dict(cost=1e-3), at_least=2.0, max_run_time=0.5)
    assert d.verdict == "within noise"


def test_a_trend_in_the_rounds_is_said_and_a_drifting_side_is_re_sized():
    clock = {"t": 0.0, "n": 0}

    def base():
        clock["t"] += 1e-3

    def opt():                      # slows steadily: 0.5 ms to ~3 ms over the decision
        clock["n"] += 1
        clock["t"] += 5e-4 * (1 + clock["n"] / 300)

    d = decide_speedup(base, opt, at_least=0.9, clock=lambda: clock["t"], max_run_time=2.0)
    assert "re-sized at round" in d.note and "optimized drifted" in d.note
    assert "the rounds drift" in d.note


def test_saving_time_value_and_rate():
    m = Machine(4)
    d = decide_saving(m.side(1.5e-3, jitter=0.01), m.side(1e-3, jitter=0.01), per=5000, at_least=1.0, clock=m.clock,
                      waited=m.waited)
    assert d.quantity == "saving" and d.verdict == "holds" and d.value == pytest.approx(2.5, rel=0.05)
    m = Machine(5)
    d = decide_time(m.side(2e-3, jitter=0.02), at_most=5.0, scale=1e3, quantity="ms per call", clock=m.clock,
                    waited=m.waited)
    assert d.verdict == "holds" and d.quantity == "ms per call" and d.value == pytest.approx(2.0, rel=0.05)
    rng = random.Random(5)
    t = {"t": 0.0}

    def tick():
        t["t"] += 0.01
        return t["t"]
    v = decide_value(lambda: 1000 + rng.gauss(0, 10), at_least=900, quantity="candidates/s", clock=tick)
    assert v.verdict == "holds" and v.quantity == "candidates/s" and v.value == pytest.approx(1000, rel=0.01)
    sizes = iter([10, 1000] * 100)      # a small and a big sample in turn: 100/s and 1000/s

    def once():
        n = next(sizes)
        secs = n / 1000 if n == 1000 else n / 100
        t["t"] += secs
        return n, secs
    r = decide_rate(once, at_most=900, quantity="items/s", clock=lambda: t["t"], warmup=0)
    assert r.value == pytest.approx(1010 / 1.1)      # the total over the total, not the mean rate (550/s)
    assert r.typical != pytest.approx(r.value)


def test_bad_arguments_are_refused_with_the_argument_named():
    f = lambda: None  # noqa: E731
    for call, match, exc in [
        (lambda: decide_speedup(3, f, at_least=1), "baseline must be a callable", TypeError),
        (lambda: decide_speedup(f, "x", at_least=1), "optimized must be a callable", TypeError),
        (lambda: decide_speedup(f, f, at_least=1, at_most=2), "exactly one of at_least and at_most", ValueError),
        (lambda: decide_speedup(f, f), "exactly one of at_least and at_most", ValueError),
        (lambda: decide_speedup(f, f, at_least=1, max_run_time=0), "max_run_time must be a number of seconds > 0",
         ValueError),
        (lambda: decide_speedup(f, f, at_least=1, confidence=99), "confidence", ValueError),
        (lambda: decide_speedup(f, f, at_least=2, partly=3), "partly=3 must lie on the claim's side", ValueError),
        (lambda: decide_speedup(f, f, at_least="2x"), "at_least must be a number", TypeError),
        (lambda: decide_speedup(f, f, at_least=1, scale=0), "scale must be", ValueError),
        (lambda: decide_speedup(f, f, at_least=1, block=0), "block must be a number of seconds > 0", ValueError),
        (lambda: decide_saving(f, f, at_least=1, per=-1), "per must be", ValueError),
        (lambda: decide_time(None, at_most=1), "decide_time: fn must be a callable", TypeError),
        (lambda: decide_time(f, at_most=1, max_run_time=0), "decide_time: max_run_time", ValueError),
        (lambda: decide_value(None, at_least=1), "measure_once must be a callable", TypeError),
        (lambda: decide_value(lambda: 1.0, at_least=1, max_run_time=-1), "max_run_time", ValueError),
        (lambda: decide_value(lambda: 1.0, at_least=1, warmup=-1), "warmup must be a number of calls", ValueError),
        (lambda: decide_rate(lambda: 1.0, at_least=1, warmup=0), r"must return \(amount, seconds\)", TypeError),
        (lambda: decide_rate(lambda: (1, 0.0), at_least=1, warmup=0), "a rate needs seconds > 0", ValueError),
    ]:
        with pytest.raises(exc, match=match):
            call()


def test_one_decision_judged_against_another_claims_threshold():
    d, _ = decide(dict(cost=3e-3, jitter=0.01), dict(cost=1e-3, jitter=0.01), at_least=2.0)
    e = d.rejudge(at_least=4.0, partly=1.5)
    assert (e.verdict, e.at_least, e.partly, e.rounds, e.value) == ("partly holds", 4.0, 1.5, d.rounds, d.value)
    with pytest.raises(ValueError, match="exactly one"):
        d.rejudge()
    with pytest.raises(ValueError, match="partly=3 must lie on the claim's side"):
        d.rejudge(at_least=2, partly=3)
    assert "mean of" in d.how and "paired rounds" in d.how and "typical" in d.how


def test_decide_speedup_on_real_calls_stays_in_its_budget():
    """Real timings, no clock injected: the path runs end to end within 1.2x its budget (no verdict on speed is
    asserted: a loaded machine may say "within noise"; never "does not hold" for a 3x gap in work)."""
    import time

    import torch

    a = torch.randn(32, 32)
    V.prepare()
    t0 = time.perf_counter()
    d = decide_speedup(lambda: [a @ a for _ in range(30)], lambda: [a @ a for _ in range(10)], at_least=1.0,
                       max_run_time=1.0)
    assert time.perf_counter() - t0 <= 1.2 and d.seconds <= 1.2
    assert d.verdict in ("holds", "within noise") and d.rounds >= 1 and min(d.calls) >= 1


def test_measured_from_samples_and_ratio_are_means():
    m = Measured.from_samples([3.0, 1.0, 2.0, 5.0, 4.0, 9.0, 6.0, 8.0, 7.0], confidence=0.99)
    assert m.value == 5.0 and m.low < 5.0 < m.high
    assert Measured.from_samples([1.0], confidence=0.99).high == math.inf
    r = Measured.ratio([2.0] * 12, [1.0] * 12, confidence=0.95, scale=3.0)
    assert (r.value, r.low, r.high) == (6.0, 6.0, 6.0)
    r = Measured.ratio([1.0, 1.0, 1.0, 10.0] * 3, [1.0] * 12)     # a slow sample counts: the mean's 3.25
    assert r.value == pytest.approx(3.25)
