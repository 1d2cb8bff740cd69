"""Link prediction's correctness checks: the breadth-first oracle against the plain-Python reference prover, the beam
search against that oracle (`reference.py`), a
search chunk free of host syncs, and fitted ranks that do not depend on the search's batch, as named pass/fail
results (`perflab.kit.claims.Check`, passed to `report_checks`). The details are counts."""
from __future__ import annotations

import torch

from ...kit.claims import Check
from ...kit.syncs import count_host_operands, count_host_syncs
from ..core.engine import UnificationEngine
from ..core.policy import make_policy
from ..core.ranking import outside, rank_bounds
from ..core.reference import Limits, ReferenceProver
from .benchmark_eval import SIDES, filtered_candidates
from .predict import Scored, rank, score_split
from .reference import prove_exhaustive
from .search import SCORE_TOL, BeamSearch, ClosingSearch, SparseClosingSearch, differences


def oracle_check(kg, engine, queries: torch.Tensor, depth: int = 2) -> Check:
    """The oracle the search is held to (`reference.prove_exhaustive`, batched, on the engine) against the plain-Python
    reference prover (`core.reference.ReferenceProver`, SLD resolution under the engine's limits): the shortest-proof
    depth of each of `queries` within `depth` steps, equal."""
    got = prove_exhaustive(engine, queries.to(engine.device), depth).cpu()
    ref = ReferenceProver(kg, Limits.of(engine))
    want = torch.tensor([ref.prove(tuple(q), depth) for q in queries.tolist()])
    differ = int((got != want).sum())
    return Check(f"the breadth-first oracle equals the reference prover on {len(queries)} test triples (depth <= "
                 f"{depth}; {int((want > 0).sum())} provable)", differ == 0,
                 f"{differ} of {len(queries)} shortest-proof depths differ (allowed 0)")


def search_checks(kg, engine, policy, queries: torch.Tensor, width: int, depth: int, batch: int):
    """The search the evaluation runs (`search.ClosingSearch`; on the CPU `SparseClosingSearch`, held to it here,
    as is today's `BeamSearch`) against the breadth-first oracle (held to the reference prover by 03's checks), on
    both sides' filtered corruptions of `queries`: every proof it finds exists within `depth` steps; with a
    width no step can overflow (S, depth <= 2) it finds every proof within that depth; and its chunk makes
    no host sync and takes no host tensor on a device (meta). -> (checks, info)."""
    cands = torch.cat([filtered_candidates(kg, queries, s).flat() for s in SIDES]).to(engine.device)
    found = ClosingSearch(engine, policy, width, depth).score(cands, batch)
    d_ex = min(depth, 2)
    full = ClosingSearch(engine, policy, engine.S, d_ex).score(cands, max(batch, engine.S))
    # the CPU's search (the last step's policy only where a proof closes) and the seed-era search: the same proofs
    # (proven flags exactly: ties cannot reach them; a depth where the two best proofs' scores are near-tied, within
    # float rounding, is counted apart: `search.differences`)
    same = [differences(s(engine, policy, width, depth).score(cands, batch), found)
            for s in (SparseClosingSearch, BeamSearch)]
    n_same, n_near = sum(n for n, _ in same), sum(k for _, k in same)
    bfs = torch.cat([prove_exhaustive(engine, cands[i:i + 256], depth).cpu() for i in range(0, len(cands), 256)])
    sound = bool((~found.proven.cpu() | ((bfs > 0) & (bfs <= found.depth.cpu()))).all())
    complete = torch.equal(full.proven.cpu(), (bfs > 0) & (bfs <= d_ex))
    search = ClosingSearch(engine, policy, width, depth)
    chunk = cands[:4]  # already on the device: the counted block starts at the chunk
    with torch.inference_mode(), count_host_syncs(engine.device) as syncs:
        search.chunk(chunk)
    meta = ClosingSearch(UnificationEngine(kg, engine.A, engine.S, engine.K, engine.end_action, device="meta"),
                      make_policy(kg, policy.cfg, device="meta"), width, depth)
    with torch.inference_mode(), count_host_operands() as host:
        meta.chunk(cands[:4].to("meta"))
    n = len(cands)
    n_unsound = int((found.proven.cpu() & ~((bfs > 0) & (bfs <= found.depth.cpu()))).sum())
    n_diff = int((full.proven.cpu() != ((bfs > 0) & (bfs <= d_ex))).sum())
    n_sync = syncs.total + syncs.cuda_debug_warnings
    checks = [
        Check(f"search (beam {width}, depth {depth}): each of its proofs exists within its depth (BFS, {n} "
              "candidates)", sound, f"{n_unsound} of {int(found.proven.sum())} proofs not found by BFS (allowed 0)"),
        Check(f"search (beam {engine.S}, depth {d_ex}) proves exactly what BFS proves within {d_ex} steps", complete,
              f"{n_diff} of {n} candidates differ (allowed 0)"),
        Check("the CPU's search (policy only where a proof closes) and today's BeamSearch find the same proofs",
              n_same == 0, f"{n_same} proven flags or depths differ (allowed 0)"
              + (f"; {n_near} depths at near-tied proof scores (within {SCORE_TOL:g}: another proof by float "
                 "rounding)" if n_near else "")),
        Check("a search chunk makes no host sync and takes no host tensor on a device (meta)",
              n_sync == 0 and host.total == 0, f"{n_sync} syncs, {host.total} host tensors (allowed 0)"),
    ]
    return checks, {"candidates": n, "proved": int(found.proven.sum()), "bfs_proved": int((bfs > 0).sum()),
                    "near_ties": n_near,
                    "syncs": dict(syncs.by_op), "host_operands": dict(host.by_op)}


def link_ranks_across_batches(kg, lp, queries: torch.Tensor, batches) -> list[Check]:
    """`links.predict`'s fitted ranks of `queries` with the search run at several batch sizes (other chunkings
    and paddings): equal under every tie rule, up to fitted scores within 1e-5 of each other (another number of
    rows may round differently on a GPU: `ranking.rank_bounds`; on a CPU they are identical)."""
    scored = [score_split(kg, queries, lp.search, lp.model, b, lp.config.seed, lp.table) for b in sorted(set(batches))]
    got = [rank(sc, lp.combination).ranks for sc in scored]
    sides = scored[0].sides.values()   # [2Q] ranks: head sides then tail sides, as `rank` concatenates them
    fitted = [lp.combination(s.feats, s.rule_ids).masked_fill(~s.cs.mask, float("-inf")) for s in sides]
    atol = 1e-5 * float(lp.combination.weights.abs().sum())   # features within 1e-5 -> the weighted sum's spread
    bounds = [torch.cat(b) for b in zip(*(rank_bounds(f, s.cs, atol=atol) for f, s in zip(fitted, sides)))]
    off = sum(outside(g[r], bounds) for g in got for r in g)
    n = sum(g[r].numel() for g in got for r in g)
    return [Check(f"fitted ranks equal with the search at batch sizes {sorted(set(batches))} up to float rounding "
                  "(3 tie rules)", off == 0, f"{off} of {n} ranks outside their tie bounds (allowed 0)")]


def decoys(kg, n: int, seed: int = 0) -> torch.Tensor:
    """n random false triples [n, 3]: the relations of the first test triples (cycled), head and tail drawn
    uniformly over the entities, any known triple (any split) drawn again."""
    g = torch.Generator().manual_seed(seed)
    rels = kg.queries["test"][:, 0]
    known, out = kg.true_set(), []
    while len(out) < n:
        h, t = (int(x) for x in torch.randint(1, kg.n_constants + 1, (2,), generator=g))
        tri = (int(rels[len(out) % len(rels)]), h, t)
        if tri not in known:
            out.append(tri)
    return torch.tensor(out, dtype=torch.long)


def decoy_ranks(scored: Scored, comb) -> torch.Tensor:
    """[2n] each decoy's realistic rank among its own filtered corruptions as a share of the way down its list:
    (rank - 1) / (real candidates - 1), 0 = top, 1 = bottom; 0.5 on average where the score knows nothing of it."""
    r = rank(scored, comb).ranks["realistic"]
    n = torch.cat([s.cs.mask.sum(1) for s in scored.sides.values()]).double()
    return (r - 1) / (n - 1).clamp(min=1)


def decoy_check(kg, search, model, comb, table=None, n: int = 100, batch: int = 512, seed: int = 0):
    """Random false triples ranked like test triples (both sides, every filtered corruption, the fitted score) must
    rank at chance: a decoy is uniform among its list's false triples, so any score that is a function of the triple
    puts it halfway down on average; a score that knew which triple is the query (a leak of the positive's column
    or of its label) would lift it. Passes when the mean share of the way down is within 4 standard errors of 0.5
    (the share of a uniform rank has variance ~1/12; the detail of a pass names the tolerance, the share is its value).
    -> (checks, info)."""
    sc = score_split(kg, decoys(kg, n, seed), search, model, batch, seed, table)
    share = decoy_ranks(sc, comb)
    r = rank(sc, comb).ranks["realistic"]
    sizes = torch.cat([s.cs.mask.sum(1) for s in sc.sides.values()]).double()
    chance_mrr = float(torch.stack([(1 / torch.arange(1, int(k) + 1).double()).mean() for k in sizes]).mean())
    mean, tol = float(share.mean()), 4 * (1 / 12 / len(share)) ** 0.5
    ok = abs(mean - 0.5) <= tol
    info = {"decoys": n, "mean share down": mean, "tolerance": tol, "decoy MRR": float((1 / r).mean()),
            "chance MRR": chance_mrr}
    # passed, the detail says so against the stated tolerance (the share itself moves with the CPU's kernels: the
    # check's value, logged); failed, it prints what was measured
    detail = (f"mean share of the way down within tolerance of chance (0.5 +- {tol:.3f})" if ok else
              f"mean share of the way down {mean:.3f} (chance 0.5 +- {tol:.3f}); decoy MRR {info['decoy MRR']:.3f}, "
              f"chance {chance_mrr:.3f}")
    return [Check(f"{n} random false triples rank at chance under the fitted score (both sides)", ok, detail,
                  value=mean)], info
