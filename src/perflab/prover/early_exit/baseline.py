"""The seed's loop (study 4's baseline): chunks of `batch` candidates, the tail padded, every slot stepped until the
slowest candidate of its chunk is done, so a finished row costs as much as a live one (`core.rollout.full`). Same
signature as `optimized.rollout`."""
from __future__ import annotations

import torch

from ..core.rollout import RolloutResult, full
from ..core.step import GreedyStep


def rollout(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
            trace: list | None = None) -> RolloutResult:
    """Greedy proofs of candidates [N, 3] in chunks of `batch` slots; `trace` (a list) gets (seconds, rows computed,
    rows active) per step."""
    return full(step, candidates, batch, fail_score, trace)
