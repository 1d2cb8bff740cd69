"""Steps of study 3 for `perflab diagnose` (and `perflab.kit.diagnose`): one evaluation call of a version's
`score_candidates`, as the seed's evaluation makes them: each call scores another query set's candidates, whose
number varies (filtered corruptions, another mode), so each call's tail chunk has a size of its own.

    perflab diagnose --setup perflab.prover.evaluation.diagnosis:baseline_step --library perflab.prover.core
    diagnose(setup=lambda: baseline_step(run), library_modules=("perflab.prover.core",))

The step compiles its proof step (`compile="default"`, `backend="eager"`: notebook 03's CPU defaults: dynamo's
graphs without inductor's code generation) on the synthetic family graph; call n scores `batch + tails[n]`
candidates in chunks of `batch` (64): the baseline leaves the tail at its own size, a new shape and a recompile for
every new tail (what cost the seed 20-30 s per batch size under CUDA graphs), the optimized version pads it to the
batch. `--library perflab.prover.core`: the engine library counted as library code, so a finding names the line of
the version that calls it (evaluation/baseline.py), not the library's.
`REPORT`: seed 001's findings, each with the kind and line diagnose should name (docs/diagnose.md).
"""
from __future__ import annotations

import itertools

import torch

from ...kit.env import pick_device
from ..core.datasets import knowledge_graph, test_queries
from ..core.engine import UnificationEngine
from ..core.policy import make_policy
from ..core.ranking import corruptions
from ..core.step import GreedyStep
from . import baseline, optimized

TAILS = tuple(range(3, 60, 2))   # a tail of its own for each call (29 before they repeat)


def _step(score, run, device, batch: int, compile: str, backend: str, n_queries: int, n_corruptions: int, seed: int):
    cfg = run.cfg if run is not None else None
    dev = pick_device(run.device if run is not None else device or "auto")
    max_derived, max_depth = (cfg.max_derived, cfg.max_depth) if cfg is not None else (16, 20)
    kg, _ = knowledge_graph("family", 6, seed, max_derived, dev)
    engine = UnificationEngine(kg, max_derived=max_derived, device=dev)
    policy = make_policy(kg, seed=seed, device=dev)
    cs = corruptions(kg, test_queries(kg, n_queries), n_corruptions, "both", seed=seed)
    flat = cs.flat().to(dev)
    flat = flat.repeat((batch + max(TAILS)) // len(flat) + 1, 1)   # enough candidates for the longest call
    step = GreedyStep(engine, policy, max_depth, compile=compile, backend=backend)
    tails = itertools.cycle(TAILS)

    def evaluate():
        """Score the next query set's candidates (batch + its tail)."""
        with torch.inference_mode():
            return score(step, flat[:batch + next(tails)], batch)
    return evaluate


def baseline_step(run=None, *, device=None, batch: int = 64, compile: str = "default", backend: str = "eager",
                  n_queries: int = 24, n_corruptions: int = 24, seed: int = 0):
    """One call of the seed's loop (`baseline.score_candidates`): the tail chunk unpadded."""
    return _step(baseline.score_candidates, run, device, batch, compile, backend, n_queries, n_corruptions, seed)


def optimized_step(run=None, *, device=None, batch: int = 64, compile: str = "default", backend: str = "eager",
                   n_queries: int = 24, n_corruptions: int = 24, seed: int = 0):
    """One call of the fixed loop (`optimized.score_candidates`): every chunk padded to the batch."""
    return _step(optimized.score_candidates, run, device, batch, compile, backend, n_queries, n_corruptions, seed)


# seed 001's findings (studies 3 and 4): the kind diagnose should name, and where ("file:text of the line")
REPORT = [
    dict(key="oom", words="The original code tried to process all 10,100 candidates in a single batch ... Memory "
                          "requirement: ~12 GB (exceeds 8 GB GPU)",
         mechanism=False, kind="memory", where=None,
         why="memory against the device's: diagnose names memory where a step's peak reaches 25% of the device's "
             "memory, and the report's batch was too big for an 8 GB GPU, not for this host; study 3's measured "
             "memory model sizes the batch, and its fixed loop halves the batch on out-of-memory"),
    dict(key="recompile", words="torch.compile(mode='reduce-overhead') uses CUDA graphs which are size-specific. Each "
                                "unique batch size triggers a full recompilation.",
         mechanism=True, kind="recompile", where="prover/evaluation/baseline.py:out = [rollout_full(step, candidates"),
    dict(key="batch_1024", words="Batch size 1024: 3.450s, 3.37 ms/query <- 8x slower per query! ... Exceeds L2 cache, "
                                 "causes memory thrashing",
         mechanism=False, kind=None, where=None,
         why="a batch-size sweep's finding (study 3 sweeps it), not a pattern of one step: diagnose times the step at "
             "the size it is given"),
    dict(key="early_exit", words="Each step takes ~42-45ms regardless of how many queries are done! ... processes ALL B "
                                 "queries on every step",
         mechanism=False, kind=None, where=None,
         why="the algorithm: finished rows are computed because the loop keeps them (fixed shapes); no counter tells a "
             "finished row's work from a live one's. Study 4 measures it (rows computed against rows active)"),
]
