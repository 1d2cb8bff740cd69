"""The measurements behind notebooks/04_early_exit, by role, in the order the notebook calls them:

    found = study.Findings(workloads=study.workloads(run))   the ladder and study 3's candidates (printed)
    checks.strategies_agree(...)                              correctness (checks.py), before anything is timed
    found.runs = study.traced_runs(run, found)                one traced run of every version on each whole workload:
                                                              slot-steps (the waste, the batch shapes), step times
    found.graphs = study.count_graphs(run, found)             graphs compiled per version (bucketed: one per bucket)
    found.launches = profiles.launch_counts(run, found)       launches and host reads per step (profiles.py)
    found.timing = study.benchmark(run, found)                `rounds` interleaved rounds of whole runs: indicative
    found.recycle = study.decide_recycle(run, found)          recycle against full in paired rounds: the headline
    found.bucketed = study.decide_bucketed(run, found)        bucketed's target in paired rounds
    found.flat_step = study.decide_flat_step(run, found)      one step with <= 10% of its rows active against all
    study.evidence(run, found)                                each claim's Evidence for card.judge: reads `found` only

The workloads: `workloads.py`; the figures and tables of the findings: `figures.py`. IMPLS names the
versions, the seed's loop first: every version takes (step, candidates [N, 3], batch, fail_score, trace) and gives
every candidate the same proof (`core.rollout`'s module doc says how each loop runs). The one knob of one version,
bucketed's smallest bucket, makes it a variant (`variant(name, min_bucket)`, a kit `Variant`). Each claim names the
function here that measures it (claims.py's `measured_by`)."""
from __future__ import annotations

import dataclasses
import math
import time
from typing import NamedTuple

import torch

from ...kit.bench import from_times, measure
from ...kit.claims import Evidence
from ...kit.compiles import count_compiles, reset
from ...kit.env import synchronize
from ...kit.formatting import num, value_text
from ...kit.verdicts import Decision, Measured, decide_speedup
from ...kit.versions import Variant, Versions
from ..core import rollout as loops
from ..core.rollout import RolloutResult, fill
from ..core.step import GreedyStep
from . import baseline, optimized
from .claims import CLAIMS
from .workloads import Workload, Workloads, kg_workload, ladder_workload, outcomes, workloads  # noqa: F401 (the notebook calls them here)

IMPLS = Versions({"full": baseline.rollout, "masked": loops.masked, "compact": loops.compact, "bucketed": loops.bucketed,
                  "recycle": optimized.rollout})   # the seed's loop first (the baseline), early exit last

# The claims the timed decisions are made against, looked up at import (a misspelt key fails before any timing).
FLAT_STEP = CLAIMS["flat_step"]  # decided on the ratio, judged either way (`either_way`)
RECYCLE = tuple(CLAIMS[k] for k in ("target_3x", "target_4x", "early_exit"))  # one decision, this order
BUCKETED = ((CLAIMS["bucketed_masked"], "masked", "bucketed"),   # (claim, baseline, optimized)
            (CLAIMS["bucketed_full"], "full", "bucketed"))


def variant(name: str, min_bucket: int = 8) -> Variant:
    """The version IMPLS names `name` as the study runs it: bucketed with its smallest bucket bound (the one knob of
    one version; the variant's name stays the version's). An unknown name is refused with the names there are."""
    knobs = {"min_bucket": min_bucket} if name == "bucketed" else {}
    return IMPLS.variant(name, name, **knobs)


def variants(min_bucket: int = 8) -> dict[str, Variant]:
    """Every version as `variant` makes it, by name, in IMPLS's order."""
    return {name: variant(name, min_bucket) for name in IMPLS}


# ---- running and timing the versions ---------------------------------------------------------------------------

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


def time_strategies(w: Workload, batch: int, min_bucket: int, rounds: int, strategies=tuple(IMPLS),
                    traced: dict[str, RolloutResult] | None = None):
    """Wall time of each strategy on the whole workload: one traced warm-up run (its results are returned; `traced`:
    such a run already made, taken as the warm-up), then `rounds` timed rounds with the strategies interleaved, so
    that each sees the same machine conditions (a shared CPU drifts by tens of percent within a minute). Each run
    ends with a device synchronize. -> ({strategy: Measurement, its times in round order}, {strategy: traced
    RolloutResult}, {strategy: host reads per step of the timed, untraced runs})."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    res = traced if traced is not None else run_strategies(w, batch, min_bucket, strategies)
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
    """Seconds per row of one step with every one of `batch` rows active (the ideal's unit cost, timed alone)."""
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


# ---- the findings: what the notebook measures, filled in as it runs --------------------------------------------

class Graphs(NamedTuple):
    """Graphs compiled per version on a small batch (`count_graphs`), and the buckets bucketed ran there."""
    graphs: dict          # {version: graphs compiled}
    buckets: list         # bucketed's bucket sizes, largest first
    mode: str             # the compile mode and backend counted under
    backend: str
    batch: int

    @property
    def one_per_bucket(self) -> bool:
        return self.graphs["bucketed"] == len(self.buckets)


class Timing(NamedTuple):
    """`rounds` interleaved rounds of whole runs of every version on one workload (`benchmark`)."""
    ms: dict              # {version: Measurement}: its times in round order
    reads: dict           # {version: host reads per step of the timed runs}


class StepRatio(NamedTuple):
    """One step with few rows active against one with all active, in paired rounds (`decide_flat_step`)."""
    decision: Decision    # idle step's time over the busy one's, decided against flat_step's side
    active: float         # the idle step's share of active rows


@dataclasses.dataclass
class Findings:
    """What the notebook measures, one field per measuring function, filled in as it runs: the figures, the tables and
    `evidence` read it, so a claim is judged on the very numbers the cells above it showed."""
    workloads: Workloads | None = None       # workloads
    runs: dict | None = None                 # traced_runs: {"ladder" | "kg": {version: traced RolloutResult}}
    graphs: Graphs | None = None             # count_graphs
    launches: dict | None = None             # profiles.launch_counts: {"ladder" | "kg": {version: per-step counts}}
    timing: dict | None = None               # benchmark: {"ladder" | "kg": Timing}
    recycle: Decision | None = None          # decide_recycle
    bucketed: dict | None = None             # decide_bucketed: {claim key: Decision, or None where not decided}
    flat_step: StepRatio | None = None       # decide_flat_step

    @property
    def ladder(self) -> Workload:
        return self.need("workloads", "study.workloads").ladder

    @property
    def kg(self) -> Workload:
        return self.need("workloads", "study.workloads").kg

    def need(self, name: str, by: str):
        """Field `name`, or a clear error naming `by`, the function that fills it ("study.traced_runs")."""
        v = getattr(self, name)
        if v is None:
            raise ValueError(f"Findings.{name} is not measured yet: found.{name} = {by}(run, found) first")
        return v

    def useful_share(self, workload: str = "ladder") -> float:
        """Useful rows over the rows full computed on the whole workload (a count: exact)."""
        full = self.need("runs", "study.traced_runs")[workload]["full"]
        return (full.slot_steps - full.wasted_slot_steps) / full.slot_steps

    def shapes(self, strategy: str) -> int:
        """Distinct batch shapes (rows per step) `strategy` ran on the whole ladder."""
        return len({rows for _, rows, _ in self.need("runs", "study.traced_runs")["ladder"][strategy].trace})

    def vs_full(self, workload: str = "ladder") -> dict[str, Measured]:
        """Each version's speed against full in the benchmark's rounds: the ratio of mean times with its 99% interval
        over the rounds (`Measured.paired_ratio`: indicative; unbounded from fewer than 2 rounds)."""
        ms = self.need("timing", "study.benchmark")[workload].ms
        return {s: Measured.paired_ratio(ms["full"].raw_times, m.raw_times) for s, m in ms.items()}


def _where(w: Workload, batch: int, device) -> str:
    return f"{w.name.split(' (')[0]} ({len(w.candidates):,} candidates, B={batch}, {device.type})"


def traced_runs(run, found: Findings) -> dict[str, dict[str, RolloutResult]]:
    """One traced run of every version on each whole workload (a host read per step, its time and rows): the
    slot-steps each computed, the batch shapes it ran, the step times of the figure; printed with each version's
    steps, rows computed and useful share (counts, the same on every host) and logged. Their agreement:
    `checks.whole_runs_agree`."""
    cfg = run.cfg
    out = {}
    for key, w in (("ladder", found.ladder), ("kg", found.kg)):
        res = out[key] = run_strategies(w, cfg.batch, cfg.min_bucket)
        useful = int(res["full"].steps.sum())
        print(f"{w.name}: {useful:,} useful rows (the sum of the proof lengths); per version: steps, rows computed, "
              "useful share")
        for s, r in res.items():
            shapes = len({rows for _, rows, _ in r.trace})
            print(f"  {s:9s}{r.steps_executed:5d} steps {r.slot_steps:8,} rows {useful / r.slot_steps:6.1%} useful"
                  + (f"  {shapes} distinct batch shapes" if s in ("compact", "bucketed") else ""))
            run.log.value("wasted slot-steps", r.wasted_slot_steps, unit="rows", strategy=s, workload=w.name,
                          slot_steps=r.slot_steps, steps=r.steps_executed)
    return out


def count_graphs(run, found: Findings) -> Graphs:
    """Each version's loop body in turn in one fresh compile cache (the run's `compile` and `backend`; default on the
    eager backend when compile is off), on a small batch of the ladder (4 x min_bucket: the same mechanism with
    fewer buckets to compile), and the buckets bucketed ran there; printed."""
    cfg = run.cfg
    batch = min(cfg.batch, 4 * cfg.min_bucket)      # a few buckets are enough to count; fewer compiles
    tiny = found.ladder.head(2 * batch)
    mode, backend = (cfg.compile, cfg.backend) if cfg.compile != "off" else ("default", "eager")
    counted = Workload(tiny.name, GreedyStep(tiny.step.engine, tiny.step.policy, cfg.max_depth, compile=mode,
                                             backend=backend), tiny.candidates)
    graphs = graphs_per_strategy(counted, batch, cfg.min_bucket)
    trace = run_strategies(tiny, batch, cfg.min_bucket, strategies=["bucketed"])["bucketed"].trace
    buckets = sorted({rows for _, rows, _ in trace}, reverse=True)
    print(f"graphs compiled ({mode}/{backend}, B={batch}), in order:", graphs)
    print(f"bucketed used buckets {buckets}")
    return Graphs(graphs, buckets, mode, backend, batch)


def benchmark(run, found: Findings) -> dict[str, Timing]:
    """`rounds` rounds of whole runs of every version on each workload, the versions interleaved (`time_strategies`,
    the traced runs taken as the warm-up); logged with each version's steps and per-step counts. Indicative: the
    claims are decided in paired rounds of their own (`decide_recycle`, `decide_bucketed`)."""
    cfg = run.cfg
    runs, launches = found.need("runs", "study.traced_runs"), found.need("launches", "profiles.launch_counts")
    out = {}
    for key, w in (("ladder", found.ladder), ("kg", found.kg)):
        ms, res, reads = time_strategies(w, cfg.batch, cfg.min_bucket, cfg.rounds, traced=runs[key])
        out[key] = Timing(ms, reads)
        for s, m in ms.items():
            run.log.measurement(m, impl=s, workload=w.name, candidates=len(w.candidates), steps=res[s].steps_executed,
                                launches_per_step=launches[key][s]["launches_per_step"], host_reads_per_step=reads[s])
    return out


# ---- the timed decisions (paired rounds, `decide_speedup`) -------------------------------------------------------

def lead_claim(cfg, device_type: str):
    """The recycle claim this run's decision is made against: the first of target_3x, target_4x, early_exit whose
    setup this run is (early_exit has none: always one)."""
    return next(c for c in RECYCLE if not c.off_setup(cfg, device_type))


def decide_recycle(run, found: Findings) -> Decision:
    """Recycle against full on the whole ladder in paired rounds of whole runs (`decide_speedup`: the ratio of mean
    times, at most `verdict_time` seconds), against the lead claim's threshold (`lead_claim`). Every interval of a
    decision's sequence holds at once (`perflab.kit.verdicts`), so the one it stopped at judges the other recycle
    claims too, and, times the useful share, the share of the ideal; printed."""
    cfg, device = run.cfg, run.device
    w = found.ladder
    lead = lead_claim(cfg, device.type)
    d = lead.decide(decide_speedup, strategy_fn(w, cfg.batch, "full", cfg.min_bucket),
                    strategy_fn(w, cfg.batch, "recycle", cfg.min_bucket), cfg=cfg, device=device)
    print(f"recycle over full on {_where(w, cfg.batch, device)}: {value_text(d.value, d.low, d.high, 'x')} "
          f"(99% interval, {d.how}; {d.seconds:.1f} s)")
    return d


def decide_bucketed(run, found: Findings) -> dict[str, Decision | None]:
    """Each bucketed target in paired rounds of its own where it is this run's setup (bucketed over masked on the CPU
    default, bucketed over full on a GPU: the speedup, masked's time over bucketed's), else None; bucketed against
    masked only where bucketed compiled one graph per bucket (`count_graphs`: else the claim fails without timing).
    printed."""
    cfg, device = run.cfg, run.device
    w, graphs = found.ladder, found.need("graphs", "study.count_graphs")
    out = {}
    for c, a, b in BUCKETED:
        if c.off_setup(cfg, device.type) or (c is BUCKETED[0][0] and not graphs.one_per_bucket):
            out[c.key] = None
            continue
        d = out[c.key] = c.decide(decide_speedup, strategy_fn(w, cfg.batch, a, cfg.min_bucket),
                                  strategy_fn(w, cfg.batch, b, cfg.min_bucket), cfg=cfg, device=device)
        print(f"{b} over {a} (the speedup, as recycle over full): {value_text(d.value, d.low, d.high, 'x')} (99% "
              f"interval, {d.how}; {d.seconds:.1f} s)")
    return out


def decide_flat_step(run, found: Findings) -> StepRatio:
    """One step of B slots with at most 10% of its rows active over one with all active (single steps of full on the
    ladder's first chunk, `step_fns`), in paired rounds against flat_step's side (<= 1.33; judged either way in
    `evidence`); printed."""
    cfg, device = run.cfg, run.device
    busy, idle, active = step_fns(found.ladder, cfg.batch, 0.1)
    d = FLAT_STEP.decide(decide_speedup, idle, busy, cfg=cfg, device=device, min_rounds=30)  # 30 rounds: cheap
    e = either_way(d.measured)
    print(f"one step at {active:.0%} of its rows active over one with all active: "
          f"{value_text(d.value, d.low, d.high, 'x')} (99% interval, {d.how}); judged either way, max(r, 1/r): "
          f"{value_text(e.value, e.low, e.high, 'x')} (the card's number)")
    return StepRatio(d, active)


def either_way(r: Measured) -> Measured:
    """max(r, 1/r) of a ratio and its interval (the image of [low, high]: 1 when the interval holds 1): how far a
    ratio is from 1 in either direction."""
    def f(x):
        return max(x, 1 / x) if x > 0 else math.inf
    low = 1.0 if r.low <= 1 <= r.high else min(f(r.low), f(r.high))
    return Measured(f(r.value), min(low, f(r.value)), max(f(r.low), f(r.high), f(r.value)))


# ---- the claims' evidence (`card.judge`) ---------------------------------------------------------------------

def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Each claim's Evidence, keyed by claim, read from `found` alone (nothing is timed here): the flat step
    (`decide_flat_step`, either way), the useful share and the batch shapes (`traced_runs`, exact counts), the one
    recycle decision (`decide_recycle`) for every recycle claim and, times the useful share, for the ideal's share,
    the bucketed targets (`decide_bucketed`); v10 is another engine's number, not comparable."""
    cfg, dt = run.cfg, run.device.type
    w, batch = found.ladder, cfg.batch
    where = _where(w, batch, run.device)
    full = found.runs["ladder"]["full"]
    useful, share = full.slot_steps - full.wasted_slot_steps, found.useful_share()
    out = {}
    f = found.flat_step
    out["flat_step"] = Evidence(either_way(f.decision.measured),
                                f"one step of B={batch} slots with {f.active:.0%} of its rows active over one with all "
                                f"active: {value_text(f.decision.value, f.decision.low, f.decision.high, 'x')} "
                                f"({f.decision.how}), either way")
    out["wasted"] = Evidence(Measured.exact(share), f"{useful:,} useful of the {full.slot_steps:,} rows full computed "
                                                    f"({share:.1%}) on {where}: {1 / share:.2f}x the useful work")
    d, lead = found.recycle, lead_claim(cfg, dt)
    said = f"recycle over full on {where}, whole runs in paired rounds"
    for c in RECYCLE:
        if c is lead:
            out[c.key] = Evidence(d, said)
        elif c.off_setup(cfg, dt):   # another setup's target: its card line says what this run has instead
            out[c.key] = Evidence(d.rejudge(**c.rule), f"{said}: {value_text(d.value, d.low, d.high, 'x')} "
                                                       f"(decided for {lead.key} on this run's setup, not this claim's)")
        else:
            out[c.key] = Evidence(d.rejudge(**c.rule), f"{said} (the rounds decided for {lead.key}, judged against "
                                                       "this claim's threshold)")
    ideal = Measured(d.value * share, d.low * share, d.high * share)
    out["target_ideal"] = Evidence(ideal, f"recycle over full {value_text(d.value, d.low, d.high, 'x')} times the "
                                          f"useful share {share:.1%} ({found.runs['ladder']['recycle'].steps_executed} "
                                          f"steps against full's {full.steps_executed})")
    compact, bucketed = found.shapes("compact"), found.shapes("bucketed")
    out["compaction"] = Evidence(Measured.exact(compact - bucketed),
                                 f"compact ran {compact} distinct batch shapes on {where}, bucketed {bucketed}: "
                                 f"{compact - bucketed} more graphs to capture")
    vs = found.vs_full()
    for c, a, b in BUCKETED:
        e = found.bucketed[c.key]
        if c.off_setup(cfg, dt):
            ratio = vs[b].value / vs[a].value
            out[c.key] = Evidence(None, f"{b} over {a} on {where}: {num(ratio, True)}x in the benchmark's rounds "
                                        "(indicative), not judged here")
        elif c is BUCKETED[0][0] and not found.graphs.one_per_bucket:
            out[c.key] = Evidence(Measured.exact(0.0), "a bucket compiled more than one graph")
        else:
            out[c.key] = Evidence(e, f"{b} over {a} on {where}, whole runs in paired rounds; one graph per bucket: "
                                     f"{found.graphs.one_per_bucket}")
    ms = found.timing["ladder"].ms["recycle"]
    out["v10"] = Evidence(None, f"recycle {1e3 * ms.mean / len(w.candidates):.3f} ms per candidate here ({dt}, B={batch}, "
                                f"mean of {len(ms.raw_times)} rounds)")
    return out
