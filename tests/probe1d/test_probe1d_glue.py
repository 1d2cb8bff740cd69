"""02's claim glue (issue 48's planted bugs): the floor claim's number is the optimized iteration's time over the
floor's (the floor kernel's time per call times the calls' worth of the floor's work it stands for), on sides of
known cost (the solver, the kernel and decide_speedup's timing stood in for: nothing is timed). Written against
today's `study.decide_floor`; the refactor of each study's evidence into typed findings will move it."""
import pytest

import perflab.kit.verdicts as verdicts
from perflab.kit.verdicts import Measured
from perflab.probe1d import study


def test_the_floor_claim_reads_the_iterations_time_over_the_floors(monkeypatch):
    """An iteration of 6 ms against a floor kernel of 1 ms a call, each call half the floor's work (per_call 0.5): the
    floor takes 0.5 ms, the iteration is 12x the floor (not 3x, which the kernel's factor the other way would give)."""
    cost = {}

    def opt():
        return None

    def kernel():
        return None
    cost[opt], cost[kernel] = 6e-3, 1e-3
    monkeypatch.setattr(study, "iteration_callable", lambda v, x, y, device: (None, opt, 1.0))
    monkeypatch.setattr(study, "floor_kernel", lambda floor, device: (kernel, 0.5))

    def decide_speedup(a, b, *, scale=1.0, quantity="speedup", **kw):     # the ratio of mean times, exactly
        v = scale * cost[a] / cost[b]
        return Measured(v, v, v), quantity
    monkeypatch.setattr(verdicts, "decide_speedup", decide_speedup)
    m, quantity = study.decide_floor(None, None, {}, {"bound": "memory bandwidth"}, {"at_most": 3.0}, device="cpu",
                                     max_run_time=1.0)
    assert quantity == "times the floor" and m.value == pytest.approx(12.0)
