"""The floor of link prediction on this machine: what scoring every candidate costs without a search.

    table = rule_table(kg, rules)                      # [P, C+1, C+1] log max confidence of a mined rule whose body holds
    proved, log_conf = proved_by_table(table, cands)   # [N] bool, [N] float: "proved" for all candidates, one lookup each
    n = floor_pass(model, table, queries, sides)       # both sides' candidates (side_candidates) scored: ComplEx 1-N + the table

A mined rule proves (h, r, t) in two steps (the rule, then its facts) exactly when its body holds for (h, t): the
nonzeros of one oriented adjacency or of a product of two (`mining.confidence_table`). So "proved" for every
candidate of a split is one lookup per candidate in a table built once per graph, and the embedding's score is
one log-softmax row per query and side (`ComplEx.side_log_probs`, a [Q, d] @ [d, C+1] matmul). Together they are
the floor `study.throughput` sets the search beside. What the table does not see: the engine's limits (fact
window K, successor list S, atoms A, the beam), proofs through two one-atom rules, and the policy's
log-probabilities (the combination's c_p term); `agreement` counts how often its "proved" is the search's.
"""
from __future__ import annotations

import torch

from ..core.mining import confidence_table
from .benchmark_eval import SIDES, filtered_candidates


def rule_table(kg, rules) -> torch.Tensor:
    """[P, C+1, C+1] float32: log of the highest confidence among `rules` with head r whose body holds for (h, t);
    -inf where none does."""
    return torch.log(confidence_table(kg, rules)).float()


def proved_by_table(table: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """candidates [N, 3] -> (proved [N] bool, log max confidence [N], -inf where unproved)."""
    c = candidates.long().to(table.device)
    lw = table[c[:, 0], c[:, 1], c[:, 2]]
    return lw > float("-inf"), lw


def agreement(proved_table: torch.Tensor, proved_search: torch.Tensor) -> dict:
    """How the table's "proved" compares with the search's on the same candidates: the share equal, and the
    counts proved by one only."""
    a, b = proved_table.cpu().bool(), proved_search.cpu().bool()
    return {"agree": float((a == b).float().mean()) if len(a) else 1.0, "candidates": len(a),
            "table only": int((a & ~b).sum()), "search only": int((~a & b).sum()), "both": int((a & b).sum())}


def side_candidates(kg, queries: torch.Tensor, seed: int = 0) -> dict:
    """side -> (CandidateSet, its flat candidates [N, 3]) of `queries`, built once (not part of any timing)."""
    out = {}
    for side in SIDES:
        cs = filtered_candidates(kg, queries, side, seed)
        out[side] = (cs, cs.flat())
    return out


def floor_pass(model, table: torch.Tensor, queries: torch.Tensor, sides: dict) -> int:
    """Both sides' candidates (`side_candidates`) scored as the floor scores them: the embedding's 1-N
    log-probabilities gathered at each candidate and the rule table's lookup. -> candidates scored."""
    n = 0
    for side, (cs, flat) in sides.items():
        model.candidate_log_probs(queries, side, cs.cands)                                       # [Q, C]
        proved_by_table(table, flat)
        n += len(flat)
    return n
