"""Seed 001's claims and issue 16's targets for study 4's early exit, as data (`perflab.kit.claims`), and what
judges each.

`EARLY_EXIT_CLAIMS` is checked against notebooks/04_early_exit's parameters when this module is imported (the
notebook imports it in its first cell), and the claims the timed decisions below use are looked up here too: a
misnamed claim, setup or headline fails before anything is timed. A claim's `setup` says the device it is about
(a GPU target: {"device": "cuda"}, a CPU-default one: {"device": "cpu"}); elsewhere it is "not tested here".
How each is measured (`perflab.kit.verdicts`, 99% intervals): the recycle and bucketed claims by `decide_speedup`,
paired rounds of two whole ladder runs (warmed up until steady, the ratio of their mean times, within `verdict_time`
seconds of wall time), made only where the run is the claim's setup; flat_step by paired rounds of single steps;
counts and shares by `Measured.exact`.
"""
from __future__ import annotations

import math

from ...kit.claims import Claim, Claims
from ...kit.formatting import fmt_interval as interval
from ...kit.verdicts import Measured, decide_speedup
from . import study
from .params import EarlyExitParams

SEED, I16 = "seed 001", "issue 16"

EARLY_EXIT_CLAIMS = Claims(
    Claim("flat_step", "each step takes ~42-45 ms regardless of how many queries are done", "x1.0 (42-45 ms)",
          at_most=1.33, source=SEED,
          metric="full's step time at <= 10% of rows active over at 100%, either way (max(r, 1/r)), traced steps"),
    Claim("wasted", "5.6x slowdown due to wasted computation on done queries", "5.6x", at_most=0.4, partly=0.7,
          source=SEED, metric="share of full's computed rows that were useful (its share of the ideal)"),
    Claim("early_exit", "per-query early exit: estimated 2-4x speedup", "2-4x", at_least=2.0, partly=1.05,
          source=SEED, metric="recycle over full, whole ladder runs in paired rounds"),
    Claim("compaction", "dynamic batching (compaction) won't work with CUDA graphs", "breaks CUDA graphs",
          at_least=1.0, source=SEED,
          metric="distinct batch shapes compact ran, minus bucketed's (one graph each under CUDA graphs)"),
    Claim("target_3x", "target (CPU default): recycle at least 3x faster than full", ">= 3x", at_least=3.0,
          partly=1.05, setup={"device": "cpu"}, source=I16, metric="recycle over full, whole ladder runs in paired rounds"),
    Claim("target_4x", "target (GPU preset): recycle at least 4x faster than full", ">= 4x", at_least=4.0,
          partly=1.05, setup={"device": "cuda"}, source=I16, metric="recycle over full, whole ladder runs in paired rounds"),
    Claim("target_ideal", "target: recycle reaches at least 70% of the ideal", ">= 70%", at_least=0.70, source=I16,
          metric="the ideal (useful rows at full's cost per row) over recycle's time: recycle over full x useful share"),
    Claim("bucketed_masked", "target (CPU default): bucketed keeps one graph per bucket and beats masked", "> masked",
          at_least=1.0, setup={"device": "cpu"}, source=I16,
          metric="masked over bucketed, whole ladder runs in paired rounds (0 when a bucket compiled two graphs)"),
    Claim("bucketed_full", "target (GPU preset): bucketed at least as fast as full", ">= full", at_least=1.0,
          setup={"device": "cuda"}, source=I16, metric="full over bucketed, whole ladder runs in paired rounds"),
    Claim("v10", "slot recycling (V10): 20k candidates at B=256 in 17.7 s, 0.88 ms per candidate", "0.88 ms",
          at_most=0.88, source=SEED, metric="ms per candidate",
          why_not="another engine, policy and graph: the number is not comparable"),
    headline="early_exit", params=EarlyExitParams)

# The claims the timed decisions are made against, looked up at import (a misspelt key fails before any timing).
FLAT_STEP = EARLY_EXIT_CLAIMS["flat_step"]  # decided on the ratio, judged either way (`either_way`)
RECYCLE = tuple(EARLY_EXIT_CLAIMS[k] for k in ("target_3x", "target_4x", "early_exit"))  # one decision, this order
BUCKETED = ((EARLY_EXIT_CLAIMS["bucketed_masked"], "masked", "bucketed"),   # (claim, baseline, optimized)
            (EARLY_EXIT_CLAIMS["bucketed_full"], "full", "bucketed"))


def either_way(r: Measured) -> Measured:
    """max(r, 1/r) of a ratio and its interval (the image of [low, high]: 1 when the interval holds 1): how far a
    ratio is from 1 in either direction."""
    def f(x):
        return max(x, 1 / x) if x > 0 else math.inf
    low = 1.0 if r.low <= 1 <= r.high else min(f(r.low), f(r.high))
    return Measured(f(r.value), min(low, f(r.value)), max(f(r.low), f(r.high), f(r.value)))


def measure_early_exit(ladder, *, ms: dict, res: dict, busy: list, idle: list, n_shapes: dict,
                       one_per_bucket: bool, batch: int, min_bucket: int, cfg, device) -> dict:
    """{claim key: (Measured, Decision or None, sentence)} for EARLY_EXIT_CLAIMS on the `ladder` workload: `ms` /
    `res` per strategy (`study.time_strategies`: the table), `busy` / `idle` full's traced step times at 100% and
    <= 10% active (reported only). Timed here, in paired rounds (`decide`):
    - one step with <= 10% of its rows active over one with all active (single steps), decided against the claim's
      side (<= 1.33) and judged either way (`either_way`);
    - recycle over full, decided against the first of target_3x, target_4x, early_exit that is this run's setup.
      A decision's sequence of intervals holds at every look at once (`perflab.kit.verdicts`), so the interval it
      stopped at judges the pair's other thresholds too, and, times the useful share, the ideal;
    - each bucketed target in rounds of its own, where it is this run's setup."""
    full = res["full"]
    useful, dt = full.slot_steps - full.wasted_slot_steps, device.type
    share = useful / full.slot_steps
    where = f"the ladder ({len(ladder.candidates):,} candidates, B={batch}, {dt})"
    table = ", ".join(f"{s} {ms['full'].median / m.median:.2f}x" for s, m in ms.items() if s != "full")
    fn = {s: study.strategy_fn(ladder, batch, s, min_bucket) for s in ("full", "recycle", "masked", "bucketed")}
    out = {}
    step_busy, step_idle, active = study.step_fns(ladder, batch, 0.1)
    f = FLAT_STEP.decide(decide_speedup, step_idle, step_busy, cfg=cfg, device=device, min_rounds=30)   # ~2 x 2 ms a round: 30 are cheap
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
