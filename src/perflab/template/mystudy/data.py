"""Seeded inputs: points in well-separated clusters, and starting centroids near the clusters' centres.

Well separated on purpose: every point is far nearer one centroid than any other (centres ~10 * sqrt(2 dim)
apart, points ~sqrt(dim) from theirs), so float32 and the float64 oracle agree on every assignment and the
checks can compare the centroids to rounding. Data with points halfway between two centroids would need a
check that lets such a point go either way."""
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
