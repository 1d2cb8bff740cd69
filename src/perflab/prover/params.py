"""Parameters of the prover notebooks (03_eval, 04_early_exit): the same names, types and defaults as
their `parameters` cells (tests/runner/test_notebook_params.py checks that they agree)."""
from __future__ import annotations

import dataclasses
from typing import Literal

from ..kit.params import Backend, CompileMode, RunParams, require
from ..kit.paths import user_path

GRAPHS = ("family", "kinship", "nations", "umls")   # the names `kg` takes besides a folder (datasets.load_kg)


@dataclasses.dataclass
class ProverParams(RunParams):
    """The prover's fields shared by both notebooks (after the run fields)."""
    compile: CompileMode = "off"     # torch.compile mode: off, default, reduce-overhead or max-autotune
    backend: Backend = "inductor"    # torch.compile backend: inductor, eager (dynamo graphs, no codegen) or aot_eager
    kg: str = "family"               # the graph: family (synthetic), kinship, nations, umls, or a folder (relative: from where you ran)
    max_depth: int = 20              # proof steps before a candidate counts as failed
    max_derived: int = 16            # successor slots per state; the seed used 120
    n_queries: int = 24              # test queries evaluated; 0 means the whole test split
    n_corruptions: int = 24          # corruptions per query
    n_families: int = 6              # size of the synthetic family knowledge graph
    train_updates: int = 30          # policy-gradient updates before evaluating

    def check(self) -> None:
        super().check()
        require(self.kg in GRAPHS or (self.kg.strip() != "" and user_path(self.kg).is_dir()),
                f"kg={self.kg!r} is not a graph: choose one of {', '.join(GRAPHS)}, or a folder (facts.txt/rules.txt/"
                f"test.txt, or train/valid/test.txt as TSV)" + (f"; {user_path(self.kg)} is not a folder" if self.kg.strip() else ""))
        require(self.max_depth >= 1, f"max_depth must be >= 1, got {self.max_depth}")
        require(self.max_derived >= 2, f"max_derived must be >= 2, got {self.max_derived}")
        require(self.n_queries >= 0 and self.n_corruptions >= 0,
                "need n_queries >= 0 (0: the whole test split) and n_corruptions >= 0")
        require(self.n_families >= 1 and self.train_updates >= 0, "need n_families >= 1 and train_updates >= 0")


@dataclasses.dataclass
class EvalParams(ProverParams):
    """notebooks/03_eval.ipynb"""
    compile: CompileMode = "default"  # torch.compile mode: off, default, reduce-overhead or max-autotune
    backend: Backend = "eager"       # torch.compile backend: inductor, eager (the graphs without inductor's ~60 s) or aot_eager
    batch: int = 128                 # candidates per step; 0 means the measured memory model picks
    mode: Literal["head", "tail", "both"] = "both"  # corrupt the head, the tail or both
    batch_sizes: list = dataclasses.field(default_factory=lambda: [16, 64, 256, 512, 1024])  # batch sweep
    tail_sizes: list = dataclasses.field(default_factory=lambda: [3, 7, 13])  # tail chunk sizes for the recompile count
    beam: int = 16                   # proofs the search keeps per candidate per step (16 - 1 rules and facts per goal)
    search_depth: int = 2            # steps of the search; a mined rule proves in 2 (the rule, then its facts)
    search_batch: int = 0            # rows per search step (beam rows per candidate); 0 means the run's batch
    n_fit: int = 24                  # valid queries the score combination is fitted on (all their corruptions)
    emb_rank: int = 100              # ComplEx dimensions of the learned score every candidate gets
    emb_epochs: int = 50             # ComplEx passes over the training facts

    def check(self) -> None:
        super().check()
        require(self.batch >= 0, f"batch must be >= 1 (or 0: the memory model picks), got {self.batch}")
        require(self.beam >= 1 and self.search_depth >= 1 and self.search_batch >= 0,
                f"need beam >= 1, search_depth >= 1 and search_batch >= 0, got {self.beam}, {self.search_depth}, "
                f"{self.search_batch}")
        require(self.n_fit >= 0 and self.emb_rank >= 1 and self.emb_epochs >= 0,
                "need n_fit >= 0, emb_rank >= 1 and emb_epochs >= 0")
        require(len(self.batch_sizes) >= 1 and all(isinstance(b, int) and b >= 1 for b in self.batch_sizes),
                f"batch_sizes must list ints >= 1, got {self.batch_sizes!r}")
        require(len(self.tail_sizes) >= 1 and all(isinstance(t, int) and t >= 1 for t in self.tail_sizes),
                f"tail_sizes must list ints >= 1, got {self.tail_sizes!r}")


@dataclasses.dataclass
class EarlyExitParams(ProverParams):
    """notebooks/04_early_exit.ipynb"""
    # a paired round here is two whole ladder runs (~1 s together on the CPU defaults) and a 99% interval needs 9:
    # 2 s would leave every timed claim "within noise"
    verdict_time: float = 30.0  # seconds of paired rounds per timed claim at most (a verdict stops once decided)
    batch: int = 128                 # slots per step
    n_candidates: int = 2560         # ladder candidates with seed-like proof lengths (20 batches, like the seed)
    min_bucket: int = 8              # smallest bucket of the bucketed strategy
    rounds: int = 2                  # timed rounds per strategy, the strategies interleaved

    def check(self) -> None:
        super().check()
        require(self.rounds >= 1, f"rounds must be >= 1, got {self.rounds}")
        require(self.batch >= 1, f"batch must be >= 1, got {self.batch}")
        require(self.n_candidates >= 1, f"n_candidates must be >= 1, got {self.n_candidates}")
        require(1 <= self.min_bucket <= self.batch, f"min_bucket must be in 1..batch, got {self.min_bucket}")
