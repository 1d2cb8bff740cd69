"""decide_speedup / decide_saving / decide_value: paired rounds, the median's interval, sequential stopping, refusals.

The statistics are tested on a simulated clock (the callables advance it by drawn amounts), so thousands of verdicts
run in seconds and the error rate can be counted; the battery (tests/runner/test_battery.py) does the same on real timings
under a real load."""
import math
import random

import pytest

from perflab.kit.bench import PairedTimer
from perflab.kit.verdicts import CONFIDENCE, Decision, Measured, decide_saving, decide_speedup, decide_time, decide_value, median_interval


class Clock:
    """A clock that only moves when a simulated call says so."""
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def sides(clock: Clock, rng: random.Random, base_s: float, ratio: float, spread: float = 0.05,
          outliers: float = 0.1):
    """Two callables whose calls take base_s x ratio and base_s seconds, each with log-normal noise and, now and
    then, a large skewed outlier (another process took the core): a distribution no normal model fits."""
    def call(cost):
        def f():
            t = cost * math.exp(rng.gauss(0, spread))
            if rng.random() < outliers:
                t *= 1 + rng.expovariate(0.5)
            clock.t += t
        return f
    return call(base_s * ratio), call(base_s)


def test_the_order_statistic_interval_matches_the_binomial_table():
    xs = list(range(20))
    # n=20, 95%: P(B <= 5) = 0.0207 <= 0.025 < P(B <= 6) = 0.0577 -> the 6th and 15th values
    assert median_interval(xs, 0.05) == (5, 14)
    assert median_interval(list(range(9)), 0.01) == (0, 8)          # 2 / 2^9 = 0.0039 <= 0.01
    assert median_interval(list(range(6)), 0.01) == (-math.inf, math.inf)   # 2 / 2^6 > 0.01: no interval


def test_measured_from_samples_and_ratio():
    m = Measured.from_samples([3.0, 1.0, 2.0, 5.0, 4.0, 9.0, 6.0, 8.0, 7.0], confidence=0.99)
    assert (m.value, m.low, m.high) == (5.0, 1.0, 9.0)
    assert Measured.from_samples([1.0, 2.0], confidence=0.99).high == math.inf
    r = Measured.ratio([2.0] * 12, [1.0] * 12, confidence=0.95, scale=3.0)
    assert (r.value, r.low, r.high) == (6.0, 6.0, 6.0)


def test_paired_rounds_draw_their_order_and_size_their_blocks():
    order = []
    clock = Clock()

    def a():
        order.append("a")
        clock.t += 0.002

    def b():
        order.append("b")
        clock.t += 0.0005

    pt = PairedTimer(a, b, block=0.001, warmup=0, clock=clock)
    assert pt.calls == (1, 2)                     # 2 ms per call: one; 0.5 ms: two fill a 1 ms block
    order.clear()
    firsts = []
    for _ in range(200):
        n = len(order)
        assert pt.round() == pytest.approx((0.002, 0.0005))
        firsts.append(order[n])
    assert 70 <= firsts.count("a") <= 130          # each side first about half the time (drawn, seeded)


def test_a_periodic_interruption_does_not_skew_the_rounds():
    """Another process takes the core for 3 ms every 4th block: under a fixed a-b, b-a pattern it always lands on the
    same side (about half the rounds skewed one way: the review's finding); drawn orders spread it over both."""
    clock, blocks = Clock(), [0]

    def side():
        blocks[0] += 1
        clock.t += 1e-3 + (3e-3 if blocks[0] % 4 == 0 else 0.0)

    d = decide_speedup(side, side, at_least=1.1, warmup=0, block=1e-3, clock=clock, max_run_time=2.0)
    assert d.verdict == "does not hold" and abs(d.value - 1.0) < 0.01


@pytest.mark.parametrize("ratio, rule, want", [
    (3.0, dict(at_least=2.0), "holds"),
    (1.5, dict(at_least=2.0), "does not hold"),
    (1.5, dict(at_least=2.0, partly=1.1), "partly holds"),
    (0.5, dict(at_most=0.8), "holds"),
])
def test_a_clear_effect_is_decided_at_the_first_look(ratio, rule, want):
    clock = Clock()
    base, opt = sides(clock, random.Random(1), 1e-3, ratio, spread=0.01, outliers=0.0)
    d = decide_speedup(base, opt, **rule, max_run_time=2.0, clock=clock)
    assert isinstance(d, Decision) and d.verdict == want
    assert d.rounds == 9                          # the fewest rounds whose 99% interval exists (2/2^9 < 0.0061)
    assert d.low <= ratio <= d.high or want == "holds"
    assert d.seconds < 0.1 and d.measured == Measured(d.value, d.low, d.high)


def test_an_effect_at_the_threshold_runs_the_budget_and_is_within_noise():
    clock = Clock()
    base, opt = sides(clock, random.Random(2), 1e-3, 2.0)
    d = decide_speedup(base, opt, at_least=2.0, max_run_time=1.0, clock=clock)
    assert d.verdict == "within noise" and d.low < 2.0 < d.high
    assert 0.9 < d.seconds <= 1.01 and d.rounds > 100


@pytest.mark.slow
def test_the_error_rate_holds_over_many_verdicts_despite_the_repeated_looks():
    """A/A pairs (true median ratio 1) against thresholds a hair on either side: every decided verdict there is wrong.
    The union bound over looks allows at most (1 - CONFIDENCE) / 2 = 0.5% per side; 1,500 verdicts each side."""
    rng = random.Random(3)
    wrong, n = 0, 1500
    for _ in range(n):
        clock = Clock()
        base, opt = sides(clock, rng, 1e-3, 1.0)
        up = decide_speedup(base, opt, at_least=1.0 + 1e-9, max_run_time=0.15, clock=clock, block=1e-3)
        clock2 = Clock()
        base, opt = sides(clock2, rng, 1e-3, 1.0)
        down = decide_speedup(base, opt, at_most=1.0 - 1e-9, max_run_time=0.15, clock=clock2, block=1e-3)
        wrong += (up.verdict == "holds") + (down.verdict == "holds")
    assert (1 - CONFIDENCE) / 2 == pytest.approx(0.005)
    print(f"{wrong} wrong of {2 * n}")
    assert wrong / (2 * n) <= 0.01, f"{wrong} wrong of {2 * n}"   # 0.5% expected at most; slack for the draw


def test_saving_and_value():
    clock = Clock()
    base, opt = sides(clock, random.Random(4), 1e-3, 1.5, spread=0.01, outliers=0.0)
    d = decide_saving(base, opt, per=5000, at_least=1.0, clock=clock)     # 0.5 ms x 5000 = 2.5 s saved
    assert d.quantity == "saving" and d.verdict == "holds" and d.value == pytest.approx(2.5, rel=0.05)
    rng = random.Random(5)
    v = decide_value(lambda: 1000 + rng.gauss(0, 10), at_least=900, quantity="candidates/s", clock=Clock())
    assert v.verdict == "holds" and v.quantity == "candidates/s" and v.rounds == 9


def test_bad_arguments_are_refused_with_the_argument_named():
    f = lambda: None  # noqa: E731
    with pytest.raises(TypeError, match="baseline must be a callable"):
        decide_speedup(3, f, at_least=1)
    with pytest.raises(TypeError, match="optimized must be a callable"):
        decide_speedup(f, "x", at_least=1)
    with pytest.raises(ValueError, match="exactly one of at_least and at_most"):
        decide_speedup(f, f, at_least=1, at_most=2)
    with pytest.raises(ValueError, match="exactly one of at_least and at_most"):
        decide_speedup(f, f)
    with pytest.raises(ValueError, match="max_run_time must be a number of seconds > 0"):
        decide_speedup(f, f, at_least=1, max_run_time=0)
    with pytest.raises(ValueError, match="confidence"):
        decide_speedup(f, f, at_least=1, confidence=99)
    with pytest.raises(ValueError, match="partly=3 must lie on the claim's side"):
        decide_speedup(f, f, at_least=2, partly=3)
    with pytest.raises(TypeError, match="at_least must be a number"):
        decide_speedup(f, f, at_least="2x")
    with pytest.raises(ValueError, match="scale must be"):
        decide_speedup(f, f, at_least=1, scale=0)
    with pytest.raises(ValueError, match="per must be"):
        decide_saving(f, f, at_least=1, per=-1)
    with pytest.raises(TypeError, match="measure_once must be a callable"):
        decide_value(None, at_least=1)
    with pytest.raises(ValueError, match="max_run_time"):
        decide_value(lambda: 1.0, at_least=1, max_run_time=-1)


def test_decide_speedup_on_real_calls():
    """Real timings, no clock injected: the path runs end to end (no verdict on speed is asserted: a slow machine may
    say "within noise"; never "does not hold" for a 3x gap in work)."""
    import torch

    a = torch.randn(32, 32)
    d = decide_speedup(lambda: [a @ a for _ in range(30)], lambda: [a @ a for _ in range(10)], at_least=1.0,
                       max_run_time=2.0)
    assert d.verdict in ("holds", "within noise") and d.rounds >= 1 and min(d.calls) >= 1


def test_a_budget_too_short_for_any_interval_says_so():
    clock = Clock()
    base, opt = sides(clock, random.Random(6), 0.1, 3.0, spread=0.01, outliers=0.0)   # 0.4 s per round
    d = decide_speedup(base, opt, at_least=2.0, max_run_time=1.0, clock=clock)
    assert d.verdict == "within noise" and d.rounds < 9
    assert "the first 99% interval needs 9: give more time" in d.note


def test_decide_time_against_a_number():
    clock = Clock()
    rng = random.Random(7)

    def f():
        clock.t += 2e-3 * math.exp(rng.gauss(0, 0.02))

    d = decide_time(f, at_most=5.0, scale=1e3, quantity="ms per call", clock=clock)   # 2 ms against <= 5 ms
    assert d.verdict == "holds" and d.quantity == "ms per call" and d.value == pytest.approx(2.0, rel=0.05)
    with pytest.raises(TypeError, match="decide_time: fn must be a callable"):
        decide_time(None, at_most=1)
    with pytest.raises(ValueError, match="decide_time: block must be > 0"):
        decide_time(f, at_most=1, block=0, clock=clock)


def test_one_decision_judged_against_another_claims_threshold():
    clock = Clock()
    base, opt = sides(clock, random.Random(8), 1e-3, 3.0, spread=0.01, outliers=0.0)
    d = decide_speedup(base, opt, at_least=2.0, clock=clock)
    e = d.rejudge(at_least=4.0, partly=1.5)
    assert (e.verdict, e.at_least, e.partly, e.rounds, e.value) == ("partly holds", 4.0, 1.5, d.rounds, d.value)
    with pytest.raises(ValueError, match="exactly one"):
        d.rejudge()


def test_every_decide_refuses_a_budget_of_zero_and_the_timers_a_non_callable():
    from perflab.kit.bench import BlockTimer

    f = lambda: None  # noqa: E731
    for decide in (decide_saving, decide_speedup):
        with pytest.raises(ValueError, match="max_run_time must be a number of seconds > 0"):
            decide(f, f, at_least=1, max_run_time=0)
    with pytest.raises(ValueError, match="decide_time: max_run_time must be a number of seconds > 0"):
        decide_time(f, at_most=1, max_run_time=0)
    with pytest.raises(TypeError, match="PairedTimer: b must be a callable"):
        PairedTimer(f, 1)
    with pytest.raises(TypeError, match="fn must be a callable"):
        BlockTimer("f")
    clock = Clock()
    d = decide_speedup(*sides(clock, random.Random(10), 1e-3, 3.0), at_least=2, clock=clock)
    with pytest.raises(ValueError, match="partly=3 must lie on the claim's side"):
        d.rejudge(at_least=2, partly=3)


def test_a_claimed_maximum_with_a_smaller_effect_settles_in_a_sequential_run():
    clock = Clock()
    base, opt = sides(clock, random.Random(9), 1e-3, 1.5, spread=0.01, outliers=0.0)
    d = decide_speedup(base, opt, at_most=1.2, partly=2.0, clock=clock)     # 1.5x: past 1.2, within 2.0
    assert d.verdict == "partly holds" and d.rounds == 9
