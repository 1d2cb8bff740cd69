"""Where a step of the evaluation loop's time goes: a torch.profiler table, launches and host reads per step
(`step_profile`, notebook 03; study 4's counts per rollout: `early_exit.profiles`).

Launches come from `perflab.kit.launches.count_launches`: CUDA kernels on a GPU; on a CPU its proxy, the aten
ops dispatched (views included: `StepProfile.views` says how many, they launch no kernel on a GPU) plus
compiled-graph calls. Every count is divided by the steps of the run it was counted on.
"""
from __future__ import annotations

import dataclasses

import torch
from torch.autograd import DeviceType

from ...kit.bench import measure
from ...kit.env import synchronize
from ...kit.launches import count_launches, profiler_activities, self_time_key
from ...kit.profiling import quiet_profiler
from ..core.batching import step_bytes
from ..core.rollout import rollout_full
from ..core.step import GreedyStep

VIEWS = ("aten::unsqueeze", "aten::select", "aten::slice", "aten::expand", "aten::expand_as", "aten::view",
         "aten::reshape", "aten::unbind", "aten::squeeze", "aten::as_strided", "aten::alias", "aten::t")


@dataclasses.dataclass
class StepProfile:
    batch: int
    steps: int                 # steps of the profiled chunk
    launches: float            # per step: CUDA kernels, or on CPU aten ops + compiled-graph calls
    views: float               # per step, of `launches` on CPU: view ops (no kernel on a GPU)
    host_reads: float          # per step
    measurement: object        # one chunk's rollout, warm
    bytes_per_step: int        # predicted (step_bytes)
    table: str                 # torch.profiler's top ops of the profiled chunk
    top: list                  # [(op, calls per step, share of the op time)]

    @property
    def ms_per_step(self) -> float:
        return 1e3 * self.measurement.median / self.steps

    def bandwidth(self) -> float:
        """Bytes per step over time per step (B/s): the rate the step would need to move its bytes."""
        return self.bytes_per_step / (self.measurement.median / self.steps)


def step_profile(step: GreedyStep, candidates: torch.Tensor, batch: int, *, min_run_time: float,
                 max_run_time: float, row_limit: int = 12) -> StepProfile:
    """Where one step of the evaluation loop goes: a chunk of `batch` candidates rolled out with `step`
    (warm), under torch.profiler (its top ops by self time, device time on a GPU), under count_launches, and
    timed; every count divided by the chunk's steps."""
    chunk = candidates.repeat((batch + len(candidates) - 1) // len(candidates), 1)[:batch]
    dev = step.engine.device
    with torch.inference_mode():
        res = rollout_full(step, chunk)                               # warm: compiled, buffers built
        with quiet_profiler():
            with count_launches(dev) as launches:
                rollout_full(step, chunk)
            with torch.profiler.profile(activities=profiler_activities(dev)) as prof:
                rollout_full(step, chunk)
                synchronize(dev)
        m = measure(lambda: rollout_full(step, chunk), label="one chunk of the evaluation loop", sub_label=f"B={batch}",
                    description=f"{step.mode}/{step.backend}", min_run_time=min_run_time, max_run_time=max_run_time,
                    warmup=0, device=dev)
    key = self_time_key(dev)
    # on a GPU the device's own events (kernels, copies), so an op and the kernel it launched are not both counted
    avg = [e for e in prof.key_averages() if (e.device_type != DeviceType.CPU if dev.type != "cpu"
                                              else e.key.startswith(("aten::", "## Call", "triton", "void", "cpp_")))]
    total = sum(getattr(e, key) for e in avg) or 1.0
    top = sorted(avg, key=lambda e: -getattr(e, key))[:row_limit]
    n = res.steps_executed
    views = sum(v for k, v in launches.by_op.items() if k in VIEWS) if dev.type == "cpu" else 0
    return StepProfile(batch, n, launches.total / n, views / n, res.host_reads / n, m, step_bytes(step.engine, step.policy, batch),
                       prof.key_averages().table(sort_by=key, row_limit=row_limit, max_name_column_width=48),
                       [(e.key, e.count / n, getattr(e, key) / total) for e in top])
