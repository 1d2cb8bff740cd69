"""decide_speedup / saving / time / value / rate: total time at steady state, paired rounds, the looks, the budget.

The statistics run on a simulated machine (`perflab.runner.simulate`: calls advance an injected clock and its run-queue
wait), so thousands of verdicts take seconds and a wrong one can be counted; the battery (tests/runner/test_battery.py)
does the same on real timings under a real load."""
import math
import random
import re

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
    """300 calls 3x slower, then steady (past the first look's MIN_CALLS): a decision on the plateau is checked
    against longer blocks, which disagree; the rounds begin again with them and the verdict is the steady state's."""
    notes, wrong = [], 0
    for seed in range(20):
        d, t = decide(dict(cost=1e-3), dict(cost=3e-4, warm_calls=300, warm_factor=3), seed, machine=LOADED,
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
    monkeypatch.setattr(V, "_level", lambda k, alpha, share, before: alpha * 4)
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
    p.sized_at, p.spread = 0, None
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


# ---- mutants of deciding.py the tests above let live (issue 39 item 3): each test names those it kills ----

def test_the_looks_spend_alpha_as_6_over_pi_squared_k_squared():
    # the levels of looks 1, 2, ... sum to alpha over any number of looks, the first getting 6 / pi^2 of it (kills _alpha
    # 2, 3 and 5-8: a wrong constant or power spends more than alpha, or far less)
    assert V._alpha(1, 0.01) == pytest.approx(0.01 * 6 / math.pi ** 2)
    assert V._alpha(3, 0.01) == pytest.approx(V._alpha(1, 0.01) / 9)
    assert sum(V._alpha(k, 0.01) for k in range(1, 100_000)) == pytest.approx(0.01, rel=1e-4)


def test_each_look_is_charged_the_next_level(monkeypatch):
    # look k is made at alpha_k: the looks of one decision are 1, 2, 3, ..., each at the horizon's share it reached
    # after the last one's, and the typical interval is at the last look's level (kills _Looks._at 1-3)
    calls, levels = [], []
    real = V._level

    def level(k, alpha, share, before):
        calls.append((k, share, before))
        levels.append(real(k, alpha, share, before))
        return levels[-1]

    monkeypatch.setattr(V, "_level", level)
    t = {"t": 0.0}

    def once():
        t["t"] += 0.01
        return 1000 + 30 * math.sin(t["t"] * 50)

    d = decide_value(once, at_least=999.0, clock=lambda: t["t"], max_run_time=2.0)
    ks = [k for k, _, _ in calls]
    assert len(ks) >= 3 and ks == list(range(1, len(ks) + 1)), (ks, d)
    assert all(b == pytest.approx(a) for (_, a, _), (_, _, b) in zip(calls, calls[1:]))   # each starts where the last ended
    assert 0 < calls[0][1] and calls[-1][1] <= 1 + 1e-9 and calls[0][2] == 0
    assert sum(levels) <= 0.01 + 1e-12


def test_the_looks_spend_by_the_horizon_share_and_never_more_than_alpha():
    # the time part of a look's level is alpha x SPEND_BY_TIME x the share it adds: a look at the end of the horizon
    # gets far more than the 17th look's 6 / (pi^2 k^2) (issue 50), and any sequence of looks sums to at most alpha
    a = 0.01
    assert V._level(1, a, 0.0, 0.0) == pytest.approx((1 - V.SPEND_BY_TIME) * V._alpha(1, a))
    assert V._level(17, a, 1.0, 0.8) == pytest.approx((1 - V.SPEND_BY_TIME) * V._alpha(17, a) + V.SPEND_BY_TIME * a * 0.2)
    assert V._level(17, a, 1.0, 0.8) > 50 * V._alpha(17, a)
    assert V._level(3, a, 0.5, 0.7) == pytest.approx((1 - V.SPEND_BY_TIME) * V._alpha(3, a))   # no share added
    assert V._level(3, a, 1.7, 0.9) == pytest.approx(V._level(3, a, 1.0, 0.9))   # past the horizon: no more
    rng = random.Random(3)
    for _ in range(200):
        shares = sorted(rng.uniform(0, 1.3) for _ in range(rng.randint(1, 60)))
        total = sum(V._level(k, a, s, b) for k, (s, b) in enumerate(zip(shares, [0.0] + shares), start=1))
        assert total <= a + 1e-12


def _steady_value(n_warm: int = 2, step: float = 0.01):
    """decide_value's inputs: a value of 1000 +- 1% (seeded), each sample `step` seconds of an injected clock."""
    rng, t = random.Random(7), {"t": 0.0}

    def once():
        t["t"] += step
        return 1000 * (1 + rng.gauss(0, 0.01))

    return once, (lambda: t["t"]), t


def test_a_value_decision_carries_its_samples_interval_rule_and_budget():
    # every field of decide_value's Decision (kills samples 137-215's changed or dropped fields, 131, 148, 149, 151,
    # 152, 153 and 156)
    once, clock, t = _steady_value()
    d = decide_value(once, at_least=900.0, partly=850.0, quantity="candidates/s", warmup=3, clock=clock, max_run_time=1.0)
    assert (d.verdict, d.quantity, d.confidence) == ("holds", "candidates/s", CONFIDENCE)
    assert (d.at_least, d.at_most, d.partly) == (900.0, None, 850.0)
    assert d.rounds == len(d.samples) >= V.FIRST and d.value == pytest.approx(sum(d.samples) / len(d.samples))
    assert math.isfinite(d.low) and d.low < d.value < d.high and math.isfinite(d.high)
    assert d.seconds == pytest.approx(0.01 * (3 + d.rounds)) and t["t"] == pytest.approx(d.seconds)
    assert d.typical == pytest.approx(sorted(d.samples)[len(d.samples) // 2], rel=1e-3)
    assert math.isfinite(d.typical_low) and d.typical_low < d.typical < d.typical_high and math.isfinite(d.typical_high)
    assert (d.calls, d.block, d.warmup_calls, d.waits_removed, d.note) == ((), 0.0, (3,), False, "")
    assert math.isnan(d.longer)
    r = decide_rate(lambda: (once(), 0.5), at_most=2500.0, partly=2600.0, clock=clock, warmup=0, max_run_time=1.0)
    assert (r.verdict, r.at_least, r.at_most, r.partly, r.warmup_calls) == ("holds", None, 2500.0, 2600.0, (0,))
    assert r.value == pytest.approx(2000, rel=0.02) and r.value == pytest.approx(sum(r.samples) / len(r.samples))
    assert r.typical == pytest.approx(sorted(r.samples)[len(r.samples) // 2], rel=1e-3)


def test_a_value_that_never_looks_is_its_typical_sample_with_no_interval():
    # one sample fits: no interval (kills samples 137-147's fallback: its value, its open ends); a rising value says so
    once, clock, _ = _steady_value(step=0.6)
    d = decide_value(once, at_least=900.0, clock=clock, max_run_time=1.0, warmup=0)
    assert d.rounds == 1 and d.value == d.samples[0] and (d.low, d.high) == (-math.inf, math.inf)
    assert d.verdict == "within noise" and "too few for a 99% interval" in d.note
    t = {"t": 0.0}

    def rising():
        t["t"] += 0.01
        return 0.1 * (1 + t["t"])   # +100% over the second, every value below 1

    d = decide_value(rising, at_least=0.01, clock=lambda: t["t"], max_run_time=1.0, warmup=0)
    assert "the samples drift: +" in d.note   # (kills samples 93 and 99: no trend read, or none of values below 1)
    d = decide_value(lambda: rising() * 0, at_most=1.0, clock=lambda: t["t"], max_run_time=1.0, warmup=0)
    assert d.verdict == "holds" and d.note == ""   # zeros: no trend to read (kills samples 94, 98 and 100)


def test_the_budget_note_tells_too_few_rounds_from_an_unsettled_interval():
    # an interval with open ends: too few rounds; a finite one that straddles the threshold: only the budget (kills
    # _budget_note 3-5)
    once, clock, _ = _steady_value()
    d = decide_value(once, at_least=1000.0, clock=clock, max_run_time=0.5)
    assert d.verdict == "within noise" and math.isfinite(d.low) and math.isfinite(d.high)
    budget, more = d.note.split("; ")
    assert budget == f"the budget (0.5 s) ended after {d.rounds} rounds"
    assert more.startswith("about ") and more.endswith("s more of rounds would decide it at this spread (the value "
                                                       f"{float(f'{100 * abs(d.value / 1000 - 1):.2g}'):g}% from the "
                                                       "threshold)")   # a distance to 2 figures, not '10.01%'
    assert re.search(r"the value \d(\.\d)?%|the value \d\d%|the value 0\.\d+%", more), more


def test_a_time_decision_carries_its_blocks_interval_rule_and_budget():
    # every field of decide_time's Decision (kills timed 167-232's changed or dropped fields)
    m = Machine(5)
    t0 = m.clock()
    d = decide_time(m.side(2e-3, jitter=0.02), at_most=5.0, partly=6.0, scale=1e3, quantity="ms per call",
                    clock=m.clock, waited=m.waited, max_run_time=1.0)
    assert (d.verdict, d.quantity, d.confidence, d.at_least, d.at_most, d.partly) == \
        ("holds", "ms per call", CONFIDENCE, None, 5.0, 6.0)
    assert d.rounds == len(d.samples) >= V.FIRST and d.value == pytest.approx(sum(d.samples) / len(d.samples))
    assert d.value == pytest.approx(2.0, rel=0.05) and all(1.5 < s < 2.5 for s in d.samples)   # ms, per call
    assert math.isfinite(d.low) and d.low < d.value < d.high and math.isfinite(d.high)
    assert 0 < d.seconds <= 1.0 and d.seconds == pytest.approx(m.clock() - t0)
    assert d.typical == pytest.approx(sorted(d.samples)[len(d.samples) // 2], rel=0.02)
    assert math.isfinite(d.typical_low) and d.typical_low < d.typical < d.typical_high and math.isfinite(d.typical_high)
    assert len(d.calls) == 1 and d.calls[0] >= 1 and d.block == pytest.approx(V.BLOCK, rel=0.5)   # a block's seconds
    assert len(d.warmup_calls) == 1 and d.warmup_calls[0] >= 30 and d.waits_removed is True and math.isnan(d.longer)
    # a call longer than the budget: no round, the warm-up's time per call with no interval (kills timed 164, 165)
    m = Machine(5)
    d = decide_time(m.side(0.4), at_most=5.0, scale=1e3, clock=m.clock, waited=m.waited, max_run_time=0.5)
    assert d.rounds == 0 and d.value == pytest.approx(400, rel=0.05) and (d.low, d.high) == (-math.inf, math.inf)
    assert "no round fit in the budget" in d.note and math.isnan(d.typical) and d.typical_low == -math.inf  # _typical 2


def test_a_time_decision_re_sizes_a_drifting_side_and_says_the_blocks_drift():
    # a call that slows steadily: its blocks re-sized from their last FIRST, and the trend said; a steady one is not
    # re-sized (kills timed 80-100 and 153)
    t = {"t": 0.0, "n": 0}

    def slowing():
        t["n"] += 1
        t["t"] += 5e-4 * (1 + t["n"] / 300)

    d = decide_time(slowing, at_most=1.0, clock=lambda: t["t"], max_run_time=2.0)
    import re
    sized = re.findall(r"re-sized at block (\d+): (\d+) -> (\d+) calls \(the time per call drifted\)", d.note)
    # fewer, slower calls, from the last FIRST blocks' time per call (kills timed 92 and 94); notes joined by "; " (_join 2)
    assert sized and all(int(n) % V.FIRST == 0 and int(a) > int(b) >= int(a) / 3 for n, a, b in sized), d.note
    assert "drifted); the blocks drift" in d.note
    assert "the blocks drift: the time per call moved +" in d.note
    m = Machine(5)
    d = decide_time(m.side(2e-3, jitter=0.02), at_most=5.0, scale=1e3, clock=m.clock, waited=m.waited, max_run_time=1.0)
    assert "re-sized" not in d.note and "drift" not in d.note


def test_decide_time_and_decide_value_name_themselves_and_the_bad_argument():
    # (kills timed 8, 9, 14-17, 23 and 29, samples 1 and 14)
    f = lambda: None  # noqa: E731
    for call, match in [
        (lambda: decide_time(f, at_most=1, scale=0), "^decide_time: scale must be a number > 0, got 0$"),
        (lambda: decide_time(f, at_most=1, block=0), "^decide_time: block must be a number of seconds > 0"),
        (lambda: decide_time(f, at_most=1, confidence=1.5), "^decide_time: confidence must be a float"),
        (lambda: decide_value(None, at_least=1), "^decide_value: measure_once must be a callable"),
        (lambda: decide_value(lambda: 1.0, at_least=1, warmup=True), "^decide_value: warmup must be a number of calls"),
        (lambda: decide_value(lambda: 1.0, at_least=1, warmup=1.5), "^decide_value: warmup must be a number of calls"),
    ]:
        with pytest.raises((TypeError, ValueError), match=match):
            call()


def test_a_restart_makes_the_blocks_longer_and_drops_the_rounds(monkeypatch):
    # LONG x longer blocks, sized again (kills _Paired.restart 1 and 2)
    import perflab.kit.rounds as rounds
    monkeypatch.setattr(rounds, "size_blocks", lambda sides, block: block)
    p = _paired([1e-3] * 8, [5e-4] * 8, seconds=0.1)
    p.sides, p.block, p.length = [], 0.005, 0.005
    p.restart()
    assert p.block == p.length == pytest.approx(0.005 * V.LONG) and p.tb == p.to == []


def _checked(values, m: Measured, *, deadline: float, round_s: float, rule=None):
    """_Paired.check with its rounds replaced: `values` the (baseline, optimized) seconds per call of each longer round
    (the value b / o), each round `round_s` seconds of the clock; sides of 4 calls of 0.0625 s a longer block (one =
    0.5 s). -> (check's result, the calls each round was asked for)."""
    import types

    import perflab.kit.rounds as rounds
    t, asked, it = {"t": 0.0}, [], iter(values)

    def paired_round(sides, sw, order, calls):
        asked.append(calls)
        t["t"] += round_s
        b, o = next(it)
        return (b * 4, 4), (o * 4, 4)

    p = _paired([1.0] * 8, [1.0] * 8, seconds=1.0)
    p.sides = [types.SimpleNamespace(calls=1, per_call=0.0625), types.SimpleNamespace(calls=1, per_call=0.0625)]
    p.sw, p.order = types.SimpleNamespace(clock=lambda: t["t"]), None
    mp = pytest.MonkeyPatch()
    mp.setattr(rounds, "paired_round", paired_round)
    try:
        return p.check(m, deadline, rule or dict(at_least=1.5, at_most=None, partly=None)), asked
    finally:
        mp.undo()


def test_the_longer_blocks_check_runs_four_rounds_where_they_fit_and_stops_before_one_that_would_not():
    # four rounds of LONG x the calls when 4 longer rounds fit (exactly, here); then rounds while the next one fits
    # (kills check 12, 14, 20, 23, 28, 32 and 36-38)
    two = [(2.0, 1.0)] * 5
    (v, off, note), asked = _checked(two, Measured(2.0, 1.9, 2.1), deadline=2.0, round_s=0.5)
    assert (v, off, note) == (2.0, False, "") and asked == [[4, 4]] * 4
    assert len(_checked(two, Measured(2.0, 1.9, 2.1), deadline=3.0, round_s=0.5)[1]) == 4   # never more (check 23)
    (_, _, _), asked = _checked(two, Measured(2.0, 1.9, 2.1), deadline=2.0, round_s=0.75)
    assert len(asked) == 3   # after the third (2.25 s) one more would end past the deadline
    (v, off, note), asked = _checked(two, Measured(2.0, 1.9, 2.1), deadline=1.99, round_s=0.5)
    assert math.isnan(v) and not off and asked == [] and note == "not checked against 4x longer blocks: 1.99 s of budget left"
    (v, _, note), asked = _checked(two, Measured(2.0, 1.9, 2.1), deadline=0.01, round_s=0.5)
    assert note.endswith(": 0.01 s of budget left")


@pytest.mark.parametrize("side", ["low", "high"])
def test_the_longer_blocks_disagree_beyond_twice_their_standard_error(side):
    # four longer rounds of 2.0, 2.2, 1.8, 2.0: value 2.0, standard error sqrt(0.08 / 3 / 4); the interval placed
    # 1.9 and 2.3 standard errors away (kills check 54, 57, 58, 61, 63, 64, 80, 81, 85 and 86)
    vals = [(2.0, 1.0), (2.2, 1.0), (1.8, 1.0), (2.0, 1.0)]
    se = math.sqrt(0.08 / 3 / 4)
    sign = 1 if side == "low" else -1

    def apart(k):
        edge = 2.0 + sign * k * se
        m = Measured(edge, edge, edge + 0.5) if side == "low" else Measured(edge, edge - 0.5, edge)
        rule = dict(at_least=1.0, at_most=None, partly=None)   # both hold: only the distance decides
        return _checked(vals, m, deadline=2.0, round_s=0.5, rule=rule)[0][1]

    assert apart(1.9) is False and apart(2.3) is True


def test_a_single_longer_round_is_checked_against_the_interval_itself():
    # one round fits: no standard error, the interval's own ends (kills check 55, 65, 67, 82 and 83)
    one = [(2.0, 1.0)]
    rule = dict(at_least=1.0, at_most=None, partly=None)
    for m, off in ((Measured(2.0, 2.0, 2.5), False), (Measured(2.0, 1.5, 2.0), False), (Measured(2.5, 2.01, 2.6), True),
                   (Measured(1.5, 1.0, 1.99), True)):
        (v, got, note), asked = _checked(one, m, deadline=2.0, round_s=1.6, rule=rule)
        assert len(asked) == 1 and v == 2.0 and got is off and (note == "") is not off
    # two rounds, 2.2 and 1.8: a standard error of 0.14 (kills check 66)
    (v, off, _), asked = _checked([(2.2, 1.0), (1.8, 1.0)], Measured(2.2, 2.1, 2.3), deadline=2.0, round_s=0.9, rule=rule)
    assert len(asked) == 2 and v == pytest.approx(2.0) and off is False


def test_where_the_typical_round_and_the_mean_part_the_note_names_the_side_with_the_slow_calls():
    # _apart directly: nothing where either is missing or the intervals touch; else the side whose mean stands
    # furthest above its median (kills _apart 2, 3, 8-10, 12, 20, 23 and 27)
    slow, flat = [1e-3, 1e-3, 1e-3, 1e-2], [5e-3] * 4
    m = Measured(1.0, 0.9, 1.1)
    assert V._apart(m, (math.nan, 5.0, 6.0), slow, flat, "speedup") == ""
    assert V._apart(m, (5.5, 5.0, 6.0), [], [], "speedup") == ""
    assert V._apart(m, (1.5, 1.1, 2.0), slow, flat, "speedup") == ""        # touching at the top
    assert V._apart(m, (0.5, 0.1, 0.9), slow, flat, "speedup") == ""        # and at the bottom
    assert V._apart(m, (5.5, 5.0, 6.0), slow, flat, "speedup").startswith("the baseline side's slow calls: typical 5.5")
    assert V._apart(m, (5.5, 5.0, 6.0), flat, slow, "speedup").startswith("the optimized side's slow calls")
    assert V._apart(m, (5.5, 5.0, 6.0), flat, flat, "speedup").startswith("the optimized side's")   # a tie: optimized


def test_the_load_test_reads_only_positive_rounds_and_sees_a_side_that_follows_the_load():
    # (kills _Paired.load_bound 1, 3-7 and 12)
    tb, to = _one_side_follows_the_load()
    assert _paired(tb, to, seconds=0.5).load_bound() is True
    assert _paired(tb, [x / 2 for x in tb], seconds=0.5).load_bound() is False   # both alike
    assert _paired([0.0] + tb[1:], to, seconds=0.5).load_bound() is False
    assert _paired(tb, [0.0] + to[1:], seconds=0.5).load_bound() is False


def test_the_rounds_drift_of_a_ratio_is_the_ratios_and_of_a_saving_either_sides():
    # (kills _Paired.drift 1-3, 6 and 13)
    rising = [1e-3 * (1 + i / 10) for i in range(32)]
    flat = [1e-3] * 32
    ratio = _paired(rising, rising, seconds=0.5)
    assert ratio.drift() == 0.0                                       # both sides rise alike: the ratio is flat
    assert _paired(rising, flat, seconds=0.5).drift() == pytest.approx(V.trend([b / o for b, o in zip(rising, flat)]))
    saving = _paired(flat, rising, seconds=0.5)
    saving.of = "saving"
    assert saving.drift() == pytest.approx(V.trend(rising)) and saving.drift() > V.TREND


def test_the_first_look_waits_for_min_calls_of_each_side_or_half_the_budget_of_rounds():
    # (kills _Paired.rounds_for_calls 6 and 20-24)
    import types
    p = _paired([1e-3] * 8, [1e-3] * 8, seconds=0.1)
    p.length = 0.01
    p.sides = [types.SimpleNamespace(calls=40), types.SimpleNamespace(calls=80)]
    assert p.rounds_for_calls(100.0) == 2 * V.FEW                      # 200 calls in 5 rounds: at least 2 x FEW
    p.sides = [types.SimpleNamespace(calls=10), types.SimpleNamespace(calls=20)]
    assert p.rounds_for_calls(100.0) == V.MIN_CALLS // 10 == 20        # 200 calls of the 10-call side
    p.sides = [types.SimpleNamespace(calls=1), types.SimpleNamespace(calls=2)]
    assert p.rounds_for_calls(100.0) == V.MIN_CALLS                    # 200 calls of the one-call side
    assert p.rounds_for_calls(0.4) == 10                               # half of 0.4 s in rounds of 0.02 s
    assert p.rounds_for_calls(0.1) == V.FIRST


def test_a_decision_that_never_looks_has_no_interval_and_says_what_the_warm_up_took():
    # the warm-up eats the budget: no round, value 0, open ends, the warm-up's seconds in the note; the clock not at 0
    # (kills samples 137-142, 144, 146, 147, 149 and 156)
    once, clock, t = _steady_value(step=0.6)
    t["t"] = 100.0
    d = decide_value(once, at_least=900.0, clock=clock, max_run_time=1.0, warmup=2)
    assert (d.rounds, d.value, d.low, d.high, d.verdict) == (0, 0.0, -math.inf, math.inf, "within noise")
    assert d.seconds == pytest.approx(1.2) and "(1 s; 1.20 s went to the warm-up)" in d.note
    once, clock, t = _steady_value()
    t["t"] = 100.0
    d = decide_value(once, at_least=900.0, clock=clock, max_run_time=2.0, min_rounds=60)
    assert d.rounds >= 60 and d.seconds == pytest.approx(0.01 * (1 + d.rounds))   # (kills samples 112)
    d = decide_value(once, at_least=900.0, clock=clock, max_run_time=2.0)
    assert 0.25 * 2.0 <= 0.01 * d.rounds < 1.0   # first looked at after a quarter of the budget (kills samples 115)


def test_a_time_decision_of_few_rounds_says_so_and_keeps_its_rule():
    # calls of 0.4 s in a 1 s budget (one round); the machine's clock not at 0 (kills timed 174, 179 and 192, and timed 43, 47
    # and 48: the side named "fn" where its warm-up does not settle)
    m = Machine(5)
    m.run(100.0)
    t0 = m.clock()
    d = decide_time(m.side(0.4), at_least=0.1, clock=m.clock, waited=m.waited, max_run_time=1.0)
    assert d.at_least == 0.1 and d.at_most is None and d.seconds == pytest.approx(m.clock() - t0) and d.seconds <= 1.0
    assert "too few for a 99% interval" in d.note
    slower = {"cost": 1e-4}

    def o():
        slower["cost"] *= 1.01
        m.run(slower["cost"])
    d = decide_time(o, at_most=1.0, clock=m.clock, waited=m.waited, max_run_time=1.0)
    assert "warm-up not steady within its share of the budget: fn" in d.note
    m = Machine(5)
    d = decide_time(m.side(2e-3, jitter=0.02), at_most=5.0, clock=m.clock, waited=m.waited, max_run_time=2.0)
    # a warm-up of a tenth of the budget at least, then a quarter of it in rounds before the first look (kills timed 144)
    assert d.seconds >= 0.1 * 2.0 + 0.25 * 2.0


def _slowing_optimized_side():
    """decide_speedup on a clock the calls advance: the baseline 1 ms a call, the optimized side 0.5 ms slowing to
    ~1.5 ms by its 600th call."""
    clock = {"t": 0.0, "n": 0}

    def base():
        clock["t"] += 1e-3

    def opt():
        clock["n"] += 1
        clock["t"] += 5e-4 * (1 + clock["n"] / 300)

    return decide_speedup(base, opt, at_least=0.9, clock=lambda: clock["t"], max_run_time=2.0)


def test_a_re_sized_pair_keeps_the_steady_sides_calls_and_says_both_before_and_after():
    # the optimized side slows (0.5 ms to ~1.5 ms a call): re-sized from the last FIRST rounds' time per call; the
    # baseline's calls stay (kills _Paired.round 33, 35, 44 and 46)
    import re
    d = _slowing_optimized_side()
    sized = re.findall(r"re-sized at round \d+: optimized drifted from its calibration \(calls per block (\d+)/(\d+) -> "
                       r"(\d+)/(\d+)\)", d.note)
    assert sized, d.note
    (a, b, c, e), last = [tuple(map(int, s)) for s in sized[:1]][0], tuple(map(int, sized[-1][2:]))
    assert a == c and b > e and last == d.calls


def test_a_paired_decision_carries_its_rounds_rule_and_notes():
    # every field of decide_speedup's Decision; with no round, the warm-up's ratio with the ratio's open interval
    # [0, inf) (a saving's: (-inf, inf)) and no check (kills paired 11, 94, 103, 156-164, 171, 173-177, 185, 208-221,
    # 249 and 250)
    d, _ = decide(dict(cost=1e-3, slow_every=10, slow_factor=10), dict(cost=4e-4), at_least=3.0, partly=2.0, block=1e-3,
                  min_rounds=100)
    assert (d.verdict, d.quantity, d.confidence, d.at_least, d.at_most, d.partly) == \
        ("holds", "speedup", CONFIDENCE, 3.0, None, 2.0)
    assert d.rounds == len(d.samples) >= 100 and len(d.calls) == 2 and len(d.warmup_calls) == 2
    assert math.isfinite(d.typical_low) and d.typical_low < d.typical < d.typical_high and math.isfinite(d.typical_high)
    assert d.note.endswith("(speedup)") and not math.isnan(d.longer)
    m = Machine(0)
    d = decide_saving(m.side(2.0), m.side(1.0), at_least=0.5, clock=m.clock, waited=m.waited, max_run_time=0.5)
    assert d.rounds == 0 and d.value == pytest.approx(1.0, rel=0.2) and (d.low, d.high) == (-math.inf, math.inf)
    assert math.isnan(d.longer)
    d, _ = decide(dict(cost=2.0), dict(cost=1.0), at_least=1.5, max_run_time=0.5)
    assert d.rounds == 0 and d.value == pytest.approx(2.0, rel=0.2) and (d.low, d.high) == (0.0, math.inf)
    with pytest.raises(TypeError, match="^decide_speedup: baseline must be a callable"):
        decide_speedup(None, lambda: None, at_least=1.0)
    d = _slowing_optimized_side()
    assert "the rounds drift: the ratio moved -" in d.note


def test_a_processs_first_decision_stays_within_its_budget_and_its_seconds_are_its_wall_time():
    """Issue 50: in a fresh process the first decision imported torch and scipy.special and built its stopwatch
    (1-2 s) before its clock started: `seconds` said 0.5 for 2 s of wall time, the budget overran 2-3x. Now
    `perflab.kit.verdicts` pays the imports when it is imported, and what a decision still sets up is inside its
    budget: `seconds` is the call's wall time, within 1.2x the budget (or one call of each side). The claims'
    tables (`perflab.kit.claims`, `judge`) still import without torch."""
    import subprocess
    import sys

    code = ("import sys, time\n"
            "import perflab.kit.claims\n"
            "print('torch' in sys.modules)\n"
            "from perflab.kit.verdicts import decide_speedup\n"
            "t0 = time.perf_counter()\n"
            "d = decide_speedup(lambda: time.sleep(0.025), lambda: time.sleep(0.01), at_least=2, max_run_time=1.0)\n"
            "print(time.perf_counter() - t0, d.seconds, d.rounds)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    torch_before, line = out.stdout.split("\n")[:2]
    wall, seconds, rounds = map(float, line.split())
    assert torch_before == "False"                                 # the claims' tables stay light
    assert seconds <= wall <= seconds + 0.05, (wall, seconds)     # the setup inside `seconds` (it was 0.5 of 2.0)
    assert wall <= 1.2 * 1.0 + 0.025 + 0.01 and rounds > 0, (wall, rounds)
