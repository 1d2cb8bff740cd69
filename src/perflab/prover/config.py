"""Parameters of the prover notebooks: the same names, types and defaults as their `parameters` cells
(tests/test_prover_params.py checks that they agree)."""
from __future__ import annotations

import dataclasses

from ..params import require
from .ranking import MODES
from .step import COMPILE_MODES


def _common_checks(p) -> None:
    require(p.max_depth >= 1, f"max_depth must be >= 1, got {p.max_depth}")
    require(p.compile in COMPILE_MODES, f"compile must be one of {COMPILE_MODES}, got {p.compile!r}")
    require(p.max_derived >= 2, f"max_derived must be >= 2, got {p.max_derived}")
    require(p.threads >= 0, f"threads must be >= 0 (0 keeps torch's default), got {p.threads}")
    require(0 < p.min_run_time <= p.max_run_time, "need 0 < min_run_time <= max_run_time")


@dataclasses.dataclass
class EvalParams:
    """notebooks/03_eval.ipynb"""
    batch: int = 128                 # candidates per step; 0 means the measured memory model picks
    n_queries: int = 24              # test queries evaluated
    n_corruptions: int = 24          # corruptions per query
    mode: str = "both"               # head, tail or both
    compile: str = "eager"           # off, eager, default or reduce-overhead
    max_depth: int = 20              # proof steps before a candidate counts as failed
    max_derived: int = 16            # successor slots per state; the seed used 120
    n_families: int = 6              # size of the synthetic family knowledge graph
    kg_dir: str = ""                 # a knowledge-graph folder to load instead; empty means the synthetic one
    train_updates: int = 30          # policy-gradient updates before evaluating
    batch_sizes: list = dataclasses.field(default_factory=lambda: [16, 64, 256, 512, 1024])  # batch sweep
    tail_sizes: list = dataclasses.field(default_factory=lambda: [3, 7, 13])  # tail chunk sizes for the recompile count
    min_run_time: float = 0.2        # seconds per timing at least
    max_run_time: float = 1.0        # seconds per timing at most
    threads: int = 1                 # torch CPU threads; 0 keeps torch's default
    device: str = "auto"             # auto, cpu or cuda
    out_dir: str = ""                # results folder; empty means $PERFLAB_OUT or outputs/local
    seed: int = 0

    def check(self) -> None:
        _common_checks(self)
        require(self.batch >= 0, f"batch must be >= 0 (0: measured), got {self.batch}")
        require(self.n_queries >= 1 and self.n_corruptions >= 0, "need n_queries >= 1 and n_corruptions >= 0")
        require(self.mode in MODES, f"mode must be one of {MODES}, got {self.mode!r}")
        require(all(isinstance(b, int) and b >= 1 for b in self.batch_sizes), "batch_sizes must be positive ints")
        require(all(isinstance(t, int) and t >= 1 for t in self.tail_sizes), "tail_sizes must be positive ints")


@dataclasses.dataclass
class EarlyExitParams:
    """notebooks/04_early_exit.ipynb"""
    batch: int = 128                 # slots per step
    n_candidates: int = 2560         # ladder candidates with seed-like proof lengths (20 batches, like the seed)
    max_depth: int = 20              # proof steps before a candidate counts as failed; the longest ladder proof
    compile: str = "off"             # off, eager, default or reduce-overhead; compact always runs eager
    min_bucket: int = 8              # smallest bucket of the bucketed strategy
    max_derived: int = 16            # successor slots per state; the seed used 120
    n_queries: int = 24              # family test queries for the study-3 workload
    n_corruptions: int = 24          # corruptions per family query
    n_families: int = 6              # size of the synthetic family knowledge graph
    train_updates: int = 30          # policy-gradient updates for the family policy
    rounds: int = 2                  # timed rounds per strategy, the strategies interleaved
    min_run_time: float = 0.2        # seconds per timing at least (one step)
    max_run_time: float = 1.0        # seconds per timing at most (one step)
    threads: int = 1                 # torch CPU threads; 0 keeps torch's default
    device: str = "auto"             # auto, cpu or cuda
    out_dir: str = ""                # results folder; empty means $PERFLAB_OUT or outputs/local
    seed: int = 0

    def check(self) -> None:
        _common_checks(self)
        require(self.rounds >= 1, f"rounds must be >= 1, got {self.rounds}")
        require(self.batch >= 1, f"batch must be >= 1, got {self.batch}")
        require(self.n_candidates >= 1, f"n_candidates must be >= 1, got {self.n_candidates}")
        require(1 <= self.min_bucket <= self.batch, f"min_bucket must be in 1..batch, got {self.min_bucket}")
        require(self.n_queries >= 1 and self.n_corruptions >= 0, "need n_queries >= 1 and n_corruptions >= 0")
