"""Study 5: a sync-free mixture-VAE training step, then a captured one (notebook 05_vae_sync).

    params.py     the notebook's parameters (VAEParams)
    data.py       seeded batches of 256-bit integers and their labels
    model.py      the mixture VAE (real, or with ComplexLinear layers) and its losses
    reference.py  the oracles: float64 remap, separability and ComplexLinear
    config.py     ModelConfig, TrainConfig, StepConfig (a step's switches) and single_changes()
    step_ops.py   the step's operations each switch picks: the original's (host syncs) and the sync-free ones
    train.py      one step and one epoch of any StepConfig (run_epoch)
    baseline.py   train_epoch: the original loop (and its step_config)
    optimized.py  train_epoch: the sync-free loop (and its step_config)
    captured.py   train_epoch: the optimized step recorded once (CapturedStep, Captured: its knobs)
    impls.py      IMPLS = {"baseline", "optimized", "captured": each module's train_epoch}, a kit Versions
    trainers.py   every configuration as a kit Variant, and its trainer (a fresh model from a seed; train_fresh)
    measuring.py  host syncs and launches per step, a step's time in interleaved rounds, the sweep's fit, the floor
    checks.py     the notebook's correctness checks
    claims.py     CLAIMS: the seed's claims and the issue's targets with their verdict rules, units and measurers
    findings.py   Findings: what the notebook measures, one field per measuring function of study.py
    study.py      the notebook's measurements, in its order, each filling a field of Findings (study.IMPLS)
    evidence.py   evidence(run, found): each claim's Evidence for card.judge; this run's sentences
    tables.py     the tables the notebook shows (DataFrames), figures.py its figures
    diagnosis.py  the steps `perflab diagnose` runs (baseline_step, optimized_step, captured_step) and REPORT

The three `train_epoch` take the same arguments (model, batches, optimizer=, train=, start_step=, progress=,
progress_file=) and each its own knobs (log_every, sep_grad, compile, backend); `study.IMPLS[name]` looks one
up by name (a kit `Versions`: an unknown name is refused with the names there are).
"""
from .captured import Captured, CapturedStep
from .config import BASELINE, OPTIMIZED, ModelConfig, StepConfig, TrainConfig, single_changes
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
from .params import VAEParams
from .step_ops import (
    DeviceMetrics,
    Remapped,
    fisher_ratio_loop,
    fisher_ratio_vectorized,
    remap_host,
    remap_presence,
    remap_unique,
)
from .train import BadLabelsError, EpochLog, make_optimizer, run_epoch, step_losses, train_step

__all__ = [
    "BASELINE", "OPTIMIZED", "BadLabelsError", "Captured", "CapturedStep", "ComplexLinear", "ComplexMixtureVAE",
    "DeviceMetrics", "EpochLog", "MixtureVAE", "ModelConfig", "RealMixtureVAE", "Remapped", "StepConfig",
    "TrainConfig", "VAEParams", "build_model", "count_parameters", "fisher_ratio_loop", "fisher_ratio_vectorized",
    "kl_standard_normal", "make_batches", "make_optimizer", "mixture_nll", "remap_host", "remap_presence",
    "remap_unique", "run_epoch", "single_changes", "step_losses", "stream", "train_step",
]
