"""The measurements behind notebooks/04_early_exit, as functions (the notebook calls and plots them): the workloads
(`ladder_workload`, `kg_workload`), `run_strategies`, `strategy_fn`, `graphs_per_strategy`, `time_strategies`,
`row_step_seconds`, `step_fns`, `trace_table`, `strategy_table`. Launches per step: `profiles.py`. The timed
decisions on the claims (paired rounds): `claims.py`.

IMPLS names the versions, the seed's loop first: every version takes (step, candidates [N, 3], batch, fail_score,
trace) and gives every candidate the same proof (`core.rollout`'s module doc says how each loop runs). The one knob
of one version, bucketed's smallest bucket, makes it a variant (`variant(name, min_bucket)`, a kit `Variant`).
"""
from __future__ import annotations

import dataclasses
import math
import time

import torch

from ...kit.bench import from_times, measure, summary
from ...kit.compiles import count_compiles, reset
from ...kit.env import synchronize
from ...kit.formatting import fmt_interval as interval
from ...kit.verdicts import Measured, decide_speedup
from ...kit.versions import Variant, Versions
from ..core import rollout as loops
from ..core.data import ladder_kg, ladder_queries, seed_like_lengths, training_queries
from ..core.datasets import graph_label, knowledge_graph, test_queries
from ..core.engine import UnificationEngine
from ..core.policy import make_policy, train_policy
from ..core.ranking import corruptions
from ..core.rollout import RolloutResult, fill
from ..core.step import GreedyStep
from . import baseline, optimized
from .claims import CLAIMS

IMPLS = Versions({"full": baseline.rollout, "masked": loops.masked, "compact": loops.compact, "bucketed": loops.bucketed,
                  "recycle": optimized.rollout})   # the seed's loop first (the baseline), early exit last


def variant(name: str, min_bucket: int = 8) -> Variant:
    """The version IMPLS names `name` as the study runs it: bucketed with its smallest bucket bound (the one knob of
    one version; the variant's name stays the version's). An unknown name is refused with the names there are."""
    knobs = {"min_bucket": min_bucket} if name == "bucketed" else {}
    return IMPLS.variant(name, name, **knobs)


def variants(min_bucket: int = 8) -> dict[str, Variant]:
    """Every version as `variant` makes it, by name, in IMPLS's order."""
    return {name: variant(name, min_bucket) for name in IMPLS}


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


def run_strategies(w: Workload, batch: int, min_bucket: int, strategies=tuple(IMPLS), trace: bool = True
                   ) -> dict[str, RolloutResult]:
    """One run of each version IMPLS names in `strategies` (traced: a host read every step)."""
    return {s: variant(s, min_bucket)(w.step, w.candidates, batch, trace=[] if trace else None) for s in strategies}


def strategy_fn(w: Workload, batch: int, strategy: str, min_bucket: int):
    """One untraced run of the version IMPLS names `strategy` on the whole workload, as a callable (it ends on a
    host read)."""
    fn = variant(strategy, min_bucket)
    return lambda: fn(w.step, w.candidates, batch)


def graphs_per_strategy(w: Workload, batch: int, min_bucket: int) -> dict[str, int]:
    """Graphs dynamo compiles for each strategy's loop body, in one fresh cache (`w.step`'s mode and
    backend; nothing when compile is off)."""
    step = GreedyStep(w.step.engine, w.step.policy, w.step.max_depth, compile=w.step.mode, backend=w.step.backend)
    reset()
    out = {}
    for s, fn in variants(min_bucket).items():
        with count_compiles() as cc:
            fn(step, w.candidates, batch)
        out[s] = cc.graphs
    reset()
    return out


def time_strategies(w: Workload, batch: int, min_bucket: int, rounds: int, strategies=tuple(IMPLS)):
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
            r = variant(s, min_bucket)(w.step, w.candidates, batch)
            synchronize(dev)
            times[s].append(time.perf_counter() - t0)
            reads[s] = r.host_reads / max(1, r.steps_executed)
    ms = {s: from_times(t, label=w.name, sub_label=f"{len(w.candidates)} candidates, B={batch}", description=s,
                          stmt="rollout(...)", env=str(dev)) for s, t in times.items()}
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


# ---- the claims' evidence (`CLAIMS.judge`) ------------------------------------------------------------------

# The claims the timed decisions are made against, looked up at import (a misspelt key fails before any timing).
FLAT_STEP = CLAIMS["flat_step"]  # decided on the ratio, judged either way (`either_way`)
RECYCLE = tuple(CLAIMS[k] for k in ("target_3x", "target_4x", "early_exit"))  # one decision, this order
BUCKETED = ((CLAIMS["bucketed_masked"], "masked", "bucketed"),   # (claim, baseline, optimized)
            (CLAIMS["bucketed_full"], "full", "bucketed"))


def either_way(r: Measured) -> Measured:
    """max(r, 1/r) of a ratio and its interval (the image of [low, high]: 1 when the interval holds 1): how far a
    ratio is from 1 in either direction."""
    def f(x):
        return max(x, 1 / x) if x > 0 else math.inf
    low = 1.0 if r.low <= 1 <= r.high else min(f(r.low), f(r.high))
    return Measured(f(r.value), min(low, f(r.value)), max(f(r.low), f(r.high), f(r.value)))


def evidence(run, ladder: Workload, *, ms: dict, res: dict, busy: list, idle: list, n_shapes: dict,
             one_per_bucket: bool) -> dict:
    """Each claim's measurement and its sentence, keyed by claim (what `CLAIMS.judge` takes), on the `ladder` workload
    at the run's batch and smallest bucket: `ms` / `res` per strategy (`time_strategies`: the table), `busy` / `idle`
    full's traced step times at 100% and <= 10% active (reported only), `n_shapes` the batch shapes compact and
    bucketed ran, `one_per_bucket` the graph count's check. Timed here, in paired rounds (`Claim.decide`):
    - one step with <= 10% of its rows active over one with all active (single steps), decided against the claim's
      side (<= 1.33) and judged either way (`either_way`);
    - recycle over full, decided against the first of target_3x, target_4x, early_exit that is this run's setup.
      A decision's sequence of intervals holds at every look at once (`perflab.kit.verdicts`), so the interval it
      stopped at judges the pair's other thresholds too, and, times the useful share, the ideal;
    - each bucketed target in rounds of its own, where it is this run's setup."""
    cfg, device = run.cfg, run.device
    batch, min_bucket = cfg.batch, cfg.min_bucket
    full = res["full"]
    useful, dt = full.slot_steps - full.wasted_slot_steps, device.type
    share = useful / full.slot_steps
    where = f"the ladder ({len(ladder.candidates):,} candidates, B={batch}, {dt})"
    table = ", ".join(f"{s} {ms['full'].median / m.median:.2f}x" for s, m in ms.items() if s != "full")
    fn = {s: strategy_fn(ladder, batch, s, min_bucket) for s in ("full", "recycle", "masked", "bucketed")}
    out = {}
    step_busy, step_idle, active = step_fns(ladder, batch, 0.1)
    f = FLAT_STEP.decide(decide_speedup, step_idle, step_busy, cfg=cfg, device=device, min_rounds=30)  # 30 rounds: cheap
    traced = (f"; in the traced run {1e3 * _median(busy):.2f} ms ({len(busy)} steps) and {1e3 * _median(idle):.2f} ms "
              f"({len(idle)} steps)" if busy and idle else "")
    out["flat_step"] = (either_way(f.measured), f"one step of B={batch} slots with {active:.0%} of its rows active "
                        f"over one with all active: {interval(f.measured)} ({f.how}, 99% interval), "
                        f"either way{traced}")
    out["wasted"] = (Measured.exact(share), f"{useful} useful of {full.slot_steps} rows computed by full ({share:.0%}) "
                                            "on seed-like lengths")
    lead = next(c for c in RECYCLE if not c.off_setup(cfg, dt))          # early_exit has no setup: always one
    d = lead.decide(decide_speedup, fn["full"], fn["recycle"], cfg=cfg, device=device)
    said = f"recycle over full on {where} in paired rounds; the table's medians: {table}"
    also = f"{said} (the rounds decided for {lead.key}, judged against this claim's threshold)"
    for c in RECYCLE:
        out[c.key] = (d, said) if c is lead else (d.rejudge(**c.rule), also)
    ideal = Measured(d.value * share, d.low * share, d.high * share)
    out["target_ideal"] = (ideal, f"recycle at {interval(ideal, '%')} of the ideal: recycle over full {interval(d.measured)} times "
                                  f"the useful share {share:.1%} ({res['recycle'].steps_executed} steps against full's "
                                  f"{full.steps_executed})")
    out["compaction"] = (Measured.exact(n_shapes["compact"] - n_shapes["bucketed"]),
                         f"compact ran {n_shapes['compact']} distinct batch shapes, bucketed {n_shapes['bucketed']}")
    for c, a, b in BUCKETED:
        key = c.key
        said = f"{a} over {b} on {where}"
        if c.off_setup(cfg, dt):
            out[key] = (None, f"{said}: {ms[a].median / ms[b].median:.2f}x in the table's medians, not judged here")
        elif key == "bucketed_masked" and not one_per_bucket:
            out[key] = (Measured.exact(0.0), "a bucket compiled more than one graph")
        else:
            e = c.decide(decide_speedup, fn[a], fn[b], cfg=cfg, device=device)
            out[key] = (e, f"{said} in paired rounds; one graph per bucket: {one_per_bucket}")
    out["v10"] = (None, f"recycle {1e3 * ms['recycle'].median / len(full.score):.3f} ms per candidate here ({dt}, "
                        f"B={batch})")
    return out


def _median(xs) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
