"""The versions as trainers the study times and counts: each configuration a kit Variant, one type for all of them.

    impls, fallback = variants(log_every, compile, backend)    # {name: Variant}: the baseline, each change, ...
    tr = trainer(impls["captured"], model_cfg=..., train_cfg=..., seed=0, device="cpu")
    log = tr.epoch(batches)                                      # an EpochLog; tr.model, tr.step

`eager(StepConfig)` is a version's step, or one change alone (`train.run_epoch` runs it); `captured(Captured)` the
optimized step recorded once (a `CapturedStep` runs it). `trainer(v)` builds either's trainer from a seed, with the
same `.epoch(batches)`; `train_fresh` trains one epoch from a fresh model."""
from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator

import torch

from ..kit.versions import Variant
from .captured import Captured, CapturedStep, runnable
from .config import ModelConfig, StepConfig, TrainConfig, single_changes
from .model import MixtureVAE, build_model
from .train import EpochLog, make_optimizer, run_epoch


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with `n` torch intra-op threads (0: leave as is), then restore the previous count."""
    prev = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def pick_clock(clock: str, device: torch.device) -> Callable[[], float] | None:
    """The timer for `perflab.kit.bench.measure`: None (wall time, CUDA-synchronized) or time.process_time.

    "auto" picks CPU time on a CPU device running one torch thread: on a shared host it counts only
    this process's work, and with one thread it equals what an idle host's wall clock would show."""
    one_thread_cpu = device.type == "cpu" and torch.get_num_threads() == 1
    if clock == "wall" or (clock == "auto" and not one_thread_cpu):
        return None
    if clock in ("auto", "cpu"):
        if not one_thread_cpu:
            raise ValueError(f"clock 'cpu' needs a cpu device and one torch thread (threads 1); got {device} "
                             f"with {torch.get_num_threads()} threads: use clock 'wall'")
        return time.process_time
    raise ValueError(f"clock must be 'auto', 'wall' or 'cpu', got {clock!r}")


def fresh(model_cfg: ModelConfig, seed: int, device: torch.device | str, *, capturable: bool = False):
    """A model and its optimizer from `seed`, with the global RNG (dropout, noise) seeded too."""
    torch.manual_seed(seed)
    model = build_model(model_cfg, seed=seed, device=device)
    return model, make_optimizer(model, capturable=capturable)


class EagerTrainer:
    """`run_epoch` of one StepConfig on one model and optimizer, counting steps across epochs (CapturedStep's
    interface)."""

    def __init__(self, config: StepConfig, model: MixtureVAE, optimizer: torch.optim.Optimizer, train: TrainConfig):
        self.config, self.model, self.optimizer, self.train, self.step = config, model, optimizer, train, 0

    def epoch(self, batches, *, progress: bool = False, progress_file=None) -> EpochLog:
        log = run_epoch(self.model, batches, self.config, optimizer=self.optimizer, train=self.train,
                        start_step=self.step, progress=progress, progress_file=progress_file)
        self.step += len(batches)
        return log


def _eager_trainer(model: MixtureVAE, optimizer, train: TrainConfig, *, step: StepConfig) -> EagerTrainer:
    return EagerTrainer(step, model, optimizer, train)


def _captured_trainer(model: MixtureVAE, optimizer, train: TrainConfig, *, step: Captured) -> CapturedStep:
    return CapturedStep(model, optimizer, step, train)


def eager(step: StepConfig, name: str = "") -> Variant:
    """A StepConfig (a version's step, or one change alone) as the kit Variant the notebook times: `train.run_epoch`
    of it, eagerly; its version is the one whose switches it has ("optimized" for the sync-free ones, else
    "baseline"). Called as `v(model, optimizer, train)` it builds its trainer."""
    sync_free = (step.remap, step.metrics, step.separability) == ("presence", "device", "vectorized")
    return Variant("optimized" if sync_free else "baseline", _eager_trainer, {"step": step}, name)


def captured(step: Captured, name: str = "captured") -> Variant:
    """A Captured (the optimized step recorded once, its kernels from its compile mode) as a kit Variant of the
    captured version; `v(model, optimizer, train)` builds its CapturedStep."""
    return Variant("captured", _captured_trainer, {"step": step}, name)


def variants(log_every: int, compile: str, backend: str) -> tuple[dict[str, Variant], str]:
    """What the notebook times, declared as data: every configuration of `single_changes` (the baseline, each change
    alone, the seed's three together, optimized, optimized + sep grad) and the optimized step captured, each a kit
    Variant (`eager`, `captured`). The captured one runs eagerly where this torch's dynamo cannot trace the step's
    backward (`captured.runnable`). -> ({name: Variant}, the fallback's reason or "")"""
    out = {name: eager(step, name) for name, step in single_changes(log_every).items()}
    cap, fallback = runnable(Captured(out["optimized"].knobs["step"], compile=compile, backend=backend))
    return {**out, "captured": captured(cap)}, fallback


def step_config(v: Variant) -> StepConfig:
    """The switches a variant's step runs (a captured step's: the step it records)."""
    step = v.knobs["step"]
    return step.step if isinstance(step, Captured) else step


def trainer(v: Variant, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
            device: torch.device | str) -> EagerTrainer | CapturedStep:
    """A fresh model from `seed` trained by variant `v` (`eager`, `captured`: a captured step compiles at its first
    batch)."""
    model, opt = fresh(model_cfg, seed, device, capturable=v.version == "captured")
    return v(model, opt, train_cfg)


def train_fresh(v: Variant, batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
                device: torch.device | str, progress_file=None) -> tuple[EpochLog, MixtureVAE]:
    """One epoch over `batches` from a fresh model: the per-step metrics and the trained model."""
    tr = trainer(v, model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
    log = tr.epoch(batches, progress=progress_file is not None, progress_file=progress_file)
    return log, tr.model


def eager_form(v: Variant) -> Variant:
    """A captured variant in its eager form (compile "off": the same function, run eagerly), any other as it is."""
    if v.version != "captured":
        return v
    return v.with_knobs(v.name, step=dataclasses.replace(v.knobs["step"], compile="off"))
