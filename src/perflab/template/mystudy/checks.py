"""The notebook's correctness checks (`checks.correctness`), each a `perflab.kit.claims.Check`: its name, whether it
passed, and what was measured beside what is allowed. The notebook reports them with `report_checks`, which stops
it on a failure, before anything is timed. The inputs are fresh: several shapes, from seeds the benchmark does not
use.

Tolerance: centroids within RTOL of the data's scale (its largest |coordinate|) of the float64 oracle's. A centroid is
a float32 mean of at most n points: summed in another order, its rounding stays near sqrt(n) * 6e-8 (float32's
epsilon) of the scale, ~2e-6 at the n = 1000 of the checks. One point counted in the wrong cluster moves a
centroid by its distance over the cluster's size, ~10^-2 of the scale here: the check cannot miss it."""
from __future__ import annotations

import math

import torch
from perflab.kit.claims import Check

from . import reference
from .data import blobs
from .study import IMPLS

RTOL = 1e-5
# (n, dim, k): one point; few clusters; many; 64 clusters in 16 dimensions; more clusters than points (some empty)
CASES = ((1, 1, 1), (40, 2, 3), (300, 8, 12), (1000, 16, 64), (6, 3, 10))
SEEDS = 3


def correctness(run, data) -> list[Check]:
    """Every check, in the notebook's order: each version against the oracle on fresh inputs, an empty cluster, and
    the versions against each other on the benchmark's own `data`."""
    cfg, device = run.cfg, run.device
    return oracle_checks(cfg.seed, device) + empty_cluster_check(cfg.seed, device) + same_result_check(data, cfg.iters)


def _size(err: float, allowed: float) -> str:
    """An error as the check's detail: within what is allowed, the power of ten it is under (the same on every run,
    so nbval can compare the line); beyond it, its value."""
    if err > allowed or not math.isfinite(err):
        return f"{err:.2e}"
    return "0" if err == 0 else f"under {10.0 ** math.ceil(math.log10(err)):.0e}"


def _error(c: torch.Tensor, ref: torch.Tensor, points: torch.Tensor) -> float:
    """Largest centroid difference, relative to the data's scale."""
    scale = max(points.abs().max().item(), 1.0)
    return (c.double().cpu() - ref.double().cpu()).abs().max().item() / scale


def oracle_checks(seed: int, device: torch.device | str, iters: int = 3) -> list[Check]:
    """Each version against the oracle: `iters` iterations from the same start, on every shape of CASES with SEEDS
    fresh seeds each. Assignments must be equal, centroids within RTOL."""
    out = []
    for name, impl in IMPLS.items():
        worst, wrong, runs = 0.0, 0, 0
        for i, (n, dim, k) in enumerate(CASES):
            for s in range(SEEDS):
                points, start = blobs(n, dim, k, seed=seed + 1000 + 10 * i + s, device=device)
                c, assign = impl(points, start, iters, tol=0.0)
                ref_c, ref_assign = reference.kmeans(points, start, iters)
                worst = max(worst, _error(c, ref_c, points))
                wrong += not torch.equal(assign.cpu(), ref_assign)
                runs += 1
        out.append(Check(f"{name} equals the float64 oracle ({len(CASES)} shapes x {SEEDS} fresh seeds, "
                         f"{iters} iterations)", wrong == 0 and worst <= RTOL,
                         f"assignments differ in {wrong} of {runs} runs (allowed 0), largest centroid error "
                         f"{_size(worst, RTOL)} of the scale (allowed {RTOL:g})"))
    return out


def empty_cluster_check(seed: int, device: torch.device | str) -> list[Check]:
    """A centroid far from every point gets no point, and every version leaves it where it is."""
    points, start = blobs(50, 2, 3, seed=seed + 2000, device=device)
    start = torch.cat([start, torch.full((1, 2), 1e3, device=points.device)])  # [4, 2]: the fourth one is far away
    moved, picked = 0.0, 0
    for impl in IMPLS.values():
        c, assign = impl(points, start, 2, tol=0.0)
        moved = max(moved, (c[3] - start[3]).abs().max().item())
        picked += int((assign == 3).sum())
    return [Check("a cluster that no point picks keeps its centroid (every version)", moved == 0 and picked == 0,
                  f"a centroid at 1e3 moved by {moved:g} (allowed 0) and got {picked} points (allowed 0)")]


def same_result_check(data, iters: int) -> list[Check]:
    """The versions against the baseline on the benchmark's own data (too large for the oracle on a GPU preset):
    the same assignment, centroids within RTOL of the scale (all float32, sums in another order)."""
    points, start = data
    (_, (cb, ab)), *others = ((name, impl(points, start, iters, tol=0.0)) for name, impl in IMPLS.items())
    scale = max(points.abs().max().item(), 1.0)
    out = []
    for name, (c, a) in others:
        err = (cb - c).abs().max().item() / scale
        differ = int((ab != a).sum())
        out.append(Check(f"{name} agrees with the baseline on the benchmark's data ({iters} iterations)",
                         differ == 0 and err <= RTOL,
                         f"{differ} points assigned differently (allowed 0), largest centroid difference "
                         f"{_size(err, RTOL)} of the scale (allowed {RTOL:g})"))
    return out
