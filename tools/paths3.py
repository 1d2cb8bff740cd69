"""An experiment kept as a tool (issue 23): closed-path rules of length 3, `r(X,Y) :- p(X,Z), q(Z,W), s(W,Y)`
(inverses included), on small graphs, mined with the same measures as `perflab.prover.core.mining` and scored by
the rules alone, to measure whether they would help where rules of length <= 2 cover too little.

What it measured (Nations, docs/knowledge-graphs.md): they do not help. Competing for the same 15 rules per
head, rules of length <= 3 cover 76.9% of the valid triples instead of 95.0% and the rules alone rank at 0.626
instead of 0.760; 15 of length 3 added to the 15 of length <= 2 rank at 0.716. So the engine keeps bodies of 1-2
atoms and nothing here is part of the package (tests/prover/test_prover_paths3.py keeps it running).

    rules = mine_length3(kg, MiningConfig())                   # length 1-3 together, capped per head as mining does
    conf = rule_confidence3(kg, rules, triples)               # [T] best confidence of a rule that proves each

The engine takes bodies of 1 or 2 atoms, so these rules are measured here, by the rules alone (coverage and
the filtered ranking), before anything is built into the prover: a length-3 rule would enter it as two
length-2 rules through an auxiliary predicate, and its proofs would take 4 steps instead of 2.

Dense on purpose: the 2-hop reachability of every ordered pair of oriented relations, [n_or^2, N, N], then per
first relation one batched product for the third hop and one product against the heads' incidence; 2R * N^2
per first relation. Nations (110 oriented relations, 15 ids): ~40 GFLOP, about 3 minutes on one thread of
the shared 2-core CPU; refused above `max_work` multiply-adds (Kinship needs ~9x Nations' work, UMLS ~125x).

    python tools/paths3.py nations

prints `length_comparison`: the rules alone on valid and test with rules of length <= 2 (15 per head, as the
prover gets them), length <= 3 competing for the same 15, and 15 of length 3 added to the 15 of length <= 2.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from perflab.prover.core.kg import FIRST_PRED, KnowledgeGraph
from perflab.prover.core.mining import MinedRule, MiningConfig, MiningResult, mine_rules, oriented_edges


def _adjacency(kg: KnowledgeGraph) -> torch.Tensor:
    """[2R, N, N] float 0/1: oriented relation o holds for (a, b)."""
    R, N = kg.n_predicates - FIRST_PRED, kg.n_constants + 1
    adj = torch.zeros(2 * R, N, N)
    o, src, dst = oriented_edges(kg, "cpu")
    adj[o, src, dst] = 1.0
    return adj


def length3_statistics(kg: KnowledgeGraph, max_work: float = 1e11):
    """Support [n_or^3, R] and body sizes [n_or^3] of every body (o1, o2, o3), index (o1 * n_or + o2) * n_or + o3."""
    adj = _adjacency(kg)
    n_or, N = adj.shape[0], adj.shape[1]
    R = n_or // 2
    work = n_or ** 3 * N * N * (N + R)
    if work > max_work:
        raise ValueError(f"length-3 mining needs ~{work:.1e} multiply-adds > max_work={max_work:.1e}: small graphs only")
    f = kg.facts
    heads = torch.zeros(N * N, R)
    heads[f[:, 1] * N + f[:, 2], f[:, 0] - FIRST_PRED] = 1.0                    # pair -> relations holding
    two = (adj[:, None] @ adj[None, :] > 0).float()                            # [n_or, n_or, N, N]
    supports, sizes = [], []
    for o1 in range(n_or):
        three = (two[o1][:, None] @ adj[None, :] > 0).float().reshape(n_or * n_or, N * N)  # [(o2, o3), pairs]
        supports.append(three @ heads)                                          # one product for every head
        sizes.append(three.sum(1))
    return torch.cat(supports).round().long(), torch.cat(sizes).round().long()


def mine_length3(kg: KnowledgeGraph, cfg: MiningConfig | None = None, max_work: float = 1e11) -> MiningResult:
    """Rules of length 1-3 passing cfg's thresholds, each head's strongest cfg.max_rules_per_head by shrunk
    confidence (support / (body pairs + cfg.prior), as `mining.mine_rules` ranks them)."""
    cfg = cfg if cfg is not None else MiningConfig()
    t0 = time.perf_counter()
    short = mine_rules(kg, dataclasses.replace(cfg, max_rules_per_head=None))
    support, size = length3_statistics(kg, max_work)
    R = kg.n_predicates - FIRST_PRED
    n_or = 2 * R
    head_size = torch.bincount(kg.facts[:, 0] - FIRST_PRED, minlength=R)
    b, r = (support > 0).nonzero(as_tuple=True)
    sup, bs, hs = support[b, r], size[b], head_size[r]
    keep = (sup >= cfg.min_support) & (sup >= cfg.min_head_coverage * hs) & (sup >= cfg.min_confidence * bs)
    one = lambda o: (FIRST_PRED + o // 2, bool(o % 2))  # noqa: E731
    long = [MinedRule(FIRST_PRED + ri, tuple(one(o) for o in (bi // n_or ** 2, bi // n_or % n_or, bi % n_or)), s, h, n)
            for bi, ri, s, h, n in zip(*(t[keep].tolist() for t in (b, r, sup, hs, bs)))]
    by_head: dict[int, list] = {}
    for m in [*short.rules, *long]:
        by_head.setdefault(m.head, []).append(m)
    cap = cfg.max_rules_per_head
    rules = [m for h in sorted(by_head)
             for m in sorted(by_head[h], key=lambda m: (-m.support / (m.body_size + cfg.prior), -m.support,
                                                         len(m.body)))[:cap]]
    return MiningResult(rules, short.candidates + int((support > 0).sum()), time.perf_counter() - t0)


def rule_confidence3(kg: KnowledgeGraph, rules, triples: torch.Tensor) -> torch.Tensor:
    """[T] the highest confidence among `rules` (length 1-3) with head r whose body holds for (h, t); 0 if none."""
    adj = _adjacency(kg)
    best = torch.zeros(len(triples), dtype=torch.float64)
    by_head: dict[int, list] = {}
    for m in rules:
        by_head.setdefault(m.head, []).append(m)
    for i, (r, h, t) in enumerate(triples.long().tolist()):
        for m in by_head.get(r, ()):
            v = torch.zeros(adj.shape[1])
            v[h] = 1.0
            for p, inv in m.body:                                             # walk the path from h
                v = (v @ adj[2 * (p - FIRST_PRED) + inv] > 0).float()
            if v[t] > 0 and m.confidence > best[i]:
                best[i] = m.confidence
    return best


def rules_alone(kg: KnowledgeGraph, rules, queries: torch.Tensor) -> dict:
    """`benchmark_eval.rules_only` with rules of length 1-3: realistic, optimistic and pessimistic metrics, and the
    share of `queries` some rule proves (coverage)."""
    from perflab.prover.core.ranking import metrics, ranks
    from perflab.prover.links.benchmark_eval import SIDES, filtered_candidates

    out = {b: [] for b in ("mean", "optimistic", "pessimistic")}
    for side in SIDES:
        cs = filtered_candidates(kg, queries, side)
        scores = cs.unflatten(rule_confidence3(kg, rules, cs.flat()).float(), fill=float("-inf"))
        for b in out:
            out[b].append(ranks(scores, cs, b))
    res = {("realistic" if b == "mean" else b): metrics(torch.cat(v)) for b, v in out.items()}
    res["coverage"] = float((rule_confidence3(kg, rules, queries) > 0).float().mean())
    return res


def length_comparison(kg: KnowledgeGraph, cfg: MiningConfig | None = None, splits=("valid", "test")) -> list[dict]:
    """Rows (split, rule set, rules, coverage, realistic/optimistic/pessimistic MRR of the rules alone) for the
    three rule sets of the module doc; the length-3 statistics are counted once."""
    cfg = cfg if cfg is not None else MiningConfig()
    cap = cfg.max_rules_per_head
    two = mine_rules(kg, cfg).rules
    every = mine_length3(kg, dataclasses.replace(cfg, max_rules_per_head=None)).rules
    by_head: dict[int, list] = {}
    for m in every:
        by_head.setdefault(m.head, []).append(m)
    key = lambda m: (-m.support / (m.body_size + cfg.prior), -m.support, len(m.body))  # noqa: E731
    joint = [m for h in sorted(by_head) for m in sorted(by_head[h], key=key)[:cap]]
    added = two + [m for h in sorted(by_head) for m in sorted([x for x in by_head[h] if len(x.body) == 3], key=key)[:cap]]
    sets = {f"length <= 2, {cap} per head": two, f"length <= 3, {cap} per head": joint,
            f"length <= 2 ({cap}) + length 3 ({cap}) per head": added}
    rows = []
    for split in splits:
        for name, rules in sets.items():
            a = rules_alone(kg, rules, kg.queries[split])
            rows.append(dict(split=split, rules=name, n=len(rules), coverage=round(a["coverage"], 3),
                             **{f"MRR {t}": round(a[t]["MRR"], 3) for t in ("realistic", "optimistic", "pessimistic")}))
    return rows


def print_comparison(name: str = "nations") -> None:
    """`length_comparison` of a benchmark, as a table (one torch thread)."""
    import pandas as pd

    from perflab.prover.core.datasets import load_benchmark

    torch.set_num_threads(1)
    print(pd.DataFrame(length_comparison(load_benchmark(name, rules=False).kg)).to_string(index=False))


if __name__ == "__main__":
    import sys

    print_comparison(*sys.argv[1:2])
