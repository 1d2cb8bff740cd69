"""The figures of notebooks 01 and 02, each in the study's colours (`perflab.kit.figures.color` over IMPLS: the
baseline grey, the optimized solver blue, in every figure), with its spreads drawn, units on its axes and the judged
value written where it shows a quantity a claim judges.

    card.figure(figures.share_figure(run, found), "profile_shares", ...)     # 01: the card's figure
    card.figure(figures.iteration_figure(run, found), "iterations", ...)    # 02: the card's figure
    figures.slab_figure(run, found.slabs)                                    # 02's appendix
"""
from __future__ import annotations

import math

import numpy as np

from ..kit.bench import summary
from ..kit.claims import log_ticks
from ..kit.figures import color
from ..kit.formatting import num, value_text
from .claims import (
    FLOOR_CLAIM,
    GPU_MECHANISM,
    PROFILE_CLAIMS,
    SEED_BREAKDOWN,
    SEED_SHARES,
    SHARE_CONFIDENCE,
    SLAB_CLAIMS,
    slab_headline,
)
from .study import IMPLS, compile_label, iteration_floor, judged_speedup

WIDTH = 6.3   # inches: at 110 dpi a card figure under card.WIDE (760 px) sits beside the table, text at its own size


def share_figure(run, found):
    """Notebook 01: each of the seed's frames, its share of fit in the seed's A100 profile (an open bar) against this
    run's (the plain baseline profiles' mean with its interval: the very number the card judges, written beside it),
    with the share a claim holds from (dotted); frames of a GPU mechanism (not judged on a CPU) greyed."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from .profiles import share_of_fit, share_text

    profs, device_type = found.profiles, run.device.type
    base_c, opt_c = color("baseline", IMPLS), color("optimized", IMPLS)
    fig, ax = plt.subplots(figsize=(WIDTH, 4.2), layout="constrained")
    opt = [100 * profs.optimized.share(needle) for _, needle, _ in SEED_BREAKDOWN]
    for i, (_, needle, seed) in enumerate(SEED_BREAKDOWN):
        key = next(k for k, v in SEED_SHARES.items() if v[1] == needle)
        m = share_of_fit(profs.baseline, needle)
        v, lo, hi = 100 * m.value, 100 * m.low, 100 * m.high
        ax.barh(i - 0.2, 100 * seed, height=0.36, facecolor="white", edgecolor="black", lw=0.8)
        ax.annotate(f"{100 * seed:.1f}%", (100 * seed + 1.2, i - 0.2), va="center", fontsize=7.5)
        ax.barh(i + 0.2, v, height=0.36, color=base_c, xerr=[[v - lo], [hi - v]], capsize=2.5, error_kw=dict(lw=1))
        ax.annotate(share_text(m), (hi + 1.2, i + 0.2), va="center", fontsize=7.5, fontweight="bold", zorder=4,
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.3))  # over the dotted threshold
        if any(opt):
            ax.barh(i + 0.44, opt[i], height=0.1, color=opt_c)
        if not PROFILE_CLAIMS[key].off_setup(run.cfg, device_type):   # a threshold only where a claim is judged
            thr = 100 * PROFILE_CLAIMS[key].at_least
            ax.plot([thr, thr], [i - 0.45, i + 0.45], color="black", lw=1.2, ls=":")
            ax.annotate(f">= {thr:.3g}%", (thr, i - 0.45), xytext=(2, 1), textcoords="offset points", fontsize=7,
                        va="bottom")
    ax.set_yticks(range(len(SEED_BREAKDOWN)), [f for f, _, _ in SEED_BREAKDOWN], fontsize=9)
    for label, (_, needle, _) in zip(ax.get_yticklabels(), SEED_BREAKDOWN):
        key = next(k for k, v in SEED_SHARES.items() if v[1] == needle)
        if PROFILE_CLAIMS[key].off_setup(run.cfg, device_type):
            label.set_color("#9e9e9e")
    ax.invert_yaxis()
    ax.set_xlim(0, 125)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("share of Sparse1DProbe.fit, inclusive (%)")
    n = len(profs.baseline)
    handles = [Patch(color=base_c, label=f"baseline on {device_type}: mean of {n} profiles, {SHARE_CONFIDENCE:.0%} "
                                         f"interval"),
               Patch(facecolor="white", edgecolor="black", label="the seed's profile (A100, real data)"),
               Line2D([], [], color="black", ls=":", label="a judged claim holds from 1/1.5 of the seed's share")]
    handles.append(Patch(color=opt_c, label="optimized (1 profile)") if any(opt) else
                   Line2D([], [], ls="", label="optimized: 0% in every frame"))
    if any(k in GPU_MECHANISM and PROFILE_CLAIMS[k].off_setup(run.cfg, device_type) for k in SEED_SHARES):
        handles.append(Line2D([], [], ls="", label=f"grey frames: a GPU mechanism, not judged on {device_type}"))
    ax.legend(handles=handles, loc="lower right", fontsize=7.5, frameon=False)
    x, y = found.data
    ax.set_title(f"Where fit spends its time: {x.shape[0]} rows x {y.shape[1]} classes, {run.cfg.max_iter} LM "
                 f"iterations", fontsize=10)
    return fig


def _pairs_axis(ax) -> None:
    """A log axis of (event, class) pairs, ticked at 1, 2 and 5 per decade as '1M', '2M', '5M'."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    def short(v, _):
        for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if v >= scale:
                return f"{v / scale:g}{unit}"
        return f"{v:g}"
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(short))
    ax.xaxis.set_minor_formatter(NullFormatter())


def iteration_figure(run, found):
    """Notebook 02: (top) seconds per LM iteration against the (event, class) pairs of an iteration, both versions
    (median, p20-p80) beside the floor, the judged distance from it written at the default size; (bottom) baseline /
    optimized as sizes grow (ratio of medians, p20-p80: indicative) and the judged speedup at the default size
    (paired rounds, 99% interval) against its target."""
    import matplotlib.pyplot as plt

    cfg, rows = run.cfg, sorted(found.sweep, key=lambda r: r["pair_events"])
    n_lat = found.data(cfg)[0].shape[1]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(WIDTH, 6.0), sharex=True, layout="constrained",
                                      gridspec_kw=dict(height_ratios=(1.15, 1)))
    styles = {"rows": ("-", "o"), "classes": ("--", "s"), "default": ("", "o")}
    for impl in ("baseline", "optimized"):
        for sweep, (ls, marker) in styles.items():
            rr = [r for r in rows if sweep in r["sweeps"]]
            if not rr:
                continue
            s = [summary(r[impl]) for r in rr]
            med = np.array([1e3 * q["median_s"] for q in s])
            top.errorbar([r["pair_events"] for r in rr], med, ls=ls or "none", marker=marker, ms=4, capsize=2,
                         color=color(impl, IMPLS), yerr=[med - [1e3 * q["p20_s"] for q in s],
                                                         [1e3 * q["p80_s"] for q in s] - med],
                         label=f"{impl}, {sweep} grow" if sweep != "default" else f"{impl}, default size")
    fl = found.floor
    pairs = [r["pair_events"] for r in rows]
    floor_ms = [1e3 * iteration_floor(r["nnz"], n_lat, r["n_classes"], fl["bandwidth"], fl["sigmoid_rate"])["floor_s"]
                for r in rows]
    top.plot(pairs, floor_ms, color="black", lw=1.2, label=f"the floor ({fl['bound']})")
    top.plot(pairs, [FLOOR_CLAIM.at_most * f for f in floor_ms], color="black", lw=1, ls=":",
             label=f"{num(FLOOR_CLAIM.at_most)}x the floor (target)")
    d = (found.decisions or {}).get(FLOOR_CLAIM.key)
    x, y = found.data(cfg)
    at = x._nnz() * y.shape[1]
    if d is not None:
        base = 1e3 * fl["floor_s"]
        lo, hi = _drawn_ends(d, floor_ms + [1e3 * summary(r[k])["median_s"] for r in rows for k in IMPLS])
        top.errorbar([at], [base * d.value], yerr=[[base * (d.value - lo)], [base * (hi - d.value)]], fmt="D",
                     color="black", ms=5, capsize=3, zorder=5)
        top.annotate(f"judged: {value_text(d.value, d.low, d.high, 'x')} the floor", (at, base * d.value),
                     xytext=(8, -14), textcoords="offset points", fontsize=8)
    top.set_xscale("log")
    top.set_yscale("log")
    lo, hi = top.get_ylim()
    top.set_ylim(lo, hi * (hi / lo) ** 0.3)  # room above the lines for the legend
    log_ticks(top.yaxis)
    top.set_ylabel("ms per LM iteration\n(median, p20-p80)")
    top.legend(fontsize=7, ncol=2, loc="upper left", frameon=False)
    top.grid(True, which="major", alpha=0.3)
    top.set_title(f"One LM iteration, {n_lat} latents, L0 {cfg.l0} ({found.source.kind} data, {run.device.type}, "
                  f"optimized {compile_label(cfg.compile, cfg.backend)})", fontsize=9)
    _speedup_panel(bottom, rows, found, at, run.device.type)
    _pairs_axis(bottom)
    bottom.set_xlabel("(event, class) pairs per LM iteration")
    return fig


def _speedup_panel(ax, rows, found, at: float, device_type: str) -> None:
    """baseline / optimized per size (ratio of medians, p20-p80) and the judged speedup at the default size."""
    c = color("optimized", IMPLS)
    for sweep, marker in (("rows", "o"), ("classes", "s")):
        rr = [r for r in rows if sweep in r["sweeps"]]
        if rr:
            v = np.array([r["ratio"] for r in rr])
            ax.errorbar([r["pair_events"] for r in rr], v, yerr=[v - [r["low"] for r in rr], [r["high"] for r in rr] - v],
                        marker=marker, ls="-" if sweep == "rows" else "--", ms=4, capsize=2, color=c, alpha=0.8,
                        label=f"{sweep} grow: ratio of medians, p20-p80 (indicative)")
    judged = judged_speedup(found)
    target = SLAB_CLAIMS[judged[0] if judged else slab_headline(device_type)]
    ax.axhline(target.at_least, color="black", lw=1.2)
    ax.annotate(f"target >= {num(target.at_least)}x ({target.key})", (0.99, target.at_least), xytext=(0, -11),
                xycoords=("axes fraction", "data"), textcoords="offset points", fontsize=8, ha="right")
    ends = [target.at_least] + [e for r in rows for e in (r["low"], r["high"])]
    if judged is not None:
        d = judged[1]
        lo, hi = _drawn_ends(d, ends)
        ax.errorbar([at], [d.value], yerr=[[d.value - lo], [hi - d.value]], fmt="D", color="black", ms=6,
                    capsize=4, zorder=5, label=f"judged at the default size: paired rounds, {d.confidence:.0%} interval")
        ax.annotate(value_text(d.value, d.low, d.high, "x"), (at, hi), xytext=(0, 5), textcoords="offset points",
                    ha="center", fontsize=8, fontweight="bold")
        ends += [lo, hi]
    lows, highs = [e for e in ends if math.isfinite(e)], [e for e in ends if math.isfinite(e)]
    span = max(highs) - min(lows) or 1.0
    ax.set_ylim(max(0.0, min(lows) - 0.12 * span), max(highs) + 0.5 * span)  # room above for the legend
    ax.set_ylabel("baseline / optimized\nper LM iteration (x)")
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    ax.grid(True, which="major", alpha=0.3)


def _drawn_ends(d, others) -> tuple[float, float]:
    """A decision's interval as drawn: an end that is unbounded (too few rounds under load: Fieller's interval opens)
    stops at 4x the farthest finite mark beside it, or at 0 below; its label still prints it ('inf')."""
    finite = [v for v in [d.value, d.low, d.high, *others] if math.isfinite(v) and v > 0]
    lo = d.low if math.isfinite(d.low) and d.low > 0 else min(finite) / 4
    hi = d.high if math.isfinite(d.high) else max(finite) * 4
    return lo, hi


def slab_figure(run, grid):
    """Notebook 02's appendix: ms per LM iteration against the classes per slab (baseline) or per pass (optimized),
    median and p20-p80, in the study's colours, the log axis ticked as numbers."""
    cfg = run.cfg
    fig = grid.figure(xlabel="classes per slab (baseline) or per pass (optimized)",
                      ylabel="ms per LM iteration (median, p20-p80)", versions=IMPLS,
                      title=f"{grid.label} ({run.device.type}, optimized {compile_label(cfg.compile, cfg.backend)})")
    ax = fig.axes[0]
    if ax.get_yscale() == "log":
        log_ticks(ax.yaxis)
    ax.grid(True, which="major", alpha=0.3)
    return fig
