"""The seed report's claims as data, and the rule that turns a measurement into a verdict.

Each claim names its metric and where the number comes from:
- "gain": samples/s of an ablation variant over the baseline's (per-sample time ratio);
- "overhead": the share of the baseline's step a change removes: 1 - 1/gain of a variant, or measured
  directly for the data path ("tokenize": on-the-fly tokenization minus the cache gather; "data_prep": all
  of the on-the-fly preparation, the most a DataLoader can hide), per sample over the baseline's time per sample;
- "memory": the baseline's activation bytes over the variant's;
- "attention gain": one attention layer, eager vs SDPA (fwd+bwd).
An "X% overhead" claim is compared as a share of the step; a "Nx" claim as a gain.

Verdict (computed, never typed in): no measurement, or a GPU mechanism on another device (pinned transfers,
tensor-core AMP) -> "not tested here"; the claimed low end reached -> "holds"; a real but smaller effect
(gain >= 1.05, share >= 2%) -> "partly holds"; else "does not hold". A claim without a number holds when the
effect is real: a gain whose p20/p80 range stays above 1.05, a share of at least 5%.
"""
from __future__ import annotations

import dataclasses

MIN_GAIN = 1.05       # below this a ratio is within this study's noise on a shared CPU
MIN_OVERHEAD = 0.02   # a share of the step below this is not worth a change
REAL_OVERHEAD = 0.05  # a bottleneck worth the name


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    text: str                  # the report, quoted
    claimed: str               # its number, as written
    metric: str                # "gain" | "overhead" | "memory" | "attention gain"
    variant: str | None        # the ablation variant that tests it; None: not tested here
    low: float | None = None   # the claimed range as a ratio (gain, memory) or a share (overhead)
    high: float | None = None
    needs: str = ""            # "cuda": a GPU mechanism (nothing to measure on a CPU)
    why_not: str = ""          # why it is not tested, when it cannot be
    source: str = "variant"    # "variant" | "tokenize" | "data_prep" | "attention"


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
          "amp_bf16", 2.0, 3.0, needs="cuda",
          why_not="the claim is about tensor cores under an 8B LM; this CPU run shows bf16 autocast's cost on a "
                  "0.7M-parameter model, not that"),
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
    Claim("multi_gpu", "4x H100 GPUs running at ~10% utilization", "~10% utilization", "gain", None,
          why_not="GPU utilization needs GPUs; the DDP path is checked for correctness on CPU (gloo), "
                  "its throughput comes from params/gpu runs"),
    Claim("memory_strategy", "Use ZeRO ... dynamic batching ... torch.cuda.empty_cache() after each epoch",
          "no number", "memory", None,
          why_not="not implemented: no throughput claim to test, and empty_cache only hands cached blocks back "
                  "to the driver"),
)


def verdict(claim: Claim, value: float | None, device_type: str, spread: tuple[float, float] | None = None) -> str:
    """The verdict for `value` (a gain, an overhead share, or a memory ratio; see module doc)."""
    if value is None or claim.variant is None or (claim.needs == "cuda" and device_type != "cuda"):
        return "not tested here"
    if claim.metric == "overhead":
        if value >= (claim.low if claim.low is not None else REAL_OVERHEAD):
            return "holds"
        return "partly holds" if value >= MIN_OVERHEAD else "does not hold"
    if claim.low is None:  # no number: the effect must be real, its whole p20/p80 range above noise
        if value < MIN_GAIN:
            return "does not hold"
        return "holds" if spread is None or spread[0] >= MIN_GAIN else "partly holds"
    if value >= claim.low:
        return "holds"
    return "partly holds" if value >= MIN_GAIN else "does not hold"


def _fmt(claim: Claim, v: float) -> str:
    return f"{v:.1%}" if claim.metric == "overhead" else f"{v:.2f}x"


def describe(claim: Claim, value: float | None, spread: tuple[float, float] | None, device_type: str,
             note: str = "") -> str:
    """The measured number as a sentence for the results log."""
    if value is None:
        return f"not measured: {claim.why_not}" + (f" ({note})" if note else "")
    unit = {"gain": " samples/s", "attention gain": " on one attention layer (fwd+bwd)",
            "memory": " less activation memory", "overhead": " of the baseline's step"}[claim.metric]
    rng = f" (p20-p80 {_fmt(claim, spread[0])} to {_fmt(claim, spread[1])})" if spread else ""
    text = f"{_fmt(claim, value)}{unit}{rng} on {device_type}"
    if note:
        text += f"; {note}"
    if claim.needs == "cuda" and device_type != "cuda":
        text += f"; {claim.why_not}"
    return text


def _gain(base, r) -> tuple[float, tuple[float, float]]:
    """Per-sample time ratio baseline / variant, and its conservative p20/p80 range."""
    from ..bench import speedup, speedup_range

    scale = r.samples_per_step / base.samples_per_step  # steps hold different numbers of samples
    lo, hi = speedup_range(base.measurement, r.measurement)
    return speedup(base.measurement, r.measurement) * scale, (lo * scale, hi * scale)


def assess(results: dict, extra: dict, device_type: str, accum_steps: int) -> list[dict]:
    """One row per claim: measured value, spread, verdict and a sentence.

    `results`: ablation results by variant name; `extra`: "attention" -> {seq: (gain, (lo, hi))} with the
    study's sequence first, "data" -> experiments.data_path(...), "optimizer" -> (gain, [default, fused])."""
    from ..bench import summary

    base = results["baseline"]
    t_sample = summary(base.measurement)  # per step
    per_sample = {k: v / base.samples_per_step for k, v in t_sample.items() if k.endswith("_s")}
    rows = []
    for c in CLAIMS:
        value, spread, note, why = None, None, "", c.why_not
        r = results.get(c.variant) if c.variant else None
        if c.source == "attention" and extra.get("attention"):
            (seq, (value, spread)), *rest = extra["attention"].items()
            note = f"at the study's LM length {seq}" + "".join(f"; {g:.2f}x at length {s}" for s, (g, _) in rest)
        elif c.source in ("tokenize", "data_prep") and extra.get("data"):
            fly, cache = summary(extra["data"]["on_the_fly"]), summary(extra["data"]["cache"])
            saved = {k: cache[k] if c.source == "tokenize" else 0.0 for k in ("median_s", "p20_s", "p80_s")}
            value = (fly["median_s"] - saved["median_s"]) / per_sample["median_s"]
            # conservative: the smallest cost over the slowest step, the largest over the fastest
            spread = (max(0.0, fly["p20_s"] - saved["p80_s"]) / per_sample["p80_s"],
                      (fly["p80_s"] - saved["p20_s"]) / per_sample["p20_s"])
            note = (f"on the fly {fly['median_s'] * 1e6:.0f} us/sample, cache {cache['median_s'] * 1e6:.0f} us, "
                    f"baseline step {per_sample['median_s'] * 1e3:.1f} ms/sample")
            if r is not None:
                g, (lo, hi) = _gain(base, r)
                note += f"; end to end {g:.2f}x ({lo:.2f}-{hi:.2f})"
        elif c.metric == "memory" and r is not None:
            if c.key == "grad_accum" and accum_steps < 2:
                why = "accum_steps=1: there is nothing to accumulate"
            elif r.activation_bytes and base.activation_bytes:
                value = base.activation_bytes / r.activation_bytes
                g, _ = _gain(base, r)
                note = f"{base.activation_bytes / 2**20:.1f} -> {r.activation_bytes / 2**20:.1f} MiB; speed {g:.2f}x"
        elif r is not None:
            value, spread = _gain(base, r)
            if c.metric == "overhead":
                value, spread = 1 - 1 / value, (1 - 1 / spread[0], 1 - 1 / spread[1])
            if c.key == "fused_adamw" and extra.get("optimizer"):
                og, (m_default, m_fused) = extra["optimizer"]
                note = (f"AdamW.step alone {og:.2f}x ({m_default.median * 1e3:.2f} -> {m_fused.median * 1e3:.2f} ms, "
                        f"{m_default.median / (per_sample['median_s'] * base.samples_per_step):.1%} of the baseline step)")
            if c.key == "non_blocking" and extra.get("data"):
                note = f"{extra['data']['bytes_per_sample']} bytes per sample host-to-device"
            if c.key in ("quick_wins", "all") and not r.variant.toggles.get("amp"):
                note = "bf16 autocast off in this run (amp=False)"
        c2 = dataclasses.replace(c, why_not=why)
        rows.append({"claim": c.key, "seed": f"{c.text} [{c.claimed}]", "variant": c.variant or "-",
                     "value": value, "spread": spread, "verdict": verdict(c2, value, device_type, spread),
                     "measured": describe(c2, value, spread, device_type, note)})
    return rows


def claimed_by_variant() -> dict[str, str]:
    """The report's numbers per ablation variant, for the table beside the measured ratios."""
    out: dict[str, list[str]] = {}
    for c in CLAIMS:
        if c.variant:
            out.setdefault(c.variant, []).append(f"{c.claimed} ({c.key})")
    return {k: "; ".join(v) for k, v in out.items()}
