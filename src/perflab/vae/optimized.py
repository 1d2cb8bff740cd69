"""The optimized version: the same step with no host sync in it (its operations are in `step_ops.py`): labels ranked
by a presence table on the device, the separability by one-hot matmuls, the metrics written to a device buffer
that the host reads once per `log_every` steps, and the separability's gradient reaching the encoder (`sep_grad`).

    log = train_epoch(model, batches, optimizer=make_optimizer(model), log_every=50)

Same signature as `baseline.train_epoch` and `captured.train_epoch`; `study.IMPLS` names the three.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

from .config import OPTIMIZED, StepConfig, TrainConfig
from .model import MixtureVAE
from .train import EpochLog, run_epoch


def step_config(*, log_every: int = 50, sep_grad: bool = True) -> StepConfig:
    """The sync-free step, its metrics read every `log_every` steps; `sep_grad=False` keeps the original's
    no_grad separability pass, to compare with the baseline on identical math."""
    sc = dataclasses.replace(OPTIMIZED, log_every=log_every, sep_grad=sep_grad)
    sc.check()
    return sc


def train_epoch(model: MixtureVAE, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], *,
                optimizer: torch.optim.Optimizer, train: TrainConfig = TrainConfig(), start_step: int = 0,
                progress: bool = True, progress_file=None, log_every: int = 50, sep_grad: bool = True) -> EpochLog:
    """One pass over `batches` by sync-free steps; a bad label is counted on the device and raised
    (BadLabelsError, naming the steps) at the next host read, every `log_every` steps or at the end."""
    return run_epoch(model, batches, step_config(log_every=log_every, sep_grad=sep_grad), optimizer=optimizer,
                     train=train, start_step=start_step, progress=progress, progress_file=progress_file,
                     desc="optimized")
