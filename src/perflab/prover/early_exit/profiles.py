"""Launches and host reads per step of each version of the rollout (`per_step_counts`; `launch_counts` for notebook
04's findings).

Launches come from `perflab.kit.launches.count_launches`: CUDA kernels on a GPU; on a CPU its proxy, the aten
ops dispatched plus compiled-graph calls. Every count is divided by the steps of the run it was counted on.
"""
from __future__ import annotations

from ...kit.launches import count_launches
from ...kit.profiling import quiet_profiler
from .study import variants


def per_step_counts(w, batch: int, min_bucket: int) -> dict[str, dict]:
    """Per version (`study.IMPLS`), per step: launches (count_launches: CUDA kernels, or aten ops + graph calls on
    CPU) and host reads, from one warm untraced run."""
    out = {}
    for s, fn in variants(min_bucket).items():
        fn(w.step, w.candidates, batch)        # warm
        with quiet_profiler(), count_launches(w.step.engine.device) as launches:
            r = fn(w.step, w.candidates, batch)
        n = max(1, r.steps_executed)
        out[s] = dict(launches_per_step=launches.total / n, host_reads_per_step=r.host_reads / n, steps=r.steps_executed)
    return out


def launch_counts(run, found) -> dict[str, dict[str, dict]]:
    """`per_step_counts` on 4 chunks of the ladder and on the whole of study 3's candidates (`found.workloads`), at the
    run's batch and smallest bucket. -> {"ladder" | "kg": {version: counts}}"""
    cfg = run.cfg
    return {"ladder": per_step_counts(found.ladder.head(4 * cfg.batch), cfg.batch, cfg.min_bucket),
            "kg": per_step_counts(found.kg, cfg.batch, cfg.min_bucket)}
