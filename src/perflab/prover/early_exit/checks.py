"""Study 4's correctness checks: every version of the rollout gives every candidate the seed's loop's proof
(`reference.py`), as named pass/fail results (`perflab.kit.claims.Check`, passed to `report_checks`). The details
are counts, so a checked cell prints the same on every run."""
from __future__ import annotations

import torch

from ...kit.claims import Check
from ..core.ranking import outside, rank_bounds, ranks
from ..core.rollout import RolloutResult
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
        strategies_match(f"{family.graph} ({len(family.candidates)} candidates)", res_f),
        Check(f"{family.graph}: ranks equal across strategies up to float rounding", off_rank == 0,
              f"{off_rank} of {sum(r.numel() for r in rank.values())} ranks outside their tie bounds (allowed 0)"),
    ]
    assert set(res_l) == set(IMPLS)
    return checks, {"ladder": res_l, "family": res_f}
