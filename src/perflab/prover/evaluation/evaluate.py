"""`evaluate_with_corruptions`: queries x (1 + K) candidates scored by greedy proofs, ranked, MRR/Hits.

    step = GreedyStep(engine, policy, max_depth=20, compile="reduce-overhead", backend="inductor")
    res = evaluate_with_corruptions(kg, engine, policy, kg.queries["test"][:100], n_corruptions=100,
                                    mode="both", batch=512, step=step)
    res.metrics   # {'MRR': ..., 'Hits@1': ..., 'Hits@3': ..., 'Hits@10': ...}

How the step runs (compile mode, backend) is the step's: pass `step` (and reuse it, with its compiled
graphs, across calls); without one, an eager GreedyStep of `engine`, `policy` and `max_depth`. batch=0
lets the measured memory model pick (`batching.resolve_batch`). `score` is the version that scores the
candidates (a value of `study.IMPLS`): by default every chunk padded to `batch` (`optimized.py`);
`baseline.score_candidates` is the seed's unpadded loop.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ..core.batching import resolve_batch
from ..core.ranking import CandidateSet, corruptions, metrics, ranks
from ..core.rollout import RolloutResult
from ..core.step import GreedyStep
from . import optimized


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
                              mode: str = "both", batch: int = 512, score=optimized.score_candidates, max_depth: int = 20,
                              fail_score: float = -100.0, seed: int = 0, tie_break: str = "random",
                              step: GreedyStep | None = None, candidates: CandidateSet | None = None) -> EvalResult:
    """Score every candidate with a greedy proof, rank each positive among its corruptions (module doc)."""
    t0 = time.perf_counter()
    if step is None:
        step = GreedyStep(engine, policy, max_depth)
    elif step.engine is not engine or step.policy is not policy or step.max_depth != max_depth:
        raise ValueError("step must be a GreedyStep of this engine and policy with the same max_depth "
                         f"(step.max_depth={step.max_depth}, max_depth={max_depth})")
    cs = candidates if candidates is not None else corruptions(kg, queries, n_corruptions, mode, seed)
    flat = cs.flat().to(engine.device)
    batch = resolve_batch(batch, engine, policy, flat, max_depth)
    with torch.inference_mode():
        res = score(step, flat, batch, fail_score=fail_score)
    scores = cs.unflatten(res.score.float(), fill=float("-inf"))
    r = ranks(scores, cs, tie_break)
    return EvalResult(metrics(r), r, scores, cs.unflatten(res.proven, fill=False), cs, res, res.batch,
                      time.perf_counter() - t0)
