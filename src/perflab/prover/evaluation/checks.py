"""03's correctness checks (the engine, the oracle's provability, a sync-free step, ranks across batch sizes):
the optimized paths against the reference, as named pass/fail results.

Each function returns `(checks, info)`: `checks` is a list of `perflab.kit.claims.Check` (name, passed, and a detail
that says what was measured beside the rule: "0 of 880 successor lists differ (allowed 0)"), which the notebook
passes to `perflab.kit.claims.report_checks` (PASS / FAIL, logged; it stops on any failure); `info` holds the numbers
behind them. The details are counts, so a checked cell prints the same on every run.
"""
from __future__ import annotations

import torch

from ...kit.claims import Check
from ...kit.syncs import count_host_operands, count_host_syncs
from ..core.data import random_kg, random_states
from ..core.engine import UnificationEngine
from ..core.policy import make_policy
from ..core.ranking import outside, rank_bounds
from ..core.reference import Limits, ReferenceProver, prove_exhaustive, to_tuples  # 03's oracle: the engine library's
from ..core.step import GreedyStep
from .evaluate import evaluate_with_corruptions


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


def no_recompiles_with_padding(padded_graphs: int) -> Check:
    """The padded version compiles nothing after its warm-up (`study.recompiles_by_tail`'s graphs, summed over the
    padded rows): every chunk has the batch's shape, so a new tail size is no new shape."""
    return Check("zero recompiles after warm-up with padding", padded_graphs == 0,
                 f"{padded_graphs} graphs compiled after warm-up, padded (allowed 0)")
