"""What notebook 06 shows: tables, figures and commands built from the study's results (nothing is measured here)."""
from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import pandas as pd

from ..kit.bench import fmt_seconds, summary
from .claims import claimed_by_variant
from .config import Toggles
from .floors import fraction_of_floor
from .params import LatentWireParams
from .timing import iqr_ratio


def plain_log(axis) -> None:
    """Log scale with ticks at 1, 2, 5 x 10^k labelled as plain numbers."""
    axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def _row(r, base, flops_per_sample: float, peak: float) -> dict:
    lo, hi = r.samples_per_s_range()
    b_lo, b_hi = base.samples_per_s_range()
    return {"samples/s": r.samples_per_s, "vs baseline": r.samples_per_s / base.samples_per_s,
            "p20-p80": f"{lo / b_hi:.2f}-{hi / b_lo:.2f}", "median step": fmt_seconds(r.measurement.median),
            "IQR/median": f"{r.iqr_ratio:.0%}", "steps/block": r.steps_per_block,
            "launches/step": r.launches["total"], "launches/sample": r.launches["total"] / r.samples_per_step,
            "of floor": fraction_of_floor(r, flops_per_sample, peak).value}


def ablation_table(results: dict, flops: dict, peak: float) -> pd.DataFrame:
    """One row per variant: throughput with its conservative p20-p80 ratio to the baseline, spread, launches
    (perflab.kit.launches: CUDA kernels, or the CPU proxy), first step, memory, and model FLOP/s over `peak`.
    `flops`: study floors.step_flops per loss variant {single_pass: {...}}."""
    base, claimed = results["baseline"], claimed_by_variant()
    rows = []
    for name, r in results.items():
        f = flops[r.variant.knobs.get("single_pass", False)]["total"]
        rows.append({"variant": name, **_row(r, base, f, peak), "report claims": claimed.get(name, "-"),
                     "first step": fmt_seconds(r.first_step_s),
                     "activation MiB": (r.activation_bytes or float("nan")) / 2**20,
                     f"peak MiB ({r.memory_method})": r.peak_bytes / 2**20})
    return pd.DataFrame(rows).set_index("variant")


def ablation_figure(results: dict, device_type: str):
    names = list(results)
    base = results["baseline"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    ypos = list(range(len(names)))
    special = {"baseline": "tab:gray", "quick_wins": "tab:orange", "all_together": "tab:red", "compiled": "tab:purple"}
    sps = [results[n].samples_per_s for n in names]
    ax1.barh(ypos, sps, color=[special.get(n, "tab:blue") for n in names])
    for y, v in zip(ypos, sps):
        ax1.text(v, y, f" {v / base.samples_per_s:.2f}x", va="center", fontsize=8)
    ax1.axvline(base.samples_per_s, color="k", lw=0.8, ls="--")
    ax1.set_xscale("log")
    plain_log(ax1.xaxis)
    ax1.set_xlabel(f"training samples/s on {device_type} (log scale; dashed: baseline; labels: ratio to it)")
    ax1.set_yticks(ypos, names)
    ax1.invert_yaxis()
    ax1.set_title("throughput: baseline, each toggle alone, combined")
    ax2.barh(ypos, [(results[n].activation_bytes or float("nan")) / 2**20 for n in names], color="tab:green")  # nan: compiled
    ax2.set_xscale("log")
    plain_log(ax2.xaxis)
    ax2.set_xlabel("peak activation memory per optimizer step (MiB, log scale; compiled: not counted)")
    ax2.set_title("memory held for backward")
    fig.tight_layout()
    return fig


def sweep_table(sweep: dict, compiled, flops_per_sample: float, peaks: dict) -> pd.DataFrame:
    """One row per sweep point (and the compiled step): samples/s, spread, launches, and the share of each floor."""
    points = [("bf16" if amp else "fp32", r) for amp, rows in sweep.items() for r in rows]
    if compiled is not None:
        points.append(("bf16" if compiled.variant.knobs.get("amp") else "fp32", compiled))
    rows = []
    for dtype, r in points:
        lo, hi = r.samples_per_s_range()
        rows.append({"step": r.variant.name, "batch": r.samples_per_step, "dtype": dtype, "samples/s": r.samples_per_s,
                     "p20-p80": f"{lo:.4g}-{hi:.4g}", "IQR/median": f"{r.iqr_ratio:.0%}",
                     "launches/step": r.launches["total"],
                     "of fp32 floor": fraction_of_floor(r, flops_per_sample, peaks["fp32"][0]).value,
                     f"of {dtype} floor": fraction_of_floor(r, flops_per_sample, peaks[dtype][0]).value,
                     f"peak MiB ({r.memory_method})": r.peak_bytes / 2**20})
    return pd.DataFrame(rows).set_index("step")


def sweep_figure(sweep: dict, compiled, base, flops_per_sample: float, peaks: dict, device_type: str):
    """samples/s against the batch for each dtype, with the floors as lines (samples/s at the matmul peak);
    peak memory on the right."""
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {False: ("o-", "tab:blue", "fp32"), True: ("s-", "tab:red", "bf16 autocast")}
    bs = sorted({r.samples_per_step for rows in sweep.values() for r in rows})
    for amp, rows in sweep.items():
        marker, color, label = styles[amp]
        x = [r.samples_per_step for r in rows]
        ax[0].plot(x, [r.samples_per_s for r in rows], marker, color=color, label=f"all toggles, {label}")
        ax[1].plot(x, [r.peak_bytes / 2**20 for r in rows], marker, color=color, label=f"{label} ({rows[0].memory_method})")
    if compiled is not None:
        ax[0].plot([compiled.samples_per_step], [compiled.samples_per_s], "*", ms=14, color="tab:purple",
                   label="compiled step at the best batch")
    for name, ls in (("fp32", "--"), ("bf16", ":")):
        ax[0].axhline(peaks[name][0] / flops_per_sample, color="0.4", lw=1, ls=ls, label=f"{name} matmul floor")
    ax[0].axhline(base.samples_per_s, color="k", lw=0.8, ls="-.", label="baseline (batch 1)")
    for a, ylabel in ((ax[0], "training samples/s"), (ax[1], "peak memory (MiB)")):
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.set_xticks(bs, [str(b) for b in bs])
        plain_log(a.yaxis)
        a.set_xlabel("micro-batch size (samples)")
        a.set_ylabel(ylabel)
        a.legend(fontsize=8)
    ax[0].set_title(f"batch sweep, {device_type}: one fresh model per point")
    fig.tight_layout()
    return fig


def curves_figure(curves, curve_batch: int):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    styles = [dict(color="0.6", lw=4), dict(color="tab:blue", lw=1.5, ls="--"), dict(color="tab:red", lw=1.5, marker="o")]
    for c, style in zip(curves, styles):
        window = max(1, curve_batch // c.samples[0])  # every point a mean over curve_batch samples
        ax.plot(c.samples, pd.Series(c.losses).rolling(window, min_periods=1).mean(), label=f"{c.name} ({c.seconds:.1f} s)",
                **style)
    ax.set_xlabel("training samples seen")
    ax.set_ylabel(f"training loss (mean over the last {curve_batch} samples)")
    ax.set_title("loss curves (wall time of each run in the legend)")
    ax.legend()
    return fig


def spread_table(timings: list[tuple[str, str, object]], threshold: float = 0.1) -> pd.DataFrame:
    """Every timing of the run with its IQR/median: (benchmark, case, Measurement) per row."""
    rows = []
    for bench, case, m in timings:
        s = summary(m)
        rows.append({"benchmark": bench, "case": case, "median": fmt_seconds(s["median_s"]), "IQR": fmt_seconds(s["iqr_s"]),
                     "IQR/median": iqr_ratio(m.times), "blocks": s["n"]})
    df = pd.DataFrame(rows)
    df[f"under {threshold:.0%}"] = df["IQR/median"] < threshold  # a single block (nan): no spread measured, not under
    return df


def widest(spreads: pd.DataFrame) -> tuple[float, str]:
    """(IQR/median, name) of the timing with the widest spread in a `spread_table` (single blocks skipped)."""
    row = spreads.loc[spreads["IQR/median"].idxmax()]
    return float(row["IQR/median"]), f"{row['benchmark']} {row['case']}"


def describe_toggles(toggles: dict) -> str:
    """Only what differs from the defaults (= the baseline's behaviour)."""
    default = dataclasses.asdict(Toggles())
    return ", ".join(f"{k}={v}" for k, v in toggles.items() if default.get(k) != v) or "-"


def ddp_command(p: LatentWireParams, toggles: dict, n_gpus: int) -> str:
    """The torchrun command that trains `toggles` at p.max_batch on every visible GPU (perflab.latentwire.ddp)."""
    flags = " ".join(f"--toggle {k}={v}" for k, v in toggles.items()
                     if v != dataclasses.asdict(Toggles())[k] and k not in ("batch_size", "num_workers"))
    model = " ".join(f"--model {k}={getattr(p, k)}" for k in ("d_enc", "enc_layers", "d_lm", "lm_layers", "latent_len", "k_tokens"))
    return (f"torchrun --nproc_per_node={max(n_gpus, 2)} -m perflab.latentwire.ddp --device cuda --steps 50 "
            f"--batch-size {p.max_batch} --n-examples {p.n_examples} {flags} {model}")
