"""The seed's evaluation loop before its fixes: candidates in chunks of `batch`, the last chunk at its
own size. Each new size is a new shape: a compiled step recompiles for it (and records a new CUDA graph
under reduce-overhead), which is what cost the seed 20-30 s per new batch size."""
from __future__ import annotations

import torch

from ..core.rollout import RolloutResult, check_batch, concat, rollout_full
from ..core.step import GreedyStep


def score_candidates(step: GreedyStep, candidates: torch.Tensor, batch: int,
                     fail_score: float = -100.0) -> RolloutResult:
    """Scores of candidates [N, 3], chunk by chunk, the tail chunk unpadded."""
    check_batch(batch)
    out = [rollout_full(step, candidates[i:i + batch], fail_score=fail_score)
           for i in range(0, len(candidates), batch)]
    res = concat(out)
    res.batch = batch
    return res
