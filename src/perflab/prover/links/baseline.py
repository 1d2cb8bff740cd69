"""Link prediction's baseline: each candidate scored by the one greedy proof the policy finds (study 3's padded
loop, `evaluation.optimized.score_candidates`, at the greedy loop's batch), a failed proof scoring fail_score: how
the seed ranked. Same constructor and `score` as `optimized.Prover`."""
from __future__ import annotations

import torch

from ..core.rollout import RolloutResult
from ..core.step import GreedyStep
from ..evaluation.optimized import score_candidates
from .params import LinkConfig


class Prover:
    """One greedy proof per candidate, `cfg.max_depth` steps at most, `cfg.greedy_slots` candidates per step."""

    def __init__(self, engine, policy, cfg: LinkConfig):
        self.step = GreedyStep(engine, policy, cfg.max_depth, cfg.compile, cfg.backend)  # its compiled graphs
        self.batch = cfg.greedy_slots

    def score(self, candidates: torch.Tensor, fail_score: float = -100.0) -> RolloutResult:
        """Candidates [N, 3] -> .score, .proven per candidate (and the loop's counts: `slot_steps` rows)."""
        return score_candidates(self.step, candidates, self.batch, fail_score)
