"""Corrupted candidates, ranks and metrics (the link-prediction protocol of the seed's evaluation).

Each query (p, h, t) gets K corruptions: `head` replaces h by another entity, `tail` replaces t, `both`
takes ceil(K/2) head and floor(K/2) tail corruptions. Corruptions that are known to be true (facts,
held-out queries, and any closure the KG carries) are filtered out, none is repeated; a query with too
few entities left keeps fewer (masked). The positive is candidate 0.

rank = 1 + #(negatives scoring higher) + tie-break among equal scores. Scores are rounded to `decimals`
first, so float noise between batch sizes cannot reorder a tie. The random tie-break draws one key per
(query, candidate) from the seed when the candidates are made, so a rank never depends on how the
candidates were chunked.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

MODES = ("head", "tail", "both")
TIE_BREAKS = ("random", "mean", "optimistic", "pessimistic")


@dataclasses.dataclass
class CandidateSet:
    queries: torch.Tensor   # [Q, 3]
    cands: torch.Tensor     # [Q, 1 + K, 3], the positive at 0
    mask: torch.Tensor      # [Q, 1 + K] bool: real candidate
    tie_key: torch.Tensor   # [Q, 1 + K] float in [0, 1): the random tie-break's order

    def flat(self) -> torch.Tensor:
        """[N, 3] the real candidates, query by query (the order scores come back in)."""
        return self.cands[self.mask]

    def unflatten(self, values: torch.Tensor, fill=0) -> torch.Tensor:
        """[N] per-candidate values -> [Q, 1 + K] (fill where masked)."""
        out = torch.full(self.mask.shape, fill, dtype=values.dtype)
        out[self.mask] = values.cpu()
        return out

    def __len__(self) -> int:
        return int(self.mask.sum())


def corruptions(kg, queries: torch.Tensor, n_corruptions: int, mode: str = "both", seed: int = 0) -> CandidateSet:
    """The candidate set of `queries` [Q, 3] (module doc)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if n_corruptions < 0:
        raise ValueError(f"n_corruptions must be >= 0, got {n_corruptions}")
    rng = np.random.default_rng(seed)
    true = kg.true_set()
    n_head = {"head": n_corruptions, "tail": 0, "both": (n_corruptions + 1) // 2}[mode]
    sides = [(1, n_head), (2, n_corruptions - n_head)]
    Q, C = len(queries), kg.n_constants
    cands = torch.zeros(Q, 1 + n_corruptions, 3, dtype=torch.long)
    mask = torch.zeros(Q, 1 + n_corruptions, dtype=torch.bool)
    for i, q in enumerate(queries.tolist()):
        cands[i, 0], mask[i, 0] = torch.tensor(q), True
        j = 1
        for pos, k in sides:
            got = 0
            for e in rng.permutation(np.arange(1, C + 1)):     # no entity twice on one side
                if got == k:
                    break
                c = list(q)
                c[pos] = int(e)
                if int(e) == q[pos] or tuple(c) in true:
                    continue
                cands[i, j], mask[i, j] = torch.tensor(c), True
                j, got = j + 1, got + 1
            j += k - got                                         # too few entities: the rest stay masked
    g = torch.Generator().manual_seed(seed)
    return CandidateSet(queries.clone(), cands, mask, torch.rand(mask.shape, generator=g))


def ranks(scores: torch.Tensor, cs: CandidateSet, tie_break: str = "random", decimals: int = 4) -> torch.Tensor:
    """[Q] float rank of each positive among its candidates; scores [Q, 1 + K] (module doc)."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    s = torch.round(scores.double(), decimals=decimals)
    pos, neg, m = s[:, :1], s[:, 1:], cs.mask[:, 1:]
    higher = ((neg > pos) & m).sum(1).double()
    tied = (neg == pos) & m
    if tie_break == "random":
        ahead = (tied & (cs.tie_key[:, 1:] < cs.tie_key[:, :1])).sum(1).double()
    else:
        ahead = tied.sum(1).double() * {"mean": 0.5, "optimistic": 0.0, "pessimistic": 1.0}[tie_break]
    return 1 + higher + ahead


def rank_bounds(scores: torch.Tensor, cs: CandidateSet, atol: float = 1e-5, decimals: int = 4):
    """([Q], [Q]) the lowest and highest rank `ranks` can give each positive when every score may move by up to
    `atol` (float rounding that changes with the batch size or the device: cuBLAS and inductor pick other
    kernels, and other reduction orders, for another number of rows), under any tie rule. Rounding to `decimals`
    moves a score by up to half a unit more."""
    tol = 2 * atol + 10.0 ** -decimals
    s = scores.double()
    pos, neg, m = s[:, :1], s[:, 1:], cs.mask[:, 1:]
    surely_above = ((neg - pos > tol) & m).sum(1).double()
    maybe_above = ((neg - pos >= -tol) & m).sum(1).double()
    return 1 + surely_above, 1 + maybe_above


def within_bounds(r: torch.Tensor, bounds) -> bool:
    """Every rank of `r` inside `rank_bounds`' interval."""
    lo, hi = bounds
    return bool(((r >= lo) & (r <= hi)).all())


def outside(r: torch.Tensor, bounds) -> int:
    """How many ranks of `r` lie outside `rank_bounds`' interval (`within_bounds` as a count)."""
    lo, hi = bounds
    return int(((r < lo) | (r > hi)).sum())


def ties_with(scores: torch.Tensor, cs: CandidateSet, among: torch.Tensor | None = None, decimals: int = 4) -> torch.Tensor:
    """[Q] bool: the positive's score (rounded as `ranks` rounds it) equals that of at least one real negative,
    only counting negatives where `among` [Q, 1 + K] is True (None: every negative)."""
    s = torch.round(scores.double(), decimals=decimals)
    m = cs.mask[:, 1:] if among is None else cs.mask[:, 1:] & among[:, 1:]
    return ((s[:, 1:] == s[:, :1]) & m).any(1)


def metrics(r: torch.Tensor) -> dict:
    """MRR and Hits@1/3/10 of ranks [Q]."""
    r = r.double()
    return {"MRR": float((1 / r).mean()), **{f"Hits@{k}": float((r <= k).double().mean()) for k in (1, 3, 10)}}
