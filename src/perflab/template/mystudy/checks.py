"""The notebook's correctness checks, each (name, passed, detail): the notebook prints and logs them and stops if one
fails. The inputs are fresh: several shapes, drawn from seeds the benchmark does not use.

Tolerance: centroids within RTOL of the data's scale (its largest |coordinate|) of the float64 oracle's. A centroid is
a float32 mean of at most n points: summed in another order, its rounding stays near sqrt(n) * 6e-8 (float32's
epsilon) of the scale, ~2e-6 at the n = 1000 of the checks. One point counted in the wrong cluster moves a
centroid by its distance over the cluster's size, ~10^-2 of the scale here: the check cannot miss it."""
from __future__ import annotations

import torch

from . import baseline, optimized, reference
from .data import blobs

Check = tuple[str, bool, str]
RTOL = 1e-5
IMPLS = {"baseline": baseline.kmeans, "optimized": optimized.kmeans}
# (n, dim, k): one point; few clusters; many; 64 clusters in 16 dimensions; more clusters than points (some empty)
CASES = ((1, 1, 1), (40, 2, 3), (300, 8, 12), (1000, 16, 64), (6, 3, 10))
SEEDS = 3


def _error(c: torch.Tensor, ref: torch.Tensor, points: torch.Tensor) -> float:
    """Largest centroid difference, relative to the data's scale."""
    scale = max(points.abs().max().item(), 1.0)
    return (c.double().cpu() - ref).abs().max().item() / scale


def oracle_checks(seed: int, device: torch.device | str, iters: int = 3) -> list[Check]:
    """Baseline and optimized against the oracle: `iters` iterations from the same start, on every shape of CASES
    with SEEDS fresh seeds each. Assignments must be equal, centroids within RTOL."""
    out = []
    for name, impl in IMPLS.items():
        ok = True
        for i, (n, dim, k) in enumerate(CASES):
            for s in range(SEEDS):
                points, start = blobs(n, dim, k, seed=seed + 1000 + 10 * i + s, device=device)
                c, assign = impl(points, start, iters, tol=0.0)
                ref_c, ref_assign = reference.kmeans(points, start, iters)
                ok &= torch.equal(assign.cpu(), ref_assign) and _error(c, ref_c, points) <= RTOL
        out.append((f"{name} equals the float64 oracle ({len(CASES)} shapes x {SEEDS} fresh seeds, {iters} iterations)",
                    ok, f"assignments equal, centroids within {RTOL:g} of the scale"))
    return out


def empty_cluster_check(seed: int, device: torch.device | str) -> list[Check]:
    """A centroid far from every point gets no point, and both versions leave it where it is."""
    points, start = blobs(50, 2, 3, seed=seed + 2000, device=device)
    start = torch.cat([start, torch.full((1, 2), 1e3, device=points.device)])  # [4, 2]: the fourth one is far away
    ok = True
    for impl in IMPLS.values():
        c, assign = impl(points, start, 2, tol=0.0)
        ok &= torch.equal(c[3], start[3]) and not bool((assign == 3).any())
    return [("a cluster that no point picks keeps its centroid (baseline and optimized)", ok, "a centroid at 1e3")]


def same_result_check(points: torch.Tensor, start: torch.Tensor, iters: int) -> list[Check]:
    """Baseline and optimized on the benchmark's own data (too large for the oracle on a GPU preset): the same
    assignment, centroids within RTOL of the scale (both float32, sums in another order)."""
    cb, ab = baseline.kmeans(points, start, iters, tol=0.0)
    co, ao = optimized.kmeans(points, start, iters, tol=0.0)
    scale = max(points.abs().max().item(), 1.0)
    ok = torch.equal(ab, ao) and (cb - co).abs().max().item() / scale <= RTOL
    return [(f"baseline and optimized agree on the benchmark's data ({iters} iterations)", ok, f"within {RTOL:g}")]
