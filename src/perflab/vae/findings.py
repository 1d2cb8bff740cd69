"""What the 05_vae_sync notebook measures, as one typed object: `Findings`, one field per measuring function of
study.py, filled in as the notebook runs (`found.syncs = study.host_syncs(run, found)`); `evidence.evidence(run, found)`
judges the claims on it, and the tables and figures draw it. Each field's type says what its function measured."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from torch.utils.benchmark.utils.common import Measurement

from ..kit.claims import Check
from ..kit.verdicts import Decision
from ..kit.versions import Variant
from .captured import CapturedStep
from .config import ModelConfig, TrainConfig
from .model import MixtureVAE
from .train import EpochLog


@dataclasses.dataclass
class Inputs:
    """What every measurement runs on: the model and schedule, the versions (kit Variants, `trainers.variants`), the
    batches, the clock, the device."""
    model_cfg: ModelConfig
    train_cfg: TrainConfig
    impls: dict[str, Variant]
    fallback: str                 # why the captured step runs eagerly on this torch, or ""
    curve_batches: list           # curve_steps batches: the loss curves, the sync and launch counts
    timed_batches: list           # log_every batches: one timed call, one metric read
    clock: Callable[[], float] | None
    model0: MixtureVAE | None     # a model of the run's config (its parameter count, the floor)
    device_kind: str              # the device as the sentences name it ("cpu", "h100")
    seed: int = 0
    device: Any = "cpu"
    progress_file: Any = None     # where timed progress bars draw: their cost stays, their text goes

    @property
    def kw(self) -> dict:
        return dict(model_cfg=self.model_cfg, train_cfg=self.train_cfg, seed=self.seed, device=self.device)

    @property
    def clock_name(self) -> str:
        return "CPU time" if self.clock else "wall time"


@dataclasses.dataclass
class Compiled:
    """The captured step after its first epoch over the curve batches (compiled there, recorded on CUDA)."""
    trainer: CapturedStep | Any
    log: EpochLog
    first_epoch_s: float
    compiles: Any                 # the CompileCounter over that epoch


@dataclasses.dataclass
class Curves:
    """The loss curves on one seed and data, and what the checked cell found of them."""
    logs: dict[str, EpochLog]
    checks: list[Check]
    baseline_optimized: bool      # equal to rounding (the rtol of loss_curves)
    optimized_captured: bool      # equal to rounding over the first CHECKED_STEPS steps
    steps: int
    gap: float                    # largest relative gap, optimized vs captured, all steps


@dataclasses.dataclass
class Syncs:
    """Host syncs counted per configuration over `steps` steps (`measuring.count_syncs`)."""
    per_step: dict[str, float]    # the loop's metric reads included
    by_op: dict[str, dict]
    step_syncs: dict[str, int]    # inside the step itself (reads excluded): "optimized", "captured"
    steps: int
    reads: int                    # metric reads of a deferred loop in those steps
    cuda_debug: dict[str, int] | None = None   # CUDA's sync-debug warnings per configuration, where it ran


@dataclasses.dataclass
class Launches:
    """Launches per step (kernels on CUDA, the aten-op proxy on a CPU) of baseline, optimized, captured."""
    per_step: dict[str, float]
    host: dict[str, dict[str, float]]   # host calls into the GPU runtime per step, by what they start
    kinds: dict[str, dict[str, float]]  # each count split by what the ops are (measuring.LAUNCH_KINDS)
    what: str                           # what was counted, in words
    top: dict[str, float] = dataclasses.field(default_factory=dict)   # the captured step's kernels, by name (GPU)


@dataclasses.dataclass
class Remaps:
    """The label remap alone: time per call of each (Measurements), the syncs of one torch.unique remap by op, and the
    remap claims' decisions (None where not this run's setup)."""
    times: dict[str, Measurement]
    unique_syncs: dict[str, int]
    decisions: dict[str, Decision | None]


@dataclasses.dataclass
class Sweep:
    """Time per step at each batch size (`sweep_steps` steps per call), and the fit t(B) = a + b B per version."""
    times: dict[tuple[str, int], Measurement]
    fits: dict[str, dict]
    note: str = ""                # why a version is in the sweep at some sizes only


@dataclasses.dataclass
class Findings:
    """What the notebook measures, one field per measuring function (module doc), filled in as it runs: `evidence`
    reads only this, so a claim is judged on the very numbers the cells above it showed."""
    inputs: Inputs | None = None
    checks: list[Check] | None = None
    captured: Compiled | None = None
    curves: Curves | None = None
    syncs: Syncs | None = None
    launches: Launches | None = None
    times: dict[str, Measurement] | None = None     # time per step at `batch`, by configuration
    speedups: dict[str, Decision | None] | None = None
    remaps: Remaps | None = None
    savings: dict[str, Decision | None] | None = None
    sweep: Sweep | None = None
    floors: dict[str, dict] | None = None
