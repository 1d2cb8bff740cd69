"""What notebook 06 shows: tables (DataFrames, shown as HTML), figures and commands built from its `study.Findings`
(nothing is measured here). A number that a claim judges is shown as it was decided (the paired rounds' value and
99% interval); one measured another way says so on its face ("indicative: ratio of medians of 3 rounds").
Colours: the baseline grey and the optimized version blue in every figure (`perflab.kit.figures.color` with the
study's IMPLS); a decided interval in its verdict's colour (`perflab.kit.claims.COLORS`)."""
from __future__ import annotations

import dataclasses
import math

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..kit.bench import fmt_seconds
from ..kit.claims import COLORS
from ..kit.figures import PALETTE, color
from ..kit.formatting import num, value_text
from .ablation import IMPLS, TESTED_BY, claims_of
from .claims import CLAIMS
from .config import Toggles
from .findings import GAINS, MEMORY, Findings, decided, indicative, indicative_text, spreads
from .floors import fraction_of_floor
from .params import LatentWireParams

BASE, OPT = color("baseline", IMPLS), color("optimized", IMPLS)
# the sweep's lines: its fp32 points are the optimized version (its colour), bf16 and the compiled step the next two
DTYPES = {"fp32": OPT, "bf16 autocast": PALETTE[2], "compiled step": PALETTE[4]}


def plain_log(axis, subs=(1.0, 2.0, 5.0)) -> None:
    """Log scale with ticks at `subs` x 10^k labelled as plain numbers (2, 5, 10; not 2x10^0)."""
    axis.set_major_locator(ticker.LogLocator(subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: num(v)))
    axis.set_minor_formatter(ticker.NullFormatter())


def describe_toggles(toggles: dict) -> str:
    """Only what differs from the defaults (= the baseline's behaviour)."""
    default = dataclasses.asdict(Toggles())
    return ", ".join(f"{k}={v}" for k, v in toggles.items() if default.get(k) != v) or "-"


def claimed_by_variant() -> dict[str, str]:
    """The report's numbers per ablation variant (the claims it tests end to end; issue 13's targets left out), for
    the table."""
    out: dict[str, list[str]] = {}
    for c in CLAIMS:
        if c.key in TESTED_BY and c.source != "issue 13":
            out.setdefault(TESTED_BY[c.key], []).append(f"{c.claimed} ({c.key})")
    return {k: "; ".join(v) for k, v in out.items()}


def vs_baseline(run, found: Findings, variant: str) -> tuple[str, str]:
    """A variant's samples/s over the baseline's as the page shows it, and how it was taken: the decision's value and
    99% interval where a claim was decided on it (paired rounds; the claims judged on it), else the ablation's ratio
    of medians, indicative."""
    if variant == "baseline":
        return "1x", "the reference"
    d, keys = decided(found, variant)
    if d is not None:   # the samples/s column is the ablation's own: its ratio said beside the decided one
        return (value_text(d.value, d.low, d.high, "x"),
                f"decided: {', '.join(keys)} (the samples/s column's own ratio: {indicative(found, variant):.2f}x, "
                f"indicative)")
    other = other_claims(run, variant)
    return f"{indicative(found, variant):.2f}x", "indicative" + (f"; {other}" if other else "")


def ablation_note(run, found: Findings) -> str:
    """What the ablation table's ratio column holds, and how far its indicative ratios can move: the spread
    (IQR/median) of the ablation's own timings, from which a ratio of medians of a few rounds strays from the decided
    one (06 at 7e78e9d: single_pass's 2.36x against its decided 1.96x [1.81, 2.12])."""
    spread = [r.iqr_ratio for r in found.ablation.values()]
    return (f"vs baseline: samples/s over the baseline's; decided = the value and 99% interval of the paired rounds a "
            f"claim was judged on (the card's number); indicative = the "
            f"{indicative_text(run).removeprefix('indicative: ')} of the ablation's own timings, whose blocks spread "
            f"{min(spread):.0%}-{max(spread):.0%} (IQR/median): a ratio of their medians strays by as much, where a "
            f"decided one does not. What each variant costs (time, launches, floor, memory): the appendix")


def ablation_table(run, found: Findings) -> pd.DataFrame:
    """One row per variant: throughput, its ratio to the baseline's and how it was taken (`vs_baseline`), and the
    report's numbers; what each variant costs (time, spread, launches, floor, memory) is `costs_table`'s (the appendix):
    the table a reader needs for the verdicts, narrow enough to read without wrapping."""
    claimed = claimed_by_variant()
    rows = []
    for name, r in found.ablation.items():
        ratio, how = vs_baseline(run, found, name)
        rows.append({"variant": name, "samples/s": f"{r.samples_per_s:.3g}", "vs baseline": ratio, "how": how,
                     "report claims": claimed.get(name, "-")})
    return pd.DataFrame(rows).set_index("variant")


def peak_label(method: str) -> str:
    """What a peak-memory column holds: the CUDA allocator's peak of the first step, or on a CPU the whole process's
    peak resident memory over it (the interpreter, torch and every earlier variant's freed-but-kept heap included:
    not the step's own; `activation MiB` is that)."""
    return ("peak MiB (CUDA allocator, first step)" if method == "cuda_allocator" else
            f"process peak RSS MiB ({method}, first step)")


def costs_table(run, found: Findings) -> pd.DataFrame:
    """One row per variant, what it costs: the median step and its spread, launches per sample (perflab.kit.launches:
    CUDA kernels, or the CPU proxy), model FLOP/s over the run's dtype's matmul floor, activation and peak memory
    (`peak_label`), the first (untimed) step."""
    cfg = run.cfg
    peak = found.peaks["bf16" if cfg.amp else "fp32"][0]
    rows = []
    for name, r in found.ablation.items():
        f = found.flops[r.variant.knobs.get("single_pass", False)]["total"]
        rows.append({"variant": name, "median step": fmt_seconds(r.measurement.median),
                     "IQR/median": f"{r.iqr_ratio:.0%}",
                     "launches/sample": num(r.launches["total"] / r.samples_per_step),
                     f"of {'bf16' if cfg.amp else 'fp32'} floor": f"{fraction_of_floor(r, f, peak).value:.1%}",
                     "activation MiB": "-" if r.activation_bytes is None else f"{r.activation_bytes / 2**20:.3g}",
                     peak_label(r.memory_method): num(r.peak_bytes / 2**20),
                     "first step": fmt_seconds(r.first_step_s)})
    return pd.DataFrame(rows).set_index("variant")


_RATIO_TICKS = (0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 4, 5, 7, 10, 20, 30, 50, 100)


def ratio_axis(axis, low: float, high: float, keep=(), px: float = 340.0) -> None:
    """A log axis of ratios from `low` to `high` with ticks a reader can read off (0.5, 0.75, 1, 1.5, 2, 3, 4, ...):
    1x and the ticks in `keep` (the claims' thresholds) always, the others only where their labels do not run into a
    neighbour's on an axis about `px` pixels long (at 8.5 pt, ~6 px a character)."""
    span = math.log(high / low)
    ticks = sorted(t for t in _RATIO_TICKS if low <= t <= high)
    must = {t for t in ticks if t == 1 or any(abs(t - k) < 1e-9 for k in keep)}
    width = {t: 6.0 * len(f"{num(t)}x") + 8 for t in ticks}

    def fits(t, chosen):
        return all(abs(math.log(t / c)) * px / span >= (width[t] + width[c]) / 2 for c in chosen)

    chosen = sorted(must)
    for t in sorted(set(ticks) - must, key=lambda t: (len(f"{num(t)}"), abs(math.log(t)))):   # short, near 1x first
        if fits(t, chosen):
            chosen = sorted([*chosen, t])
    axis.set_major_locator(ticker.FixedLocator(chosen))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{num(v)}x"))
    axis.set_minor_locator(ticker.NullLocator())


def _judged_on(keys: list[str]) -> str:
    """What a variant's claims that are not its speed are judged on: 'its share of the step', 'activation memory',
    'its share of the fp32 floor'."""
    share = all(CLAIMS[k].unit == "%" for k in keys)
    return ("activation memory" if all(k in MEMORY for k in keys)
            else "its share of the matmul floor" if share and all("floor" in CLAIMS[k].metric for k in keys)
            else "its share of the step" if share else "another quantity")


def other_claims(run, variant: str) -> str:
    """What a variant's claims that are not its speed say beside its indicative ratio: each judged one on what it is
    judged on (the card's number), each not tested here said so ('amp: not tested here (a GPU claim)'); '' for none."""
    other = [k for k in claims_of(variant) if k not in GAINS]
    judged = [k for k in other if not CLAIMS[k].off_setup(run.cfg, run.device.type)]
    off = [k for k in other if k not in judged]
    return "; ".join([*([f"{', '.join(judged)}: judged on {_judged_on(judged)} (card)"] if judged else []),
                      *([f"{', '.join(off)}: not tested here (set up for "
                         f"{', '.join(sorted({v for k in off for _, v in CLAIMS[k].setup}, key=str))})"] if off else [])])


def ablation_figure(run, found: Findings):
    """The study's main figure: each variant's samples/s over the baseline's. Where a claim was decided on the
    variant: the decision's value (dot) and 99% interval (bar, in the claim's verdict colour), the claims' thresholds
    as black ticks, the numbers and verdicts written beside; elsewhere the ablation's ratio of medians, hollow, with
    the p20-p80 of each over the other's, labelled indicative. -> Figure"""
    names = list(found.ablation)
    b_lo, b_hi = found.base.samples_per_s_range()
    # the numbers in a column of their own beside the axes (in the layout): ~700 px, beside the card's table
    fig, (ax, col) = plt.subplots(1, 2, figsize=(6.6, 0.3 * len(names) + 1.5), layout="constrained", sharey=True,
                                  gridspec_kw=dict(width_ratios=[1, 0.95], wspace=0.0))
    xs, labels, bars = [], [], []
    for y, name in enumerate(names):
        if name == "baseline":
            ax.plot([1], [y], "s", color=BASE, ms=7)
            labels.append((y, "1x: the reference", "black"))
            continue
        d, keys = decided(found, name)
        if d is not None:
            verdicts = {}
            for k in keys:
                verdicts.setdefault(CLAIMS[k].verdict(found.gains[k], run.cfg, run.device.type), []).append(k)
                ax.plot([CLAIMS[k].at_least] * 2, [y - 0.38, y + 0.38], color="black", lw=1.3)
                xs.append(CLAIMS[k].at_least)
            first = next(iter(verdicts))
            bars.append((y, d, COLORS.get(first, "black"), first))
            xs += [d.value, d.low, d.high]
            said = "; ".join(f"{v}: {', '.join(ks)}" for v, ks in verdicts.items())
            labels.append((y, f"{value_text(d.value, d.low, d.high, 'x')} {said}", "black"))
            continue
        lo, hi = found.ablation[name].samples_per_s_range()
        x, rng = indicative(found, name), (lo / b_hi, hi / b_lo)
        ax.plot(rng, [y, y], color="0.55", lw=1.6)
        ax.plot([x], [y], "o", mfc="white", mec="0.35", mew=1.2, ms=6)
        xs += [*rng, x]
        other = other_claims(run, name)   # a share or a memory claim: its number is the card's; or not tested here
        labels.append((y, f"{x:.2f}x indicative" + (f"\n{other}" if other else ""), "0.35"))
    for y, text, c in labels:
        col.text(0.0, y, text, va="center", fontsize=7.5 if "\n" not in text else 6.5, color=c, linespacing=1.0)
    col.set_axis_off()
    col.set_xlim(0, 1)
    ax.axvline(1, color=BASE, lw=0.9, ls="--")
    finite = [x for x in xs + [1] if x > 0 and math.isfinite(x)]
    lo, hi = min(finite) / 1.15, max(finite) * 1.15
    for y, d, c, _ in bars:  # an interval open at an end (too few rounds) runs to the axis's edge, an arrow there
        a, b = max(d.low, lo) if d.low > 0 else lo, min(d.high, hi)
        ax.plot([a, b], [y, y], color=c, lw=7, solid_capstyle="butt")
        for end, edge, mark in ((d.low, lo, "<"), (d.high, hi, ">")):
            if not (0 < end < math.inf) or not lo <= end <= hi:
                ax.plot([edge], [y], mark, color=c, ms=8, clip_on=False)
        ax.plot([d.value], [y], "o", color=c, mec="black", mew=0.7, ms=7)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ratio_axis(ax.xaxis, lo, hi, keep=[CLAIMS[k].at_least for name in names for k in decided(found, name)[1]])
    ax.set_yticks(range(len(names)), names, fontsize=8.5)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.tick_params(axis="x", labelsize=8.5)
    ax.grid(axis="x", color="0.9", lw=0.6)
    ax.set_xlabel(f"training samples/s over the baseline's on {run.device.type} (log scale)", fontsize=9)
    ax.set_title("each recommendation alone, the quick wins, all together, compiled", fontsize=9.5, loc="left")
    handles = [Line2D([], [], color=COLORS["holds"], lw=6, marker="o", mec="black",
                      label="decided in paired rounds:\nvalue, 99% interval"),
               Line2D([], [], color="0.55", lw=1.6, marker="o", mfc="white", mec="0.35",
                      label=f"{indicative_text(run)},\np20-p80"),
               Line2D([], [], color="black", lw=0, marker="|", ms=11, mew=1.3, label="a claim's threshold")]
    key = dict.fromkeys((v, c) for _, _, c, v in bars)   # the verdicts' colours drawn, each named
    handles += [Patch(color=c, label=f"colour: {v}") for v, c in key]
    fig.legend(handles=handles, loc="outside lower left", ncols=2, fontsize=7, frameon=False)
    return fig


def sweep_table(run, found: Findings) -> pd.DataFrame:
    """One row per sweep point (and the compiled step): samples/s with its p20-p80, spread, launches, the share of
    the fp32 floor and of the point's own dtype's floor, and peak memory."""
    points = [("bf16" if amp else "fp32", r) for amp, rows in found.sweep.items() for r in rows]
    if found.compiled is not None:
        points.append(("bf16" if found.compiled.variant.knobs.get("amp") else "fp32", found.compiled))
    flops, peaks = found.flops[True]["total"], found.peaks
    rows = []
    for dtype, r in points:
        lo, hi = r.samples_per_s_range()
        rows.append({"step": r.variant.name, "batch": r.samples_per_step, "dtype": dtype,
                     "samples/s": f"{r.samples_per_s:.3g}", "p20-p80": f"{lo:.3g}-{hi:.3g}",
                     "IQR/median": f"{r.iqr_ratio:.0%}", "launches/step": r.launches["total"],
                     "of fp32 floor": f"{fraction_of_floor(r, flops, peaks['fp32'][0]).value:.1%}",
                     "of its dtype's floor": f"{fraction_of_floor(r, flops, peaks[dtype][0]).value:.1%}",
                     peak_label(r.memory_method): f"{r.peak_bytes / 2**20:.4g}"})
    return pd.DataFrame(rows).set_index("step")


def _memory_axis(axis, values) -> None:
    """Peak memory: a log axis with ticks at 1, 2, 5 per decade where the values span a factor of 3, else a linear
    one with about five ticks (a span of 1.06-1.31 GB has one log tick)."""
    vs = [v for v in values if v > 0]
    if vs and max(vs) / min(vs) > 3:
        axis.axes.set_yscale("log")
        plain_log(axis)
    else:
        axis.set_major_locator(ticker.MaxNLocator(5))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: num(v)))


def memory_of(r) -> float | None:
    """A step's memory as the sweep's panel draws it, MiB: the CUDA allocator's peak, or on a CPU the activations
    held for backward (counted; None under compile), not the process's resident set (torch and every earlier point's
    heap: 605-756 MiB that moved with the run, not the batch)."""
    if r.memory_method == "cuda_allocator":
        return r.peak_bytes / 2**20
    return None if r.activation_bytes is None else r.activation_bytes / 2**20


def memory_label(method: str) -> str:
    return ("peak memory of a step (MiB, CUDA allocator)" if method == "cuda_allocator" else
            "activations held for backward (MiB, counted)")


def sweep_figure(run, found: Findings):
    """samples/s against the batch for each dtype (median, p20-p80 bars), the compiled step at its batch, the
    baseline, and the floors (samples/s at the matmul peak) as labelled lines; the step's memory on the right
    (`memory_of`)."""
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained", width_ratios=(1.6, 1))
    flops = found.flops[True]["total"]
    bs = sorted({r.samples_per_step for rows in found.sweep.values() for r in rows})
    mem = []
    for amp, rows in found.sweep.items():
        name = "bf16 autocast" if amp else "fp32"
        x = [r.samples_per_step for r in rows]
        y = [r.samples_per_s for r in rows]
        rng = [r.samples_per_s_range() for r in rows]
        a0.errorbar(x, y, yerr=[[v - lo for v, (lo, _) in zip(y, rng)], [hi - v for v, (_, hi) in zip(y, rng)]],
                    marker="s" if amp else "o", color=DTYPES[name], capsize=3, label=f"every recommendation, {name}")
        got = [(b, m) for b, m in zip(x, map(memory_of, rows)) if m is not None]
        a1.plot([b for b, _ in got], [m for _, m in got], marker="s" if amp else "o", color=DTYPES[name],
                label=f"{name}")
        mem += [m for _, m in got]
    c = found.compiled
    if c is not None:
        lo, hi = c.samples_per_s_range()
        a0.errorbar([c.samples_per_step], [c.samples_per_s], yerr=[[c.samples_per_s - lo], [hi - c.samples_per_s]],
                    marker="*", ms=13, color=DTYPES["compiled step"], capsize=3, ls="none",
                    label=f"compiled step, batch {c.samples_per_step}")
        m = memory_of(c)
        if m is not None:
            a1.plot([c.samples_per_step], [m], "*", ms=12, color=DTYPES["compiled step"])
            mem.append(m)
    ys = [r.samples_per_s for rows in found.sweep.values() for r in rows]
    for name, ls in (("fp32", "--"), ("bf16", ":")):
        floor = found.peaks[name][0] / flops
        a0.axhline(floor, color="0.35", lw=1, ls=ls)
        a0.annotate(f"{name} matmul floor: {num(floor)} samples/s", (bs[0], floor), xytext=(2, 3), textcoords="offset points",
                    fontsize=7, color="0.25")
        ys.append(floor)
    a0.axhline(found.base.samples_per_s, color=BASE, lw=1, ls="-.")
    a0.annotate(f"baseline (batch 1, accum {run.cfg.accum_steps}): {found.base.samples_per_s:.3g} samples/s",
                (bs[-1], found.base.samples_per_s), xytext=(-2, -10), textcoords="offset points", ha="right",
                fontsize=7, color="0.25")
    ys.append(found.base.samples_per_s)
    a0.set_yscale("log")
    a0.set_ylim(min(ys) / 1.6, max(ys) * 1.6)
    plain_log(a0.yaxis, subs=(1.0, 2.0, 3.0, 5.0))
    _memory_axis(a1.yaxis, mem)
    for a in (a0, a1):
        a.set_xscale("log", base=2)
        a.set_xticks(bs, [str(b) for b in bs])
        a.minorticks_off() if a is a0 else None
        a.set_xlabel("micro-batch size (samples per step)")
        a.grid(color="0.92", lw=0.6)
    a0.set_ylabel("training samples/s (median, p20-p80)")
    a1.set_ylabel(memory_label(found.base.memory_method))
    a0.set_title(f"batch sweep on {run.device.type}: one fresh model per point", fontsize=9, loc="left")
    a1.set_title("memory", fontsize=9, loc="left")
    fig.legend(*a0.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig


def curves_figure(run, found: Findings):
    """The training loss of the three curves (a running mean over `curve_batch` samples), the baseline grey, the
    optimized version blue (dashed: batch 1 on the baseline's samples; markers: the batched run), wall time in the
    legend."""
    fig, ax = plt.subplots(figsize=(8, 3.4), layout="constrained")
    styles = [dict(color=BASE, lw=4, alpha=0.7), dict(color=OPT, lw=1.5, ls="--"), dict(color=OPT, lw=1.2, marker="o")]
    batch = run.cfg.curve_batch
    for c, style in zip(found.curves, styles):
        window = max(1, batch // c.samples[0])  # every point a mean over curve_batch samples
        ax.plot(c.samples, pd.Series(c.losses).rolling(window, min_periods=1).mean(),
                label=f"{c.name} ({c.seconds:.1f} s)", **style)
    ax.axhline(found.untrained["loss"], color="0.5", lw=0.8, ls=":")
    ax.annotate(f"held-out loss of the initial weights: {found.untrained['loss']:.2f}",
                (found.curves[0].samples[-1], found.untrained["loss"]), xytext=(0, 3), textcoords="offset points",
                ha="right", fontsize=7, color="0.3")
    ax.set_xlabel("training samples seen")
    ax.set_ylabel(f"training loss (nats; mean over the last {batch} samples)")
    ax.set_title("loss curves from the same initial weights (wall time of each run in the legend)", fontsize=9,
                 loc="left")
    ax.legend(fontsize=8)
    return fig


def quality_table(found: Findings) -> pd.DataFrame:
    """Held-out quality of the initial weights and after each curve: the loss, its parts, first-token accuracy."""
    rows = [{"run": "initial weights", "seconds": "-", **found.untrained}]
    rows += [{"run": c.name, "seconds": f"{c.seconds:.2f}", **c.heldout} for c in found.curves]
    df = pd.DataFrame(rows).set_index("run")
    for k in ("loss", "tf", "first", "k", "first_token_acc"):
        df[k] = df[k].map(lambda v: f"{v:.3f}")
    return df


def spread_figure(run, found: Findings, threshold: float = 0.1):
    """Every timing's IQR/median (`findings.spreads`), one row per benchmark, the GPU preset's threshold as a line, the
    widest of each row named. -> Figure"""
    table = spreads(found, threshold).dropna(subset=["IQR/median"])
    groups = list(dict.fromkeys(table["benchmark"]))
    fig, ax = plt.subplots(figsize=(10, 0.36 * len(groups) + 1.2), layout="constrained")
    for y, g in enumerate(groups):
        rows = table[table["benchmark"] == g].reset_index(drop=True)
        ys = [y + ((i % 5) - 2) * 0.07 for i in range(len(rows))]
        ax.scatter(100 * rows["IQR/median"], ys, s=22, edgecolors="black", linewidths=0.4, zorder=3,
                   c=[COLORS["holds"] if v < threshold else COLORS["does not hold"] for v in rows["IQR/median"]])
        i = int(rows["IQR/median"].idxmax())
        ax.annotate(f"{rows.loc[i, 'case']} {rows.loc[i, 'IQR/median']:.0%}", (100 * rows.loc[i, "IQR/median"], ys[i]),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=7)
    ax.axvline(100 * threshold, color="black", lw=1.1)
    ax.annotate(f"the GPU preset's target: < {threshold:.0%}", (100 * threshold, len(groups) - 0.55), xytext=(3, 0),
                textcoords="offset points", fontsize=7, va="bottom")
    ax.set_xscale("log")
    plain_log(ax.xaxis)
    ax.set_yticks(range(len(groups)), groups, fontsize=8)
    ax.set_ylim(len(groups) - 0.5, -0.6)
    vals = 100 * table["IQR/median"]
    ax.set_xlim(max(0.1, vals.min() / 1.5), vals.max() * 2.5)
    ax.set_xlabel("IQR / median over its blocks (%, log scale); green: under the target, red: over", fontsize=8.5)
    n, single = int((table["IQR/median"] < threshold).sum()), len(spreads(found, threshold)) - len(table)
    ax.set_title(f"spread of every timing of this run: {n} of {len(table)} under {threshold:.0%}"
                 + (f" ({single} timed in one block: no spread, not drawn)" if single else ""), fontsize=9, loc="left")
    return fig


def ddp_command(p: LatentWireParams, toggles: dict, n_gpus: int) -> str:
    """The torchrun command that trains `toggles` at p.max_batch on every visible GPU (perflab.latentwire.ddp)."""
    flags = " ".join(f"--toggle {k}={v}" for k, v in toggles.items()
                     if v != dataclasses.asdict(Toggles())[k] and k not in ("batch_size", "num_workers"))
    model = " ".join(f"--model {k}={getattr(p, k)}" for k in ("d_enc", "enc_layers", "d_lm", "lm_layers", "latent_len", "k_tokens"))
    return (f"torchrun --nproc_per_node={max(n_gpus, 2)} -m perflab.latentwire.ddp --device cuda --steps 50 "
            f"--batch-size {p.max_batch} --n-examples {p.n_examples} {flags} {model}")

