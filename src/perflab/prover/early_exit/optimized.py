"""Per-query early exit (study 4's optimized version): `batch` slots fed from a device-resident queue of every
candidate's initial state; a slot whose proof ends records its outcome and takes the next candidate in the same
step, so the batch stays full until the queue drains (continuous batching: `core.rollout.recycle`). Same signature
as `baseline.rollout`."""
from __future__ import annotations

import torch

from ..core.rollout import RolloutResult, recycle
from ..core.step import GreedyStep


def rollout(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
            trace: list | None = None) -> RolloutResult:
    """Greedy proofs of candidates [N, 3] with `batch` recycled slots; `trace` (a list) gets (seconds, rows
    computed, rows active) per step read."""
    return recycle(step, candidates, batch, fail_score, trace)
