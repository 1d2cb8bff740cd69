"""Study 4's correctness checks: every version of the rollout gives every candidate the seed's loop's proof
(`reference.py`), as named pass/fail results (`perflab.kit.claims.Check`, passed to `report_checks`). The details
are counts, so a checked cell prints the same on every run."""
from __future__ import annotations

import torch

from ...kit.claims import Check
from ..core.ranking import outside, rank_bounds, ranks
from ..core.rollout import RolloutResult
from .reference import recycle_schedule
from .study import IMPLS, run_strategies


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


def recycle_follows_the_schedule(ladder, batch: int) -> Check:
    """Recycle on the ladder with its longest proof queued last (the edge where a phantom last step, or a slot
    refilled a step late, shows): its steps, slot-steps, wasted slot-steps and busy slots per step must be those of
    the plain schedule (`reference.recycle_schedule`)."""
    lengths = ladder.lengths.tolist()
    last = max(range(len(lengths)), key=lambda i: (lengths[i], i))
    order = [i for i in range(len(lengths)) if i != last] + [last]
    trace: list = []
    r = IMPLS["recycle"](ladder.step, ladder.candidates[order], batch, trace=trace)
    busy = recycle_schedule([lengths[i] for i in order], batch)
    got = (r.steps_executed, r.slot_steps, r.wasted_slot_steps)
    want = (len(busy), len(busy) * batch, len(busy) * batch - sum(busy))
    off = sum(a != b for a, b in zip([active for _, _, active in trace], busy)) + abs(len(trace) - len(busy))
    return Check(f"recycle: the plain schedule's steps and busy slots, the longest proof ({max(lengths)} steps) "
                 "queued last", got == want and off == 0,
                 f"{got[0]} steps, {got[1]} slot-steps, {got[2]} wasted (the schedule: {want[0]}, {want[1]}, "
                 f"{want[2]}); {off} of {len(busy)} steps' busy slots differ (allowed 0)")


def strategies_agree(ladder, family, family_cs, batch: int, min_bucket: int):
    """Study 4's checks: every strategy gives the same proofs on a ladder sample (of designed lengths)
    and on study 3's candidates (`family`: the graph `kg` names; the same ranks).
    -> (checks, {"ladder": results, "family": results})."""
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
        recycle_follows_the_schedule(ladder, batch),
        strategies_match(f"{family.graph} ({len(family.candidates)} candidates)", res_f),
        Check(f"{family.graph}: ranks equal across strategies up to float rounding", off_rank == 0,
              f"{off_rank} of {sum(r.numel() for r in rank.values())} ranks outside their tie bounds (allowed 0)"),
    ]
    assert set(res_l) == set(IMPLS)
    return checks, {"ladder": res_l, "family": res_f}


def one_graph_per_bucket(graphs: dict[str, int], buckets: list[int]) -> Check:
    """Compiled, bucketed compiles one graph per bucket it ran and every other version one (`study.graphs_per_strategy`
    counted over a run that used `buckets`): a bucket that compiled twice, or a shape that leaks into full's, masked's
    or recycle's graph, would recompile on every new tail."""
    return Check("bucketed compiles one graph per bucket; full, masked and recycle one each",
                 graphs["bucketed"] == len(buckets) and graphs["full"] == graphs["masked"] == graphs["recycle"] == 1,
                 f"bucketed {graphs['bucketed']} graphs for {len(buckets)} buckets; full, masked, recycle "
                 f"{graphs['full']}, {graphs['masked']}, {graphs['recycle']}")


def whole_runs_agree(found) -> list[Check]:
    """The traced runs of the whole workloads (`study.traced_runs`, what the slot-steps, the figures and the claims
    read): every version agrees with full on every candidate, per workload."""
    return [strategies_match(f"{w.name}, the whole workload", found.runs[key])
            for key, w in (("ladder", found.ladder), ("kg", found.kg))]
