"""The parameters of notebooks 01_profile_probe1d and 02_slab_stats: the same names, types and defaults
as their `parameters` cells (tests/test_probe1d_notebooks.py checks it). CPU defaults here; GPU presets
in params/gpu/."""
from __future__ import annotations

import dataclasses

from ..params import require


@dataclasses.dataclass
class ProfileParams:
    device: str = "auto"          # auto, cpu or cuda
    out_dir: str = ""             # results folder; empty means $PERFLAB_OUT or outputs/local
    seed: int = 0                 # data seed
    threads: int = 1              # torch CPU threads, 0 means all; 1 keeps timings stable on a shared machine
    n_rows: int = 1024            # rows of the reduced data set (the seed profiled 1k rows)
    n_latents: int = 256          # latents
    n_classes: int = 24           # classes (three slabs of 8)
    l0: int = 32                  # active latents per row
    max_iter: int = 8             # LM iterations per slab in the profiled fit
    class_slab_size: int = 8      # baseline classes per slab (the seed)
    row_batch_size: int = 1024    # baseline chunk is row_batch_size x 32 events
    interval: float = 0.0005      # pyinstrument sampling interval in seconds
    activations: str = ""         # your scipy CSR npz of activations; empty means generated data
    labels: str = ""              # your labels.bin, one uint8 class per row

    def check(self) -> None:
        require(min(self.n_rows, self.n_latents, self.n_classes, self.l0, self.max_iter) >= 1,
                "n_rows, n_latents, n_classes, l0 and max_iter must be >= 1")
        require(self.l0 <= self.n_latents, f"l0={self.l0} cannot exceed n_latents={self.n_latents}")
        require(self.interval > 0, "interval must be > 0")
        require(self.threads >= 0, "threads must be >= 0")
        require(bool(self.activations) == bool(self.labels), "give both activations and labels, or neither")


@dataclasses.dataclass
class SlabStatsParams:
    device: str = "auto"          # auto, cpu or cuda
    out_dir: str = ""             # results folder; empty means $PERFLAB_OUT or outputs/local
    seed: int = 0                 # data seed
    threads: int = 1              # torch CPU threads, 0 means all; 1 keeps timings stable on a shared machine
    n_rows: int = 4096            # rows at the default size
    n_latents: int = 512          # latents
    n_classes: int = 32           # classes at the default size
    l0: int = 32                  # active latents per row
    row_sweep: list = dataclasses.field(default_factory=lambda: [1024, 2048, 4096, 8192])  # rows per size, classes fixed
    class_sweep: list = dataclasses.field(default_factory=lambda: [8, 32, 64])  # classes per size, rows fixed
    slab_sweep: list = dataclasses.field(default_factory=lambda: [2, 8, 32])  # classes per slab or pass
    baseline_slabs: int = 0       # baseline slabs timed per iteration then scaled; 0 means all
    fit_rows: int = 2048          # rows of the whole-fit comparison
    fit_classes: int = 16         # classes of the whole-fit comparison
    fit_max_iter: int = 40        # max LM iterations of the whole fits
    memory_budget_mb: float = 512.0  # optimized memory budget per pass
    compile: str = "inductor"     # off, eager or inductor: torch.compile of the optimized kernel and LM update
    min_run_time: float = 0.1     # seconds per measurement before the spread is checked
    max_run_time: float = 0.6     # seconds per measurement at most
    activations: str = ""         # your scipy CSR npz of activations; empty means generated data
    labels: str = ""              # your labels.bin, one uint8 class per row

    def check(self) -> None:
        require(min(self.n_rows, self.n_latents, self.n_classes, self.l0) >= 1, "sizes must be >= 1")
        require(self.l0 <= self.n_latents, f"l0={self.l0} cannot exceed n_latents={self.n_latents}")
        for name in ("row_sweep", "class_sweep", "slab_sweep"):
            v = getattr(self, name)
            require(len(v) >= 1 and all(isinstance(i, int) and i >= 1 for i in v), f"{name} must list ints >= 1")
        require(self.baseline_slabs >= 0, "baseline_slabs must be >= 0")
        require(self.threads >= 0, "threads must be >= 0")
        require(min(self.fit_rows, self.fit_classes, self.fit_max_iter) >= 1, "fit sizes must be >= 1")
        require(self.compile in ("off", "eager", "inductor"), "compile must be off, eager or inductor")
        require(0 < self.min_run_time <= self.max_run_time, "need 0 < min_run_time <= max_run_time")
        require(bool(self.activations) == bool(self.labels), "give both activations and labels, or neither")
