"""notebooks/04_early_exit's figures and tables, drawn from its findings (`study.Findings`), each version in its colour
(`perflab.kit.figures.color` with `study.IMPLS`), units on every axis:

    strategies(run, found)   the card's figure: each version's speed against full on the ladder, recycle's the decided
                             value with its interval, the others the benchmark's rounds (indicative), and the ideal
    slot_steps(run, found)   rows computed per version, useful and wasted, on both workloads (counts)
    step_time(run, found)    each traced step's time against its share of active rows, with the decided flat step
    strategy_table(run, found), table_note(run, found)   per workload and version: times, steps, launches, reads
    gpu_run()                the committed H100 run's timings (outputs/h100/1a70d9c)
"""
from __future__ import annotations

import math

from ...kit.bench import fmt
from ...kit.figures import color
from ...kit.formatting import value_text
from ...kit.verdicts import Measured
from .claims import CLAIMS
from .study import IMPLS, Findings, either_way, lead_claim, trace_table


def _bar_label(ax, x, top, text, fontsize=7.5, **kw):
    """`text` just above `top` (the bar's error bar, not its body)."""
    ax.annotate(text, (x, top), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=fontsize,
                **kw)


def strategies(run, found: Findings):
    """Each version's speed against full on the whole ladder (full's time over the version's): recycle's bar is the
    decided ratio with its 99% interval (`decide_recycle`), the others the ratio of mean times over the benchmark's
    rounds with their 99% interval (indicative, said on the figure); each labelled with its share of the ideal (its
    speed times full's useful share), the ideal (every row useful) and the lead target drawn as lines. -> Figure"""
    import matplotlib.pyplot as plt

    cfg, share, d = run.cfg, found.useful_share(), found.need("recycle", "study.decide_recycle")
    vs = found.vs_full()
    vs["recycle"] = d.measured
    names = list(IMPLS)
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")  # shown at ~480 px in the card: large type
    tops = []
    for x, s in enumerate(names):
        m = vs[s]
        bounded = math.isfinite(m.high) and m.low > 0 and s != "full"
        err = [[m.value - m.low], [m.high - m.value]] if bounded else None
        ax.bar(x, m.value, color=color(s, IMPLS), yerr=err, capsize=4, ecolor="black", width=0.66,
               edgecolor="black" if s == "recycle" else "none", lw=1.2)
        top = m.high if bounded else m.value
        tops.append(top)
        if s == "full":
            _bar_label(ax, x, top, "1x\n(baseline)", fontsize=9)
        elif s == "recycle":  # above the ideal's line where its interval reaches below it: no line crosses it
            _bar_label(ax, x, max(top, 1 / share), f"{value_text(m.value, m.low, m.high, 'x')}\n"
                       f"{value_text(m.value * share, m.low * share, m.high * share, '%')}\nof the ideal", fontsize=9,
                       fontweight="bold")
        else:
            _bar_label(ax, x, top, f"{m.value:.2f}x\n{m.value * share:.0%} of\nthe ideal"
                       + ("" if bounded else "\n(no interval)"), fontsize=9)
    ideal = 1 / share
    lead = lead_claim(cfg, run.device.type)
    ax.axhline(ideal, color="black", ls="--", lw=1)
    # the lines' labels in the right margin: no bar's label can sit on them, however wide the intervals
    ax.annotate(f"ideal\n{ideal:.2f}x\n(only the\nuseful rows:\n{share:.1%})", (1.0, ideal),
                xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8.5)
    ax.axhline(lead.at_least, color="#c62828", ls=":", lw=1.2)
    of_ideal = CLAIMS["target_ideal"].at_least * ideal   # the other target, on the same axis: 70% of the ideal
    near = abs(of_ideal / lead.at_least - 1) < 0.15       # two labels that would sit on each other: one above, one below
    above = of_ideal > lead.at_least
    ax.annotate(f"target\n>= {lead.at_least:g}x", (1.0, lead.at_least), xycoords=("axes fraction", "data"),
                xytext=(4, 0), textcoords="offset points", va=("top" if above else "bottom") if near else "center",
                fontsize=8.5, color="#c62828")
    ax.axhline(of_ideal, color="#6a1b9a", ls="-.", lw=1)
    ax.annotate(f"target >= {CLAIMS['target_ideal'].at_least:.0%}\nof the ideal\n({of_ideal:.2f}x)", (1.0, of_ideal),
                xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points",
                va=("bottom" if above else "top") if near else "center", fontsize=8.5, color="#6a1b9a")
    ax.set_xticks(range(len(names)), names, fontsize=10)
    ax.set_xlim(-0.6, len(names) - 0.25)  # room for recycle's label inside the axes
    ax.set_ylim(0, max(ideal, *tops) * 1.4)
    ax.set_ylabel("speed against full, x (full's time / the version's)", fontsize=9.5)
    ax.set_title(f"recycle {value_text(d.value, d.low, d.high, 'x')} faster than full: "
                 f"{value_text(d.value * share, d.low * share, d.high * share, '%')} of the ideal\n"
                 f"the ladder: {len(found.ladder.candidates):,} candidates, seed-like proof lengths, B={cfg.batch}, "
                 f"{run.device.type}", fontsize=10)
    n = len(found.timing["ladder"].ms["full"].raw_times)
    ax.set_xlabel(f"recycle: decided, {d.how.split(' (')[0]}, 99% interval.\nmasked, compact, bucketed: "
                  f"indicative, ratio of mean times over {n} interleaved round{'s' if n != 1 else ''},\n99% interval "
                  "over the rounds (none where they are too few or too noisy for one)", fontsize=8, loc="left")
    return fig


def slot_steps(run, found: Findings):
    """Rows computed by each version over a whole run, split into useful rows (a candidate's own proof steps) and
    wasted ones (finished, padding or idle rows), on the ladder and on study 3's candidates; each bar labelled with the
    version's steps and useful share (counts: exact). -> Figure"""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    runs = found.need("runs", "study.traced_runs")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    for ax, (key, w) in zip(axes, (("ladder", found.ladder), ("kg", found.kg))):
        res = runs[key]
        useful = res["full"].slot_steps - res["full"].wasted_slot_steps
        for x, (s, r) in enumerate(res.items()):
            c = color(s, IMPLS)
            ax.bar(x, useful / 1e3, color=c, width=0.66)
            ax.bar(x, r.wasted_slot_steps / 1e3, bottom=useful / 1e3, color=c, alpha=0.3, hatch="///",
                   edgecolor=c, width=0.66)
            _bar_label(ax, x, r.slot_steps / 1e3, f"{r.steps_executed} steps\n{useful / r.slot_steps:.1%} useful")
        ax.set_xticks(range(len(res)), list(res))
        ax.set_ylim(0, max(r.slot_steps for r in res.values()) / 1e3 * 1.25)
        ax.set_ylabel("rows computed over the run, thousands")
        ax.set_title(f"{w.name}: {len(w.candidates):,} candidates, B={run.cfg.batch}", fontsize=9)
    axes[1].legend([Patch(color="#7f7f7f"), Patch(facecolor="#7f7f7f", alpha=0.3, hatch="///")],
                   ["useful rows (a candidate's own proof steps)", "wasted rows (finished, padding or idle)"],
                   fontsize=7.5, loc="upper right")
    fig.suptitle("What each version computes: rows stepped, summed over the whole run (counted)", fontsize=10)
    return fig


def step_time(run, found: Findings):
    """Every step of the traced run on the ladder (`traced_runs`: timed between the host reads each loop makes, so
    indicative) against the share of its rows still active, per version, with the decided flat step written on it
    (`decide_flat_step`: single steps of full in paired rounds). -> Figure"""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    tt = trace_table(found.need("runs", "study.traced_runs")["ladder"])
    fig, ax = plt.subplots(figsize=(8.2, 4.2), layout="constrained")
    for s in IMPLS:
        t = tt[tt.strategy == s]
        ax.scatter(t.active_fraction, 1e3 * t.seconds, s=9, alpha=0.6, color=color(s, IMPLS), label=s)
    f = found.need("flat_step", "study.decide_flat_step")
    d, e = f.decision, either_way(f.decision.measured)
    ax.text(0.02, 0.97, f"full, one step at {f.active:.0%} of its rows active over one with all active:\n"
                        f"{value_text(d.value, d.low, d.high, 'x')} (decided on single steps: {d.how.split(' (')[0]}, "
                        f"99% interval);\njudged either way, max(r, 1/r): {value_text(e.value, e.low, e.high, 'x')} "
                        "(the card's)", transform=ax.transAxes, va="top", fontsize=7.5,
            bbox=dict(facecolor="white", edgecolor="#bdbdbd", boxstyle="round"))
    ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(0, 1e3 * tt.seconds.quantile(0.99) * 1.35)
    ax.set(xlabel="active rows, share of the batch", ylabel=f"ms per step ({run.device.type}, B={run.cfg.batch})",
           title="The cost of one step against how many of its rows still need it (each step of the traced runs)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1), markerscale=2, title="version",
              title_fontsize=7.5)
    return fig


# ---- tables ----------------------------------------------------------------------------------------------------

def strategy_table(run, found: Findings):
    """Per workload and version: the mean time of the benchmark's rounds, its speed against full (indicative: ratio
    of mean times, 99% interval over the rounds), steps, ms per step and per candidate, launches and host reads per
    step. -> DataFrame"""
    import pandas as pd

    rows = []
    for key, w in (("ladder", found.ladder), ("kg", found.kg)):
        t, res, counts = found.timing[key], found.runs[key], found.launches[key]
        vs = found.vs_full(key)
        for s, m in t.ms.items():
            steps = max(1, res[s].steps_executed)
            rows.append({"workload": w.name.split(" (")[0], "version": s, "mean s": round(m.mean, 3),
                         f"vs full (mean of {len(m.raw_times)} rounds)": _ratio(s, vs[s]),
                         "steps": res[s].steps_executed, "ms per step": round(1e3 * m.mean / steps, 2),
                         "ms per candidate": round(1e3 * m.mean / len(w.candidates), 3),
                         "launches per step": round(counts[s]["launches_per_step"], 1),
                         "host reads per step": round(t.reads[s], 2)})
    return pd.DataFrame(rows).set_index(["workload", "version"])


def _ratio(version: str, m: Measured) -> str:
    """'2.13x [1.80, 2.50]'; full against itself '1x'; '[0, inf]' where the rounds are too few or too noisy for an
    interval (Fieller's is unbounded then)."""
    return "1x" if version == "full" else value_text(m.value, m.low, m.high, "x")


def row_cost_line(found: Findings, per_row: float, m_row) -> str:
    """One row of a full step timed alone (`row_step_seconds`) beside the benchmark's: full's mean time over the rows
    it computed on the ladder."""
    full = found.runs["ladder"]["full"]
    bench = found.timing["ladder"].ms["full"].mean / full.slot_steps
    return (f"one row of a full step with every row active, timed alone: {1e6 * per_row:.1f} us ({fmt(m_row)} per "
            f"step); in the benchmark's full runs: {1e6 * bench:.1f} us (mean time over {full.slot_steps:,} rows)")


def table_note(run, found: Findings) -> str:
    """What the table's ratios are, against the decided one."""
    d, n = found.recycle, run.cfg.rounds
    decided = (f"; recycle over full decided in paired rounds: {value_text(d.value, d.low, d.high, 'x')} (99%, the "
               "card)" if d is not None else "")
    return (f"Indicative: ratio of mean times over {n} interleaved round{'s' if n != 1 else ''} of whole runs, 99% "
            f"interval over the rounds{decided}.")



# ---- the committed GPU run (outputs/h100/) ----------------------------------------------------------------------

H100_RUN = "outputs/h100/1a70d9c"  # the H100 run of commit 1a70d9c, kept as evidence (its README says what ran)


def gpu_run(folder: str = H100_RUN):
    """The committed GPU run's timings of 04 on its ladder, per version: seconds (median of its rounds), steps, ms per
    step, speed against full, and the run's stated ideal share, read from its results log (under the project's
    root). -> DataFrame, or None where this checkout has no such folder (an installed wheel)."""
    import pandas as pd

    from ...kit.paths import repo_root
    from ...kit.results import read_rows, results_file

    path = results_file(repo_root() / folder)  # results.jsonl, or the committed results.jsonl.gz
    if not path.is_file():
        return None
    rows = [r for r in read_rows(path) if r.get("study") == "04_early_exit"]
    timed = [r for r in rows if r.get("kind") == "measurement" and str(r.get("workload", "")).startswith("ladder")]
    ideal = next((r["value"] for r in rows if r.get("metric") == "ideal" and str(r.get("workload")).startswith("ladder")),
                 None)
    full = next(r["median_s"] for r in timed if r["impl"] == "full")
    return pd.DataFrame([{"version": r["impl"], "median s": round(r["median_s"], 3), "rounds": r["n"],
                          "steps": r["steps"], "ms per step": round(1e3 * r["median_s"] / r["steps"], 2),
                          "vs full": f"{full / r['median_s']:.2f}x",
                          "of the ideal": f"{ideal / r['median_s']:.0%}" if ideal else "-"}
                         for r in timed]).set_index("version")
