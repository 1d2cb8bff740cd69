"""Issue 50: a side's own random slow calls are not the machine's load, more budget decides more, and a verdict left
within noise says what would decide it.

On the simulated machine (`perflab.runner.simulate`): calls advance an injected clock, so a decision of 8 s takes a
fraction of a second and its truth is known from the sides' definitions."""
import math
import random
import statistics

import pytest

from perflab.kit import deciding as V
from perflab.kit import intervals as I
from perflab.kit.rounds import Side, typical_block
from perflab.kit.verdicts import decide_speedup, decide_time
from perflab.runner.simulate import _BY_NAME, THIS_VM, Machine, SimCase, case_truth, decide_case, truth

# the issue's case: the baseline 40 units a call; the optimized 10, one call in 50 drawn at random costing 500
GC = dict(cost=2.5e-4, slow_p=0.02, slow_factor=50)
BASE = dict(cost=1e-3)


def _rounds_with_own_slow_calls(n=400, seed=1, load=False):
    """Each round's (baseline, optimized) seconds per call: the optimized side's blocks hold a slow call now and
    then (one round's own), and with `load` both sides follow a load with a memory of many rounds, the baseline more."""
    rng = random.Random(seed)
    x, tb, to = 0.0, [], []
    for _ in range(n):
        x = 0.9 * x + 0.1 * rng.gauss(0, 1)
        slow = 1 + 4 * (rng.random() < 0.2)
        eb, eo = (1.0 * x, 0.3 * x) if load else (0.0, 0.0)
        tb.append(2e-3 * math.exp(eb + rng.gauss(0, 0.02)))
        to.append(1e-3 * slow * math.exp(eo + rng.gauss(0, 0.02)))
    return tb, to


def _logs(tb, to):
    return [math.log(b / o) for b, o in zip(tb, to)], [math.log(b * o) for b, o in zip(tb, to)]


def test_a_sides_own_slow_calls_are_not_read_as_the_load_but_a_load_with_memory_is():
    y, x = _logs(*_rounds_with_own_slow_calls())
    # the same-round test reads a slow call (ratio down, total up in the same round) as the load
    assert I.moves_with(y, x)
    assert not I.follows_load(y, x)
    y, x = _logs(*_rounds_with_own_slow_calls(load=True))
    assert I.follows_load(y, x)
    assert not I.follows_load(y[:15], x[:15])   # under 2 x FEW rounds: nothing told
    # the ranks: a slow call however slow moves one place
    assert I._ranks([3.0, 1.0, 1e9, 2.0]) == [2.0, 0.0, 3.0, 1.0]


def test_the_load_test_false_alarm_rate_over_a_decisions_looks_is_small():
    """Sides that respond to the load alike, with own slow calls: over the looks of a decision (every 25% more
    rounds from 16 to 600), the load test fires in few of 200 decisions (it is made at every look and kept)."""
    fired = 0
    for seed in range(200):
        y, x = _logs(*_rounds_with_own_slow_calls(n=600, seed=seed))
        n = 16
        while n <= 600:
            if I.follows_load(y[:n], x[:n]):
                fired += 1
                break
            n = max(n + 1, math.ceil(n * 1.25))
    assert fired <= 10, fired    # 5%: at alpha 0.01 a look it was ~13%


def test_blocks_with_a_slow_call_of_their_own_are_not_re_sized_but_a_slower_side_is():
    side = Side("optimized", lambda: None)
    side.calls = 20
    length = 5e-3
    some_slow = [5e-3] * 7 + [20e-3] * 9        # 9 of 16 blocks hold a slow call: the typical block is as sized
    assert typical_block(some_slow) == 5e-3 and not side.drifted(some_slow, length)
    slower = [12e-3] * 14 + [5e-3] * 2          # most blocks 2.4x longer: the side itself slowed
    assert side.drifted(slower, length)
    shorter = [2e-3] * 16
    assert side.drifted(shorter, length)
    one = Side("baseline", lambda: None)         # one call a block, sized from a warm-up that held a slow call
    assert not one.drifted(shorter, length) and one.drifted(shorter, length, shrinks=True)


def test_the_issues_case_decides_with_more_budget_and_says_so_before():
    """Optimized: one call in 50 drawn 50x (mean 2.0x, typical 4x), claim >= 3x. At 2 s: within noise, and the note
    says about how much more would decide it; with max_run_time="auto" it decides "does not hold" (right) within
    1.2x the ceiling, and says what it spent. No decision is wrong."""
    decided = 0
    for seed in range(6):
        m = Machine(seed, **THIS_VM)
        b, o = m.side(**BASE), m.side(**GC)
        assert truth(b, o) == pytest.approx(2.02, abs=0.01)
        d = decide_speedup(b, o, at_least=3.0, clock=m.clock, waited=m.waited, seed=seed, max_run_time="auto")
        assert d.verdict in ("does not hold", "within noise"), d
        assert d.seconds <= 1.2 * V.AUTO * V.AUTO_CEILING
        if d.verdict == "does not hold":
            decided += 1
            assert d.seconds <= V.AUTO or f"decided in {d.seconds:.2f} s (auto: up to 8 s)" in d.note
            assert math.isnan(d.more)
        assert "moves with the machine's load" not in d.note or seed
    assert decided >= 5
    d = decide_case(SimCase("gc", BASE, GC, THIS_VM), 0, budget=2.0, at_least=3.0)   # one 2-s window it leaves open
    assert d.verdict == "within noise" and 0 < d.more < 60
    assert f"about {V.num(d.more)} s more of rounds would decide it at this spread (the value " in d.note


def _log_width(d) -> float:
    return math.log(d.high / d.low) if d.low > 0 and math.isfinite(d.high) else math.inf


@pytest.mark.parametrize("opt", [dict(cost=1e-3), GC, dict(cost=1e-3, tail=2.5)],
                         ids=["clean", "slow calls drawn", "heavy tail"])
def test_four_times_the_budget_gives_an_interval_at_most_0_6x_as_wide(opt):
    """The claim at the truth (never decided, so the rounds run to the budget): the median log width over 6 seeds at
    8 s against at 2 s, in classes where the load does not move the ratio (both sides respond to it alike)."""
    base = dict(cost=1.5e-3) if opt is not GC else BASE
    case = SimCase("c", base, opt, THIS_VM)
    t = truth(*[Machine(0).side(**x) for x in (base, opt)])
    widths = {}
    for budget in (2.0, 8.0):
        widths[budget] = statistics.median(_log_width(decide_case(case, 100 + s, budget=budget, at_least=t))
                                           for s in range(6))
    assert widths[8.0] <= 0.6 * widths[2.0], widths


@pytest.mark.parametrize("name", ["time per call, this VM's load", "rate, this VM's load"])
def test_a_time_or_a_rate_narrows_with_the_budget_down_toward_the_drift(name):
    """A quantity the load moves itself, at its truth: over FEW fixed batches each later look's t quantile grew faster
    than the batches' spread shrank, and a time's interval at 8 s was wider than at 2 s (issue 50). Its batches are
    now LOAD_BATCH seconds long, so 4x the budget narrows it (median over 6 seeds), not below the drift's floor."""
    case = _BY_NAME[name]
    t = case_truth(case)
    widths = {}
    for budget in (2.0, 8.0):
        widths[budget] = statistics.median(_log_width(decide_case(case, 100 + s, budget=budget, at_least=t))
                                           for s in range(6))
    assert widths[8.0] <= 0.8 * widths[2.0], widths
    assert widths[8.0] >= 2 * V.drift_z(0.01) * V.DRIFT, widths


def test_load_batches_grow_with_the_window():
    assert V.load_batches(10_000, 1.0) == I.FEW                  # at least FEW
    assert V.load_batches(10_000, 8.0) == int(8.0 / V.LOAD_BATCH)
    assert V.load_batches(60, 8.0) == 15                         # four rounds a batch at least


def test_where_the_load_moves_the_ratio_the_interval_narrows_to_the_drift_and_says_that_is_the_floor():
    case = SimCase("mem", dict(cost=2e-3, exponent=1.0), dict(cost=1e-3, exponent=0.7), THIS_VM, long_run=True)
    d = decide_case(case, 7, budget=8.0, at_least=2.0)
    assert d.verdict == "within noise" and "moves with the machine's load" in d.note
    assert "no budget would decide it: the value is" in d.note and "within the machine's drift" in d.note
    assert d.more == math.inf
    floor = 2 * V.drift_z(1e-4) * V.DRIFT * 0.3    # the drift at the looks' level, as far as the ratio follows it
    assert _log_width(d) >= floor


def test_more_needed_reads_the_spread():
    def sp(value, low, high, seconds=2.0, drift=0.0):
        return V.Spread(value, low, high, seconds, lambda s: drift, 0.01)
    rule = dict(at_least=3.0, at_most=None, partly=None)
    assert math.isnan(V.more_needed(None, rule)) and math.isnan(V.more_needed(sp(2.0, 0.0, math.inf), rule))
    assert V.more_needed(sp(2.0, 1.5, 2.5), rule) == 0.0                 # decided already
    # half-width toward the threshold log(2.4/2) against a margin of log(3/2): (0.182/0.405)^2 x 2 s in all
    extra = V.more_needed(sp(2.0, 1.6, 2.4 * 1.5), rule)
    want = 2.0 * (math.log(3.6 / 2.0) / math.log(1.5)) ** 2 - 2.0
    assert extra == pytest.approx(want, rel=1e-6)
    assert V.more_needed(sp(2.9, 2.0, 4.0, drift=0.05), rule) == math.inf   # 3% away, within a 5% drift
    near = dict(rule, at_least=2.0001)                                      # would need > 10,000x the rounds
    assert V.more_needed(sp(2.0, 1.6, 2.4), near) == math.inf
    # a difference (not positive): linear
    rule = dict(at_least=None, at_most=1.0, partly=None)
    assert V.more_needed(sp(0.5, -1.0, 2.0), rule) == pytest.approx(2.0 * (1.5 / 0.5) ** 2 - 2.0, rel=1e-6)
    assert V.more_note(sp(2.0, 1.6, 3.6), dict(at_least=3.0, at_most=None, partly=None), "holds") == ""


def test_auto_is_refused_where_it_is_not_a_budget_and_a_time_decision_takes_it():
    with pytest.raises(ValueError, match="max_run_time must be a number of seconds"):
        decide_speedup(lambda: None, lambda: None, at_least=1, max_run_time="soon")
    m = Machine(2, **THIS_VM)
    d = decide_time(m.side(1e-3), at_most=1.5, scale=1e3, clock=m.clock, waited=m.waited, max_run_time="auto")
    assert d.verdict == "holds" and d.seconds <= 1.2 * V.AUTO * V.AUTO_CEILING


@pytest.mark.slow
@pytest.mark.parametrize("at_least, want", [(3.0, "does not hold"), (1.5, "holds")])
def test_a_step_with_gc_like_pauses_gets_the_verdict_its_total_time_says_on_the_real_clock(at_least, want):
    """Issue 50's user case on the real clock, not the simulated one, as the issue gives it: the baseline is 40 units
    of work a call; the optimized 10, but one call in 50, drawn at random, costs 500 (a collection). A unit: one
    64x64 matmul on one thread. The typical call is 4x faster, the total time 40 / (0.98 x 10 + 0.02 x 500) = 2.02x:
    ">= 3x" does not hold and ">= 1.5x" holds, each 25% or more from the truth, within "auto" (4x the default
    budget), the wall time within 1.2x it."""
    import time

    import torch

    torch.set_num_threads(1)
    a = torch.randn(64, 64)
    rng = random.Random(5)

    def work(units):
        for _ in range(units):
            torch.mm(a, a)

    def base():
        work(40)

    def opt():
        work(500 if rng.random() < 0.02 else 10)

    t0 = time.perf_counter()
    d = decide_speedup(base, opt, at_least=at_least, max_run_time="auto", seed=1)
    wall = time.perf_counter() - t0
    assert d.verdict == want, (d.value, d.low, d.high, d.note)
    # the total time's ratio (2.02x) inside the interval, not the typical call's (4x): a ">= 1.5x" decided at its first
    # look has seen ~4 slow calls of the optimized side's 200, so its value alone strays to ~2.8x (a bound on it failed)
    assert d.low < 2.02 < d.high and d.value < 3.5, (d.value, d.low, d.high)
    assert wall <= 1.2 * V.AUTO * V.AUTO_CEILING and d.seconds <= wall
