"""Study 5: a sync-free mixture-VAE training step (notebook 05_vae_sync).

`train_epoch(model, batches, impl="baseline" | "optimized", optimizer=...)` runs the original loop
(host syncs every step) or the sync-free one; `single_changes()` lists each change alone;
`CapturedStep(model, optimizer, Captured(step_config("optimized")))` runs the sync-free step recorded once
(one CUDA-graph replay per step on CUDA, compiled by inductor on CPU).
"""
from .baseline import Remapped, fisher_ratio_loop, remap_host, remap_unique
from .captured import Captured, CapturedStep
from .config import BASELINE, OPTIMIZED, ModelConfig, StepConfig, TrainConfig, single_changes, step_config
from .data import make_batches, stream
from .model import (
                     ComplexLinear,
                     ComplexMixtureVAE,
                     MixtureVAE,
                     RealMixtureVAE,
                     build_model,
                     count_parameters,
                     kl_standard_normal,
                     mixture_nll,
)
from .optimized import DeviceMetrics, fisher_ratio_vectorized, remap_presence
from .params import VAEParams
from .train import BadLabelsError, EpochLog, make_optimizer, step_losses, train_epoch, train_step

__all__ = [
    "BASELINE", "OPTIMIZED", "BadLabelsError", "Captured", "CapturedStep", "ComplexLinear", "ComplexMixtureVAE",
    "DeviceMetrics", "EpochLog", "MixtureVAE", "ModelConfig", "RealMixtureVAE", "Remapped", "StepConfig",
    "TrainConfig", "VAEParams", "build_model", "count_parameters", "fisher_ratio_loop", "fisher_ratio_vectorized",
    "kl_standard_normal", "make_batches", "make_optimizer", "mixture_nll", "remap_host", "remap_presence",
    "remap_unique", "single_changes", "step_config", "step_losses", "stream", "train_epoch", "train_step",
]
