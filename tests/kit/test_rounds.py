"""perflab.kit.rounds: a block's own time (another process's turns out, the clock's cost out), the warm-up until
steady, blocks of equal length, paired rounds in a drawn order."""
import time

import pytest

from perflab.kit.rounds import WARM_CALLS, BlockTimer, PairedTimer, Side, Stopwatch, size_blocks, warm_up
from perflab.runner.simulate import Machine


def test_another_process_turns_are_taken_out_of_a_block():
    m = Machine(0, preempt_rate=200, preempt_s=0.003, refill=0.0)
    f = m.side(1e-3, jitter=0.0)
    plain = Stopwatch("cpu", clock=m.clock)
    own = Stopwatch("cpu", clock=m.clock, waited=m.waited)
    assert not plain.corrects and own.corrects
    walls = [plain.time(f, 10) for _ in range(50)]
    owns = [own.time(f, 10) for _ in range(50)]
    assert max(walls) > 0.012 and all(t == pytest.approx(0.01) for t in owns)


def test_on_this_cpu_the_stopwatch_reads_the_run_queue_and_takes_its_own_cost_out():
    sw = Stopwatch("cpu")
    assert sw.corrects                                   # Linux: /proc/self/task/<tid>/schedstat
    assert 0 <= sw.overhead < 1e-4
    assert abs(sw.time(lambda: None, 1)) < 5e-5          # an empty block costs about nothing
    t = sw.time(lambda: time.sleep(0.002), 1)            # a side that waits: its wait is its own
    assert 0.0019 < t < 0.02


def test_the_warm_up_runs_tens_of_calls_past_a_lazy_init_and_sizes_equal_blocks():
    m = Machine(1)
    a, b = Side("a", m.side(1e-4, lazy_at=2, lazy=5e-3)), Side("b", m.side(4e-4))
    note = warm_up([a, b], Stopwatch("cpu", clock=m.clock), block=0.004, until=m.clock() + 1.0)
    assert note == "" and sum(n for _, n in a.log) >= WARM_CALLS
    assert a.per_call == pytest.approx(1e-4, rel=0.1) and b.per_call == pytest.approx(4e-4, rel=0.1)
    length = size_blocks([a, b], 0.004)
    assert (a.calls, b.calls) == (40, 10) and length == 0.004
    assert a.calls * a.per_call == pytest.approx(b.calls * b.per_call, rel=0.15)


def test_a_call_longer_than_a_block_sets_the_length_for_both():
    m = Machine(2)
    a, b = Side("a", m.side(0.02)), Side("b", m.side(0.005))
    warm_up([a, b], Stopwatch("cpu", clock=m.clock), block=0.004, until=m.clock() + 0.5)
    length = size_blocks([a, b], 0.004)
    assert (a.calls, b.calls) == (1, 4) and length == pytest.approx(0.02, rel=0.1)


def test_paired_rounds_draw_their_order():
    m = Machine(3)
    order = []

    def a():
        order.append("a")
        m.run(2e-3)

    def b():
        order.append("b")
        m.run(5e-4)

    pt = PairedTimer(a, b, block=0.002, clock=m.clock, waited=m.waited, warmup=0.2)
    assert pt.calls == (1, 4)
    firsts = []
    for _ in range(200):
        n = len(order)
        assert pt.round() == pytest.approx((0.002, 0.0005))
        firsts.append(order[n])
    assert 70 <= firsts.count("a") <= 130 and pt.rounds == 200


def test_the_timers_refuse_what_they_cannot_time():
    with pytest.raises(TypeError, match="PairedTimer: b must be a callable"):
        PairedTimer(lambda: None, 1)
    with pytest.raises(TypeError, match="fn must be a callable"):
        BlockTimer("f")
    with pytest.raises(ValueError, match="block must be > 0 seconds"):
        BlockTimer(lambda: None, block=0)
