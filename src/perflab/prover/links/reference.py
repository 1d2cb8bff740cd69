"""Link prediction's oracle: the exhaustive breadth-first provability of the engine library's reference
(`core.reference.prove_exhaustive`, itself held to the plain-Python prover: `checks.oracle_check`, and 03's checks).
The search's proofs must exist within their depth there, and `engine_coverage` is the ceiling of any search as deep."""
from __future__ import annotations

import torch

from ..core.reference import prove_exhaustive


def engine_coverage(engine, queries: torch.Tensor, max_depth: int = 2, chunk: int = 64) -> torch.Tensor:
    """[Q] bool: a proof of the query exists within max_depth steps through the engine's successors (its
    limits included: fact window K, successor list S, atoms A). The ceiling for any policy at that depth.
    Breadth-first (`prove_exhaustive`), `chunk` queries at a time to bound the frontier's memory."""
    return torch.cat([prove_exhaustive(engine, queries[i:i + chunk], max_depth) > 0
                      for i in range(0, len(queries), chunk)] or [torch.zeros(0, dtype=torch.bool)])
