"""The slow pattern: k-means as it is usually first written, with a host sync per cluster inside the loop.

`points[assign == j]` is a boolean-mask gather: how many rows it returns depends on the data, so the host must
wait until the device has counted the mask before it can allocate the result. That is one host sync per cluster
per iteration, and one more for the convergence test: k + 1 per iteration. On a GPU each one drains the queue of
launched kernels; on a CPU a sync waits for nothing, but the loop still pays k small gathers and means."""
from __future__ import annotations

import torch


def kmeans(points: torch.Tensor, centroids: torch.Tensor, iters: int,
           tol: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's algorithm over `points` [n, dim] from `centroids` [k, dim]: at most `iters` iterations, fewer when
    the centroids move less than `tol` (0: never stop early). -> (centroids [k, dim], assignment [n])"""
    c = centroids.clone()
    for _ in range(iters):
        assign = torch.cdist(points, c).argmin(1)  # [n]: each point's nearest centroid
        new = c.clone()
        for j in range(c.shape[0]):
            mine = points[assign == j]  # host sync: the mask's count sizes the result
            if len(mine):
                new[j] = mine.mean(0)
        moved = (new - c).norm()
        c = new
        if moved.item() < tol:  # host sync: the loop's decision
            break
    return c, assign
