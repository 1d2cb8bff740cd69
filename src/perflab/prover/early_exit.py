"""The measurements behind notebooks/04_early_exit, as functions (the notebook calls and plots them)."""
from __future__ import annotations

import dataclasses
import time

import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from ..bench import measure
from ..compiles import count_compiles, reset
from ..env import synchronize
from .data import ladder_kg, ladder_queries, seed_like_lengths
from .engine import UnificationEngine
from .rollout import STRATEGIES, RolloutResult, rollout
from .step import GreedyStep


@dataclasses.dataclass
class Workload:
    name: str
    step: GreedyStep
    candidates: torch.Tensor   # [N, 3]
    lengths: torch.Tensor | None = None  # [N] designed proof lengths (ladder), else None


def ladder_workload(n: int, max_depth: int, max_derived: int, policy_factory, device, seed: int = 0,
                    compile: str = "off") -> Workload:
    """n ladder queries whose proofs take seed-like lengths (mean ~5, max = max_depth) whatever the policy picks."""
    g = torch.Generator().manual_seed(seed)
    kg = ladder_kg(levels=max_depth, n_pairs=64, seed=seed)
    lengths = seed_like_lengths(n, max_depth, g)
    engine = UnificationEngine(kg, max_derived=max_derived, end_action=False, device=device)
    step = GreedyStep(engine, policy_factory(kg), max_depth, compile=compile)
    return Workload("ladder (seed-like lengths)", step, ladder_queries(kg, lengths, g).to(device), lengths)


def run_strategies(w: Workload, batch: int, min_bucket: int, strategies=STRATEGIES) -> dict[str, RolloutResult]:
    """One traced run of each strategy. A compiled step starts from a fresh cache: two workloads with
    five buckets each would pass dynamo's limit of 8 graphs per code object, and it would run eager."""
    if w.step.mode != "off":
        reset()
    with torch.inference_mode():
        return {s: rollout(w.step, w.candidates, batch, s, min_bucket=min_bucket, trace=[]) for s in strategies}


def agreement(results: dict[str, RolloutResult]) -> dict[str, bool]:
    """Does every strategy give every candidate the full loop's steps, outcome and score (float32 rounding
    of rows computed in batches of another size allowed: 1e-5), each written exactly once?"""
    ref = results["full"]
    out = {}
    for name, r in results.items():
        out[name] = (torch.equal(r.steps.cpu(), ref.steps.cpu()) and torch.equal(r.proven.cpu(), ref.proven.cpu())
                     and torch.allclose(r.score.cpu(), ref.score.cpu(), rtol=1e-5, atol=1e-5)
                     and bool((r.records == 1).all()))
    return out


def graphs_per_strategy(w: Workload, batch: int, min_bucket: int, mode: str) -> dict[str, int]:
    """Graphs dynamo compiles for each strategy in turn, in one fresh cache (a later strategy reuses the
    graphs of an earlier one with the same shapes). compact runs eager: 0 by construction."""
    step = GreedyStep(w.step.engine, w.step.policy, w.step.max_depth, compile=mode)
    reset()
    out = {}
    for s in STRATEGIES:
        with torch.inference_mode(), count_compiles() as cc:
            rollout(step, w.candidates, batch, s, min_bucket=min_bucket)
        out[s] = cc.graphs
    reset()
    return out


def time_strategies(w: Workload, batch: int, min_bucket: int, rounds: int, strategies=STRATEGIES):
    """Wall time of each strategy on the whole workload: one traced warm-up run (its results and counts
    are returned), then `rounds` timed rounds with the strategies interleaved, so that each sees the same
    machine conditions (a shared CPU drifts by tens of percent within a minute, more than some of the
    differences measured here). -> ({strategy: Measurement}, {strategy: RolloutResult}).
    The Measurements are built from the raw times like perflab.bench.measure_cuda_events does: every
    rollout reads a value on the host at each step, and the device is synchronized after each run."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    res = run_strategies(w, batch, min_bucket, strategies)
    dev = w.step.engine.device
    times: dict[str, list] = {s: [] for s in strategies}
    with torch.inference_mode():
        for _ in range(rounds):
            for s in strategies:
                t0 = time.perf_counter()
                rollout(w.step, w.candidates, batch, s, min_bucket=min_bucket)
                synchronize(dev)
                times[s].append(time.perf_counter() - t0)
    spec = dict(stmt="rollout(...)", setup="", global_setup="", label=w.name, env=str(dev),
                sub_label=f"{len(w.candidates)} candidates, B={batch}", num_threads=torch.get_num_threads())
    ms = {s: Measurement(number_per_run=1, raw_times=t, task_spec=TaskSpec(description=s, **spec))
          for s, t in times.items()}
    return ms, res


def row_step_seconds(w: Workload, batch: int, *, min_run_time: float, max_run_time: float):
    """Seconds per row of one step with every one of `batch` rows active (the ideal's unit cost)."""
    chunk = w.candidates[:batch]
    if len(chunk) < batch:
        chunk = chunk.repeat((batch + len(chunk) - 1) // len(chunk), 1)[:batch]
    slots = w.step.init(chunk)
    with torch.inference_mode():
        m = measure(lambda: w.step(*slots), label=w.name, sub_label=f"one step, B={batch}", description="all active",
                    min_run_time=min_run_time, max_run_time=max_run_time, device=w.step.engine.device)
    return m.median / batch, m


def trace_table(results: dict[str, RolloutResult]):
    """Per step of each strategy: seconds, rows computed, rows active, active fraction of the batch."""
    import pandas as pd

    rows = []
    for s, r in results.items():
        for i, (sec, computed, active) in enumerate(r.trace):
            rows.append(dict(strategy=s, step=i, seconds=sec, computed=computed, active=active,
                             active_fraction=active / r.batch))
    return pd.DataFrame(rows)
