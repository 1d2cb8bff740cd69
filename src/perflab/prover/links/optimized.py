"""Link prediction's optimized prover: a beam search that keeps `cfg.beam` proofs per candidate for
`cfg.search_depth` steps (the exhaustive search of two steps, the engine's ceiling for a mined rule): today's
`search.BeamSearch` whose last step tests which children are <true> instead of building them, the same proofs
(`search.ClosingSearch` on a device, `search.SparseClosingSearch` on the CPU; issue 33), `cfg.search_batch`
rows per step. Same constructor and `score` as `baseline.Prover`; `predict.py` adds the learned
score every candidate gets."""
from __future__ import annotations

import torch

from .params import LinkConfig
from .search import ClosingSearch, SearchResult, SparseClosingSearch


class Prover:
    """The best proof of each candidate the search finds (`self.search`, reused: its compiled graphs)."""

    def __init__(self, engine, policy, cfg: LinkConfig):
        # on a device, fixed shapes and no host read (a CUDA graph, no wait per chunk): the last step's policy on every
        # row; on the CPU, where a host read waits for nothing, only on the rows where a proof closes (~8% of
        # Kinship's rows: a third of the time)
        search = SparseClosingSearch if engine.device.type == "cpu" else ClosingSearch
        self.search = search(engine, policy, cfg.beam, cfg.search_depth, cfg.compile, cfg.backend)
        self.batch = cfg.search_batch

    def score(self, candidates: torch.Tensor, fail_score: float = -100.0) -> SearchResult:
        """Candidates [N, 3] -> .score, .proven per candidate (and the search's counts: `row_steps` rows)."""
        return self.search.score(candidates, self.batch, fail_score)
