"""`evaluate_with_corruptions`: queries x (1 + K) candidates scored by greedy proofs, ranked, MRR/Hits.

    res = evaluate_with_corruptions(kg, engine, policy, kg.queries["test"][:100], n_corruptions=100,
                                    mode="both", batch=512, compile="reduce-overhead")
    res.metrics   # {'MRR': ..., 'Hits@1': ..., 'Hits@3': ..., 'Hits@10': ...}

batch=0 lets the measured memory model pick the batch. pad_tail=False is the seed's unpadded loop
(`baseline.py`); the default pads every chunk to `batch` (`optimized.py`). Pass `step` to reuse a
GreedyStep (and its compiled graphs) across calls.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from . import baseline, optimized
from .batching import choose_batch, measure_memory_model
from .ranking import CandidateSet, corruptions, metrics, ranks
from .rollout import RolloutResult
from .step import GreedyStep


@dataclasses.dataclass
class EvalResult:
    metrics: dict
    ranks: torch.Tensor      # [Q]
    scores: torch.Tensor     # [Q, 1 + K] (masked candidates: -inf)
    proven: torch.Tensor     # [Q, 1 + K]
    candidates: CandidateSet
    rollout: RolloutResult
    batch: int
    seconds: float


def evaluate_with_corruptions(kg, engine, policy, queries: torch.Tensor, *, n_corruptions: int = 100,
                              mode: str = "both", batch: int = 512, compile: str = "off", pad_tail: bool = True,
                              max_depth: int = 20, fail_score: float = -100.0, seed: int = 0,
                              tie_break: str = "random", step: GreedyStep | None = None,
                              candidates: CandidateSet | None = None) -> EvalResult:
    """Score every candidate with a greedy proof, rank each positive among its corruptions (module doc)."""
    t0 = time.perf_counter()
    cs = candidates if candidates is not None else corruptions(kg, queries, n_corruptions, mode, seed)
    flat = cs.flat().to(engine.device)
    if step is None:
        step = GreedyStep(engine, policy, max_depth, compile)
    elif step.max_depth != max_depth:
        raise ValueError(f"step.max_depth={step.max_depth} differs from max_depth={max_depth}")
    if batch == 0:
        batch = choose_batch(measure_memory_model(engine, policy, flat, max_depth=max_depth), len(flat))
    if batch < 0:
        raise ValueError(f"batch must be >= 1 (or 0: measured), got {batch}")
    score_fn = optimized.score_candidates if pad_tail else baseline.score_candidates
    with torch.inference_mode():
        res = score_fn(step, flat, batch, fail_score=fail_score)
    scores = cs.unflatten(res.score.float(), fill=float("-inf"))
    r = ranks(scores, cs, tie_break)
    return EvalResult(metrics(r), r, scores, cs.unflatten(res.proven, fill=False), cs, res, res.batch,
                      time.perf_counter() - t0)
