"""Parameters of notebooks/03_eval.ipynb: the prover's shared fields (`core.params.ProverParams`) and this room's.
(Link prediction's are `links.params.LinkParams`, notebooks/03b_links.)"""
from __future__ import annotations

import dataclasses
from typing import Literal

from ...kit.params import Backend, CompileMode, require
from ..core.params import ProverParams


@dataclasses.dataclass
class EvalParams(ProverParams):
    """notebooks/03_eval.ipynb"""
    compile: CompileMode = "default"  # torch.compile mode: off, default, reduce-overhead or max-autotune
    backend: Backend = "eager"       # torch.compile backend: inductor, eager (the graphs without inductor's ~60 s) or aot_eager
    batch: int = 128                 # candidates per step; 0 means the measured memory model picks
    mode: Literal["head", "tail", "both"] = "both"  # corrupt the head, the tail or both
    batch_sizes: list = dataclasses.field(default_factory=lambda: [16, 64, 256, 512, 1024])  # batch sweep
    tail_sizes: list = dataclasses.field(default_factory=lambda: [3, 7, 13])  # tail chunk sizes for the recompile count

    def check(self) -> None:
        super().check()
        require(self.batch >= 0, f"batch must be >= 1 (or 0: the memory model picks), got {self.batch}")
        require(len(self.batch_sizes) >= 1 and all(isinstance(b, int) and b >= 1 for b in self.batch_sizes),
                f"batch_sizes must list ints >= 1, got {self.batch_sizes!r}")
        require(len(self.tail_sizes) >= 1 and all(isinstance(t, int) and t >= 1 for t in self.tail_sizes),
                f"tail_sizes must list ints >= 1, got {self.tail_sizes!r}")
