"""Seed 001's claims and the issue targets for studies 3 and 4, as data beside their verdict rules.

Each `Claim` says what is measured (`metric`, in words), the threshold (`at_least` or `at_most`, and
`partly` for a real but smaller effect) and where it can be tested (`needs="cuda"`: a GPU target or
mechanism, "not tested here" elsewhere; `needs="cpu"`: a CPU-default target). `measure_eval` and
`measure_early_exit` turn a notebook's results into a `Measured` (value and interval: p20-p80 ratios of
timings, exact counts) and a sentence per claim; `perflab.verdicts.judge` gives the verdict, so a
measurement whose interval straddles its threshold is "within noise" rather than flipping between runs.
The recompile claim's extra rule: the seed's loop recompiles and padding removes it -> "fixed".
"""
from __future__ import annotations

import dataclasses

from ..bench import speedup_range, summary
from ..verdicts import Measured, judge, log_claims


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    text: str                     # the seed's words, or the target
    claimed: str                  # its number, as written
    metric: str                   # what is measured here, in words
    at_least: float | None = None
    at_most: float | None = None
    partly: float | None = None   # past this (on the claim's side of 1), a real but smaller effect
    needs: str = ""               # "cuda" or "cpu": the only device type it is judged on
    why_not: str = ""             # when it cannot be tested at all


EVAL_CLAIMS = (
    Claim("memory", "10,100 candidates in one batch allocate [10100, 120, 26, 3]: ~12 GB, exceeds an 8 GB GPU",
          "~12 GB", "GiB for 10,100 rows at S=120 (memory model)", at_least=8.0),
    Claim("recompiles", "CUDA Graph recompilation, ~20-30 s per unique batch size; unpadded 110: 2.97 s vs 0.27 s",
          "a recompile per new size", "graphs compiled per new tail size after warm-up, unpadded", at_least=1.0),
    Claim("batch_1024", "batch 1024 is pathologically slow: 3.37 vs 0.41 ms per query at 512", "8.2x",
          "ms per candidate at the largest swept batch over the one before (1024 over 512)", at_least=4.0, partly=2.0),
    Claim("l2", "the slowdown comes from tensors exceeding L2 (memory thrashing)", "~75 MB tensors at 1024",
          "change of the cost per candidate-step where the step's bytes pass L2", at_least=2.0,
          why_not="no swept batch size crosses L2"),
    Claim("cap_512", "capping the batch at 512 gives the best throughput", "cap at 512",
          "ms per candidate at 512 over the best other batch size", at_most=1.0),
    Claim("flat", "target: per-candidate cost flat or falling up to the largest batch that fits", "<= +10% per step up",
          "largest rise of ms per candidate from one swept batch size to the next", at_most=1.10),
    Claim("flat_step", "target, stragglers removed: cost per candidate-step flat or falling", "<= +10% per step up",
          "largest rise of us per candidate-step from one swept batch size to the next", at_most=1.10),
    Claim("speed_5x", "target: compiled and padded at least 5x the same code eager and unpadded", ">= 5x",
          "whole evaluation, eager unpadded over compiled padded", at_least=5.0, partly=1.05, needs="cuda"),
    Claim("floor_20", "target: at least 20% of the bandwidth floor", ">= 20%",
          "bytes per step over time per step, as a share of the measured copy bandwidth", at_least=0.20, needs="cuda"),
    Claim("seed_run", "the fixed 100 x 100 'both' run: 18.19 s + 5.49 s warm-up = 1.80 ms per candidate", "1.80 ms",
          "ms per candidate", at_most=1.80, why_not="another engine, policy and graph: the number is not comparable"),
    Claim("kg_mrr", "target: on the whole test split, realistic MRR at or above NTPλ's published figure on at least "
          "two of Kinship (0.80), Nations (0.74) and UMLS (0.93)", ">= NTPλ",
          "realistic filtered MRR on the whole test split minus NTPλ's published MRR of the graph run",
          at_least=0.0, why_not="a graph without published results, or part of the test split"),
    Claim("kg_rules", "target: above the mined rules alone on all three graphs", "> rules alone",
          "realistic MRR minus the mined rules' realistic MRR on the same test triples", at_least=0.001,
          why_not="a graph without mined rules"),
    Claim("kg_ties", "target: at most 5% of the positives' ranks tie with a failed corruption", "<= 5%",
          "share of positives whose fitted score equals that of a corruption the search did not prove", at_most=0.05),
    Claim("kg_speed", "target: whole-split evaluation on the CPU defaults at 1,000 candidates/s or more", ">= 1,000/s",
          "candidates per second of the test scoring (search + embedding), warm, whole test split", at_least=1e3,
          needs="cpu"),
    Claim("kg_speed_gpu", "target: whole-split evaluation on the GPU preset at 100k candidates/s or more", ">= 100k/s",
          "candidates per second of the test scoring (search + embedding), warm, whole test split", at_least=1e5,
          needs="cuda"),
)

EARLY_EXIT_CLAIMS = (
    Claim("flat_step", "each step takes ~42-45 ms regardless of how many queries are done", "x1.0 (42-45 ms)",
          "full: step time at <= 10% active over 100% active, either way (max(r, 1/r))", at_most=1.33),
    Claim("wasted", "5.6x slowdown due to wasted computation on done queries", "5.6x",
          "share of full's computed rows that were useful (its share of the ideal)", at_most=0.4, partly=0.7),
    Claim("early_exit", "per-query early exit: estimated 2-4x speedup", "2-4x", "recycle over full",
          at_least=2.0, partly=1.05),
    Claim("compaction", "dynamic batching (compaction) won't work with CUDA graphs", "breaks CUDA graphs",
          "distinct batch shapes compact ran, minus bucketed's (one graph each under CUDA graphs)", at_least=1.0),
    Claim("target_3x", "target (CPU default): recycle at least 3x faster than full", ">= 3x", "recycle over full",
          at_least=3.0, partly=1.05, needs="cpu"),
    Claim("target_4x", "target (GPU preset): recycle at least 4x faster than full", ">= 4x", "recycle over full",
          at_least=4.0, partly=1.05, needs="cuda"),
    Claim("target_ideal", "target: recycle reaches at least 70% of the ideal", ">= 70%",
          "ideal (useful rows at full's cost per row) over recycle's time", at_least=0.70),
    Claim("bucketed_masked", "target (CPU default): bucketed keeps one graph per bucket and beats masked", "> masked",
          "masked over bucketed (0 when a bucket compiled more than one graph)", at_least=1.0, partly=None, needs="cpu"),
    Claim("bucketed_full", "target (GPU preset): bucketed at least as fast as full", ">= full", "full over bucketed",
          at_least=1.0, needs="cuda"),
    Claim("v10", "slot recycling (V10): 20k candidates at B=256 in 17.7 s, 0.88 ms per candidate", "0.88 ms",
          "ms per candidate", at_most=0.88, why_not="another engine, policy and graph: the number is not comparable"),
)


def verdict(c: Claim, m: Measured | None, device_type: str, fixed: bool = False) -> str:
    """`judge` with the claim's thresholds (nothing measured: "not tested here"); "fixed" for a claim that
    holds of the seed's loop and that the fix removes."""
    v = judge(m, at_least=c.at_least, at_most=c.at_most, partly=c.partly, needs=c.needs, device_type=device_type)
    return "fixed" if fixed and v == "holds" else v


def ratio(a, b, scale: float = 1.0) -> Measured:
    """a / b of two Measurements (times), times `scale`, with the conservative p20/p80 interval."""
    lo, hi = speedup_range(a, b)
    v = a.median / b.median
    return Measured(v * scale, min(lo, v) * scale, max(hi, v) * scale)


def _fmt(m: Measured, unit: str = "x", digits: int = 2) -> str:
    if unit == "%":
        return f"{m.value:.0%} (p20-p80 {m.low:.0%}-{m.high:.0%})" if m.low != m.high else f"{m.value:.0%}"
    spread = f" (p20-p80 {m.low:.{digits}f}-{m.high:.{digits}f})" if m.low != m.high else ""
    return f"{m.value:.{digits}f}{unit}{spread}"


def _worst_rise(pairs) -> Measured:
    """pairs: [(Measured rise b1 -> b2)]: the largest rise, with the largest low and high (all <= t iff max high <= t)."""
    return Measured(max(p.value for p in pairs), max(p.low for p in pairs), max(p.high for p in pairs))


def measure_eval(*, seed_gib: float, unpadded_graphs_per_tail: float, padded_graphs: int, compile_s: float,
                 points, l2: int, step_bytes_fn, timings: dict, base: str, fixed: str, floor_share: Measured | None,
                 device_type: str) -> dict:
    """{claim key: (Measured or None, sentence)} for EVAL_CLAIMS from notebook 03's results."""
    pts = sorted(points, key=lambda p: p.batch)
    per_cand = {p.batch: p for p in pts}
    out = {"memory": (Measured.exact(seed_gib), f"{seed_gib:.2f} GiB predicted for 10,100 rows at S=120 "
                      "(this engine builds candidate states of A+1 atoms, not 26)"),
           "recompiles": (Measured.exact(unpadded_graphs_per_tail),
                          f"unpadded: {unpadded_graphs_per_tail:.2f} new graphs per new tail size after warm-up "
                          f"({compile_s:.2f} s per new graph); padded: {padded_graphs} in all")}
    hi, lo = pts[-1], pts[-2]
    r = ratio(hi.measurement, lo.measurement, lo.batch / hi.batch)
    out["batch_1024"] = (r, f"B={hi.batch} over B={lo.batch}: {_fmt(r)} per candidate; the first call at "
                            f"B={hi.batch} took {hi.first_call_s / hi.measurement.median:.1f}x a warm one")
    cross = next(((a, b) for a, b in zip(pts, pts[1:]) if step_bytes_fn(a.batch) <= l2 < step_bytes_fn(b.batch)), None)
    if cross:
        a, b = cross
        j = ratio(b.measurement, a.measurement, (a.batch * a.steps) / (b.batch * b.steps))
        out["l2"] = (j, f"the step's bytes pass L2 ({l2 / 2**20:g} MiB) between B={a.batch} and {b.batch}: "
                        f"cost per candidate-step {_fmt(j)} there")
    else:
        out["l2"] = (None, f"no swept batch size crosses L2 ({l2 / 2**20:g} MiB)")
    if 512 in per_cand and len(pts) > 1:
        best = min((p for p in pts if p.batch != 512), key=lambda p: p.ms_per_candidate)
        c = ratio(per_cand[512].measurement, best.measurement, best.batch / 512)
        out["cap_512"] = (c, f"B=512 costs {_fmt(c)} of the best other batch size (B={best.batch}) per candidate")
    else:
        out["cap_512"] = (None, "512 is not in the sweep")
    rises = [ratio(b.measurement, a.measurement, a.batch / b.batch) for a, b in zip(pts, pts[1:])]
    step_rises = [ratio(b.measurement, a.measurement, (a.batch * a.steps) / (b.batch * b.steps)) for a, b in zip(pts, pts[1:])]
    out["flat"] = (_worst_rise(rises), f"largest rise {_fmt(_worst_rise(rises))}; ms per candidate "
                   f"{[round(p.ms_per_candidate, 3) for p in pts]} at B={[p.batch for p in pts]}, steps {[p.steps for p in pts]}")
    out["flat_step"] = (_worst_rise(step_rises), f"largest rise {_fmt(_worst_rise(step_rises))}; us per candidate-step "
                        f"{[round(p.us_per_candidate_step, 1) for p in pts]}")
    s = ratio(timings[base]["m"], timings[fixed]["m"])
    out["speed_5x"] = (s, f"{_fmt(s)} ({base} over {fixed}) on {device_type}")
    out["floor_20"] = (floor_share, f"{_fmt(floor_share, '%')} of the measured copy bandwidth on {device_type}"
                       if floor_share else "not measured")
    out["seed_run"] = (None, f"{timings[fixed]['ms_per_candidate']:.3f} ms per candidate here ({fixed}, {device_type})")
    return out


def measure_real_graph(kg: str, lp, dataset: str | None, device_type: str) -> dict:
    """{claim key: (Measured or None, sentence)} for the link-prediction claims from `links.predict`'s result `lp`
    on the graph `kg` names (`dataset`: the benchmark's name, None for a graph without mined rules)."""
    from .links.benchmark_eval import published_mrr

    fit = lp.results["fitted"]
    mrr = fit.metrics["realistic"]["MRR"]
    size = "the whole test split" if lp.whole_split else f"the first {lp.queries} of {lp.test_size} test triples"
    here = (f"realistic MRR {mrr:.3f} (optimistic {fit.metrics['optimistic']['MRR']:.3f}, pessimistic "
            f"{fit.metrics['pessimistic']['MRR']:.3f}) on {size} of kg={kg}")
    ntp = published_mrr(dataset, "NTPλ") if dataset else None
    if ntp is None:
        out = {"kg_mrr": (None, f"{here}; no published NTPλ figure for this graph")}
    elif not lp.whole_split:
        out = {"kg_mrr": (None, f"{here}; the target is on the whole split (-p n_queries=0)")}
    else:
        out = {"kg_mrr": (Measured.exact(mrr - ntp), f"{here} against NTPλ {ntp:.2f} ({mrr - ntp:+.3f})")}
    if lp.rules_only is None:
        out["kg_rules"] = (None, f"kg={kg}: no mined rules")
    else:
        r = lp.rules_only["metrics"]["MRR"]
        out["kg_rules"] = (Measured.exact(mrr - r), f"{here}; the mined rules alone {r:.3f} ({mrr - r:+.3f})")
    out["kg_ties"] = (Measured.exact(fit.tie_share), f"{fit.tie_share:.1%} of the positives' ranks tie with a failed "
                      f"corruption on {size} (the prover alone: {lp.results['prover alone'].tie_share:.1%})")
    speed = f"{lp.candidates_per_s:,.0f} candidates/s over {lp.candidates:,} candidates ({size}, {device_type})"
    m = Measured.exact(lp.candidates_per_s) if lp.whole_split else None
    out["kg_speed"] = (m, speed if m else f"{speed}; the target is on the whole split")
    out["kg_speed_gpu"] = out["kg_speed"]
    return out


def eval_headline(lp, dataset: str | None) -> str:
    """03's headline claim: the MRR against NTPλ on a benchmark, else the compiled-vs-eager speedup."""
    from .links.benchmark_eval import published_mrr

    return "kg_mrr" if lp is not None and dataset and published_mrr(dataset, "NTPλ") is not None else "speed_5x"


def _either_way(r: Measured) -> Measured:
    f = lambda x: max(x, 1 / x)  # noqa: E731
    low = 1.0 if r.low <= 1 <= r.high else min(f(r.low), f(r.high))
    return Measured(f(r.value), min(low, f(r.value)), max(f(r.low), f(r.high), f(r.value)))


def measure_early_exit(*, ms: dict, res: dict, busy: list, idle: list, n_shapes: dict, one_per_bucket: bool,
                       batch: int, device_type: str) -> dict:
    """{claim key: (Measured or None, sentence)} for EARLY_EXIT_CLAIMS from notebook 04's ladder results:
    `ms`/`res` per strategy, `busy`/`idle` full's step times at 100% and <= 10% active."""
    import numpy as np

    full = res["full"]
    useful = full.slot_steps - full.wasted_slot_steps
    p = lambda xs, q: float(np.percentile(xs, q))  # noqa: E731
    flat = None
    if busy and idle:
        r = float(np.median(idle) / np.median(busy))
        flat = Measured(r, min(r, p(idle, 20) / p(busy, 80)), max(r, p(idle, 80) / p(busy, 20)))
    rec, bkt = ratio(ms["full"], ms["recycle"]), ratio(ms["full"], ms["bucketed"])
    ideal = ratio(ms["full"], ms["recycle"], useful / full.slot_steps)
    bm = ratio(ms["masked"], ms["bucketed"]) if one_per_bucket else Measured.exact(0.0)
    vs = ", ".join(f"{s} {ms['full'].median / m.median:.2f}x" for s, m in ms.items() if s != "full")
    n_cand = len(full.score)
    return {
        "flat_step": (None, "no full step with all rows active, or none with <= 10%") if flat is None else
                     (_either_way(flat), f"full at B={batch}: {1e3 * np.median(busy):.2f} ms per step with every row "
                      f"active, {1e3 * np.median(idle):.2f} ms with <= 10% active ({_fmt(flat)})"),
        "wasted": (Measured.exact(useful / full.slot_steps), f"{useful} useful of {full.slot_steps} rows computed by full "
                   f"({useful / full.slot_steps:.0%}) on seed-like lengths"),
        "early_exit": (rec, f"recycle {_fmt(rec)} vs full; {vs}"),
        "compaction": (Measured.exact(n_shapes["compact"] - n_shapes["bucketed"]),
                       f"compact ran {n_shapes['compact']} distinct batch shapes, bucketed {n_shapes['bucketed']}"),
        "target_3x": (rec, f"recycle {_fmt(rec)} vs full on {device_type}, B={batch}"),
        "target_4x": (rec, f"recycle {_fmt(rec)} vs full on {device_type}, B={batch}"),
        "target_ideal": (ideal, f"recycle at {_fmt(ideal, '%')} of the ideal ({res['recycle'].steps_executed} steps "
                         f"against full's {full.steps_executed})"),
        "bucketed_masked": (bm, f"one graph per bucket: {one_per_bucket}; masked over bucketed {_fmt(bm)}"),
        "bucketed_full": (bkt, f"full over bucketed {_fmt(bkt)} on {device_type}"),
        "v10": (None, f"recycle {1e3 * summary(ms['recycle'])['median_s'] / n_cand:.3f} ms per candidate here "
                f"({device_type}, B={batch})"),
    }


def assess(claims, measured: dict, device_type: str, fixed: set = frozenset()) -> list[dict]:
    """One row per claim: the seed's words and number, what was measured, the verdict."""
    rows = []
    for c in claims:
        m, sentence = measured[c.key]
        v = verdict(c, m, device_type, fixed=c.key in fixed)
        if v == "not tested here" and c.needs and c.needs != device_type:
            sentence += f" (a {c.needs} target: judged on {c.needs} runs only)"
        rows.append(dict(claim=c.key, seed=f"{c.text} [{c.claimed}]", measured=sentence, verdict=v,
                         value=None if m is None else m.value, low=None if m is None else m.low,
                         high=None if m is None else m.high, rule=_rule(c)))
    return rows


def _rule(c: Claim) -> str:
    side = f">= {c.at_least:g}" if c.at_least is not None else f"<= {c.at_most:g}"
    return f"{c.metric} {side}" + (f" (partly past {c.partly:g})" if c.partly else "") + (f"; {c.needs} only" if c.needs else "")


def report(run, rows: list[dict], headline: str | None = None) -> None:
    """Log and print each claim with its verdict and rule (`perflab.verdicts.log_claims`); `headline` names
    the claim that leads the run's report."""
    log_claims(run.log, rows, headline=headline)
