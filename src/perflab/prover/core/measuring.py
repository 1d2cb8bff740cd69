"""What the rooms' measurements share beyond the kit: a Measurement of times taken here, the profiler's stderr
silenced, a claim decided only where the run is its setup, and an interval as text."""
from __future__ import annotations

import contextlib
import math
import os
import sys

import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from ...kit.claims import Claim
from ...kit.verdicts import Decision, Measured, decide_speedup


def measurement(times: list, *, label: str, sub_label: str, description: str, stmt: str, device) -> Measurement:
    """A torch.utils.benchmark Measurement of single-call times measured here (one call per block)."""
    spec = TaskSpec(stmt=stmt, setup="", global_setup="", label=label, sub_label=sub_label, description=description,
                    env=str(device), num_threads=torch.get_num_threads())
    return Measurement(number_per_run=1, raw_times=list(times), task_spec=spec)


@contextlib.contextmanager
def quiet_profiler():
    """The profiler's C++ start/stop lines ("USDT ... profiler_start") go to file descriptor 2, which a
    notebook kernel copies into the cell's output: silence that descriptor (Python warnings do not use it)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def decide(claim: Claim, baseline, optimized, cfg, device, **kw) -> Decision | None:
    """`decide_speedup(baseline, optimized)` against `claim`'s thresholds, in at most cfg.verdict_time seconds of
    paired rounds, synchronizing `device`, where this run is the claim's setup; None elsewhere (the claim is "not
    tested here", and no time is spent on it)."""
    if claim.off_setup(cfg, device.type):
        return None
    return decide_speedup(baseline, optimized, **claim.rule, max_run_time=cfg.verdict_time, device=device, **kw)


def interval(m: Measured, unit: str = "x", digits: int = 2) -> str:
    """'1.03x [1.01, 1.05]', or '1.03x' for an exact number; unit '%': '4.2% [4.1%, 4.3%]'."""
    def f(v):
        if not math.isfinite(v):
            return "-inf" if v < 0 else "inf"
        return f"{v:.1%}" if unit == "%" else f"{v:.{digits}f}{unit}"
    return f(m.value) if m.low == m.high else f"{f(m.value)} [{f(m.low)}, {f(m.high)}]"
