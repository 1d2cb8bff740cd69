"""Closed-path rules mined from a graph's facts: `r(X,Y) :- p(X,Y)` and `r(X,Y) :- p(X,Z), q(Z,Y)`, inverses included.

    rules = mine_rules(kg, MiningConfig(min_support=2, min_head_coverage=0.01, min_confidence=0.1))
    kg = with_rules(kg, rules)                       # the engine's Rule objects, strongest first per head
    Path("rules.txt").write_text(rules_text(kg, rules))   # the rules.txt format, stats as comments

A body is a path from X to Y through oriented relations: `p` reads p(V_i, V_{i+1}), its inverse `p^-1` reads
p(V_{i+1}, V_i). With A_p the [C+1, C+1] 0/1 adjacency of p (A_p[a, b] = 1 iff p(a, b) is a fact), the pairs a
body holds for are the nonzeros of one oriented matrix (length 1) or of the product of two (length 2, any Z,
Z = X or Y included). AMIE's measures (Galarraga et al. 2013), counted over pairs (x, y):
    support          #{(x, y): body(x, y) and r(x, y)}      head facts the rule predicts that are true
    head coverage    support / |r|
    confidence       support / #{(x, y): body(x, y)}         standard confidence (closed world)
The trivial `r(X,Y) :- r(X,Y)` is never proposed. Every count is a sparse product: the 2-hop bodies of all
pairs (p, q) come from one `torch.sparse.mm` per chunk of first relations, and the supports of all bodies and
heads from one more (body x pair incidence times pair x relation incidence), on the device given.
`brute_force_statistics` counts the same numbers with Python loops (the tests' oracle).
"""
from __future__ import annotations

import dataclasses
import itertools
import time
import warnings
from contextlib import contextmanager

import torch

from .kg import FIRST_PRED, KnowledgeGraph, Rule

X, Y, Z = -1, -2, -3   # the variables as kg.Rule stores them (order of first appearance: head X, Y, then Z)


@dataclasses.dataclass(frozen=True)
class MiningConfig:
    min_support: int = 2                 # head facts a rule must predict correctly
    min_head_coverage: float = 0.01      # support / |head relation|
    min_confidence: float = 0.1          # support / |body pairs| (standard confidence)
    max_length: int = 2                  # body atoms: 1 or 2
    # keep the strongest k per head relation (None: all that pass). The engine offers a ground goal at most
    # max_derived - 1 rules (its successor list), and its tensors grow with the largest count per head:
    # 15 matches the prover notebooks' CPU default max_derived=16 (Nations passes ~10^4 per head without a cap)
    max_rules_per_head: int | None = 15
    # "strongest" = highest support / (body pairs + prior): the confidence shrunk as if `prior` more body pairs
    # had failed. 0 ranks by raw confidence, which on Nations keeps rules of support 2-3 (confidence 0.67-1)
    # that cover 11% of the valid triples; 20 (picked on the valid split's rules-alone MRR, prior 5-200) covers 95%
    prior: float = 20.0

    def __post_init__(self):
        if self.min_support < 1:
            raise ValueError(f"min_support must be >= 1, got {self.min_support}")
        if not (0 <= self.min_head_coverage <= 1 and 0 <= self.min_confidence <= 1):
            raise ValueError(f"min_head_coverage and min_confidence must be in [0, 1], "
                             f"got {self.min_head_coverage}, {self.min_confidence}")
        if self.max_length not in (1, 2):
            raise ValueError(f"max_length must be 1 or 2, got {self.max_length}")
        if self.max_rules_per_head is not None and self.max_rules_per_head < 1:
            raise ValueError(f"max_rules_per_head must be >= 1 or None, got {self.max_rules_per_head}")
        if self.prior < 0:
            raise ValueError(f"prior must be >= 0, got {self.prior}")


@dataclasses.dataclass(frozen=True)
class MinedRule:
    head: int                               # predicate id
    body: tuple[tuple[int, bool], ...]      # (predicate id, inverse) per atom, along the path X -> (Z ->) Y
    support: int
    head_size: int                          # |head relation|
    body_size: int                          # pairs the body holds for

    @property
    def head_coverage(self) -> float:
        return self.support / self.head_size

    @property
    def confidence(self) -> float:
        return self.support / self.body_size if self.body_size else 0.0

    def atoms(self) -> tuple[tuple[int, int, int], ...]:
        """Body atoms with variables as kg.Rule stores them."""
        path = (X, Z, Y) if len(self.body) == 2 else (X, Y)
        return tuple((p, path[i + 1], path[i]) if inv else (p, path[i], path[i + 1])
                     for i, (p, inv) in enumerate(self.body))

    def rule(self, kg: KnowledgeGraph) -> Rule:
        return Rule(head=(self.head, X, Y), body=self.atoms(), n_vars=2 + (len(self.body) == 2), text=self.text(kg),
                    weight=self.confidence)

    def text(self, kg: KnowledgeGraph) -> str:
        v = {X: "X", Y: "Y", Z: "Z"}
        body = ", ".join(f"{kg.predicates[p]}({v[a]},{v[b]})" for p, a, b in self.atoms())
        return f"{kg.predicates[self.head]}(X,Y) :- {body}."


@dataclasses.dataclass
class MiningResult:
    rules: list[MinedRule]      # passing the thresholds, by head relation then strongest first
    candidates: int             # (head, body) pairs with support >= 1 before the thresholds
    seconds: float

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self):
        return iter(self.rules)


# ---- the sparse counts -----------------------------------------------------------------------

@contextmanager
def _quiet_sparse():
    # torch warns that COO invariant checks are off and that CSR (used inside sparse.mm) is beta: noise here
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*", category=UserWarning)
        yield


def _coo(rows, cols, shape, device) -> torch.Tensor:
    idx = torch.stack([rows, cols]).to(device)
    vals = torch.ones(idx.shape[1], dtype=torch.float32, device=device)
    return torch.sparse_coo_tensor(idx, vals, shape, check_invariants=False).coalesce()


def oriented_edges(kg: KnowledgeGraph, device):
    """Facts as oriented edges: o = 2 * (p - FIRST_PRED) + inverse, source, target (each fact twice)."""
    f = kg.facts.to(device)
    o = 2 * (f[:, 0] - FIRST_PRED)
    return torch.cat([o, o + 1]), torch.cat([f[:, 1], f[:, 2]]), torch.cat([f[:, 2], f[:, 1]])


def body_statistics(kg: KnowledgeGraph, max_length: int = 2, device="cpu", chunk: int = 16):
    """Support [B, R] (body b, head relation r) and body sizes [B] for every body of length <= max_length.
    Bodies: b < 2R is the single oriented relation b; b >= 2R is the pair (o1, o2) = divmod(b - 2R, 2R)."""
    dev = torch.device(device)
    R, N = kg.n_predicates - FIRST_PRED, kg.n_constants + 1
    n_or = 2 * R
    f = kg.facts.to(dev)
    with _quiet_sparse():
        # H [N*N, R]: pair (a, b) -> the relations holding for it (the heads' side)
        heads = _coo(f[:, 1] * N + f[:, 2], f[:, 0] - FIRST_PRED, (N * N, R), dev)
        o, src, dst = oriented_edges(kg, dev)
        b1 = _coo(o, src * N + dst, (n_or, N * N), dev)                     # [n_or, N*N] length-1 bodies
        supports, sizes = [torch.sparse.mm(b1, heads).to_dense()], [torch.sparse.sum(b1, 1).to_dense()]
        if max_length == 2:
            right = _coo(src, o * N + dst, (N, n_or * N), dev)              # [N, n_or*N]: z -> (o2, y)
            for o_lo in range(0, n_or, chunk):
                sel = (o >= o_lo) & (o < o_lo + chunk)
                left = _coo((o[sel] - o_lo) * N + src[sel], dst[sel], (chunk * N, N), dev)  # [(o1, x), z]
                paths = torch.sparse.mm(left, right).coalesce()          # [(o1, x), (o2, y)]: path counts
                r, c = paths.indices()
                o1, x = r // N + o_lo, r % N
                o2, y = c // N, c % N
                # one 0/1 row per body (o1, o2) over pairs (x, y): binarized, as the measures count pairs
                # (o1, x, o2, y) are unique after coalesce, so every value is 1
                inc = _coo((o1 - o_lo) * n_or + o2, x * N + y, (chunk * n_or, N * N), dev)
                n_body = min(chunk, n_or - o_lo) * n_or
                supports.append(torch.sparse.mm(inc, heads).to_dense()[:n_body])
                sizes.append(torch.sparse.sum(inc, 1).to_dense()[:n_body])
    return torch.cat(supports).round().long(), torch.cat(sizes).round().long()


def _decode_body(b: int, R: int) -> tuple[tuple[int, bool], ...]:
    n_or = 2 * R

    def one(o):
        return (FIRST_PRED + o // 2, bool(o % 2))
    return (one(b),) if b < n_or else tuple(one(o) for o in divmod(b - n_or, n_or))


def mine_rules(kg: KnowledgeGraph, cfg: MiningConfig = MiningConfig(), device="cpu") -> MiningResult:
    """Every closed-path rule of length <= cfg.max_length passing the thresholds (module doc), per head
    relation ordered by shrunk confidence (support / (body pairs + cfg.prior)), then support, then shorter
    body first, cut at cfg.max_rules_per_head."""
    t0 = time.perf_counter()
    support, size = body_statistics(kg, cfg.max_length, device)
    R = kg.n_predicates - FIRST_PRED
    head_size = torch.bincount(kg.facts[:, 0] - FIRST_PRED, minlength=R).to(support.device)
    b_idx, r_idx = (support > 0).nonzero(as_tuple=True)
    sup, bs, hs = support[b_idx, r_idx], size[b_idx], head_size[r_idx]
    trivial = (b_idx == 2 * r_idx)                                  # r(X,Y) :- r(X,Y)
    keep = (~trivial & (sup >= cfg.min_support) & (sup >= cfg.min_head_coverage * hs)
            & (sup >= cfg.min_confidence * bs))
    b_idx, r_idx, sup, bs, hs = (t[keep].cpu() for t in (b_idx, r_idx, sup, bs, hs))
    # order in tensors (hundreds of thousands of candidates on dense graphs): head, shrunk confidence desc
    # (cfg.prior), support desc, then bodies in index order (length 1 first); exact ratios of equal fractions
    # compare equal
    order = torch.arange(len(b_idx))
    for key in (b_idx, -sup, -(sup.double() / (bs.double() + cfg.prior)), r_idx):   # least significant first, stable sorts
        order = order[torch.argsort(key[order], stable=True)]
    b_idx, r_idx, sup, bs, hs = (t[order] for t in (b_idx, r_idx, sup, bs, hs))
    if cfg.max_rules_per_head is not None:
        first = torch.searchsorted(r_idx, r_idx)                     # index of each head's first rule
        top = (torch.arange(len(r_idx)) - first) < cfg.max_rules_per_head
        b_idx, r_idx, sup, bs, hs = (t[top] for t in (b_idx, r_idx, sup, bs, hs))
    rules = [MinedRule(FIRST_PRED + r, _decode_body(b, R), s, h, n)
             for b, r, s, h, n in zip(*(t.tolist() for t in (b_idx, r_idx, sup, hs, bs)))]
    return MiningResult(rules, int((~trivial).sum()), time.perf_counter() - t0)


# ---- rules for the engine and for the rules.txt format ----------------------------------------

def with_rules(kg: KnowledgeGraph, rules, replace: bool = True) -> KnowledgeGraph:
    """A copy of `kg` whose rules are the mined ones (appended to its own when replace=False)."""
    new = [m.rule(kg) for m in rules]
    return dataclasses.replace(kg, rules=new if replace else [*kg.rules, *new])


def rules_text(kg: KnowledgeGraph, rules, header: str = "") -> str:
    """The rules.txt format: each rule led by its confidence as a weight (the loader ignores it) and a comment
    line with its counts, so the file can be read, edited and loaded back."""
    lines = [f"% {line}" for line in header.splitlines()]
    lines.append("% weight = standard confidence; support / head coverage / body pairs in the comment above each rule")
    for m in rules:
        lines.append(f"% support {m.support}, head coverage {m.head_coverage:.4f}, body pairs {m.body_size}")
        lines.append(f"{m.confidence:.4f} {m.text(kg)}")
    return "\n".join(lines) + "\n"


def rule_coverage(kg: KnowledgeGraph, rules, queries: torch.Tensor, max_bytes: int = 2**28) -> torch.Tensor:
    """[Q] bool: query r(h, t) is proved by one of `rules` with head r whose body holds on kg's facts, i.e. by
    a proof of at most 2 steps (one rule, then facts), before any engine limit. The ceiling for what rules of
    length <= 2 applied once can reach."""
    return rule_confidence(kg, rules, queries, max_bytes) > 0


def rule_confidence(kg: KnowledgeGraph, rules, triples: torch.Tensor, max_bytes: int = 2**28) -> torch.Tensor:
    """[T] float: the highest confidence among `rules` with head r whose body holds for (h, t) on kg's facts,
    0 where none does (every mined rule has confidence > 0). Scores a triple by the rules alone, the way
    rule-based link predictors do (max aggregation): one lookup per triple in `confidence_table`."""
    t = triples.long().cpu()
    return confidence_table(kg, rules, max_bytes)[t[:, 0], t[:, 1], t[:, 2]]


def body_holds(kg: KnowledgeGraph, rules, max_bytes: int = 2**28):
    """Per rule of `rules`, (rule, [C+1, C+1] bool: the (h, t) pairs its body holds for on kg's facts): an oriented
    adjacency (length 1) or the product of two (length 2: path counts, > 0 where some z links them); one [C+1]^2
    matmul per rule (Kinship: 329 rules, tens of ms) instead of a test per (triple, rule). The 2R dense float32
    adjacencies are refused above max_bytes."""
    R, N = kg.n_predicates - FIRST_PRED, kg.n_constants + 1
    if 2 * R * 4 * N * N > max_bytes:
        raise ValueError(f"body_holds: dense adjacencies need {2 * R * 4 * N * N:,} bytes > max_bytes={max_bytes:,}")
    adj = torch.zeros(2 * R, N, N)                                   # [n_or, N, N] 0/1
    o, src, dst = oriented_edges(kg, "cpu")
    adj[o, src, dst] = 1.0
    for m in rules:
        a = adj[2 * (m.body[0][0] - FIRST_PRED) + m.body[0][1]]
        if len(m.body) == 2:
            a = a @ adj[2 * (m.body[1][0] - FIRST_PRED) + m.body[1][1]]  # paths x -> z -> y (exact counts)
        yield m, a > 0


def confidence_table(kg: KnowledgeGraph, rules, max_bytes: int = 2**28) -> torch.Tensor:
    """[P, C+1, C+1] float64: per head relation r and pair (h, t), the highest confidence among `rules` with head r
    whose body holds for (h, t) (`body_holds`), 0 where none does; refused above max_bytes (with the adjacencies)."""
    N, P = kg.n_constants + 1, kg.n_predicates
    if P * 8 * N * N > max_bytes:
        raise ValueError(f"confidence_table: the table needs {P * 8 * N * N:,} bytes > max_bytes={max_bytes:,}")
    best = torch.zeros(P, N, N, dtype=torch.float64)
    for m, holds in body_holds(kg, rules, max_bytes):
        best[m.head] = torch.where(holds, torch.clamp(best[m.head], min=m.confidence), best[m.head])
    return best


# ---- the oracle -------------------------------------------------------------------------------

def brute_force_statistics(kg: KnowledgeGraph, max_length: int = 2) -> dict:
    """{(head, body): (support, body_size)} for every head relation and body (same encoding as MinedRule),
    counted pair by pair with Python sets and loops. Small graphs only."""
    facts = {tuple(f) for f in kg.facts.tolist()}
    ents = range(1, kg.n_constants + 1)
    preds = range(FIRST_PRED, kg.n_predicates)
    edge = {(p, inv): {(b, a) if inv else (a, b) for q, a, b in facts if q == p} for p in preds for inv in (False, True)}
    bodies = {(o,): edge[o] for o in edge}
    if max_length == 2:
        for o1, o2 in itertools.product(edge, repeat=2):
            bodies[(o1, o2)] = {(x, y) for x in ents for y in ents
                                if any((x, z) in edge[o1] and (z, y) in edge[o2] for z in ents)}
    out = {}
    for r in preds:
        head = {(a, b) for q, a, b in facts if q == r}
        for body, pairs in bodies.items():
            if body == ((r, False),):
                continue
            out[(r, body)] = (len(pairs & head), len(pairs))
    return out
