"""A small link predictor trained on the training facts: ComplEx with reciprocal relations (the learned score
every candidate gets, proved or not).

    model, log = train_complex(kg, EmbeddingConfig(rank=100, epochs=50), seed=0, device="cpu")
    lp = model.side_log_probs(queries, "tail")     # [Q, C + 1]: log p(t | h, r) over every entity (0: padding)

ComplEx (Trouillon et al. 2016) scores (h, r, t) as Re(<e_h, w_r, conj(e_t)>) with complex embeddings of `rank`
dimensions. Trained as Lacroix et al. 2018 train it: each fact (h, r, t) is two queries, (h, r, ?) and
(t, r^-1, ?) with a reciprocal relation r^-1 of its own, each a softmax over all entities (cross-entropy
against the true one), with the weighted N3 penalty on the factors a query uses, and Adagrad. A candidate of
a tail corruption is scored by the query (h, r, ?), one of a head corruption by (t, r^-1, ?): each side ranks
with the direction it was trained for.

Seeded and reproducible: the initial weights and the order of the facts come from CPU generators seeded
by `seed`, so two runs on the same device and thread count give the same weights bit for bit.
"""
from __future__ import annotations

import dataclasses
import time

import torch
from torch import nn
from torch.nn import functional as F

from ..core.kg import FIRST_PRED, KnowledgeGraph


@dataclasses.dataclass(frozen=True)
class EmbeddingConfig:
    rank: int = 100          # complex dimensions per entity and relation (2 * rank reals)
    epochs: int = 50         # passes over the training facts (both directions)
    lr: float = 0.1          # Adagrad learning rate
    reg: float = 1e-2        # weight of the N3 penalty
    batch: int = 256         # queries per update
    init: float = 1e-3       # scale of the normal initial weights

    def __post_init__(self):
        if self.rank < 1 or self.epochs < 0 or self.batch < 1:
            raise ValueError(f"need rank >= 1, epochs >= 0 and batch >= 1, got {self.rank}, {self.epochs}, {self.batch}")


class ComplEx(nn.Module):
    """Entities 0..C (0 is padding, never an answer), relations 0..2R-1 (r + R is r's reciprocal)."""

    def __init__(self, n_constants: int, n_relations: int, rank: int, init: float = 1e-3,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.rank, self.R = rank, n_relations
        self.ent = nn.Parameter(torch.randn(n_constants + 1, 2 * rank, generator=generator) * init)
        self.rel = nn.Parameter(torch.randn(2 * n_relations, 2 * rank, generator=generator) * init)

    def _query(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """[B] heads and relation ids -> [B, 2 * rank] the query vector (e_h * w_r as complex numbers)."""
        k = self.rank
        eh, wr = self.ent[h], self.rel[r]
        return torch.cat([eh[:, :k] * wr[:, :k] - eh[:, k:] * wr[:, k:], eh[:, :k] * wr[:, k:] + eh[:, k:] * wr[:, :k]], 1)

    def scores(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """[B, C + 1] the score of every entity as the answer of (h, r, ?); padding -inf."""
        s = self._query(h, r) @ self.ent.T                     # one matmul against every entity
        # column 0 (padding) filled on the device: an index tensor built from host data would be a blocking copy
        return torch.cat([torch.full_like(s[:, :1], float("-inf")), s[:, 1:]], 1)

    def side_log_probs(self, queries: torch.Tensor, side: str, chunk: int = 4096) -> torch.Tensor:
        """[Q, C + 1] log-softmax over entities for the side a corruption replaces: tail -> (h, r, ?), head ->
        (t, r^-1, ?). queries [Q, 3] as the engine stores triples (pred, h, t)."""
        if side not in ("head", "tail"):
            raise ValueError(f"side must be head or tail, got {side!r}")
        q = queries.long().to(self.ent.device)
        r = q[:, 0] - FIRST_PRED
        h, r = (q[:, 2], r + self.R) if side == "head" else (q[:, 1], r)
        with torch.no_grad():
            return torch.cat([torch.log_softmax(self.scores(h[i:i + chunk], r[i:i + chunk]), -1)
                              for i in range(0, len(q), chunk)] or [torch.zeros(0, self.ent.shape[0])])

    def candidate_log_probs(self, queries: torch.Tensor, side: str, cands: torch.Tensor) -> torch.Tensor:
        """[Q, C]: each candidate's (cands [Q, C, 3]) log-probability of the entity on `side` (`side_log_probs`
        gathered), on the model's device."""
        pos = 1 if side == "head" else 2
        return self.side_log_probs(queries, side).gather(1, cands[..., pos].to(self.ent.device))


@dataclasses.dataclass
class EmbeddingLog:
    loss: list          # mean training loss per epoch
    seconds: float = 0.0


def training_pairs(kg: KnowledgeGraph) -> torch.Tensor:
    """[2F, 3] (head, relation, answer) for every fact and its reciprocal."""
    f = kg.facts.long()
    R = kg.n_predicates - FIRST_PRED
    r = f[:, 0] - FIRST_PRED
    return torch.cat([torch.stack([f[:, 1], r, f[:, 2]], 1), torch.stack([f[:, 2], r + R, f[:, 1]], 1)])


def train_complex(kg: KnowledgeGraph, cfg: EmbeddingConfig = EmbeddingConfig(), seed: int = 0,
                  device="cpu") -> tuple[ComplEx, EmbeddingLog]:
    """ComplEx trained on kg.facts (module doc). Host syncs are fine here (training is not the measured loop)."""
    g = torch.Generator().manual_seed(seed)
    model = ComplEx(kg.n_constants, kg.n_predicates - FIRST_PRED, cfg.rank, cfg.init, g).to(device)
    pairs = training_pairs(kg).to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=cfg.lr)
    log, t0 = EmbeddingLog(loss=[]), time.perf_counter()
    for _ in range(cfg.epochs):
        order = torch.randperm(len(pairs), generator=g).to(device)
        total = torch.zeros((), device=device)
        for i in range(0, len(pairs), cfg.batch):
            h, r, t = pairs[order[i:i + cfg.batch]].unbind(1)
            loss = F.cross_entropy(model.scores(h, r), t) + cfg.reg * _n3(model, h, r, t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total = total + loss.detach() * len(h)
        log.loss.append(float(total) / len(pairs))
    log.seconds = time.perf_counter() - t0
    model.eval()
    return model, log


def _n3(model: ComplEx, h, r, t) -> torch.Tensor:
    """Weighted N3 (Lacroix et al. 2018): the cubed moduli of the factors a batch uses, per query."""
    k = model.rank
    norm = lambda x: torch.sqrt(x[:, :k] ** 2 + x[:, k:] ** 2 + 1e-12)  # noqa: E731  (complex modulus)
    return sum((norm(x) ** 3).sum() for x in (model.ent[h], model.rel[r], model.ent[t])) / len(h)
