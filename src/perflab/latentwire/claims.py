"""The seed report's claims and issue 13's targets as data, and the rule that turns a measurement into a verdict.

Each claim names its metric and where the number comes from:
- "gain": samples/s of an ablation variant over the baseline's (per-sample time ratio); for "amp", bf16 over
  fp32 at the most compute-bound batch of the sweep (the largest measured in both), where AMP can pay;
- "overhead": the share of the baseline's step a change removes: 1 - 1/gain of a variant, or measured
  directly for the data path ("tokenize": on-the-fly tokenization minus the cache gather; "data_prep": all
  of the on-the-fly preparation, the most a DataLoader can hide), per sample over the baseline's time per sample;
- "memory": the baseline's activation bytes over the variant's;
- "attention gain": one attention layer, eager vs SDPA (fwd+bwd);
- "mfu": model FLOP/s of the compiled step at the sweep's best batch over the measured bf16 matmul floor;
- "spread": the largest IQR/median over every step timing of the run.
Every value carries its interval (p20-p80 of a timing ratio, conservative: baseline p20 over variant p80;
counts and memory ratios are exact), and the verdict is `perflab.verdicts.judge` of that interval against the
claim's low end (computed, never typed in): wholly above -> "holds"; wholly below -> "partly holds" for a real
but smaller effect (gain >= 1.05, share >= 2%), else "does not hold"; straddling it -> "within noise". A claim
without a number holds when the effect is real: its interval above 1.05x (a share: above 5%). A GPU mechanism or
a GPU-preset target on another device, or no measurement: "not tested here", whatever a CPU measures.
"""
from __future__ import annotations

import dataclasses

from ..bench import speedup, speedup_range, summary
from ..verdicts import Measured, judge, log_claims

MIN_GAIN = 1.05       # below this a ratio is within this study's noise on a shared CPU
MIN_OVERHEAD = 0.02   # a share of the step below this is not worth a change
REAL_OVERHEAD = 0.05  # a bottleneck worth the name


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    text: str                  # the report, quoted
    claimed: str               # its number, as written
    metric: str                # "gain" | "overhead" | "memory" | "attention gain" | "mfu" | "spread"
    variant: str | None        # the ablation variant that tests it; None: not tested here
    low: float | None = None   # the claimed range as a ratio (gain, memory) or a share (overhead)
    high: float | None = None
    needs: str = ""            # "cuda": a GPU mechanism (nothing to measure on a CPU)
    why_not: str = ""          # why it is not tested, when it cannot be
    source: str = "variant"    # "variant" | "tokenize" | "data_prep" | "attention" | "amp" | "mfu" | "spread"


CLAIMS: tuple[Claim, ...] = (
    Claim("non_blocking", "Multiple .to(device) calls with non_blocking=False ... ~20-30% performance overhead "
          "from blocking transfers", "20-30%", "gain", "pin_memory", 1.20, 1.30, needs="cuda",
          why_not="a CPU run has no host-to-device copy: .to('cpu') is a no-op and nothing can be pinned"),
    Claim("dataloader", "No DataLoader usage - manual batch indexing ... CPU bottleneck during data preparation",
          "no number", "overhead", "dataloader", source="data_prep"),
    Claim("pretokenize", "Re-tokenizing chat templates every iteration ... ~10-15% overhead", "10-15%", "overhead",
          "pretokenize", 0.10, 0.15, source="tokenize"),
    Claim("grad_accum", "No gradient accumulation optimization ... Memory fragmentation leading to OOMs",
          "no number (memory)", "memory", "grad_accum"),
    Claim("batch_size", "Default batch size of 1 severely underutilizes GPUs ... Increasing batch sizes "
          "(2-4x speedup)", "2-4x", "gain", "batch_size", 2.0, 4.0),
    Claim("loss_loop", "Sequential loss computation instead of batched ... Loop over K tokens ... ~5-10% overhead",
          "5-10%", "overhead", "single_pass", 0.05, 0.10),
    Claim("amp", "No automatic mixed precision (AMP) ... 2-3x speedup possible with AMP", "2-3x", "gain",
          "amp_bf16", 2.0, 3.0, needs="cuda", source="amp",
          why_not="the claim is about tensor cores under an 8B LM, a GPU mechanism"),
    Claim("kv_cache", "KV cache not properly reused across steps ... Recreating attention caches ... ~15-20% "
          "overhead", "15-20%", "overhead", "single_pass", 0.15, 0.20),
    Claim("fused_adamw", "Use fused optimizer: Already implemented but ensure it's active", "no number", "gain",
          "fused_adamw"),
    Claim("flash_attention", "Use Flash Attention 2: 2-4x speedup on attention layers", "2-4x", "attention gain",
          "sdpa", 2.0, 4.0, source="attention"),
    Claim("checkpointing", "Implement gradient checkpointing: Trade compute for memory", "no number (memory)",
          "memory", "checkpointing"),
    Claim("quick_wins", "After Quick Wins: ~8-12 hours (2-3x speedup)", "2-3x", "gain", "quick_wins", 2.0, 3.0),
    Claim("all", "With All Optimizations: ~4-6 hours (4-6x speedup)", "4-6x", "gain", "all_together", 4.0, 6.0),
    Claim("target_5x", "issue 13 target (GPU preset): all_together at least 5x the baseline's samples/s, the "
          "ratio's p20 above 5x", ">= 5x", "gain", "all_together", 5.0, needs="cuda",
          why_not="a target for the GPU preset"),
    Claim("target_mfu", "issue 13 target (GPU preset): the optimized step at its best batch at 30% or more of the "
          "bf16 matmul floor (MFU)", ">= 30%", "mfu", "compiled", 0.30, needs="cuda", source="mfu",
          why_not="a target for the GPU preset"),
    Claim("target_spread", "issue 13 target (GPU preset): every timing with IQR/median under 10%", "< 10%",
          "spread", "all", 0.10, needs="cuda", source="spread", why_not="a target for the GPU preset"),
    Claim("multi_gpu", "4x H100 GPUs running at ~10% utilization", "~10% utilization", "gain", None,
          why_not="GPU utilization needs GPUs; the DDP path is checked for correctness on CPU (gloo), "
                  "its throughput comes from params/gpu runs"),
    Claim("memory_strategy", "Use ZeRO ... dynamic batching ... torch.cuda.empty_cache() after each epoch",
          "no number", "memory", None,
          why_not="not implemented: no throughput claim to test, and empty_cache only hands cached blocks back "
                  "to the driver"),
)


def verdict(claim: Claim, m: Measured | None, device_type: str) -> str:
    """The verdict of measurement `m` (a gain, a share, a ratio, with its interval) for `claim` (module doc)."""
    kw = dict(needs=claim.needs, device_type=device_type)
    if claim.variant is None:
        return judge(None, at_least=0.0)  # "not tested here"
    if claim.metric == "spread":
        return judge(m, at_most=claim.low, **kw)
    if claim.metric == "overhead":
        return judge(m, at_least=claim.low if claim.low is not None else REAL_OVERHEAD, partly=MIN_OVERHEAD, **kw)
    if claim.low is None:  # no number: the effect must be real
        return judge(m, at_least=MIN_GAIN, **kw)
    return judge(m, at_least=claim.low, partly=None if claim.metric == "mfu" else MIN_GAIN, **kw)


_UNITS = {"gain": " samples/s", "attention gain": " on one attention layer (fwd+bwd)", "memory": " less activation memory",
          "overhead": " of the baseline's step", "mfu": " of the bf16 matmul floor", "spread": " IQR/median at most"}


def _fmt(claim: Claim, v: float) -> str:
    return f"{v:.1%}" if claim.metric in ("overhead", "mfu", "spread") else f"{v:.2f}x"


def describe(claim: Claim, m: Measured | None, device_type: str, note: str = "", why: str = "") -> str:
    """The measured number as a sentence for the results log."""
    if m is None:
        return f"not measured: {why or claim.why_not}" + (f" ({note})" if note else "")
    rng = "" if m.low == m.high else f" (p20-p80 {_fmt(claim, m.low)} to {_fmt(claim, m.high)})"
    text = f"{_fmt(claim, m.value)}{_UNITS[claim.metric]}{rng} on {device_type}"
    if note:
        text += f"; {note}"
    if claim.needs and claim.needs != device_type:
        text += f"; {claim.why_not}"
    return text


def _measured(value: float, lo: float, hi: float) -> Measured:
    return Measured(value, min(lo, value), max(hi, value))


def _gain(base, r) -> Measured:
    """Per-sample time ratio baseline / variant, and its conservative p20/p80 range."""
    scale = r.samples_per_step / base.samples_per_step  # steps hold different numbers of samples
    lo, hi = speedup_range(base.measurement, r.measurement)
    return _measured(speedup(base.measurement, r.measurement) * scale, lo * scale, hi * scale)


def _data_share(c: Claim, data: dict, per_sample: dict) -> tuple[Measured, str]:
    """The share of the baseline's time per sample that tokenizing (or all on-the-fly preparation) takes."""
    fly, cache = summary(data["on_the_fly"]), summary(data["cache"])
    saved = {k: cache[k] if c.source == "tokenize" else 0.0 for k in ("median_s", "p20_s", "p80_s")}
    value = (fly["median_s"] - saved["median_s"]) / per_sample["median_s"]
    # conservative: the smallest cost over the slowest step, the largest over the fastest
    m = _measured(value, max(0.0, fly["p20_s"] - saved["p80_s"]) / per_sample["p80_s"],
                  (fly["p80_s"] - saved["p20_s"]) / per_sample["p20_s"])
    return m, (f"on the fly {fly['median_s'] * 1e6:.0f} us/sample, cache {cache['median_s'] * 1e6:.0f} us, "
               f"baseline step {per_sample['median_s'] * 1e3:.1f} ms/sample")


def _amp(extra: dict, results: dict, base) -> tuple[Measured | None, str]:
    """bf16 over fp32 at the largest batch the sweep measured in both; the ablation's batch-1 figure beside it."""
    r = results.get("amp_bf16")
    at_one = f"at batch 1 (the ablation's amp_bf16) {_gain(base, r).value:.2f}x" if r is not None else ""
    gains = extra.get("amp") or {}
    if not gains:
        return (_gain(base, r) if r is not None else None), "; ".join(x for x in (at_one, extra.get("amp_note", "")) if x)
    batch = max(gains)
    others = ", ".join(f"{g.value:.2f}x at batch {b}" for b, g in sorted(gains.items()) if b != batch)
    return gains[batch], f"bf16 vs fp32 at batch {batch} of the sweep" + (f"; {others}" if others else "") + \
        (f"; {at_one}" if at_one else "")


def _mfu(compiled, share: Measured | None) -> tuple[Measured | None, str]:
    """(MFU, "") of a bf16 compiled step, else (None, why not): its share of its own floor is no bf16 MFU."""
    if compiled is None or share is None:
        return None, "no compiled step in this run (compile='off')"
    if not compiled.variant.toggles.get("amp"):
        return None, f"amp=False: the compiled step runs fp32 ({share.value:.1%} of the fp32 floor, not an MFU)"
    return share, ""


def assess(results: dict, extra: dict, device_type: str, accum_steps: int) -> list[dict]:
    """One row per claim: measured value (a Measured), verdict and a sentence.

    `results`: ablation results by variant name; `extra`: "attention" -> {seq: (gain, (lo, hi))} with the
    study's sequence first, "data" -> study.data_path(...), "optimizer" -> (gain, [default, fused]),
    "amp" -> {batch: Measured bf16/fp32} from the sweep (or "amp_note" saying why there is none),
    "compiled" -> the compiled step at its best batch (or None) and "mfu" -> its share of its own dtype's matmul
    floor (floors.fraction_of_floor), "spread" -> (largest IQR/median, which)."""
    base = results["baseline"]
    per_sample = {k: v / base.samples_per_step for k, v in summary(base.measurement).items() if k.endswith("_s")}
    rows = []
    for c in CLAIMS:
        m, note, why = None, "", ""
        r = results.get(c.variant) if c.variant else None
        if c.source == "attention" and extra.get("attention"):
            (seq, (value, (lo, hi))), *rest = extra["attention"].items()
            m = _measured(value, lo, hi)
            note = f"at the study's LM length {seq}" + "".join(f"; {g:.2f}x at length {s}" for s, (g, _) in rest)
        elif c.source in ("tokenize", "data_prep") and extra.get("data"):
            m, note = _data_share(c, extra["data"], per_sample)
            if r is not None:
                g = _gain(base, r)
                note += f"; end to end {g.value:.2f}x ({g.low:.2f}-{g.high:.2f})"
        elif c.source == "amp":
            m, note = _amp(extra, results, base)
        elif c.source == "mfu":
            m, why = _mfu(extra.get("compiled"), extra.get("mfu"))
            note = f"the compiled step at batch {extra['compiled'].samples_per_step}" if m is not None else ""
        elif c.source == "spread" and extra.get("spread"):
            worst, which = extra["spread"]
            m, note = Measured.exact(worst), f"the widest: {which}"
        elif c.metric == "memory" and r is not None:
            if c.key == "grad_accum" and accum_steps < 2:
                why = "accum_steps=1: there is nothing to accumulate"
            elif r.activation_bytes and base.activation_bytes:
                m = Measured.exact(base.activation_bytes / r.activation_bytes)
                note = (f"{base.activation_bytes / 2**20:.1f} -> {r.activation_bytes / 2**20:.1f} MiB; "
                        f"speed {_gain(base, r).value:.2f}x")
        elif r is not None:
            m = _gain(base, r)
            if c.metric == "overhead":
                m = Measured(1 - 1 / m.value, 1 - 1 / m.low, 1 - 1 / m.high)
            if c.key == "fused_adamw" and extra.get("optimizer"):
                og, (m_default, m_fused) = extra["optimizer"]
                note = (f"AdamW.step alone {og:.2f}x ({m_default.median * 1e3:.2f} -> {m_fused.median * 1e3:.2f} ms, "
                        f"{m_default.median / (per_sample['median_s'] * base.samples_per_step):.1%} of the baseline step)")
            if c.key == "non_blocking" and extra.get("data"):
                note = f"{extra['data']['bytes_per_sample']} bytes per sample host-to-device"
            if c.key in ("quick_wins", "all", "target_5x") and not r.variant.toggles.get("amp"):
                note = "bf16 autocast off in this run (amp=False)"
        rows.append({"claim": c.key, "seed": f"{c.text} [{c.claimed}]", "variant": c.variant or "-",
                     "value": m, "verdict": verdict(c, m, device_type),
                     "measured": describe(c, m, device_type, note, why)})
    return rows


def report(run, rows: list[dict]) -> None:
    """Log every claim and print it; "all" (every recommendation together against the baseline) leads the report."""
    log_claims(run.log, rows, headline="all")


def claimed_by_variant() -> dict[str, str]:
    """The report's numbers per ablation variant, for the table beside the measured ratios."""
    out: dict[str, list[str]] = {}
    for c in CLAIMS:
        if c.variant and not c.key.startswith("target"):
            out.setdefault(c.variant, []).append(f"{c.claimed} ({c.key})")
    return {k: "; ".join(v) for k, v in out.items()}


COMPUTE_BOUND = 0.5  # a step at half its fp32 matmul floor or more is compute-bound: bf16 can pay there


def floor_ratio(peaks: dict) -> str:
    """The bf16 over fp32 matmul floor, and what it means for AMP on this device."""
    ratio = peaks["bf16"][0] / peaks["fp32"][0]
    return (f"bf16 matmul floor / fp32 floor on this device: {ratio:.2f}x"
            + ("" if ratio > 1 else ": bf16 autocast cannot win at any batch here (bf16 sweep skipped)"))


def sweep_findings(sweep: dict, flops_per_sample: float, peaks: dict, gains: dict) -> list[str]:
    """The batch sweep read out: where samples/s rises or dips (beyond noise), where the step is
    compute-bound, and where bf16 autocast wins. Sentences from this run's numbers."""
    from .floors import fraction_of_floor
    from .study import dips

    def share(r, name):
        return fraction_of_floor(r, flops_per_sample, peaks[name][0]).value

    out = []
    for amp, rows in sweep.items():
        name = "bf16" if amp else "fp32"
        if len(rows) >= 2 and not dips(rows):
            out.append(f"{name}: samples/s rises or holds within noise at every larger batch: batch {rows[0].samples_per_step} "
                       f"-> {rows[-1].samples_per_step}: {rows[0].samples_per_s:.3g} -> {rows[-1].samples_per_s:.3g} samples/s")
        for a, b in dips(rows):
            out.append(f"{name}: dip from batch {a.samples_per_step} to {b.samples_per_step} ({a.samples_per_s:.3g} -> "
                       f"{b.samples_per_s:.3g} samples/s, p20-p80 ranges apart): {share(a, name):.0%} -> {share(b, name):.0%} "
                       f"of the {name} floor, peak memory {a.peak_bytes / 2**20:.0f} -> {b.peak_bytes / 2**20:.0f} MiB, "
                       f"{a.launches['total'] / a.samples_per_step:.3g} -> {b.launches['total'] / b.samples_per_step:.3g} "
                       f"launches per sample")
    if sweep.get(False):
        shares = [(r.samples_per_step, share(r, "fp32")) for r in sweep[False]]
        bound = [b for b, s in shares if s >= COMPUTE_BOUND]
        top = max(shares, key=lambda x: x[1])
        out.append(f"fp32 compute-bound (>= {COMPUTE_BOUND:.0%} of the fp32 floor) from batch {bound[0]}" if bound else
                   f"fp32 never compute-bound here: at most {top[1]:.0%} of the fp32 floor (batch {top[0]})")
    out.append(floor_ratio(peaks))
    if gains:
        wins = [b for b, g in sorted(gains.items()) if g.low > 1]
        out.append("bf16 over fp32: " + ", ".join(f"{g.value:.2f}x at batch {b}" for b, g in sorted(gains.items()))
                   + (f"; bf16 wins (p20-p80 above 1x) at batch {', '.join(map(str, wins))}" if wins else
                      "; bf16 wins at no batch"))
    return out
