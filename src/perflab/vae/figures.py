"""The 05_vae_sync notebook's figures, each drawn from the findings: every configuration in its version's colour
(`perflab.kit.figures.color` among IMPLS: the baseline grey, optimized blue, captured orange, in every figure), times
as the median of their blocks with the p20-p80 spread drawn, units on every axis, `layout="constrained"`.

    card(run, found)      the card's figure: what the run's headline judges (`study.headline`): `ops` on a CPU,
                          `times` elsewhere
    ops(run, found)       aten ops per step of baseline, optimized and captured, split by what they are, against
                          the CPU target's threshold (the headline on a CPU: an exact count, so no spread)
    times(run, found)     time per step of each configuration at `batch`, the paired rounds' speeds beside
    curves(run, found)    the loss curves of one seed (the appendix)
    sweep(run, found)     time per step and per sample against the batch size, with the fit"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, NullLocator

from ..kit.bench import summary
from ..kit.claims import log_ticks
from ..kit.figures import color, colors
from ..kit.formatting import num, value_text
from .claims import CLAIMS, SPEEDUPS
from .evidence import median_ratio
from .findings import Findings
from .impls import IMPLS

VERSIONS = list(IMPLS)


def _version(found: Findings, name: str) -> str:
    return found.inputs.impls[name].version if name in found.inputs.impls else name


def _ms(m) -> tuple[float, float, float]:
    """A Measurement's median, p20 and p80 in ms."""
    s = summary(m)
    return 1e3 * s["median_s"], 1e3 * s["p20_s"], 1e3 * s["p80_s"]


def curves(run, found: Findings):
    """Loss and separability per step of one seed and data: baseline, optimized and captured overlap (checked);
    with the separability gradient the run differs by design."""
    logs = found.curves.logs
    pal = colors(list(logs), VERSIONS)
    styles = {"baseline": dict(lw=3, alpha=0.5), "optimized": dict(ls="--"), "optimized + sep grad": dict(ls=":"),
              "captured": dict(ls="-.")}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    for name, log in logs.items():
        for ax, k in ((ax1, "loss"), (ax2, "sep")):
            ax.plot(log.steps, log.values[k], label=name, color=pal[name], **styles.get(name, {}))
    ax1.set_ylabel("loss (nll + beta kl - lambda J), nats per sample")
    ax2.set_ylabel("separability J = tr(S_B) / tr(S_W), no unit")
    for ax in (ax1, ax2):
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.suptitle(f"One seed and data, batch {run.cfg.batch} on {found.inputs.device_kind}: baseline, optimized and "
                 f"captured overlap; the J gradient changes the run", fontsize=10)
    return fig


def card(run, found: Findings):
    """The card's figure as (figure, name, caption): the quantity the run's headline claim judges (`claims.headline`):
    the op counts on a CPU (`ops`), the time per step with the decided speeds beside it elsewhere (`times`)."""
    if run.device.type == "cpu":
        return (ops(run, found), "ops_per_step", "aten ops per step of baseline, optimized and captured, by what they "
                "are, against the 10x target (the headline): exact counts")
    return (times(run, found), "time_per_step", "time per step of every configuration: medians and p20-p80, the "
            "speed beside each bar as the timing table gives it")


def ops(run, found: Findings):
    """aten ops (the CPU's launch proxy) per step of baseline, optimized and captured, each bar split by what the ops
    are (`measuring.LAUNCH_KINDS`), its total and its ratio to the baseline's at the end; the CPU target's threshold
    (10x fewer than the baseline) and its partly (2x) as lines. Counts: exact, no spread to draw."""
    la = found.launches
    names = ["baseline", "optimized", "captured"]
    kinds = list(dict.fromkeys(k for n in names for k in la.kinds[n]))
    pal = plt.get_cmap("Pastel2").colors   # the kinds muted: the versions' colours are the bars' outlines
    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")   # beside the card's table
    base = la.per_step["baseline"]
    labelled = set()
    for y, n in enumerate(names):
        left = 0.0
        for j, k in enumerate(kinds):
            w = la.kinds[n].get(k, 0.0)
            if w < 0.5:
                continue
            ax.barh(y, w, left=left, color=pal[j % len(pal)], edgecolor="white", lw=0.5,
                    label=None if k in labelled else k.split(" (")[0])   # the kind's name; the table says more
            labelled.add(k)
            left += w
        total = la.per_step[n]
        ax.barh(y, total, fill=False, edgecolor=color(_version(found, n), VERSIONS), lw=2.5)
        ratio = "" if n == "baseline" else f"  ·  {num(base / total, True)}x fewer"
        ax.annotate(f"{num(total)}{ratio}", (total, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=8)
    target = CLAIMS["cpu_ops_10x"]
    for x, what, ls in ((base / target.at_least, f"{num(target.at_least)}x fewer (the target)", "--"),
                        (base / target.partly, f"{num(target.partly)}x fewer (partly)", ":")):
        ax.axvline(x, color="black", ls=ls, lw=1)
        ax.annotate(what, (x, -0.62), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=9)
    ax.set_ylim(len(names) - 0.5, -0.8)   # the baseline on top, the thresholds' labels above it
    ax.set_xlim(0, 1.3 * max(la.per_step[n] for n in names))
    ax.set_xlabel(f"{la.what} per step (counted over {run.cfg.log_every} steps; exact)", fontsize=9)
    fig.legend(fontsize=7, loc="outside lower center", ncols=4, frameon=False)
    ax.set_title(f"Ops per step, batch {run.cfg.batch} on {found.inputs.device_kind}: the captured step "
                 f"{num(base / la.per_step['captured'], True)}x fewer\nthan the baseline (target "
                 f"{num(target.at_least)}x)", fontsize=9, loc="left")
    return fig


def times(run, found: Findings):
    """Time per step of every configuration at `batch` (the card's figure off a CPU): the median of its blocks with
    their p20-p80, the baseline's p20-p80 as a grey band; each bar labelled with its speed against the baseline as the
    timing table gives it (decided in paired rounds where a claim is judged on it here, else the ratio of medians,
    indicative)."""
    t = found.times
    names = list(t)
    ms = {n: _ms(t[n]) for n in names}
    decided = {name: found.speedups[key] for key, name in SPEEDUPS.items()}
    fig, ax = plt.subplots(figsize=(9, 3.8), layout="constrained")
    _, lo, hi = ms["baseline"]
    ax.axvspan(lo, hi, color=color("baseline", VERSIONS), alpha=0.2, lw=0)
    for y, n in enumerate(names):
        med, p20, p80 = ms[n]
        ax.barh(y, med, color=color(_version(found, n), VERSIONS), alpha=0.85)
        ax.errorbar(med, y, xerr=[[med - p20], [p80 - med]], color="black", capsize=3, lw=1)
        d = decided.get(n)
        ratio = (f"{value_text(d.value, d.low, d.high, 'x')} (paired rounds)" if d is not None else
                 f"{num(median_ratio(found, n)[0], True)}x")
        label = num(med, True) + ("" if n == "baseline" else f"  ·  {ratio}")
        ax.annotate(label, (p80, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.45 * max(p80 for _, _, p80 in ms.values()))
    ax.set_xlabel(f"ms per step ({found.inputs.clock_name}; median of the timing table's blocks, p20-p80)")
    how = ("paired rounds where the claim is judged here, else the ratio of medians (indicative)"
           if any(d is not None for d in decided.values()) else "the ratio of medians, indicative")
    ax.set_title(f"Time per step, batch {run.cfg.batch} on {found.inputs.device_kind}; beside each bar: baseline / "
                 f"this, {how}\n(grey band: the baseline's p20-p80)", fontsize=9, loc="left")
    return fig


def sweep(run, found: Findings):
    """Time per step (left) and per sample (right) against the batch size, each point the median of its blocks with
    their p20-p80; the fit t(B) = a + b B of the fitted version dotted, and the batch where its fixed cost equals
    its per-sample work dashed (where the fit has one in the range)."""
    sw, cfg = found.sweep, run.cfg
    names = list(dict.fromkeys(n for n, _ in sw.times))
    sizes = sorted({b for _, b in sw.times})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for n in names:
        bs = [b for b in sizes if (n, b) in sw.times]
        ms = [_ms(sw.times[n, b]) for b in bs]
        c = color(n, VERSIONS)
        for ax, div in ((ax1, [1.0] * len(bs)), (ax2, [b / 1e3 for b in bs])):   # ms per step, us per sample
            v = [med / d for (med, _, _), d in zip(ms, div)]
            err = [[(med - p20) / d for (med, p20, _), d in zip(ms, div)],
                   [(p80 - med) / d for (med, _, p80), d in zip(ms, div)]]
            ax.errorbar(bs, v, yerr=err, marker="o", capsize=3, color=c, label=n, ls="-" if len(bs) > 1 else "none")
    fit_name = "captured" if "captured" in sw.fits else list(sw.fits)[-1]
    f = sw.fits[fit_name]
    ax1.plot(sizes, [1e3 * (f["fixed_s"] + f["per_sample_s"] * b) for b in sizes], "k:", lw=1,
             label=f"fit a + b B ({fit_name})")
    b_star = f["crossover_batch"]
    found_one = math.isfinite(b_star) and sizes[0] / 4 <= b_star <= sizes[-1] * 4
    for ax in (ax1, ax2):
        if found_one:
            ax.axvline(b_star, color="gray", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_ticks(ax.yaxis)   # 2, 5, 10, 20: numbers, not 2x10^1
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("batch size (samples per step)")
        ax.legend(fontsize=8)
    ax1.set_ylabel(f"ms per step ({found.inputs.clock_name}, median, p20-p80)")
    ax2.set_ylabel(f"us per sample ({found.inputs.clock_name})")
    head = (f"Fixed cost equals per-sample work near batch {b_star:.0f} ({fit_name}'s fit, dashed line)" if found_one
            else f"{fit_name}'s fit: no batch in range where the fixed cost equals the per-sample work")
    note = f"; {sw.note}" if sw.note else ""
    fig.suptitle(f"{head}\n{cfg.sweep_steps}-step calls on {found.inputs.device_kind}, not the timing table's "
                 f"{cfg.log_every}-step calls{note}", fontsize=9)
    return fig
