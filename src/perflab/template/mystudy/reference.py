"""The oracle: Lloyd's algorithm in float64 on the CPU, written to be obviously right rather than fast."""
from __future__ import annotations

import torch


def lloyd_step(points: torch.Tensor, centroids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each point to its nearest centroid (squared distance; the lowest index on a tie), then each centroid to the
    mean of its points; a centroid that no point picked stays where it is. -> (centroids [k, dim], assignment [n])"""
    x, c = points.detach().double().cpu(), centroids.detach().double().cpu()
    dist = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1)  # [n, k]
    assign = dist.argmin(1)
    new = c.clone()
    for j in range(len(c)):
        mine = x[assign == j]
        if len(mine):
            new[j] = mine.mean(0)
    return new, assign


def kmeans(points: torch.Tensor, centroids: torch.Tensor, iters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`iters` Lloyd steps from `centroids`, with no early stop. -> (centroids [k, dim], last assignment [n]),
    float64 on the CPU."""
    c, assign = centroids, None
    for _ in range(iters):
        c, assign = lloyd_step(points, c)
    return c, assign


def iterations_to_settle(points: torch.Tensor, centroids: torch.Tensor, tol: float, iters: int) -> int:
    """How many Lloyd steps from `centroids` (at most `iters`) until a step moves the centroids less than `tol` (the
    norm of the change, that step included): where a version called with that `tol` stops."""
    c = centroids
    for i in range(1, iters + 1):
        new, _ = lloyd_step(points, c)
        moved, c = (new - c.double().cpu()).norm().item(), new
        if moved < tol:
            return i
    return iters
