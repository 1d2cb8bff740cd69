"""The fixed evaluation loop: every chunk has exactly `batch` rows (the tail is padded by repeating its
last candidate), so a compiled step sees one shape and never recompiles after warm-up; a CUDA
out-of-memory error halves the batch and retries from the first unfinished candidate, keeping the chunks
already done. Same signature as `baseline.score_candidates`."""
from __future__ import annotations

import warnings

import torch

from ..core.rollout import RolloutResult, check_batch, concat, pad_to, rollout_full  # noqa: F401 (pad_to re-exported)
from ..core.step import GreedyStep


def score_candidates(step: GreedyStep, candidates: torch.Tensor, batch: int,
                     fail_score: float = -100.0) -> RolloutResult:
    """Scores of candidates [N, 3] in chunks of exactly `batch` rows (module doc)."""
    check_batch(batch)
    done: list[RolloutResult] = []
    start, halvings = 0, []
    while start < len(candidates):
        chunk = candidates[start:start + batch]
        try:
            res = rollout_full(step, pad_to(chunk, batch), n_real=len(chunk), fail_score=fail_score)
        except torch.OutOfMemoryError:
            if batch == 1:
                raise
            halvings.append(batch)
            batch //= 2  # the finished chunks in `done` stay; this chunk starts over at the smaller size
            if step.engine.device.type == "cuda":
                torch.cuda.empty_cache()  # hand the failed chunk's cached blocks back before the smaller try
            warnings.warn(f"out of memory at batch {halvings[-1]}: retrying from candidate {start} "
                          f"with batch {batch}", RuntimeWarning, stacklevel=2)
            continue
        done.append(res)
        start += len(chunk)
    res = concat(done)
    res.batch, res.oom_halvings = batch, halvings
    return res
