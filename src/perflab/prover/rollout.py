"""Greedy rollouts of candidate proofs: the seed's `full` loop (study 3).

`rollout_full(step, queries)` steps every slot of one batch until all are done (or max_depth): the
pattern the seed ran, where a step costs the same however many rows are already finished.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from .step import GreedyStep, final_scores


@dataclasses.dataclass
class RolloutResult:
    score: torch.Tensor         # [N] sum of chosen log-probs when proved, else fail_score
    proven: torch.Tensor        # [N] bool
    steps: torch.Tensor         # [N] steps each candidate took
    steps_executed: int = 0     # calls of the step function
    slot_steps: int = 0         # rows computed, summed over steps
    wasted_slot_steps: int = 0  # rows computed that were finished, padding or idle
    seconds: float = 0.0
    batch: int = 0              # slots per step (the last batch used, after any OOM halving)
    oom_halvings: list = dataclasses.field(default_factory=list)  # batch sizes that ran out of memory

    @property
    def ms_per_step(self) -> float:
        return 1e3 * self.seconds / max(1, self.steps_executed)


def rollout_full(step: GreedyStep, queries: torch.Tensor, n_real: int | None = None,
                 fail_score: float = -100.0) -> RolloutResult:
    """Step all B slots of queries [B, 3] until every one is done. Rows from n_real on are padding:
    computed, not returned, counted as wasted."""
    t0 = time.perf_counter()
    B = queries.shape[0]
    n_real = B if n_real is None else n_real
    slots = step.init(queries)
    pad = torch.arange(B, device=queries.device) >= n_real
    wasted = torch.zeros((), dtype=torch.long, device=queries.device)
    n = 0
    for n in range(1, step.max_depth + 1):
        wasted = wasted + (slots[4] | pad).sum()                  # rows already done (or padding)
        slots = step(*slots)
        if bool(slots[4].all()):  # one host sync per step: the seed's exit once every row is done
            break
    score, proven = final_scores(slots[0], slots[3], fail_score)
    return RolloutResult(score[:n_real], proven[:n_real], slots[2][:n_real], steps_executed=n,
                         slot_steps=n * B, wasted_slot_steps=int(wasted), seconds=time.perf_counter() - t0,
                         batch=B)


def concat(results: list[RolloutResult]) -> RolloutResult:
    """Results of consecutive chunks as one (counters summed)."""
    if not results:
        z = torch.zeros(0)
        return RolloutResult(z, z.bool(), z.long())
    return RolloutResult(torch.cat([r.score for r in results]), torch.cat([r.proven for r in results]),
                         torch.cat([r.steps for r in results]),
                         sum(r.steps_executed for r in results), sum(r.slot_steps for r in results),
                         sum(r.wasted_slot_steps for r in results), sum(r.seconds for r in results),
                         batch=results[-1].batch)
