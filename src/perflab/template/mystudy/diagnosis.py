"""Why the baseline is slow, by `perflab diagnose` (perflab.kit.diagnose): each version's step as a callable of no
arguments, built on the study's inputs.

    perflab diagnose --setup mystudy.diagnosis:baseline_step       # in this folder: the table, --json, --figure
    diagnose(setup=lambda: baseline_step(run))                      # in the notebook: the diagnosis shows itself

A step is one call of the version the benchmark times (`iters` Lloyd iterations, tol 0). On the worked example the
baseline's diagnosis names the host sync per cluster at its line (`points[assign == j]`: a boolean-mask gather) and
the convergence test's `.item()`; the optimized version's only the latter. Replace the sizes and the call with your
study's when you replace the example.
"""
from __future__ import annotations

from perflab.kit.env import pick_device

from . import baseline, optimized
from .data import blobs
from .params import Params


def _step(impl, run=None, device=None, **sizes):
    cfg = run.cfg if run is not None else Params(**sizes)
    dev = pick_device(run.device if run is not None else device or cfg.device)
    points, start = blobs(cfg.n, cfg.dim, cfg.k, seed=cfg.seed, device=dev)

    def kmeans():
        """One timed call: `iters` Lloyd iterations."""
        return impl(points, start, cfg.iters, tol=0.0)
    return kmeans


def baseline_step(run=None, *, device=None, **sizes):
    """The baseline's call (`baseline.kmeans`) on the run's inputs (or Params' defaults, `sizes` changing them)."""
    return _step(baseline.kmeans, run, device, **sizes)


def optimized_step(run=None, *, device=None, **sizes):
    """The optimized version's call (`optimized.kmeans`)."""
    return _step(optimized.kmeans, run, device, **sizes)
