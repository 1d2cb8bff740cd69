"""The notebooks' correctness checks: the optimized paths against the reference, as named pass/fail results.

Each function returns `(checks, info)`: `checks` is a list of `perflab.kit.claims.Check` (name, passed, and a detail
that says what was measured beside the rule: "0 of 880 successor lists differ (allowed 0)"), which the notebook
passes to `perflab.kit.claims.report_checks` (PASS / FAIL, logged; it stops on any failure); `info` holds the numbers
behind them. The details are counts, so a checked cell prints the same on every run.
"""
from __future__ import annotations

import torch

from ..kit.claims import Check
from ..kit.syncs import count_host_operands, count_host_syncs
from .data import random_kg, random_states
from .engine import UnificationEngine
from .evaluate import evaluate_with_corruptions
from .links.ranking import rank_bounds
from .policy import make_policy
from .reference import Limits, ReferenceProver, prove_exhaustive, to_tuples
from .rollout import STRATEGIES, RolloutResult
from .step import GreedyStep


def engine_vs_reference(kg, engine, n_states: int = 400, n_random_kgs: int = 10, seed: int = 0) -> dict:
    """Successor lists of the engine and the reference on random states of `kg` and of small random KGs
    (tight limits, so window cuts, list cuts and over-long rejections happen). Counts of states compared,
    mismatches, and states whose lists were cut."""
    states, nv = random_states(kg, n_states, engine.A, seed)
    cases = [(kg, engine, (states.to(engine.device), nv.to(engine.device)))]
    for i in range(n_random_kgs):
        rkg = random_kg(seed + i)
        reng = UnificationEngine(rkg, max_atoms=4, max_derived=6, max_fact_matches=2 + i % 3, end_action=i % 2 == 0)
        cases.append((rkg, reng, random_states(rkg, 48, 4, seed + i)))
    out = {"states": 0, "mismatches": 0, "truncated": 0}
    for g, e, (states, nv) in cases:
        ref = ReferenceProver(g, Limits.of(e))
        d = e.derive(states, nv)
        for i, s in enumerate(to_tuples(states)):
            c = int(d.counts[i])
            got = list(zip(to_tuples(d.states[i, :c]), d.next_var[i, :c].tolist()))
            out["mismatches"] += got != ref.successors(s, int(nv[i]))
        out["states"] += len(states)
        out["truncated"] += int(d.truncated.sum())
    return out


def bfs_vs_reference(kg, engine, queries: torch.Tensor, max_depth: int) -> dict:
    """Shortest-proof depth of each query by the batched BFS and by the reference search."""
    got = prove_exhaustive(engine, queries, max_depth)
    ref = ReferenceProver(kg, Limits.of(engine))
    want = torch.tensor([ref.prove(tuple(q), max_depth) for q in queries.tolist()])
    return {"queries": len(queries), "agree": bool(torch.equal(got, want)), "differ": int((got != want).sum()),
            "provable": int((got > 0).sum()), "depth": got}


def step_syncs(kg, engine, policy, queries: torch.Tensor, max_depth: int, seed: int = 0) -> dict:
    """Host syncs of `derive` on random states and of one policy step (`perflab.kit.syncs.count_host_syncs`;
    on CUDA also the driver's sync-debug warnings), and host tensors fed to either on a device that is
    not the host (`count_host_operands` on meta: the copies from the host a GPU would make)."""
    dev = engine.device
    states, nv = random_states(kg, 64, engine.A, seed)
    step = GreedyStep(engine, policy, max_depth)
    slots = step.init(queries.to(dev))
    on_dev = states.to(dev), nv.to(dev)  # the inputs' copies from the host come before the counted block
    with torch.inference_mode(), count_host_syncs(dev) as syncs:
        engine.derive(*on_dev)
        step(*slots)
    meta = GreedyStep(UnificationEngine(kg, engine.A, engine.S, engine.K, engine.end_action, device="meta"),
                      make_policy(kg, policy.cfg, device="meta"), max_depth)
    with torch.inference_mode(), count_host_operands() as host:
        meta.engine.derive(states.to("meta"), nv.to("meta"))
        meta(*meta.init(queries.to("meta")))
    return {"syncs": syncs.total + syncs.cuda_debug_warnings, "by_op": dict(syncs.by_op),
            "host_operands": host.total, "host_by_op": dict(host.by_op)}


def correctness_03(kg, engine, policy, queries: torch.Tensor, max_depth: int, seed: int = 0, bfs_depth: int | None = None):
    """Study 3's checks: successors, provability (to `bfs_depth`, default max_depth: `study.bfs_depth`), and
    a sync-free step. -> (checks, info)."""
    bfs_depth = max_depth if bfs_depth is None else bfs_depth
    eq = engine_vs_reference(kg, engine, n_states=400, seed=seed)
    bfs = bfs_vs_reference(kg, engine, queries, max_depth=bfs_depth)
    sy = step_syncs(kg, engine, policy, queries, max_depth, seed)
    checks = [
        Check(f"engine successors equal the reference on {eq['states']} states ({eq['truncated']} with cut lists)",
              eq["mismatches"] == 0, f"{eq['mismatches']} of {eq['states']} successor lists differ (allowed 0)"),
        Check(f"BFS provability equals the reference on {bfs['queries']} queries (depth <= {bfs_depth})", bfs["agree"],
              f"{bfs['differ']} of {bfs['queries']} shortest-proof depths differ (allowed 0)"),
        Check("derive and a policy step make no host sync (counted calls; CUDA's sync-debug warnings on a GPU)",
              sy["syncs"] == 0, f"{sy['syncs']} counted (allowed 0)" + (f": {sy['by_op']}" if sy["syncs"] else "")),
        Check("derive and a policy step take no host tensor on a device (meta)", sy["host_operands"] == 0,
              f"{sy['host_operands']} host tensors fed (allowed 0)"
              + (f": {sy['host_by_op']}" if sy["host_operands"] else "")),
    ]
    return checks, {"engine": eq, "bfs": bfs, "syncs": sy}


def ranks_across_batches(kg, engine, policy, queries, cs, batches, max_depth: int, seed: int = 0):
    """The same candidates at several batch sizes (padded tails, one chunk): scores within float32 rounding
    (1e-5), so ranks equal up to scores that close (`ranking.rank_bounds`: on a GPU another number of rows may
    round differently; on a CPU they are identical). -> (checks, {batch: EvalResult})."""
    step = GreedyStep(engine, policy, max_depth)
    evals = {b: evaluate_with_corruptions(kg, engine, policy, queries, batch=b, max_depth=max_depth,
                                          candidates=cs, step=step, seed=seed) for b in sorted(set(batches))}
    ref = evals[max(evals)]
    bounds = rank_bounds(ref.scores, ref.candidates, atol=1e-5)
    off_ranks = sum(outside(r.ranks, bounds) for r in evals.values())
    off_scores = sum(int((~torch.isclose(r.scores, ref.scores, rtol=1e-5, atol=1e-5)).sum()) for r in evals.values())
    n = sum(r.ranks.numel() for r in evals.values())
    return [Check(f"ranks equal at batch sizes {sorted(evals)} up to float rounding, scores within 1e-5",
                  off_ranks == 0 and off_scores == 0,
                  f"{off_ranks} of {n} ranks outside their tie bounds, {off_scores} scores off by more than 1e-5 "
                  "(allowed 0)")], evals


def disagreements(results: dict[str, RolloutResult]) -> dict[str, int]:
    """Per strategy, the candidates whose steps, outcome or score (float32 rounding of rows computed in batches of
    another size allowed: 1e-5) differ from the full loop's, or whose outcome was not written exactly once."""
    ref = results["full"]
    out = {}
    for name, r in results.items():
        bad = ((r.steps.cpu() != ref.steps.cpu()) | (r.proven.cpu() != ref.proven.cpu())
               | ~torch.isclose(r.score.cpu(), ref.score.cpu(), rtol=1e-5, atol=1e-5) | (r.records.cpu() != 1))
        out[name] = int(bad.sum())
    return out


def agreement(results: dict[str, RolloutResult]) -> dict[str, bool]:
    """Does every strategy give every candidate the full loop's steps, outcome and score, each written once?"""
    return {name: n == 0 for name, n in disagreements(results).items()}


def strategies_match(label: str, results: dict[str, RolloutResult]) -> Check:
    """One check: every strategy of `results` agrees with full on every candidate (`disagreements`)."""
    bad = disagreements(results)
    n = len(results["full"].steps)
    return Check(f"{label}: all strategies agree", sum(bad.values()) == 0,
                 f"{sum(bad.values())} of {n} candidates differ in any of {len(bad)} strategies (allowed 0)"
                 + ("" if sum(bad.values()) == 0 else f": {bad}"))


def strategies_agree(ladder, family, family_cs, batch: int, min_bucket: int):
    """Study 4's checks: every strategy gives the same proofs on a ladder sample (of designed lengths)
    and on study 3's candidates (`family`: the graph `kg` names; the same ranks).
    -> (checks, {"ladder": results, "family": results})."""
    from .links.ranking import ranks
    from .study import run_strategies

    res_l = run_strategies(ladder, batch, min_bucket)
    res_f = run_strategies(family, batch, min_bucket)
    rank = {s: ranks(family_cs.unflatten(r.score.float(), fill=float("-inf")), family_cs) for s, r in res_f.items()}
    bounds = rank_bounds(family_cs.unflatten(res_f["full"].score.float(), fill=float("-inf")), family_cs, atol=1e-5)
    off_len = int((res_l["full"].steps.cpu() != ladder.lengths).sum())
    off_rank = sum(outside(r, bounds) for r in rank.values())
    checks = [
        strategies_match(f"ladder ({len(ladder.candidates)} candidates)", res_l),
        Check("ladder: steps equal the designed proof lengths", off_len == 0,
              f"{off_len} of {len(ladder.lengths)} differ (allowed 0)"),
        strategies_match(f"{family.graph} ({len(family.candidates)} candidates)", res_f),
        Check(f"{family.graph}: ranks equal across strategies up to float rounding", off_rank == 0,
              f"{off_rank} of {sum(r.numel() for r in rank.values())} ranks outside their tie bounds (allowed 0)"),
    ]
    assert set(res_l) == set(STRATEGIES)
    return checks, {"ladder": res_l, "family": res_f}


def outside(r: torch.Tensor, bounds) -> int:
    """How many ranks of `r` lie outside `rank_bounds`' interval (`within_bounds` as a count)."""
    lo, hi = bounds
    return int(((r < lo) | (r > hi)).sum())


# ---- the search and the scores of every candidate (issue 23) ------------------------------------

def search_checks(kg, engine, policy, queries: torch.Tensor, width: int, depth: int, batch: int):
    """The beam search against the breadth-first oracle (itself checked against the reference above), on
    both sides' filtered corruptions of `queries`: every proof it finds exists within `depth` steps; with a
    width no step can overflow (S, depth <= 2) it finds every proof within that depth; and its chunk makes
    no host sync and takes no host tensor on a device (meta). -> (checks, info)."""
    from .links.benchmark_eval import SIDES, filtered_candidates
    from .links.search import BeamSearch

    cands = torch.cat([filtered_candidates(kg, queries, s).flat() for s in SIDES]).to(engine.device)
    found = BeamSearch(engine, policy, width, depth).score(cands, batch)
    d_ex = min(depth, 2)
    full = BeamSearch(engine, policy, engine.S, d_ex).score(cands, max(batch, engine.S))
    bfs = torch.cat([prove_exhaustive(engine, cands[i:i + 256], depth).cpu() for i in range(0, len(cands), 256)])
    sound = bool((~found.proven.cpu() | ((bfs > 0) & (bfs <= found.depth.cpu()))).all())
    complete = torch.equal(full.proven.cpu(), (bfs > 0) & (bfs <= d_ex))
    search = BeamSearch(engine, policy, width, depth)
    chunk = cands[:4]  # already on the device: the counted block starts at the chunk
    with torch.inference_mode(), count_host_syncs(engine.device) as syncs:
        search._chunk(chunk)
    meta = BeamSearch(UnificationEngine(kg, engine.A, engine.S, engine.K, engine.end_action, device="meta"),
                      make_policy(kg, policy.cfg, device="meta"), width, depth)
    with torch.inference_mode(), count_host_operands() as host:
        meta._chunk(cands[:4].to("meta"))
    n = len(cands)
    n_unsound = int((found.proven.cpu() & ~((bfs > 0) & (bfs <= found.depth.cpu()))).sum())
    n_diff = int((full.proven.cpu() != ((bfs > 0) & (bfs <= d_ex))).sum())
    n_sync = syncs.total + syncs.cuda_debug_warnings
    checks = [
        Check(f"search (beam {width}, depth {depth}): each of its proofs exists within its depth (BFS, {n} "
              "candidates)", sound, f"{n_unsound} of {int(found.proven.sum())} proofs not found by BFS (allowed 0)"),
        Check(f"search (beam {engine.S}, depth {d_ex}) proves exactly what BFS proves within {d_ex} steps", complete,
              f"{n_diff} of {n} candidates differ (allowed 0)"),
        Check("a search chunk makes no host sync and takes no host tensor on a device (meta)",
              n_sync == 0 and host.total == 0, f"{n_sync} syncs, {host.total} host tensors (allowed 0)"),
    ]
    return checks, {"candidates": n, "proved": int(found.proven.sum()), "bfs_proved": int((bfs > 0).sum()),
                    "syncs": dict(syncs.by_op), "host_operands": dict(host.by_op)}


def link_ranks_across_batches(kg, lp, queries: torch.Tensor, batches) -> dict:
    """`links.predict`'s fitted ranks of `queries` with the search run at several batch sizes (other chunkings
    and paddings): equal under every tie rule, up to fitted scores within 1e-5 of each other (another number of
    rows may round differently on a GPU: `ranking.rank_bounds`; on a CPU they are identical)."""
    from .links.predict import rank, score_split

    scored = [score_split(kg, queries, lp.search, lp.model, b, lp.config.seed) for b in sorted(set(batches))]
    got = [rank(sc, lp.combination).ranks for sc in scored]
    sides = scored[0].sides.values()   # [2Q] ranks: head sides then tail sides, as `rank` concatenates them
    fitted = [lp.combination(s.feats).masked_fill(~s.cs.mask, float("-inf")) for s in sides]
    atol = 1e-5 * float(lp.combination.weights.abs().sum())   # features within 1e-5 -> the weighted sum's spread
    bounds = [torch.cat(b) for b in zip(*(rank_bounds(f, s.cs, atol=atol) for f, s in zip(fitted, sides)))]
    off = sum(outside(g[r], bounds) for g in got for r in g)
    n = sum(g[r].numel() for g in got for r in g)
    return [Check(f"fitted ranks equal with the search at batch sizes {sorted(set(batches))} up to float rounding "
                  "(3 tie rules)", off == 0, f"{off} of {n} ranks outside their tie bounds (allowed 0)")]
