"""What notebooks/03_eval calls, in its order (each takes the run: `run.cfg`, `run.device`, `run.log`; those that
measure log what they measured and show it):

    found = study.Findings(work=study.workload(run))       the graph, the engine, the policy, the candidates, the batch
    checks.correctness_03(...), checks.ranks_across_batches(...)    the engine against the oracle, sync-free
    found.recompiles = study.count_recompiles(run, found.work)      padded vs unpadded tails (`recompiles.py`)
    found.sweep = study.sweep(run, found.work, step)                the batch sweep (`sweep.py`): paired rounds
    fig = study.sweep_figure(run, found)                            the card's figure: the judged ratios on it
    found.memory = study.memory(run, found.work)                    the measured memory model
    found.profile = study.step_cost(run, found.work, step)          where a step's time goes (`profiles.py`), the copy bandwidth
    found.runs = study.evaluation_runs(run, found.work)             the evaluation three ways, cold and warm
    found.speed = study.decide_speed(run, found.work, found.runs)   speed_5x in paired rounds (on its setup: a GPU)
    found.floor = study.floor(run, found)                           the fraction of the bandwidth floor
    study.evidence(run, found)                                      each claim's Evidence, for card.judge

IMPLS names the versions, baseline first: the seed's loop, each chunk at its own size (a new shape, a recompile, for
every new tail), and the fixed one, every chunk padded to the batch. Both score candidates [N, 3] with a GreedyStep.
"""
from __future__ import annotations

import collections
import dataclasses
import time

import torch

from ...kit.bench import fmt, measure, memory_bandwidth, show
from ...kit.claims import Evidence
from ...kit.compiles import reset
from ...kit.figures import color
from ...kit.formatting import fmt_interval as interval
from ...kit.verdicts import CONFIDENCE, Decision, Measured, decide_speedup
from ...kit.versions import Variant, Versions
from ..core.batching import cache_bytes, choose_batch, measure_memory_model, resolve_batch, step_bytes
from ..core.datasets import graph_label, test_queries
from ..core.prepared import OnPrepared, prepare
from ..core.ranking import CandidateSet, corruptions
from ..core.step import GreedyStep
from . import baseline, optimized
from . import sweep as sweeps
from .claims import CLAIMS
from .evaluate import evaluate_with_corruptions
from .profiles import StepProfile, step_profile
from .recompiles import Recompiles, recompiles_by_tail

IMPLS = Versions({"baseline": baseline.score_candidates, "optimized": optimized.score_candidates})  # baseline first
# looked up at import: a misspelt key fails before anything is timed
SPEED_5X, FLAT, FLAT_STEP = CLAIMS["speed_5x"], CLAIMS["flat"], CLAIMS["flat_step"]
SEED_ROWS, SEED_S = 10_100, 120   # the seed's single batch: 100 x (1 + 100) candidates, 120 successor slots


def bfs_depth(kg: str, max_depth: int) -> int:
    """Depth of the exhaustive provability check: max_depth on the family graph; at most 3 elsewhere (real
    graphs branch too much: Nations' frontier passes 200,000 states at depth 6)."""
    return max_depth if kg == "family" else min(max_depth, 3)


# ---- what every measurement runs on ---------------------------------------------------------------------------

@dataclasses.dataclass
class Workload(OnPrepared):    # prepared: the graph, the engine, the trained policy (.kg, .engine, .policy)
    queries: torch.Tensor      # [Q, 3] the test queries evaluated
    cs: CandidateSet           # each query and its corruptions
    flat: torch.Tensor         # [N, 3] the candidates, on the device
    batch: int                 # the run's batch (batch=0: the memory model's pick)

    def step_bytes(self, batch: int, **kw) -> int:
        return step_bytes(self.engine, self.policy, batch, **kw)


def workload(run) -> Workload:
    """The run's graph, engine and trained policy (`core.prepared`), its test queries with their corruptions, and
    its batch, resolved once (`batching.resolve_batch`: 0 lets the measured memory model pick); printed."""
    cfg, device = run.cfg, run.device
    p = prepare(run)
    queries = test_queries(p.kg, cfg.n_queries)  # n_queries=0: the whole test split
    cs = corruptions(p.kg, queries, cfg.n_corruptions, cfg.mode, seed=cfg.seed)
    flat = cs.flat().to(device)
    batch = resolve_batch(cfg.batch, p.engine, p.policy, flat, cfg.max_depth)
    print("\n".join(p.lines()))
    print(f"{len(queries)} queries x (1 + {cfg.n_corruptions}) '{cfg.mode}' candidates = {len(cs)}; batch {batch}")
    return Workload(p, queries, cs, flat, batch)


def oracle_line(bfs: dict) -> str:
    """'oracle: 24 of 24 test queries provable; shortest proofs {1: 8, 2: 5} (depth: queries)' (`checks`' bfs info)."""
    depths = dict(sorted(collections.Counter(bfs["depth"].tolist()).items()))
    return (f"oracle: {bfs['provable']} of {bfs['queries']} test queries provable; shortest proofs {depths} "
            "(depth: queries)")


def log_metrics(run, work: Workload, ev) -> None:
    """The greedy evaluation's MRR and Hits@k (`ev`: an EvalResult) and what it proved, printed (rounded: the
    checked cell's) and logged."""
    cfg = run.cfg
    print("metrics:", {k: round(v, 3) for k, v in ev.metrics.items()})
    print(f"positives proved by the greedy policy: {int(ev.proven[:, 0].sum())} of {len(work.queries)}; "
          f"negatives proved: {int(ev.proven[:, 1:].sum())}")
    for k, v in ev.metrics.items():
        run.log.value(k, round(v, 4), mode=cfg.mode, n_queries=len(work.queries), n_corruptions=cfg.n_corruptions)


@dataclasses.dataclass
class Findings:
    """What the notebook measures, one field per measuring function, filled in as it runs: `evidence` reads only
    this, so a claim is judged on the very numbers the cells above it showed."""
    work: Workload | None = None           # workload
    recompiles: Recompiles | None = None   # count_recompiles
    sweep: Sweep | None = None             # sweep
    memory: Memory | None = None           # memory
    profile: StepCost | None = None        # step_cost
    runs: Runs | None = None               # evaluation_runs
    speed: Decision | None = None          # decide_speed (None: not this claim's setup)
    floor: Floor | None = None             # floor


# ---- recompiles: padded vs unpadded tail chunks (`recompiles.py`) ----------------------------------------------

def count_recompiles(run, work: Workload) -> Recompiles:
    """`recompiles_by_tail` at the first two swept batch sizes and every tail size, with the run's compile mode and
    backend (`default` on the eager backend when compile is off: the same graphs, no code generation); logged, its
    sentence printed (the table: `Recompiles.frame`, the appendix)."""
    cfg = run.cfg
    mode, backend = (cfg.compile, cfg.backend) if cfg.compile != "off" else ("default", "eager")
    rc = Recompiles(recompiles_by_tail(work.engine, work.policy, work.flat, cfg.batch_sizes[:2], cfg.tail_sizes,
                                       mode, backend, padded=IMPLS["optimized"], unpadded=IMPLS["baseline"]),
                    mode, backend)
    run.log.value("graphs compiled after warm-up, unpadded", rc.graphs(False), unit="graphs")
    run.log.value("seconds of an evaluation that compiles one new graph", rc.seconds_per_graph, unit="s",
                  compile=mode, backend=backend)
    print(rc.sentence())
    return rc


# ---- the batch sweep ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Sweep:
    points: list               # sweep.SweepPoint per batch size
    caches: dict               # cache level -> bytes (`batching.cache_bytes`)
    step_bytes: dict           # batch -> a step's predicted bytes

    @property
    def l2(self) -> int:
        return self.caches.get("L2", 0)


def sweep(run, work: Workload, step: GreedyStep) -> Sweep:
    """`sweep.batch_sweep` at the run's batch sizes (at least 20 paired rounds and verdict_time seconds), logged,
    shown as a table (mean costs with their 99% intervals)."""
    cfg = run.cfg
    points = sweeps.batch_sweep(step, work.flat, cfg.batch_sizes, rounds_time=cfg.verdict_time)
    for p in points:
        run.log.measurement(p.measurement, impl=f"{cfg.compile}/{cfg.backend}", batch=p.batch, steps=p.steps,
                            ms_per_candidate=p.ms_per_candidate, first_call_s=p.first_call_s, peak_bytes=p.peak_bytes)
    sw = Sweep(points, cache_bytes(run.device), {p.batch: work.step_bytes(p.batch) for p in points})
    show(sweeps.table(points, sw.step_bytes.get))
    print("caches:", {k: f"{v / 2**20:g} MiB" for k, v in sw.caches.items()}, f"| peak memory: {points[0].peak_method}")
    return sw


def sweep_figure(run, found: Findings):
    """The card's figure: the sweep's costs per candidate and per candidate-step against the batch, with the largest
    rise labelled as the flat and flat_step claims judge it (their rule and verdict, by the claims' own rule). The
    seed's GPU figures are not drawn: another engine (S=120) on another machine."""
    cfg, sw = run.cfg, found.sweep
    ev = sweeps.sweep_claims(sw.points, sw.l2, sw.step_bytes.get)
    notes = {c.key: f"target {c.rule_text}: {c.verdict(ev[c.key].measured, cfg, run.device.type)}"
             for c in (FLAT, FLAT_STEP)}
    return sweeps.figure(sw.points, notes, color=color("optimized", IMPLS),
                         label=f"a padded chunk, {cfg.compile}/{cfg.backend}, warm",
                         title=f"03_eval on {run.device.type} (kg={graph_label(cfg.kg)}, S={found.work.engine.S}); "
                               "the seed's GPU figures\n(S=120, another engine) are not comparable, not drawn")


# ---- the memory model -------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Memory:
    model: object              # batching.MemoryModel: bytes per row measured at two batch sizes
    seed_gib: float            # the seed's 10,100 rows at its S=120, predicted
    here_gib: float            # the same rows at this run's S
    run_batch: int             # what batch=0 would run for this run's candidates


def memory(run, work: Workload) -> Memory:
    """The measured memory model (the peak of one eager step at two batch sizes: bytes per row), the largest batch
    that fits, and the seed's single batch of 10,100 rows predicted at this run's S and at the seed's S=120; logged
    and printed."""
    cfg, engine, policy = run.cfg, work.engine, work.policy
    mm = measure_memory_model(engine, policy, work.flat, probes=(64, 256), max_depth=cfg.max_depth)
    at_seed = mm.bytes_per_row * work.step_bytes(1, max_derived=SEED_S) / work.step_bytes(1)
    m = Memory(mm, SEED_ROWS * at_seed / 2**30, mm.predict(SEED_ROWS) / 2**30, choose_batch(mm, len(work.cs)))
    run.log.value("bytes per row (memory model)", mm.bytes_per_row, unit="B", method=mm.method)
    run.log.value("largest batch that fits", mm.max_batch(), unit="candidates")
    run.log.value("single batch of 10100 candidates at S=120, predicted", m.seed_gib * 2**30, unit="B")
    print(f"measured {mm.bytes_per_row / 1024:.1f} KiB per row (predicted {work.step_bytes(1) / 1024:.1f}: "
          f"{mm.bytes_per_row / work.step_bytes(1):.2f}x), method {mm.method}; free {mm.free_bytes / 2**30:.1f} GiB -> "
          f"the largest batch that fits in {mm.budget_fraction:.0%}: {mm.max_batch():,}; this run's {len(work.cs)} "
          f"candidates -> batch {m.run_batch}")
    if mm.bytes_per_row > work.step_bytes(1):
        print("the measured slope picks the batch; the prediction (batching.step_bytes) counts the step's largest "
              "intermediates only, not every temporary live at the peak nor the allocator's rounding: it runs under")
    print(f"the seed's 10,100 rows in one batch: {m.here_gib:.2f} GiB predicted at S={engine.S}, {m.seed_gib:.2f} GiB "
          f"at the seed's S={SEED_S}")
    return m


# ---- where a step's time goes -----------------------------------------------------------------------------------

@dataclasses.dataclass
class StepCost:
    profile: StepProfile       # one chunk at the run's batch under torch.profiler, count_launches, timed
    bandwidth: float           # the device's copy bandwidth, B/s (bench.memory_bandwidth)
    bandwidth_m: object        # its Measurement


def step_cost(run, work: Workload, step: GreedyStep) -> StepCost:
    """Where one step goes at the run's batch (`profiles.step_profile`) and the device's copy bandwidth; logged, one
    sentence printed (the profiler's table: `StepCost.profile.table`, the appendix)."""
    cfg, dev = run.cfg, run.device
    prof = step_profile(step, work.flat, work.batch, min_run_time=cfg.min_run_time, max_run_time=cfg.max_run_time)
    bw, bw_m = memory_bandwidth(dev, max_run_time=cfg.max_run_time)
    run.log.value("launches per step", prof.launches, unit="launches", batch=work.batch, what=dev.type)
    run.log.value("host reads per step", prof.host_reads, unit="reads", batch=work.batch)
    run.log.measurement(prof.measurement, impl=f"{cfg.compile}/{cfg.backend}", batch=work.batch, steps=prof.steps)
    kind = "device kernels" if dev.type != "cpu" else f"aten ops + graph calls, {prof.views:.1f} of them views"
    print(f"per step at B={work.batch} ({cfg.compile}/{cfg.backend}, {prof.steps} steps): {prof.launches:.1f} launches "
          f"({kind}), {prof.host_reads:.2f} host reads, {prof.ms_per_step:.3f} ms (median); bytes per step "
          f"{prof.bytes_per_step / 2**20:.1f} MiB (predicted) -> {prof.bandwidth() / 1e9:.2f} GB/s against a copy "
          f"bandwidth of {bw / 1e9:.1f} GB/s ({fmt(bw_m)})")
    return StepCost(prof, bw, bw_m)


# ---- the evaluation run, three ways -----------------------------------------------------------------------------

def eval_variants(compile: str, backend: str) -> dict[str, Variant]:
    """The evaluation run, three ways (declared as data): name -> a kit Variant, a version of IMPLS with the compile
    mode and backend of the step it scores with."""
    off = IMPLS.variant("baseline", "no compile, unpadded", compile="off", backend=backend)
    if compile == "off":
        padded = IMPLS.variant("optimized", "no compile, padded", compile="off", backend=backend)
        return {off.name: off, padded.name: padded}
    on = (IMPLS.variant(v, f"compile={compile} ({backend}), {how}", compile=compile, backend=backend)
          for v, how in (("baseline", "unpadded"), ("optimized", "padded")))
    return {v.name: v for v in (off, *on)}


def variant_fn(kg, engine, policy, queries, cs, batch: int, max_depth: int, v: Variant):
    """One evaluation of the candidates as variant `v` (`eval_variants`) runs it: its version scores every chunk on a
    step of its own, with the variant's compile mode and backend (compiled on its first call). -> a callable"""
    st = GreedyStep(engine, policy, max_depth, compile=v.knobs["compile"], backend=v.knobs["backend"])

    def fn():
        return evaluate_with_corruptions(kg, engine, policy, queries, batch=batch, score=v.fn,
                                         max_depth=max_depth, candidates=cs, step=st)
    return fn


def time_variants(kg, engine, policy, queries, cs, batch: int, max_depth: int, variants: dict, *,
                  min_run_time: float, max_run_time: float) -> dict:
    """Each variant from a fresh compile cache: the first evaluation (cold: compiles included) and a warm
    Measurement of the next ones. -> {name: dict(cold_s, m, ms_per_candidate)}."""
    out = {}
    for name, v in variants.items():
        reset()
        fn = variant_fn(kg, engine, policy, queries, cs, batch, max_depth, v)
        t0 = time.perf_counter()
        fn()
        cold = time.perf_counter() - t0
        m = measure(fn, label="03_eval run", sub_label=f"{len(cs)} candidates, B={batch}", description=name,
                    min_run_time=min_run_time, max_run_time=max_run_time, warmup=0, device=engine.device)
        out[name] = dict(cold_s=cold, m=m, ms_per_candidate=1e3 * m.median / len(cs))
    reset()
    return out


@dataclasses.dataclass
class Runs:
    variants: dict             # name -> Variant (eval_variants), the seed's eager loop first, the fix last
    timings: dict              # name -> dict(cold_s, m, ms_per_candidate) (time_variants)
    candidates: int

    @property
    def base(self) -> str:
        return next(iter(self.variants))

    @property
    def fixed(self) -> str:
        return list(self.variants)[-1]

    def warm_ratio(self) -> float:
        """The first variant's warm median over the last one's: indicative (speed_5x is decided in paired rounds)."""
        return self.timings[self.base]["m"].median / self.timings[self.fixed]["m"].median

    def frame(self):
        import pandas as pd

        return pd.DataFrame([{"variant": k, "warm, per evaluation": fmt(t["m"]), "ms per candidate (median)":
                              round(t["ms_per_candidate"], 3), "cold s (compiles)": round(t["cold_s"], 2)}
                             for k, t in self.timings.items()]).set_index("variant")


def evaluation_runs(run, work: Workload) -> Runs:
    """The evaluation run three ways (`eval_variants`, `time_variants`): logged, shown as a table, the warm medians'
    ratio printed as what it is (indicative: the claim is decided in paired rounds)."""
    cfg = run.cfg
    variants = eval_variants(cfg.compile, cfg.backend)
    timings = time_variants(work.kg, work.engine, work.policy, work.queries, work.cs, work.batch, cfg.max_depth,
                            variants, min_run_time=cfg.min_run_time, max_run_time=cfg.max_run_time)
    for name, t in timings.items():
        run.log.measurement(t["m"], impl=name, batch=work.batch, candidates=len(work.cs), cold_s=t["cold_s"])
    r = Runs(variants, timings, len(work.cs))
    show(r.frame())
    print(f"{r.fixed} over {r.base} (the speedup, {r.base}'s time over {r.fixed}'s): {r.warm_ratio():.2f}x in warm "
          f"medians (indicative: speed_5x is decided in paired rounds, on its setup)")
    return r


def decide_speed(run, work: Workload, runs: Runs) -> Decision | None:
    """speed_5x: whole evaluations of the seed's eager loop over the padded compiled one in paired rounds
    (`decide_speedup`), where this run is the claim's setup (a GPU), else None with no time spent. Each variant gets a
    step of its own in a fresh compile cache; two warm-up calls of each compile (and record CUDA graphs) before the
    budget starts; the cache is reset after, as `time_variants` leaves it."""
    cfg, device = run.cfg, run.device
    if SPEED_5X.off_setup(cfg, device.type):
        return None
    reset()
    fb, ff = (variant_fn(work.kg, work.engine, work.policy, work.queries, work.cs, work.batch, cfg.max_depth,
                         runs.variants[v]) for v in (runs.base, runs.fixed))
    try:
        for _ in range(2):   # the compiles (and CUDA graphs recorded) before the budget: a first call is not a call
            fb(), ff()
        return SPEED_5X.decide(decide_speedup, fb, ff, cfg=cfg, device=device)
    finally:
        reset()


# ---- the floor --------------------------------------------------------------------------------------------------

def floor_share(points, engine, policy, bandwidth: float, bandwidth_m, confidence: float = CONFIDENCE):
    """The floor (the step's predicted bytes over the copy bandwidth, us per candidate-step) over the best point of
    the sweep: the mean copy time over the mean chunk time, scaled by the bytes each moves, with the ratio's
    `confidence` interval (`Measured.ratio`: the copy's and the chunk's timings are independent sets).
    -> (Measured share, floor_us, best point)."""
    per_step = step_bytes(engine, policy, 1)
    floor_us = 1e6 * per_step / bandwidth
    best = min(points, key=lambda p: p.us_per_candidate_step)
    copy_bytes = bandwidth * bandwidth_m.median            # bytes one timed copy moves (bench.memory_bandwidth)
    share = Measured.ratio(bandwidth_m, best.measurement, confidence,
                           scale=per_step * best.batch * best.steps / copy_bytes)
    return share, floor_us, best


@dataclasses.dataclass
class Floor:
    share: Measured            # the floor's time over the best measured, with its interval
    floor_us: float            # us per candidate-step at the copy bandwidth
    best: object               # the sweep's best point


def floor(run, found: Findings) -> Floor:
    """`floor_share` of the sweep against the copy bandwidth `step_cost` measured; logged and printed."""
    f = Floor(*floor_share(found.sweep.points, found.work.engine, found.work.policy, found.profile.bandwidth,
                           found.profile.bandwidth_m))
    run.log.value("floor, us per candidate-step", f.floor_us, unit="us", bandwidth=found.profile.bandwidth)
    run.log.value("fraction of the floor reached", f.share.value, unit="", low=f.share.low, high=f.share.high)
    print(f"floor {f.floor_us:.3f} us per candidate-step at {found.profile.bandwidth / 1e9:.1f} GB/s; the best swept "
          f"{f.best.us_per_candidate_step:.2f} us at B={f.best.batch}: {interval(f.share, '%')} of the floor (99%)")
    return f


# ---- the claims' evidence ---------------------------------------------------------------------------------------

def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Each claim's Evidence, keyed by claim (what `card.judge` takes), read from `found` alone: the memory model's
    prediction, the recompile counts (exact), the sweep's paired ratios (`sweep.sweep_claims`), the speed decision
    (`decide_speed`), the floor's share and this run's cost per candidate."""
    dt, rc, sw, runs = run.device.type, found.recompiles, found.sweep, found.runs
    m = found.memory
    out = {"memory": Evidence(None, f"{m.seed_gib:.2f} GiB predicted for 10,100 rows at S=120 by this engine's "
                                    f"memory model ({m.here_gib:.2f} GiB at S={found.work.engine.S}): it builds "
                                    "candidate states of A+1 atoms, the seed's engine 26"),
           "recompiles": Evidence(Measured.exact(rc.per_tail),
                                  f"{rc.sentence()}; {rc.seconds_per_graph:.2f} s per new graph")}
    out.update(sweeps.sweep_claims(sw.points, sw.l2, sw.step_bytes.get))
    warm = f"{runs.warm_ratio():.2f}x in warm medians, indicative"
    out["speed_5x"] = (Evidence(None, f"{runs.fixed} over {runs.base}: {warm}; not decided on {dt} (a GPU target)")
                       if found.speed is None else
                       Evidence(found.speed, f"{runs.fixed} over {runs.base}, whole evaluations of {runs.candidates:,} "
                                             f"candidates in paired rounds on {dt} ({warm})"))
    f = found.floor
    out["floor_20"] = Evidence(f.share, f"{interval(f.share, '%')} of the floor at B={f.best.batch} on {dt} (the mean "
                                        "copy time over the mean chunk time, scaled by the bytes each moves)")
    fixed = runs.timings[runs.fixed]
    out["seed_run"] = Evidence(None, f"{fixed['ms_per_candidate']:.3f} ms per candidate here ({runs.fixed}, {dt}, "
                                     f"{runs.candidates:,} candidates)")
    return out

