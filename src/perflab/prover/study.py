"""The measurements behind notebooks/03_eval and 04_early_exit, as functions (the notebooks call and plot them).

03: `knowledge_graph`, `recompiles_by_tail`, `batch_sweep`, `floor_share`, `eval_variants`, `variant_fn`,
    `time_variants`.
04: `ladder_workload`, `kg_workload`, `run_strategies`, `strategy_fn`, `graphs_per_strategy`, `time_strategies`,
    `row_step_seconds`, `step_fns`, `trace_table`, `strategy_table`. Where a step's time goes: `profiles.py`. The timed
    decisions on the claims (paired rounds): `claims.py`.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from ..kit.bench import measure, summary
from ..kit.compiles import count_compiles, reset
from ..kit.env import synchronize
from ..kit.memory import peak_memory
from ..kit.paths import user_path
from ..kit.verdicts import CONFIDENCE, Measured
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
    measurement: object        # perflab.kit.bench Measurement of one chunk's rollout (warm): the sweep's rounds at this size
    steps: int                 # steps the chunk ran (its slowest candidate)
    first_call_s: float        # the first rollout at this size (compiles included when compiled)
    peak_bytes: int            # peak memory over entry during one rollout (of the eager step under CUDA graphs)
    peak_method: str
    rounds: tuple = ()         # seconds of the chunk in each of the sweep's rounds, in order (paired across sizes)

    @property
    def ms_per_candidate(self) -> float:
        return 1e3 * self.measurement.median / self.batch

    @property
    def us_per_candidate_step(self) -> float:
        return 1e6 * self.measurement.median / (self.batch * self.steps)


def fill(candidates: torch.Tensor, b: int) -> torch.Tensor:
    """b candidates: the given ones, repeated."""
    return candidates.repeat((b + len(candidates) - 1) // len(candidates), 1)[:b]


def _measurement(times: list, *, label: str, sub_label: str, description: str, stmt: str, device) -> Measurement:
    """A torch.utils.benchmark Measurement of single-call times measured here (one call per block)."""
    spec = TaskSpec(stmt=stmt, setup="", global_setup="", label=label, sub_label=sub_label, description=description,
                    env=str(device), num_threads=torch.get_num_threads())
    return Measurement(number_per_run=1, raw_times=list(times), task_spec=spec)


SWEEP_ROUNDS = 20   # at least: 99% intervals of the worst of up to ~1,000 size pairs stay bounded (claims.py)


def batch_sweep(step: GreedyStep, candidates: torch.Tensor, batch_sizes, *, rounds_time: float,
                min_rounds: int = SWEEP_ROUNDS) -> list[SweepPoint]:
    """One chunk of B candidates (the evaluation's, repeated to fill B) per batch size: the first call (compiles
    included when compiled), steps run and peak memory; then warm calls in interleaved rounds, each round one chunk
    at every size (the order reversed every other round), until `min_rounds` rounds and `rounds_time` seconds are
    done. The rounds are paired: a shared machine's drift hits every size of a round alike, so the ratio of two
    sizes is taken round by round (`claims.sweep_claims`); each size's rounds are also its Measurement (tables)."""
    sizes = list(dict.fromkeys(batch_sizes))
    dev = step.engine.device
    # a CUDA-graph replay allocates nothing (its memory is the pool recorded with the graph): the peak of a chunk is
    # measured on the eager step of the same engine and policy, which allocates what one step needs (T4)
    probe = GreedyStep(step.engine, step.policy, step.max_depth, compile="off") if step.cudagraphs else step
    chunks, first, runs, mems = {}, {}, {}, {}
    with torch.inference_mode():
        for b in sizes:
            chunks[b] = fill(candidates, b)
            t0 = time.perf_counter()
            runs[b] = rollout_full(step, chunks[b])
            first[b] = time.perf_counter() - t0
            with peak_memory(dev) as mems[b]:
                rollout_full(probe, chunks[b])
        times: dict[int, list] = {b: [] for b in sizes}
        started = time.perf_counter()
        while len(times[sizes[0]]) < min_rounds or time.perf_counter() - started < rounds_time:
            for b in sizes if len(times[sizes[0]]) % 2 == 0 else sizes[::-1]:
                synchronize(dev)
                t0 = time.perf_counter()
                rollout_full(step, chunks[b])
                synchronize(dev)
                times[b].append(time.perf_counter() - t0)
    return [SweepPoint(b, _measurement(times[b], label="rollout of one chunk", sub_label=f"B={b}",
                                       description=f"{step.mode}/{step.backend}", stmt="rollout_full(...)", device=dev),
                       runs[b].steps_executed, first[b], mems[b].delta_bytes,
                       mems[b].method + (" (eager step)" if probe is not step else ""), tuple(times[b]))
            for b in sizes]


def floor_share(points, engine, policy, bandwidth: float, bandwidth_m, confidence: float = CONFIDENCE):
    """The floor (the step's predicted bytes over the copy bandwidth, us per candidate-step) over the best point of
    the sweep: the median copy time over the median chunk time, scaled by the bytes each moves, with the ratio's
    `confidence` interval (`Measured.ratio`: the copy's and the chunk's timings are independent sets).
    -> (Measured share, floor_us, best point)."""
    per_step = step_bytes(engine, policy, 1)
    floor_us = 1e6 * per_step / bandwidth
    best = min(points, key=lambda p: p.us_per_candidate_step)
    copy_bytes = bandwidth * bandwidth_m.median            # bytes one timed copy moves (bench.memory_bandwidth)
    share = Measured.ratio(bandwidth_m, best.measurement, confidence,
                           scale=per_step * best.batch * best.steps / copy_bytes)
    return share, floor_us, best


def eval_variants(compile: str, backend: str) -> dict:
    """The evaluation run, three ways (declared as data): name -> (compile, backend, padded tail)."""
    out = {"no compile, unpadded": ("off", backend, False)}
    if compile != "off":
        out[f"compile={compile} ({backend}), unpadded"] = (compile, backend, False)
        out[f"compile={compile} ({backend}), padded"] = (compile, backend, True)
    else:
        out["no compile, padded"] = ("off", backend, True)
    return out


def variant_fn(kg, engine, policy, queries, cs, batch: int, max_depth: int, spec: tuple):
    """One evaluation of the candidates as a variant (`eval_variants`' (compile, backend, padded tail)) runs it: a
    callable on a step of its own (compiled on its first call)."""
    compile, backend, pad = spec
    st = GreedyStep(engine, policy, max_depth, compile=compile, backend=backend)

    def fn():
        return evaluate_with_corruptions(kg, engine, policy, queries, batch=batch, pad_tail=pad, max_depth=max_depth,
                                         candidates=cs, step=st)
    return fn


def time_variants(kg, engine, policy, queries, cs, batch: int, max_depth: int, variants: dict, *,
                  min_run_time: float, max_run_time: float) -> dict:
    """Each variant from a fresh compile cache: the first evaluation (cold: compiles included) and a warm
    Measurement of the next ones. -> {name: dict(cold_s, m, ms_per_candidate)}."""
    out = {}
    for name, spec in variants.items():
        reset()
        fn = variant_fn(kg, engine, policy, queries, cs, batch, max_depth, spec)
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


def strategy_fn(w: Workload, batch: int, strategy: str, min_bucket: int):
    """One untraced run of `strategy` on the whole workload, as a callable (it ends on a host read)."""
    return lambda: rollout(w.step, w.candidates, batch, strategy, min_bucket=min_bucket)


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
    ms = {s: _measurement(t, label=w.name, sub_label=f"{len(w.candidates)} candidates, B={batch}", description=s,
                          stmt="rollout(...)", device=dev) for s, t in times.items()}
    return ms, res, reads


def row_step_seconds(w: Workload, batch: int, *, min_run_time: float, max_run_time: float):
    """Seconds per row of one step with every one of `batch` rows active (the ideal's unit cost)."""
    slots = w.step.init(fill(w.candidates, batch))
    with torch.inference_mode():
        m = measure(lambda: w.step(*slots), label=w.name, sub_label=f"one step, B={batch}", description="all active",
                    min_run_time=min_run_time, max_run_time=max_run_time, device=w.step.engine.device)
    return m.median / batch, m


def step_fns(w: Workload, batch: int, active_at_most: float = 0.1):
    """One step of `batch` slots (the workload's first candidates) with every row active, and one with at most
    `active_at_most` of them active (the same chunk stepped until enough rows are done), each as a callable
    (`GreedyStep.__call__` returns new slots: the inputs stay as they are, so every call does the same work).
    -> (busy, idle, the idle slots' active fraction)."""
    with torch.inference_mode():
        busy = w.step.init(fill(w.candidates, batch))
        idle = busy
        for _ in range(w.step.max_depth):
            if float((~idle.done).float().mean()) <= active_at_most:
                break
            idle = w.step(*idle)
        share = float((~idle.done).float().mean())

    def run(slots):
        def fn():
            with torch.inference_mode():
                return w.step(*slots)
        return fn
    return run(busy), run(idle), share


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
