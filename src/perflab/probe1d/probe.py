"""`Sparse1DProbeBase`: the front both versions share (fit, loss matrices, the parameters checked); each version is
its subclass `Sparse1DProbe` of the same name and signature, in `baseline.py` and `optimized.py`, with its solver.

    probe = Sparse1DProbe(max_iter=30).fit(x, y)          # perflab.probe1d.Sparse1DProbe: the optimized version
    probe.coef_, probe.intercept_                         # [n_latents, n_classes]
    loss, tp, fp, tn, fn = probe.loss_matrix_with_aux(x, y, threshold=0.5)
    study.IMPLS["baseline"](max_iter=30).fit(x, y)        # the seed's solver, by name

Both versions run the same algorithm (the research note's LM with trust region, lagged-rho damping and qx
scaling, implicit zeros in closed form) and take the same arguments, so a notebook swaps them by name.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..kit.env import pick_device
from ..kit.params import validate
from .config import ProbeConfig
from .data import check_inputs

__all__ = ["Sparse1DProbeBase"]


class Sparse1DProbeBase:
    """Per (latent, class) 1D logistic regressions `logit = b + w x` on sparse activations, fit by `Solver`
    (the subclass's: `BaselineSolver` or `OptimizedSolver`).

    device: "auto" | "cpu" | "cuda"; iteration_hook(info: dict) is called after every LM iteration (it costs host
    syncs: leave it None when timing). Other keywords are `ProbeConfig` fields (class_slab_size, row_batch_size,
    max_iter, tol, ridge, accum_dtype, compile, ...), checked by `perflab.kit.params.validate`: a bad one raises
    `perflab.kit.params.ParameterError` (a ValueError).
    """
    Solver: type

    def __init__(self, *, device: str | torch.device = "auto",
                 iteration_hook: Callable[[dict], None] | None = None, **config):
        # the notebooks' validator: unknown options, wrong types and ProbeConfig.check's rules, one message
        self.config = validate(config, ProbeConfig)
        self.device = pick_device(device)
        self.solver = self.Solver(self.config, self.device, iteration_hook)

    def fit(self, x, y):
        x, y = check_inputs(x, y)
        out = self.solver.fit(x, y)
        self.coef_, self.intercept_, self.n_iter_ = out["coef"], out["intercept"], out["n_iter"]
        self.counters_ = out["counters"]
        return self

    def _fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise RuntimeError("Sparse1DProbe: call fit(x, y) first")

    def loss_matrix_with_aux(self, x, y, threshold: float = 0.5):
        """(loss, tp, fp, tn, fn), each [n_latents, n_classes]: the mean binary cross-entropy (float32) and
        the confusion counts (int64) of predicting sigmoid(b + w x) > threshold, zeros included."""
        self._fitted()
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        x, y = check_inputs(x, y)
        if x.shape[1] != self.coef_.shape[0] or y.shape[1] != self.coef_.shape[1]:
            raise ValueError(f"shape mismatch: fitted on {tuple(self.coef_.shape)} (latents, classes), "
                             f"got x with {x.shape[1]} latents and y with {y.shape[1]} classes")
        return self.solver.loss_matrix_with_aux(x, y, self.coef_, self.intercept_, threshold)

    def loss_matrix(self, x, y) -> torch.Tensor:
        """Mean binary cross-entropy over the rows, [n_latents, n_classes]."""
        return self.loss_matrix_with_aux(x, y)[0]
