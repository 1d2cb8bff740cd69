"""The baseline version: the original's training loop, reproduced with its host syncs (its operations are in
`step_ops.py`): labels remapped through the host and a Python dict, a Python loop over classes for the
separability, four `.cpu().item()` per step for the metrics and a progress postfix every step.

    log = train_epoch(model, batches, optimizer=make_optimizer(model))

Same signature as `optimized.train_epoch` and `captured.train_epoch`; `study.IMPLS` names the three.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

from .config import BASELINE, StepConfig, TrainConfig
from .model import MixtureVAE
from .train import EpochLog, run_epoch


def step_config(*, sep_grad: bool = False) -> StepConfig:
    """The original's step; `sep_grad=True` lets the separability's gradient reach the encoder (the optimized
    step's fix), to compare both on the same math."""
    return dataclasses.replace(BASELINE, sep_grad=sep_grad)


def train_epoch(model: MixtureVAE, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], *,
                optimizer: torch.optim.Optimizer, train: TrainConfig = TrainConfig(), start_step: int = 0,
                progress: bool = True, progress_file=None, sep_grad: bool = False) -> EpochLog:
    """One pass over `batches` ((x [B, 256], y [B]) pairs on the model's device) by the original loop: a host
    remap (a bad label raises at its batch), .cpu().item() per metric, the class loop, a postfix every step."""
    return run_epoch(model, batches, step_config(sep_grad=sep_grad), optimizer=optimizer, train=train,
                     start_step=start_step, progress=progress, progress_file=progress_file, desc="baseline")
