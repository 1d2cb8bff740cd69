"""The measurements behind notebooks/03_eval and 04_early_exit, as functions (the notebooks call and plot them).

03: `knowledge_graph`, `recompiles_by_tail`, `batch_sweep`, `floor_share`, `eval_variants`, `time_variants`.
04: `ladder_workload`, `kg_workload`, `run_strategies`, `graphs_per_strategy`, `time_strategies`,
    `row_step_seconds`, `trace_table`, `strategy_table`. Where a step's time goes: `profiles.py`.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from ..bench import measure, summary
from ..compiles import count_compiles, reset
from ..env import synchronize
from ..memory import peak_memory
from ..paths import user_path
from ..verdicts import Measured
from . import baseline, optimized
from .batching import step_bytes
from .data import ladder_kg, ladder_queries, seed_like_lengths, training_queries
from .engine import UnificationEngine
from .evaluate import evaluate_with_corruptions
from .links.predict import test_queries
from .links.ranking import corruptions
from .policy import make_policy, train_policy
from .rollout import STRATEGIES, RolloutResult, rollout, rollout_full
from .step import GreedyStep


def knowledge_graph(kg: str, n_families: int, seed: int, max_derived: int = 16, device="cpu"):
    """The graph the notebooks' `kg` parameter names (`datasets.load_graph`): "family" (the seeded synthetic
    graph), a benchmark (kinship, nations, umls: rules mined from train, at most max_derived - 1 per head,
    the successors a ground goal can offer), or a folder (a relative path is read from where the user ran
    the command). -> (KnowledgeGraph, datasets.Benchmark or None: names and mined rules of a benchmark)."""
    from .links.datasets import BENCHMARKS, load_graph
    from .links.mining import MiningConfig

    spec = kg if kg in ("", "family", *BENCHMARKS) else str(user_path(kg))
    return load_graph(spec, n_families=n_families, seed=seed, rules=MiningConfig(max_rules_per_head=max_derived - 1),
                      device=device)


def graph_label(kg: str) -> str:
    """A short name for the graph in tables and workload names: the parameter, or a folder's last part."""
    from .links.datasets import BENCHMARKS

    return kg if kg in ("family", *BENCHMARKS) else Path(kg).name


def bfs_depth(kg: str, max_depth: int) -> int:
    """Depth of the exhaustive provability check: max_depth on the family graph; at most 3 elsewhere (real
    graphs branch too much: Nations' frontier passes 200,000 states at depth 6)."""
    return max_depth if kg == "family" else min(max_depth, 3)


# ---- 03: recompiles, batch size, where a step's time goes, the evaluation run -------------------

def recompiles_by_tail(engine, policy, candidates: torch.Tensor, batch_sizes, tail_sizes, compile: str, backend: str,
                       max_depth: int = 3) -> list[dict]:
    """For padded and unpadded chunking: warm up at each batch size, then evaluate len = batch + tail
    candidates for each tail size and count the graphs compiled after the warm-up (and their seconds)."""
    rows = []
    for padded in (True, False):
        fn = optimized.score_candidates if padded else baseline.score_candidates
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
                rows.append(dict(padding=padded, batch=b, tail=tail, warmup_graphs=warm.graphs, graphs=cc.graphs,
                                 recompiles=cc.recompiles, cudagraph_recordings=cc.cudagraph_recordings,
                                 seconds=sec, warmup_seconds=warm_s))
    reset()
    return rows


@dataclasses.dataclass
class SweepPoint:
    batch: int
    measurement: object        # perflab.bench Measurement of one chunk's rollout (warm)
    steps: int                 # steps the chunk ran (its slowest candidate)
    first_call_s: float        # the first rollout at this size (compiles included when compiled)
    peak_bytes: int            # peak memory over entry during one rollout
    peak_method: str

    @property
    def ms_per_candidate(self) -> float:
        return 1e3 * self.measurement.median / self.batch

    @property
    def us_per_candidate_step(self) -> float:
        return 1e6 * self.measurement.median / (self.batch * self.steps)


def fill(candidates: torch.Tensor, b: int) -> torch.Tensor:
    """b candidates: the given ones, repeated."""
    return candidates.repeat((b + len(candidates) - 1) // len(candidates), 1)[:b]


def batch_sweep(step: GreedyStep, candidates: torch.Tensor, batch_sizes, *, min_run_time: float,
                max_run_time: float) -> list[SweepPoint]:
    """One chunk of B candidates (the evaluation's, repeated to fill B) per batch size: first-call time,
    warm time (perflab.bench.measure), steps run and peak memory."""
    out = []
    for b in batch_sizes:
        chunk = fill(candidates, b)
        with torch.inference_mode():
            t0 = time.perf_counter()
            res = rollout_full(step, chunk)
            first = time.perf_counter() - t0
            with peak_memory(step.engine.device) as mem:
                rollout_full(step, chunk)
            m = measure(lambda chunk=chunk: rollout_full(step, chunk), label="rollout of one chunk", sub_label=f"B={b}",
                        description=f"{step.mode}/{step.backend}", min_run_time=min_run_time,
                        max_run_time=max_run_time, warmup=0, device=step.engine.device)
        out.append(SweepPoint(b, m, res.steps_executed, first, mem.delta_bytes, mem.method))
    return out


def floor_share(points, engine, policy, bandwidth: float):
    """The floor (the step's predicted bytes over the copy bandwidth, us per candidate-step) over the best
    measured point of the sweep, with its p20-p80 interval. -> (Measured share, floor_us, best point)."""
    floor_us = 1e6 * step_bytes(engine, policy, 1) / bandwidth
    best = min(points, key=lambda p: p.us_per_candidate_step)
    s, per = summary(best.measurement), 1e6 / (best.batch * best.steps)
    v = floor_us / best.us_per_candidate_step
    return Measured(v, min(v, floor_us / (s["p80_s"] * per)), max(v, floor_us / (s["p20_s"] * per))), floor_us, best


def eval_variants(compile: str, backend: str) -> dict:
    """The evaluation run, three ways (declared as data): name -> (compile, backend, padded tail)."""
    out = {"no compile, unpadded": ("off", backend, False)}
    if compile != "off":
        out[f"compile={compile} ({backend}), unpadded"] = (compile, backend, False)
        out[f"compile={compile} ({backend}), padded"] = (compile, backend, True)
    else:
        out["no compile, padded"] = ("off", backend, True)
    return out


def time_variants(kg, engine, policy, queries, cs, batch: int, max_depth: int, variants: dict, *,
                  min_run_time: float, max_run_time: float) -> dict:
    """Each variant from a fresh compile cache: the first evaluation (cold: compiles included) and a warm
    Measurement of the next ones. -> {name: dict(cold_s, m, ms_per_candidate)}."""
    out = {}
    for name, (compile, backend, pad) in variants.items():
        reset()
        st = GreedyStep(engine, policy, max_depth, compile=compile, backend=backend)

        def fn(st=st, pad=pad):
            return evaluate_with_corruptions(kg, engine, policy, queries, batch=batch, pad_tail=pad,
                                             max_depth=max_depth, candidates=cs, step=st)
        t0 = time.perf_counter()
        fn()
        cold = time.perf_counter() - t0
        m = measure(fn, label="03_eval run", sub_label=f"{len(cs)} candidates, B={batch}", description=name,
                    min_run_time=min_run_time, max_run_time=max_run_time, warmup=0, device=engine.device)
        out[name] = dict(cold_s=cold, m=m, ms_per_candidate=1e3 * m.median / len(cs))
    reset()
    return out


# ---- 04: early exit ------------------------------------------------------------------------

@dataclasses.dataclass
class Workload:
    name: str
    step: GreedyStep
    candidates: torch.Tensor   # [N, 3]
    lengths: torch.Tensor | None = None  # [N] designed proof lengths (ladder), else None
    graph: str = ""            # the graph's short name (study 3's workload: the `kg` parameter)

    def head(self, n: int) -> Workload:
        return Workload(self.name, self.step, self.candidates[:n], None if self.lengths is None else self.lengths[:n],
                        self.graph)


def ladder_workload(n: int, max_depth: int, max_derived: int, device, seed: int = 0, compile: str = "off",
                    backend: str = "inductor") -> Workload:
    """n ladder queries whose proofs take seed-like lengths (mean ~5, max = max_depth) whatever the policy picks."""
    g = torch.Generator().manual_seed(seed)
    kg = ladder_kg(levels=max_depth, n_pairs=64, seed=seed)
    lengths = seed_like_lengths(n, max_depth, g)
    engine = UnificationEngine(kg, max_derived=max_derived, end_action=False, device=device)
    step = GreedyStep(engine, make_policy(kg, seed=seed, device=device), max_depth, compile=compile, backend=backend)
    return Workload("ladder (seed-like lengths)", step, ladder_queries(kg, lengths, g).to(device), lengths)


def kg_workload(cfg, device):
    """Study 3's candidates on the graph `cfg.kg` names: its first test queries and their filtered
    corruptions, scored by a policy trained for a few seconds. -> (Workload, CandidateSet)."""
    kg, _ = knowledge_graph(cfg.kg, cfg.n_families, cfg.seed, cfg.max_derived, device)
    engine = UnificationEngine(kg, max_derived=cfg.max_derived, device=device)
    policy = make_policy(kg, seed=cfg.seed, device=device)
    train_policy(policy, engine, training_queries(kg), updates=cfg.train_updates, batch=64,
                 max_depth=min(cfg.max_depth, 10), seed=cfg.seed)
    cs = corruptions(kg, test_queries(kg, cfg.n_queries), cfg.n_corruptions, "both", seed=cfg.seed)
    step = GreedyStep(engine, policy, cfg.max_depth, compile=cfg.compile, backend=cfg.backend)
    label = graph_label(cfg.kg)
    return Workload(f"{label} (study 3 candidates)", step, cs.flat().to(device), graph=label), cs


def run_strategies(w: Workload, batch: int, min_bucket: int, strategies=STRATEGIES, trace: bool = True
                   ) -> dict[str, RolloutResult]:
    """One run of each strategy (traced: a host read every step)."""
    return {s: rollout(w.step, w.candidates, batch, s, min_bucket=min_bucket, trace=[] if trace else None)
            for s in strategies}


def graphs_per_strategy(w: Workload, batch: int, min_bucket: int) -> dict[str, int]:
    """Graphs dynamo compiles for each strategy's loop body, in one fresh cache (`w.step`'s mode and
    backend; nothing when compile is off)."""
    step = GreedyStep(w.step.engine, w.step.policy, w.step.max_depth, compile=w.step.mode, backend=w.step.backend)
    reset()
    out = {}
    for s in STRATEGIES:
        with count_compiles() as cc:
            rollout(step, w.candidates, batch, s, min_bucket=min_bucket)
        out[s] = cc.graphs
    reset()
    return out


def time_strategies(w: Workload, batch: int, min_bucket: int, rounds: int, strategies=STRATEGIES):
    """Wall time of each strategy on the whole workload: one traced warm-up run (its results and counts
    are returned), then `rounds` timed rounds with the strategies interleaved, so that each sees the same
    machine conditions (a shared CPU drifts by tens of percent within a minute). Each run ends with a
    device synchronize. -> ({strategy: Measurement}, {strategy: traced RolloutResult}, {strategy: host
    reads per step of the timed, untraced runs})."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    res = run_strategies(w, batch, min_bucket, strategies)
    dev = w.step.engine.device
    times: dict[str, list] = {s: [] for s in strategies}
    reads = {}
    for _ in range(rounds):
        for s in strategies:
            t0 = time.perf_counter()
            r = rollout(w.step, w.candidates, batch, s, min_bucket=min_bucket)
            synchronize(dev)
            times[s].append(time.perf_counter() - t0)
            reads[s] = r.host_reads / max(1, r.steps_executed)
    spec = dict(stmt="rollout(...)", setup="", global_setup="", label=w.name, env=str(dev),
                sub_label=f"{len(w.candidates)} candidates, B={batch}", num_threads=torch.get_num_threads())
    ms = {s: Measurement(number_per_run=1, raw_times=t, task_spec=TaskSpec(description=s, **spec))
          for s, t in times.items()}
    return ms, res, reads


def row_step_seconds(w: Workload, batch: int, *, min_run_time: float, max_run_time: float):
    """Seconds per row of one step with every one of `batch` rows active (the ideal's unit cost)."""
    slots = w.step.init(fill(w.candidates, batch))
    with torch.inference_mode():
        m = measure(lambda: w.step(*slots), label=w.name, sub_label=f"one step, B={batch}", description="all active",
                    min_run_time=min_run_time, max_run_time=max_run_time, device=w.step.engine.device)
    return m.median / batch, m


def trace_table(results: dict[str, RolloutResult]):
    """Per step of each strategy: seconds, rows computed, rows active, active fraction of the batch."""
    import pandas as pd

    return pd.DataFrame([dict(strategy=s, step=i, seconds=sec, computed=c, active=a, active_fraction=a / r.batch)
                         for s, r in results.items() for i, (sec, c, a) in enumerate(r.trace)])


def strategy_table(w: Workload, ms: dict, res: dict, ideal_s: float, launches: dict, reads: dict):
    """Per strategy: median and spread, vs full, share of the ideal, steps, time, launches and host reads
    per step (`launches`: profiles.per_step_counts; `reads`: time_strategies')."""
    import pandas as pd

    n = len(w.candidates)
    rows = []
    for s, m in ms.items():
        sm, steps = summary(m), max(1, res[s].steps_executed)
        rows.append(dict(strategy=s, median_s=round(sm["median_s"], 3), iqr_s=round(sm["iqr_s"], 3),
                         ms_per_candidate=round(1e3 * sm["median_s"] / n, 3),
                         vs_full=round(ms["full"].median / m.median, 2), of_ideal=round(ideal_s / m.median, 2),
                         steps=res[s].steps_executed, ms_per_step=round(1e3 * m.median / steps, 2),
                         launches_per_step=round(launches[s]["launches_per_step"], 1),
                         host_reads_per_step=round(reads[s], 2)))
    return pd.DataFrame(rows).set_index("strategy")
