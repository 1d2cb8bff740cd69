"""Padded vs unpadded tail chunks (notebooks/03_eval): warm up at a batch size, then evaluate batch + tail candidates
for each tail size and count the graphs dynamo compiles after the warm-up. The seed's loop (each chunk at its own size)
compiles one per new tail; the padded one none.

    rc = Recompiles(recompiles_by_tail(engine, policy, candidates, [16, 64], [3, 7, 13], "default", "eager",
                                       padded=IMPLS["optimized"], unpadded=IMPLS["baseline"]), "default", "eager")
    rc.sentence(), rc.per_tail, rc.graphs(padded=True)
    rc.frame()                             # the table of 0/1 (the notebook's appendix)

`study.count_recompiles(run, work)` runs it at the run's settings.
"""
from __future__ import annotations

import dataclasses
import math
import time

import torch

from ...kit.compiles import count_compiles, reset
from ..core.step import GreedyStep


def recompiles_by_tail(engine, policy, candidates: torch.Tensor, batch_sizes, tail_sizes, compile: str, backend: str,
                       max_depth: int = 3, *, padded, unpadded) -> list[dict]:
    """For padded and unpadded chunking (`padded`, `unpadded`: the two versions' score_candidates, study.IMPLS'):
    warm up at each batch size, then evaluate len = batch + tail candidates for each tail size and count the graphs
    compiled after the warm-up (and their seconds)."""
    rows = []
    for is_padded, fn in ((True, padded), (False, unpadded)):   # the padded version first
        for b in batch_sizes:
            reset()  # a fresh cache per case: shapes seen in another case would hide recompiles
            step = GreedyStep(engine, policy, max_depth, compile=compile, backend=backend)
            with torch.inference_mode(), count_compiles() as warm:
                t0 = time.perf_counter()
                fn(step, candidates[:b], b)
                warm_s = time.perf_counter() - t0
            for tail in tail_sizes:
                with torch.inference_mode(), count_compiles() as cc:
                    t0 = time.perf_counter()
                    fn(step, candidates[:b + tail], b)
                    sec = time.perf_counter() - t0
                rows.append(dict(padding=is_padded, batch=b, tail=tail, warmup_graphs=warm.graphs, graphs=cc.graphs,
                                 recompiles=cc.recompiles, cudagraph_recordings=cc.cudagraph_recordings,
                                 seconds=sec, warmup_seconds=warm_s))
    reset()
    return rows


@dataclasses.dataclass
class Recompiles:
    rows: list                 # recompiles_by_tail's, one per (padding, batch, tail)
    compile: str               # the mode and backend the graphs were counted with
    backend: str

    def graphs(self, padded: bool) -> int:
        """Graphs compiled after warm-up over every (batch, tail) case of one version."""
        return sum(r["graphs"] for r in self.rows if r["padding"] == padded)

    @property
    def cases(self) -> int:
        return sum(1 for r in self.rows if not r["padding"])

    @property
    def per_tail(self) -> float:
        """Graphs per new tail size after warm-up, unpadded."""
        return self.graphs(False) / max(1, self.cases)

    @property
    def seconds_per_graph(self) -> float:
        """Median seconds of an unpadded evaluation that meets a new tail, per graph it compiles (nan: none)."""
        xs = sorted(r["seconds"] / r["graphs"] for r in self.rows if not r["padding"] and r["graphs"] > 0)
        return xs[len(xs) // 2] if xs else math.nan

    def sentence(self) -> str:
        return (f"padded: {self.graphs(True)} recompiles; unpadded: {self.per_tail:g} per new tail "
                f"({self.graphs(False)} graphs over {self.cases} cases: batch sizes x tail sizes, {self.compile}/"
                f"{self.backend})")

    def frame(self):
        import pandas as pd

        cols = ["padding", "batch", "tail", "warmup_graphs", "graphs", "recompiles", "cudagraph_recordings"]
        return pd.DataFrame(self.rows)[cols]
