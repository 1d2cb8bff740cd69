"""The measurements behind notebooks/03_eval's batched evaluation, as functions (the notebook calls and plots them):
`recompiles_by_tail`, `batch_sweep`, `floor_share`, `eval_variants`, `variant_fn`, `time_variants`, and `bfs_depth`.
Where a step's time goes: `profiles.py`. The timed decisions on the claims (paired rounds): `claims.py`.

IMPLS names the versions, baseline first: the seed's loop, each chunk at its own size (a new shape, a recompile, for
every new tail), and the fixed one, every chunk padded to the batch. Both score candidates [N, 3] with a GreedyStep.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ...kit.bench import from_times, measure
from ...kit.compiles import count_compiles, reset
from ...kit.env import synchronize
from ...kit.formatting import fmt_interval as interval
from ...kit.memory import peak_memory
from ...kit.verdicts import CONFIDENCE, Decision, Measured, decide_speedup
from ...kit.versions import Variant, Versions
from ..core.batching import step_bytes
from ..core.datasets import graph_label, knowledge_graph, test_queries  # noqa: F401 (the notebook's names for them)
from ..core.rollout import fill, rollout_full
from ..core.step import GreedyStep
from . import baseline, optimized
from .claims import CLAIMS
from .evaluate import evaluate_with_corruptions

IMPLS = Versions({"baseline": baseline.score_candidates, "optimized": optimized.score_candidates})  # baseline first


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
    for padded, fn in ((True, IMPLS["optimized"]), (False, IMPLS["baseline"])):   # the padded version first
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


SWEEP_ROUNDS = 20   # at least: 99% intervals of the worst of up to ~1,000 size pairs stay bounded (claims.py)


def batch_sweep(step: GreedyStep, candidates: torch.Tensor, batch_sizes, *, rounds_time: float,
                min_rounds: int = SWEEP_ROUNDS) -> list[SweepPoint]:
    """One chunk of B candidates (the evaluation's, repeated to fill B) per batch size: the first call (compiles
    included when compiled), steps run and peak memory; then warm calls in interleaved rounds, each round one chunk
    at every size (the order reversed every other round), until `min_rounds` rounds and `rounds_time` seconds are
    done. The rounds are paired: a shared machine's drift hits every size of a round alike, so the ratio of two
    sizes is taken round by round (`sweep_claims`); each size's rounds are also its Measurement (tables)."""
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
    return [SweepPoint(b, from_times(times[b], label="rollout of one chunk", sub_label=f"B={b}",
                                       description=f"{step.mode}/{step.backend}", stmt="rollout_full(...)", env=str(dev)),
                       runs[b].steps_executed, first[b], mems[b].delta_bytes,
                       mems[b].method + (" (eager step)" if probe is not step else ""), tuple(times[b]))
            for b in sizes]


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


# ---- the claims' evidence (`CLAIMS.judge`) ------------------------------------------------------------------

SPEED_5X = CLAIMS["speed_5x"]  # looked up at import: a misspelt key fails first


def round_ratios(a, b, per_step: bool = False) -> list[float]:
    """b's cost over a's (two `SweepPoint`s) per candidate, or per candidate-step, in each of the sweep's rounds."""
    na, nb = a.batch * (a.steps if per_step else 1), b.batch * (b.steps if per_step else 1)
    return [(tb / nb) / (ta / na) for ta, tb in zip(a.rounds, b.rounds)]


def rise(a, b, per_step: bool = False, of: int = 1) -> Measured:
    """b's cost over a's (per candidate, or per candidate-step) over the sweep's rounds: the ratio of their mean costs
    (the total's, `Measured.paired_ratio`), at confidence 1 - alpha / `of` when it is one of `of` ratios judged
    together (`largest`)."""
    na, nb = a.batch * (a.steps if per_step else 1), b.batch * (b.steps if per_step else 1)
    return Measured.paired_ratio([t / nb for t in b.rounds], [t / na for t in a.rounds], 1 - (1 - CONFIDENCE) / of)


def largest(ratios: list[Measured]) -> Measured:
    """The largest of k ratios. Each interval was made at 1 - alpha / k (`rise(of=k)`), so all k hold together with
    probability at least 1 - alpha (Bonferroni), and then the largest ratio lies in [max of lows, max of highs]."""
    return Measured(max(r.value for r in ratios), max(r.low for r in ratios), max(r.high for r in ratios))


def sweep_claims(points, l2: int, step_bytes_fn) -> dict:
    """{claim key: (Measured or None, sentence)} for the sweep's claims (batch_1024, l2, cap_512, flat, flat_step)
    from `batch_sweep`'s points; `step_bytes_fn(b)`: a step's bytes at batch b, `l2`: the L2 size."""
    pts = sorted(points, key=lambda p: p.batch)
    by = {p.batch: p for p in pts}
    how = f"{len(pts[0].rounds)} paired rounds of the sweep"
    out = {}
    if 512 in by and 1024 in by:
        r, hi = rise(by[512], by[1024]), by[1024]
        out["batch_1024"] = (r, f"B=1024 over B=512: {interval(r)} per candidate ({how}); the first call at B=1024 took "
                                f"{hi.first_call_s / hi.measurement.median:.1f}x a warm one")
    else:
        out["batch_1024"] = (None, f"512 and 1024 are not both in the sweep ({[p.batch for p in pts]})")
    cross = next(((a, b) for a, b in zip(pts, pts[1:]) if step_bytes_fn(a.batch) <= l2 < step_bytes_fn(b.batch)), None)
    if cross:
        a, b = cross
        j = rise(a, b, per_step=True)
        out["l2"] = (j, f"the step's bytes pass L2 ({l2 / 2**20:g} MiB) between B={a.batch} and {b.batch}: cost per "
                        f"candidate-step {interval(j)} there ({how})")
    else:
        out["l2"] = (None, f"no swept batch size crosses L2 ({l2 / 2**20:g} MiB)")
    others = [p for p in pts if p.batch != 512]
    if 512 in by and others:
        rs = [rise(p, by[512], of=len(others)) for p in others]       # 512's cost over each other's; Bonferroni
        c = largest(rs)
        worst = others[max(range(len(rs)), key=lambda i: rs[i].value)]
        out["cap_512"] = (c, f"B=512 costs {interval(c)} of B={worst.batch}'s per candidate, the most against any other "
                             f"swept size ({how}; each of the {len(rs)} ratios at {1 - (1 - CONFIDENCE) / len(rs):.2%})")
    else:
        out["cap_512"] = (None, f"512 is not in the sweep, or alone ({[p.batch for p in pts]})")
    pairs = list(zip(pts, pts[1:]))
    if not pairs:
        return {**out, "flat": (None, "one batch size: nothing to compare"), "flat_step": (None, "one batch size")}
    k = len(pairs)   # the largest of k rises: each interval at alpha / k (Bonferroni), so all k hold at 1 - alpha
    each = f"each of the {k} rises at {1 - (1 - CONFIDENCE) / k:.2%}, so all hold at {CONFIDENCE:.0%}"
    flat = largest([rise(a, b, of=k) for a, b in pairs])
    step = largest([rise(a, b, per_step=True, of=k) for a, b in pairs])
    out["flat"] = (flat, f"largest rise {interval(flat)} ({how}; {each}); ms per candidate "
                         f"{[round(p.ms_per_candidate, 3) for p in pts]} at B={[p.batch for p in pts]}, steps "
                         f"{[p.steps for p in pts]}")
    out["flat_step"] = (step, f"largest rise {interval(step)} ({how}; {each}); us per candidate-step "
                              f"{[round(p.us_per_candidate_step, 1) for p in pts]}")
    return out


def decide_speed(kg, engine, policy, queries, cs, batch: int, variants: dict, base: str, fixed: str, cfg,
                 device) -> Decision | None:
    """speed_5x: whole evaluations of `base` over `fixed` (`eval_variants`' names) in paired rounds, where
    this run is the claim's setup (a GPU), else None. Each variant gets a step of its own in a fresh compile cache;
    two warm-up calls of each compile (and record CUDA graphs) before the budget starts; the cache is reset after,
    as `time_variants` leaves it."""
    if SPEED_5X.off_setup(cfg, device.type):
        return None
    reset()
    fb, ff = (variant_fn(kg, engine, policy, queries, cs, batch, cfg.max_depth, variants[v]) for v in (base, fixed))
    try:
        for _ in range(2):   # the compiles (and CUDA graphs recorded) before the budget: a first call is not a call
            fb(), ff()
        return SPEED_5X.decide(decide_speedup, fb, ff, cfg=cfg, device=device)
    finally:
        reset()


def evidence(run, *, seed_gib: float, unpadded_graphs_per_tail: float, padded_graphs: int, compile_s: float,
             points, l2: int, step_bytes_fn, floor: Measured | None, floor_batch: int, timings: dict, base: str,
             fixed: str, speed: Decision | None, candidates: int) -> dict:
    """Each claim's measurement and its sentence, keyed by claim (what `CLAIMS.judge` takes; link prediction's:
    `links.study.evidence`): `speed` is `decide_speed`'s decision, `floor` `floor_share`'s share."""
    dt = run.device.type
    out = {"memory": (Measured.exact(seed_gib), f"{seed_gib:.2f} GiB predicted for 10,100 rows at S=120 "
                      "(this engine builds candidate states of A+1 atoms, not 26)"),
           "recompiles": (Measured.exact(unpadded_graphs_per_tail),
                          f"unpadded: {unpadded_graphs_per_tail:.2f} new graphs per new tail size after warm-up "
                          f"({compile_s:.2f} s per new graph); padded: {padded_graphs} in all")}
    out.update(sweep_claims(points, l2, step_bytes_fn))
    tb, tf = timings[base]["m"], timings[fixed]["m"]
    warm = f"{tb.median / tf.median:.2f}x in the table's warm medians"
    if speed is None:
        out["speed_5x"] = (None, f"{base} over {fixed}: {warm} on {dt}, not judged (a GPU target)")
    else:
        out["speed_5x"] = (speed, f"{base} over {fixed}, whole evaluations of {candidates:,} "
                                  f"candidates in paired rounds on {dt} ({warm})")
    out["floor_20"] = ((floor, f"{interval(floor, '%')} of the floor at B={floor_batch} on {dt} (the mean copy time over "
                               f"the mean chunk time, scaled by the bytes each moves; 99% interval)")
                       if floor is not None else (None, "not measured"))
    out["seed_run"] = (None, f"{timings[fixed]['ms_per_candidate']:.3f} ms per candidate here ({fixed}, {dt})")
    return out
