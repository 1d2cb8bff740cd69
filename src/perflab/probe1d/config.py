"""Solver settings shared by the baseline and optimized Sparse1DProbe, and the LM constants.

The constants are the ones of the profiled original (research note, probe1d-origin.md): six
Levenberg-Marquardt tries per iteration, an elliptical trust region of radius 8, lam0 = 1e-3 clamped to
[1e-12, 1e12], lagged-rho damping with thresholds 0.75 / 0.25.

`ProbeConfig` is checked like every notebook's parameters (`perflab.kit.params.validate`): unknown options,
wrong types and out-of-range values give one `ParameterError` naming them all.
"""
from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from ..kit.params import Backend, CompileMode, require

LM_TRIES = 6            # tries per iteration before the fallback (a zero step)
TRUST_RADIUS = 8.0      # sqrt(db^2 + (qx dw)^2) <= 8
LAM0, LAM_MIN, LAM_MAX = 1e-3, 1e-12, 1e12
RHO_GOOD, RHO_BAD = 0.75, 0.25
PRED_FLOOR = 1e-18      # rho = actual / max(predicted, 1e-18)
P_CLAMP = 1e-7          # b0 = logit(clamp(mean y, 1e-7, 1 - 1e-7))
QX_MIN = 1e-6           # qx = max(rms of a latent's nonzero values, 1e-6); 1 for an empty latent

DTYPES = {"float32": torch.float32, "float64": torch.float64}
Dtype = Literal["float32", "float64"]


@dataclasses.dataclass
class ProbeConfig:
    """What `Sparse1DProbe(...)` (either version) takes besides `device` and `iteration_hook`.

    The fit minimizes, per (latent l, class c), sum_rows BCE(b + w x, y) + ridge/2 (w^2 + (b - b0)^2)
    (the summed loss of the profiled commit 1b28c47), by LM from b = b0, w = 0.
    """
    class_slab_size: int | None = None  # classes per pass; None: 8 for baseline (the seed), budget-limited for optimized
    row_batch_size: int = 1024          # baseline: a chunk is row_batch_size * 32 events (the seed's chunk_target)
    max_iter: int = 100                 # LM iterations per class slab
    tol: float = 1e-4                   # converged when max |grad| and max |step| are both below tol
    ridge: float = 1e-8                 # ridge on w and on (b - b0)
    compute_dtype: Dtype = "float32"    # dtype of per-event math and of the weights
    accum_dtype: Dtype = "float32"      # optimized: dtype of sums, closed forms and LM math (float64: the seed's open question)
    memory_budget_mb: float = 512.0     # optimized: bound on per-pass state + per-chunk temporaries
    chunk_pair_events: int | None = None  # optimized: (slot, class) pairs per kernel call; None: 2^18 on CPU, 2^26 on CUDA
    tile_events: int = 32               # optimized: slots per tile; each latent's events are padded to a multiple
    freeze: bool = True                 # optimized: stop updating converged / zero-gradient coordinates
    compile: CompileMode = "off"        # optimized: torch.compile mode of the tile kernel and LM update; off: eager
    backend: Backend = "inductor"       # optimized: torch.compile backend (eager: dynamo graphs only, counts them cheaply)

    def check(self) -> None:
        require(self.class_slab_size is None or self.class_slab_size >= 1,
                f"class_slab_size must be >= 1 or None, got {self.class_slab_size}")
        require(self.row_batch_size >= 1, f"row_batch_size must be >= 1, got {self.row_batch_size}")
        require(self.max_iter >= 1, f"max_iter must be >= 1, got {self.max_iter}")
        require(self.tol >= 0, f"tol must be >= 0, got {self.tol}")
        require(self.ridge >= 0, f"ridge must be >= 0, got {self.ridge}")
        require(self.memory_budget_mb > 0, f"memory_budget_mb must be > 0, got {self.memory_budget_mb}")
        require(self.chunk_pair_events is None or self.chunk_pair_events >= 1,
                f"chunk_pair_events must be >= 1 or None, got {self.chunk_pair_events}")
        require(self.tile_events >= 1, f"tile_events must be >= 1, got {self.tile_events}")
