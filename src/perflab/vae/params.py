"""The parameters of notebook 05_vae_sync: the same names, types and defaults as its `parameters` cell
(tests/runner/test_notebook_params.py checks that they agree)."""
from __future__ import annotations

import dataclasses
from typing import Literal

from ..kit.params import Backend, CompileMode, RunParams, require
from .impls import IMPLS


@dataclasses.dataclass
class VAEParams(RunParams):
    """notebooks/05_vae_sync.ipynb"""
    min_run_time: float = 0.1     # seconds, least time per timing round
    max_run_time: float = 0.3     # seconds, most time per timing round
    model: Literal["real", "complex"] = "real"  # real (RealMixtureVAE) or complex (ComplexLinear layers)
    batch: int = 64               # samples per step (the original streamed 64)
    group: Literal[0, 1] = 1      # label group, 0 for labels 0 1 2 and 1 for labels 3 4 5
    log_every: int = 10           # the optimized loop reads its metrics every this many steps
    compile: CompileMode = "default"  # captured step's kernels: off (eager), default, reduce-overhead, max-autotune
    backend: Backend = "inductor"     # captured step's torch.compile backend: inductor, eager or aot_eager
    curve_steps: int = 100        # steps in the loss curves
    rounds: int = 5               # interleaved timing rounds per configuration (2 left the table noise: grading 7)
    clock: Literal["auto", "wall", "cpu"] = "auto"  # auto, wall or cpu; auto means cpu time of this process on a cpu device with one thread
    sweep_batches: list = dataclasses.field(default_factory=lambda: [16, 64, 256, 1024])  # batch sizes of the sweep
    sweep_steps: int = 2          # steps per timed call in the sweep
    sweep_impls: list = dataclasses.field(default_factory=lambda: ["baseline", "optimized"])  # baseline, optimized and/or captured
    epoch_batches: int = 5000     # batches per epoch in the seed table

    def check(self) -> None:
        super().check()
        require(self.batch >= 1, f"batch must be >= 1, got {self.batch}")
        require(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")
        require(self.curve_steps >= 2 and self.sweep_steps >= 1, "curve_steps must be >= 2 and sweep_steps >= 1")
        require(self.rounds >= 1, f"rounds must be >= 1, got {self.rounds}")
        require(len(self.sweep_batches) >= 2 and all(isinstance(b, int) and b >= 1 for b in self.sweep_batches),
                f"sweep_batches must list at least two batch sizes >= 1, got {self.sweep_batches!r}")
        require(len(self.sweep_impls) >= 1 and all(i in IMPLS for i in self.sweep_impls),
                f"sweep_impls must list some of {', '.join(IMPLS)}, got {self.sweep_impls!r}")
        require(self.epoch_batches >= 1, f"epoch_batches must be >= 1, got {self.epoch_batches}")
