"""The parameters of mystudy.ipynb: the same names, types and defaults as its parameters cell (a test checks
that they agree). The notebook's setup cell and `perflab run -p k=64` both validate against this class."""
from __future__ import annotations

import dataclasses

from perflab.kit.params import RunParams, require


@dataclasses.dataclass
class Params(RunParams):
    """mystudy.ipynb's parameters (device, out_dir, seed, threads, min_run_time, max_run_time and verdict_time
    come from RunParams)"""
    n: int = 4096                 # points
    dim: int = 16                 # coordinates per point
    k: int = 32                   # clusters; the baseline waits for the device once per cluster per iteration
    iters: int = 5                # Lloyd iterations per timed call
    sweep_k: list = dataclasses.field(default_factory=lambda: [8, 32, 128])  # cluster counts of the benchmark

    def check(self) -> None:
        super().check()
        require(self.n >= 1 and self.dim >= 1, f"n and dim must be >= 1, got n={self.n}, dim={self.dim}")
        require(1 <= self.k <= self.n, f"need 1 <= k <= n, got k={self.k}, n={self.n}")
        require(self.iters >= 1, f"iters must be >= 1, got {self.iters}")
        require(len(self.sweep_k) >= 1 and all(isinstance(k, int) and 1 <= k <= self.n for k in self.sweep_k),
                f"sweep_k must list cluster counts between 1 and n={self.n}, got {self.sweep_k!r}")
