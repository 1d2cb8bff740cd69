"""Steps of study 4 for `perflab diagnose` (and `perflab.kit.diagnose`): one whole run of a version over a ladder
workload (candidates whose proofs take seed-like lengths, mean ~5 steps, at most `max_depth`), as notebook 04 times
them (`study.ladder_workload`, eager: its CPU default).

    perflab diagnose --setup perflab.prover.early_exit.diagnosis:baseline_step --library perflab.prover.core

`baseline_step`: the seed's loop (`core.rollout.full`: chunks of `batch` slots, every slot stepped until the chunk's
slowest proof ends); `optimized_step`: recycled slots fed from a device queue (`core.rollout.recycle`). The finished
rows computed at every step are the algorithm's (what early exit removes), not a mechanism a counter sees: seed
001's row for it in docs/diagnose.md says so; diagnose's host reads and ops per run here show what each loop costs.
"""
from __future__ import annotations

import torch

from ...kit.env import pick_device
from . import baseline, optimized
from .study import ladder_workload


def _step(rollout, run, device, n: int, batch: int, max_depth: int, seed: int):
    cfg = run.cfg if run is not None else None
    dev = pick_device(run.device if run is not None else device or "auto")
    n, batch = (cfg.n_candidates, cfg.batch) if cfg is not None else (n, batch)
    w = ladder_workload(n, max_depth, 16, dev, seed=seed)

    def whole_run():
        """Every candidate's greedy proof, `batch` slots at a time."""
        with torch.inference_mode():
            return rollout(w.step, w.candidates, batch)
    return whole_run


def baseline_step(run=None, *, device=None, n: int = 512, batch: int = 128, max_depth: int = 20, seed: int = 0):
    """One run of the seed's loop (`baseline.rollout`: core.rollout.full)."""
    return _step(baseline.rollout, run, device, n, batch, max_depth, seed)


def optimized_step(run=None, *, device=None, n: int = 512, batch: int = 128, max_depth: int = 20, seed: int = 0):
    """One run of the recycled slots (`optimized.rollout`: core.rollout.recycle)."""
    return _step(optimized.rollout, run, device, n, batch, max_depth, seed)
