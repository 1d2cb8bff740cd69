"""The notebook's measurements: host syncs per iteration, counted, and the time of one call of each version as the
number of clusters grows, declared as data (cluster counts x versions) and measured side by side."""
from __future__ import annotations

import torch
from perflab.bench import Measurement, measure_interleaved
from perflab.syncs import count_host_syncs

from . import baseline, optimized
from .data import blobs

IMPLS = {"baseline": baseline.kmeans, "optimized": optimized.kmeans}


def syncs_per_iteration(points: torch.Tensor, start: torch.Tensor, iters: int) -> dict[str, dict]:
    """Each version's host syncs over one call of `iters` iterations (tol 0: every iteration runs), per iteration
    and by the call that made them. -> {version: {"per_iteration": float, "by_op": {op: count}}}"""
    out = {}
    for name, impl in IMPLS.items():
        with count_host_syncs(points.device) as c:
            impl(points, start, iters, tol=0.0)
        out[name] = {"per_iteration": c.total / iters, "by_op": dict(c.by_op)}
    return out


def time_calls(cfg, device: torch.device) -> dict[tuple[str, int], Measurement]:
    """Both versions at every cluster count of `cfg.sweep_k` and `cfg.k`: one call of `cfg.iters` iterations (tol 0,
    so both do the same work), in two interleaved rounds so that a drift of the machine hits both alike.
    -> {(version, k): Measurement of one call}"""
    times = {}
    for k in sorted({*cfg.sweep_k, cfg.k}):
        points, start = blobs(cfg.n, cfg.dim, k, seed=cfg.seed, device=device)
        fns = {(name, k): (lambda f=impl, x=points, c=start: f(x, c, cfg.iters, tol=0.0))
               for name, impl in IMPLS.items()}
        times.update(measure_interleaved(fns, label="k-means, one call", rounds=2, device=device,
                                         sub_labels={key: f"k={k}" for key in fns},
                                         descriptions={key: key[0] for key in fns},
                                         min_run_time=cfg.min_run_time, max_run_time=cfg.max_run_time))
    return times
