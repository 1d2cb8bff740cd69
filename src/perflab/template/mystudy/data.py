"""Seeded inputs: points in well-separated clusters, and starting centroids near the clusters' centres (`blobs`); and
clusters strung along a line with every starting centroid in the first (`strung`), which Lloyd's needs many
iterations to spread out.

Well separated on purpose: every point is far nearer one centroid than any other (centres ~10 * sqrt(2 dim)
apart, points ~sqrt(dim) from theirs), so float32 and the float64 oracle agree on every assignment and the
checks can compare the centroids to rounding. Data with points halfway between two centroids would need a
check that lets such a point go either way. `blobs` starts so near the answer that Lloyd's settles in one or
two iterations: an early stop that always stops after one (a convergence test that reads 0) passes on it, so the
tests of the early stop use `strung`."""
from __future__ import annotations

import torch


def blobs(n: int, dim: int, k: int, *, seed: int,
          device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """`n` points [n, dim] around `k` random centres, and `k` starting centroids [k, dim] near those centres
    (float32, on `device`). A centre that no point drew leaves its cluster empty."""
    g = torch.Generator().manual_seed(seed)
    centres = 10.0 * torch.randn(k, dim, generator=g)                  # [k, dim]
    points = centres[torch.randint(k, (n,), generator=g)] + torch.randn(n, dim, generator=g)  # [n, dim]
    start = centres + 0.5 * torch.randn(k, dim, generator=g)           # [k, dim]
    return points.to(device), start.to(device)


def strung(n: int, dim: int, k: int, *, seed: int,
           device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """`n` points [n, dim] in 3k tight clusters strung along the first axis (centres 10 apart, points ~0.3 from theirs)
    and `k` starting centroids [k, dim] all in the first cluster: each Lloyd iteration walks them a cluster or so
    along the line, so they settle after tens of iterations (6 to 29 over 80 seeds at n 300-500, k 4-8), where
    float32 and the float64 oracle still agree on every assignment (the clusters stay far from every boundary)."""
    g = torch.Generator().manual_seed(seed)
    m = 3 * k
    centres = torch.zeros(m, dim)
    centres[:, 0] = 10.0 * torch.arange(m)                              # [m, dim]: along the first axis
    if dim > 1:
        centres[:, 1:] = 0.5 * torch.randn(m, dim - 1, generator=g)
    points = centres[torch.randint(m, (n,), generator=g)] + 0.3 * torch.randn(n, dim, generator=g)  # [n, dim]
    start = centres[0] + 0.3 * torch.randn(k, dim, generator=g)        # [k, dim]: every one in the first cluster
    return points.to(device), start.to(device)
