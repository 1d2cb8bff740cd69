"""03's claim glue (issue 48's planted bugs): the floor's share of the best sweep point, on timings of known value:
the copy's mean time over the chunk's, scaled by the bytes each moves (a chunk moves the step's bytes per candidate,
per step, for every candidate of the batch). Written against today's `study.floor_share`; the refactor of each study's
evidence into typed findings will move it."""
import pytest

from perflab.kit.bench import from_times
from perflab.prover.evaluation import study
from perflab.prover.evaluation.sweep import SweepPoint


def _point(batch: int, steps: int, seconds: float) -> SweepPoint:
    m = from_times([seconds * f for f in (0.98, 1.0, 1.02) * 4], label="rollout of one chunk", sub_label=f"B={batch}")
    return SweepPoint(batch, m, steps, 0.0, 0, "")


def test_the_floors_share_is_the_steps_bytes_over_the_bandwidth_over_the_best_chunks_time(monkeypatch):
    """A step moves 1,000 B per candidate; a copy of 1 MB takes 1 ms at 1 GB/s. The best point (64 candidates,
    10 steps in 10 ms: 15.6 us per candidate-step against B=32's 18.75) needs 640,000 B, 0.64 ms at the bandwidth:
    6.4% of its time. Without its steps the share would read 0.64%; without its batch, 0.1%."""
    monkeypatch.setattr(study, "step_bytes", lambda engine, policy, batch: 1000 * batch)
    copy = from_times([1e-3 * f for f in (0.99, 1.0, 1.01) * 4], label="copy")
    points = [_point(32, 10, 6e-3), _point(64, 10, 10e-3)]
    share, floor_us, best = study.floor_share(points, None, None, bandwidth=1e9, bandwidth_m=copy)
    assert best is points[1] and floor_us == pytest.approx(1.0)            # 1,000 B at 1 GB/s: 1 us a step
    assert share.value == pytest.approx(0.064, rel=1e-9) and share.low < 0.064 < share.high
