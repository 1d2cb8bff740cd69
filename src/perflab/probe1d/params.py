"""The parameters of notebooks 01_profile_probe1d and 02_slab_stats: the same names, types and defaults
as their `parameters` cells (tests/runner/test_notebook_params.py checks it). CPU defaults here; GPU presets
in params/gpu/."""
from __future__ import annotations

import dataclasses

from ..kit.params import Backend, CompileMode, RunParams, require


@dataclasses.dataclass
class ProbeParams(RunParams):
    """The data fields both notebooks share (after the run fields)."""
    n_latents: int = 256          # latents
    l0: int = 32                  # active latents per row
    activations: str = ""         # your scipy CSR npz of activations; empty means generated data
    labels: str = ""              # your labels.bin, one uint8 class per row (paths from where you ran the command)

    def check(self) -> None:
        super().check()
        require(min(self.n_latents, self.l0) >= 1, "n_latents and l0 must be >= 1")
        require(self.l0 <= self.n_latents, f"l0={self.l0} cannot exceed n_latents={self.n_latents}")
        require(bool(self.activations) == bool(self.labels), "give both activations and labels, or neither")


@dataclasses.dataclass
class ProfileParams(ProbeParams):
    """notebooks/01_profile_probe1d.ipynb"""
    n_rows: int = 1024            # rows of the reduced data set (the seed profiled 1k rows)
    n_classes: int = 24           # classes (three slabs of 8)
    max_iter: int = 8             # LM iterations per slab in the profiled fit
    class_slab_size: int = 8      # baseline classes per slab (the seed)
    row_batch_size: int = 1024    # baseline chunk is row_batch_size x 32 events
    interval: float = 0.0005      # pyinstrument sampling interval in seconds
    profile_repeats: int = 5      # plain baseline profiles: a share's interval is the t interval over them

    def check(self) -> None:
        super().check()
        require(min(self.n_rows, self.n_classes, self.max_iter, self.class_slab_size, self.row_batch_size) >= 1,
                "n_rows, n_classes, max_iter, class_slab_size and row_batch_size must be >= 1")
        require(self.profile_repeats >= 1, f"profile_repeats must be >= 1, got {self.profile_repeats}")
        require(self.interval > 0, "interval must be > 0")


@dataclasses.dataclass
class SlabStatsParams(ProbeParams):
    """notebooks/02_slab_stats.ipynb"""
    verdict_time: float = 8.0     # seconds per timed claim at most: a whole baseline iteration is ~0.2 s on the CPU
    min_run_time: float = 0.1     # seconds per timing at least
    max_run_time: float = 0.6     # seconds per timing at most
    n_latents: int = 512          # latents
    n_rows: int = 4096            # rows at the default size
    n_classes: int = 32           # classes at the default size
    row_sweep: list = dataclasses.field(default_factory=lambda: [1024, 2048, 4096, 8192])  # rows per size, classes fixed
    class_sweep: list = dataclasses.field(default_factory=lambda: [8, 32, 64])  # classes per size, rows fixed
    slab_sweep: list = dataclasses.field(default_factory=lambda: [2, 8, 32])  # classes per slab or pass
    baseline_slabs: int = 0       # baseline slabs per iteration (0: all): the sweep scales them, the verdicts run both on them
    fit_rows: int = 2048          # rows of the whole-fit comparison
    fit_classes: int = 16         # classes of the whole-fit comparison
    fit_max_iter: int = 40        # max LM iterations of the whole fits
    memory_budget_mb: float = 512.0  # optimized memory budget per pass
    compile: CompileMode = "default"  # torch.compile mode of the kernel and LM update: off (eager), default, reduce-overhead, max-autotune
    backend: Backend = "inductor"  # torch.compile backend: inductor, eager (dynamo graphs only) or aot_eager

    def check(self) -> None:
        super().check()
        require(min(self.n_rows, self.n_classes) >= 1, "n_rows and n_classes must be >= 1")
        for name in ("row_sweep", "class_sweep", "slab_sweep"):
            v = getattr(self, name)
            require(len(v) >= 1 and all(isinstance(i, int) and i >= 1 for i in v), f"{name} must list ints >= 1")
        require(self.baseline_slabs >= 0, "baseline_slabs must be >= 0")
        require(min(self.fit_rows, self.fit_classes, self.fit_max_iter) >= 1, "fit sizes must be >= 1")
        require(self.memory_budget_mb > 0, f"memory_budget_mb must be > 0, got {self.memory_budget_mb}")
