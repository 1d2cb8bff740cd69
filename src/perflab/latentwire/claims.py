"""06_latentwire_amp: the seed report's claims and issue 13's targets as data (`perflab.kit.claims`), what measures each,
and the sentences of this run. The rule of every verdict is the kit's (`perflab.kit.verdicts.judge`): the whole interval
on the claim's side: "holds"; wholly on the other side: "does not hold", or "partly holds" when the whole interval
still passes `partly` (a gain of 1.05x, a share of the step of 2%); straddling: "within noise". A claim about the GPU
(a GPU mechanism or a GPU-preset target) on another device: "not tested here (measured on cpu)".

What measures each claim (MEASURED_BY, with the ablation variant that tests it in VARIANTS):
- "gain": samples/s of a variant over the baseline's: `decide_speedup` in paired rounds of whole optimizer steps of
  the ablation's own trainers, scaled by the ratio of samples per step (`decide_gains`). "~X% overhead" claims
  tested end to end are read as the share X of the baseline's step the change removes, so their threshold is the
  speedup that implies, 1 / (1 - X) (`removes`); a claim without a number holds when the effect is real (1.05x);
- "tokenize": the share of the baseline's time per sample that tokenizing takes: on-the-fly preparation against
  the cache gather of one sample, `decide_saving` in paired rounds, per = 1 / the baseline's median time per sample
  (its own spread is not in the interval);
- "data_prep": the share that all on-the-fly preparation takes (the most a DataLoader can hide): `decide_time` over
  blocks of one-sample preparations (their mean, the machine's drift added), over the baseline's median time per
  sample;
- "attention": one attention layer, eager against SDPA (fwd+bwd), `decide_speedup` at the study's LM length;
- "amp": bf16 over fp32 at the largest batch the sweep measured in both, `decide_speedup` on a fresh pair (CUDA);
- "memory": the baseline's activation bytes over the variant's: exact (counted bytes);
- "mfu": the compiled step's model FLOP/s over the measured bf16 matmul floor, the mean over its timed blocks and
  its 99% interval (`floors.fraction_of_floor`); "spread": the largest IQR/median of the run, exact.
"""
from __future__ import annotations

import math

from ..kit.claims import Claim, ClaimError, Claims
from ..kit.verdicts import Decision, Measured, decide_saving, decide_speedup, decide_time
from .params import LatentWireParams

MIN_GAIN = 1.05       # a real gain; below it, a ratio is a negligible effect
MIN_OVERHEAD = 0.02   # a share of the step below this is not worth a change
REAL_OVERHEAD = 0.05  # a bottleneck worth the name


def removes(share: float) -> float:
    """The speedup of removing `share` of the baseline's step: 1 / (1 - share)."""
    return 1 / (1 - share)


_GPU = {"device": "cuda"}
_SEED = "seed 003"
_OVERHEAD = "samples/s over the baseline's (paired rounds); removing X of the step is 1/(1-X)"
CLAIMS = Claims(
    Claim("non_blocking", "Multiple .to(device) calls with non_blocking=False ... ~20-30% performance overhead "
          "from blocking transfers", "20-30%", at_least=removes(0.20), partly=removes(MIN_OVERHEAD), setup=_GPU,
          source=_SEED, metric=f"pin_memory: {_OVERHEAD}",
          why_not="a CPU run has no host-to-device copy: .to('cpu') is a no-op and nothing can be pinned"),
    Claim("dataloader", "No DataLoader usage - manual batch indexing ... CPU bottleneck during data preparation",
          "no number", at_least=REAL_OVERHEAD, partly=MIN_OVERHEAD, source=_SEED,
          metric="share of the baseline's time per sample that on-the-fly preparation takes (1 ms blocks)"),
    Claim("pretokenize", "Re-tokenizing chat templates every iteration ... ~10-15% overhead", "10-15%",
          at_least=0.10, partly=MIN_OVERHEAD, source=_SEED,
          metric="share of the baseline's time per sample that tokenizing takes (paired rounds vs the cache)"),
    Claim("grad_accum", "No gradient accumulation optimization ... Memory fragmentation leading to OOMs",
          "no number (memory)", at_least=MIN_GAIN, source=_SEED,
          metric="activation bytes, baseline over grad_accum"),
    Claim("batch_size", "Default batch size of 1 severely underutilizes GPUs ... Increasing batch sizes "
          "(2-4x speedup)", "2-4x", at_least=2.0, partly=MIN_GAIN, source=_SEED, setup=_GPU,
          why_not="a claim about a GPU's utilization; the CPU ablation's gain is in the table",
          metric="batch_size: samples/s over the baseline's (paired rounds)"),
    Claim("loss_loop", "Sequential loss computation instead of batched ... Loop over K tokens ... ~5-10% overhead",
          "5-10%", at_least=removes(0.05), partly=removes(MIN_OVERHEAD), source=_SEED,
          metric=f"single_pass: {_OVERHEAD}"),
    Claim("amp", "No automatic mixed precision (AMP) ... 2-3x speedup possible with AMP", "2-3x", at_least=2.0,
          partly=MIN_GAIN, setup=_GPU, source=_SEED,
          metric="bf16 over fp32 samples/s at the largest batch of the sweep (paired rounds)",
          why_not="the claim is about tensor cores under an 8B LM, a GPU mechanism"),
    Claim("kv_cache", "KV cache not properly reused across steps ... Recreating attention caches ... ~15-20% "
          "overhead", "15-20%", at_least=removes(0.15), partly=removes(MIN_OVERHEAD), source=_SEED,
          metric=f"single_pass: {_OVERHEAD}"),
    Claim("fused_adamw", "Use fused optimizer: Already implemented but ensure it's active", "no number",
          at_least=MIN_GAIN, source=_SEED, metric="fused_adamw: samples/s over the baseline's (paired rounds)"),
    Claim("flash_attention", "Use Flash Attention 2: 2-4x speedup on attention layers", "2-4x", at_least=2.0,
          partly=MIN_GAIN, source=_SEED, setup=_GPU, why_not="Flash Attention 2 is a CUDA kernel; a CPU's SDPA is another",
          metric="one attention layer fwd+bwd, eager over SDPA (paired rounds)"),
    Claim("checkpointing", "Implement gradient checkpointing: Trade compute for memory", "no number (memory)",
          at_least=MIN_GAIN, source=_SEED, metric="activation bytes, baseline over checkpointing"),
    Claim("quick_wins", "After Quick Wins: ~8-12 hours (2-3x speedup)", "2-3x", at_least=2.0, partly=MIN_GAIN,
          source=_SEED, metric="quick_wins: samples/s over the baseline's (paired rounds)"),
    Claim("all", "With All Optimizations: ~4-6 hours (4-6x speedup)", "4-6x", at_least=4.0, partly=MIN_GAIN,
          source=_SEED, metric="all_together: samples/s over the baseline's (paired rounds)"),
    Claim("target_5x", "GPU preset: all_together at least 5x the baseline's samples/s (the whole 99% interval of "
          "the speedup above 5x)", ">= 5x", at_least=5.0, partly=MIN_GAIN, setup=_GPU, source="issue 13",
          metric="all_together: samples/s over the baseline's (paired rounds)", why_not="a target for the GPU preset"),
    Claim("target_mfu", "GPU preset: the optimized step at its best batch at 30% or more of the bf16 matmul floor "
          "(MFU)", ">= 30%", at_least=0.30, setup=_GPU, source="issue 13",
          metric="the compiled step's model FLOP/s over the bf16 matmul floor, median over blocks, 99% interval",
          why_not="a target for the GPU preset"),
    Claim("target_spread", "GPU preset: every timing with IQR/median under 10%", "< 10%", at_most=0.10,
          setup=_GPU, source="issue 13", metric="the largest IQR/median of the run's timings",
          why_not="a target for the GPU preset"),
    Claim("multi_gpu", "4x H100 GPUs running at ~10% utilization", "~10% utilization", at_most=0.10, source=_SEED,
          metric="GPU utilization", why_not="GPU utilization needs GPUs; the DDP path is checked for correctness "
                                            "on CPU (gloo), its throughput comes from params/gpu runs"),
    Claim("memory_strategy", "Use ZeRO ... dynamic batching ... torch.cuda.empty_cache() after each epoch",
          "no number", at_least=MIN_GAIN, source=_SEED, metric="memory, baseline over the strategy",
          why_not="not implemented: no throughput claim to test, and empty_cache only hands cached blocks back "
                  "to the driver"),
    headline="all", params=LatentWireParams)

# The ablation variant that tests each claim (None: none does), and what measures it (module doc)
VARIANTS = {"non_blocking": "pin_memory", "dataloader": "dataloader", "pretokenize": "pretokenize",
            "grad_accum": "grad_accum", "batch_size": "batch_size", "loss_loop": "single_pass", "amp": "amp_bf16",
            "kv_cache": "single_pass", "fused_adamw": "fused_adamw", "flash_attention": "sdpa",
            "checkpointing": "checkpointing", "quick_wins": "quick_wins", "all": "all_together",
            "target_5x": "all_together", "target_mfu": "compiled", "target_spread": None, "multi_gpu": None,
            "memory_strategy": None}
MEASURED_BY = {"non_blocking": "gain", "dataloader": "data_prep", "pretokenize": "tokenize", "grad_accum": "memory",
               "batch_size": "gain", "loss_loop": "gain", "amp": "amp", "kv_cache": "gain", "fused_adamw": "gain",
               "flash_attention": "attention", "checkpointing": "memory", "quick_wins": "gain", "all": "gain",
               "target_5x": "gain", "target_mfu": "mfu", "target_spread": "spread", "multi_gpu": None,
               "memory_strategy": None}
_SHARES = {"loss_loop", "kv_cache", "non_blocking"}  # "% overhead" claims tested end to end (a gain threshold)

if set(VARIANTS) != set(CLAIMS.keys) or set(MEASURED_BY) != set(CLAIMS.keys):  # a typo fails at import
    raise ClaimError(f"VARIANTS and MEASURED_BY need one entry per claim: {', '.join(CLAIMS.keys)}")


def _off(key: str, cfg, device) -> str:
    return CLAIMS[key].off_setup(cfg, getattr(device, "type", str(device)))


def decide_gains(trainers: dict, results: dict, *, cfg: LatentWireParams, device) -> dict[str, Decision | None]:
    """Every "gain" claim this run is the setup of: its variant against the baseline in paired rounds of whole
    optimizer steps (`decide_speedup`, at most `cfg.verdict_time` s, stopped once decided; scale = the variant's
    samples per step over the baseline's), on the ablation's trainers (`study.ablation`: the timed models, alive);
    a variant's DataLoader workers are stopped after its rounds. Off the claim's setup, or its variant not in the
    ablation: None."""
    out: dict[str, Decision | None] = {}
    base = trainers["baseline"]
    for key, how in MEASURED_BY.items():
        v = VARIANTS[key]
        if how != "gain":
            continue
        if v not in trainers:
            out[key] = None
            continue
        scale = results[v].samples_per_step / results["baseline"].samples_per_step
        try:
            out[key] = CLAIMS[key].decide(decide_speedup, base.step, trainers[v].step, scale=scale, cfg=cfg,
                                          device=device)
        finally:
            trainers[v].pause()
    return out


def decide_parts(cfg: LatentWireParams, examples, *, device, base, seq: int, sweep: dict,
                 sweep_toggles: dict) -> dict[str, Decision | None]:
    """The claims about a part of the step: one attention layer eager vs SDPA at the study's LM length `seq`
    (flash_attention, paired rounds); one sample prepared on the fly, over the baseline's time per sample
    (dataloader, blocks of calls), and against a gather from the cache (pretokenize, paired rounds); and on the GPU
    setup bf16 vs fp32 at the sweep's largest batch measured in both (amp, paired rounds; None off its setup or
    without such a batch). `base`: the baseline's VariantResult; at most `cfg.verdict_time` s each."""
    from .study import amp_pair, attention_fns, data_fns

    rounds = dict(max_run_time=cfg.verdict_time, device=device)
    fns = attention_fns(cfg, batch=cfg.ablation_batch, seq=seq, device=device)
    out = {"flash_attention": CLAIMS["flash_attention"].decide(decide_speedup, fns["manual"], fns["sdpa"], cfg=cfg,
                                                               device=device)}
    data = data_fns(cfg, examples, device)
    per_sample = base.measurement.median / base.samples_per_step  # seconds of the baseline's step per sample
    out["dataloader"] = decide_time(data["on_the_fly"], scale=1 / per_sample, **CLAIMS["dataloader"].rule,
                                    quantity="share of the baseline's time per sample", **rounds)
    out["pretokenize"] = decide_saving(data["on_the_fly"], data["cache"], per=1 / per_sample,
                                       **CLAIMS["pretokenize"].rule, **rounds)
    batch = _amp_batch(sweep)
    out["amp"] = None
    if batch is not None and not _off("amp", cfg, device):
        pair = amp_pair(batch, examples, p=cfg, device=device, toggles=sweep_toggles)
        try:
            out["amp"] = decide_speedup(pair[False].step, pair[True].step, **CLAIMS["amp"].rule, **rounds)
        finally:
            for t in pair.values():
                t.close()
    return out


def _amp_batch(sweep: dict) -> int | None:
    """The largest batch the sweep measured in fp32 and in bf16 (where AMP can pay), or None."""
    both = {r.samples_per_step for r in sweep.get(False, [])} & {r.samples_per_step for r in sweep.get(True, [])}
    return max(both) if both else None


def _x(m) -> str:
    return f"{m.value:.2f}x [{m.low:.2f}, {m.high:.2f}]"


def _pct(m) -> str:
    return f"{m.value:.1%} [{m.low:.1%}, {m.high:.1%}]"


def _rounds(d: Decision) -> str:
    return f"{d.how}, {d.seconds:.2f} s"


def _share_removed(d) -> str:
    """The share of the baseline's step a speedup removes: 1 - 1/gain, with the interval's ends."""
    def s(g):
        return f"{1 - 1 / g:.0%}" if g > 0 and math.isfinite(g) else "-inf" if g <= 0 else "100%"
    return f"removes {s(d.value)} [{s(d.low)}, {s(d.high)}] of the baseline's step"


def _ablation_ratio(results: dict, v: str) -> float:
    """Samples/s of variant `v` over the baseline's from the ablation's timings, the ratio of medians: a figure for
    a sentence, never judged (the claims are decided in paired rounds)."""
    base, r = results["baseline"], results[v]
    return r.samples_per_s / base.samples_per_s


def _gain(key: str, d: Decision | None, results: dict, dt: str, extra: dict) -> tuple:
    v = VARIANTS[key]
    r = results.get(v)
    if r is None:
        return None, f"no {v} variant in this run"
    note = []
    if key == "fused_adamw" and extra.get("optimizer"):
        og, (m_default, m_fused) = extra["optimizer"]
        note.append(f"AdamW.step alone {og:.2f}x ({m_default.median * 1e3:.2f} -> {m_fused.median * 1e3:.2f} ms, "
                    f"{m_default.median / results['baseline'].measurement.median:.1%} of the baseline step)")
    if key == "non_blocking" and extra.get("data"):
        note.append(f"{extra['data']['bytes_per_sample']} bytes per sample host-to-device")
    if key in ("quick_wins", "all", "target_5x") and not r.variant.knobs.get("amp"):
        note.append("bf16 autocast off in this run (amp=False)")
    if d is None:
        text = (f"{_ablation_ratio(results, v):.2f}x samples/s on {dt} from the ablation's timings (ratio of medians), "
                f"not judged; {CLAIMS[key].why_not or 'a claim about another setup'}")
        return None, "; ".join([text, *note])
    text = f"{v}: {_x(d)} samples/s on {dt} ({_rounds(d)})"
    if key in _SHARES:
        text += f": {_share_removed(d)}"
    return d, "; ".join([text, *note])


def _data_prep(key: str, results: dict, extra: dict, dt: str, d: Decision | None) -> tuple:
    """dataloader: the share of all on-the-fly preparation (the most a DataLoader can hide); pretokenize: what
    tokenizing adds over the cache gather."""
    base = results["baseline"]
    fly, cache = extra["data"]["on_the_fly"], extra["data"]["cache"]
    per_sample = base.measurement.median / base.samples_per_step
    context = (f"on the fly {fly.median * 1e6:.0f} us/sample, cache {cache.median * 1e6:.0f} us, baseline step "
               f"{per_sample * 1e3:.1f} ms/sample")
    if d is None:
        return None, f"not measured in this run; {context}"
    what = "all on-the-fly preparation" if key == "dataloader" else "on the fly minus the cache gather"
    return d, f"{_pct(d)} of the baseline's time per sample on {dt}: {what} ({_rounds(d)}); {context}"


def measurements(results: dict, decisions: dict, extra: dict, device_type: str,
                 accum_steps: int) -> dict[str, tuple]:
    """Each claim's (measurement, sentence) for `CLAIMS.judge`. `results`: the ablation's VariantResults by variant;
    `decisions`: `decide_gains` and `decide_parts` together; `extra`: "attention" -> {seq: Measured} with the study's
    length first, "data" -> study.data_path(...), "optimizer" -> (gain, [default, fused]), "amp" -> {batch:
    Measured bf16/fp32} from the sweep, "amp_note", "compiled" -> the compiled step at its best batch (or None),
    "mfu" -> its share of the floor of the dtype it runs in, "spread" -> (largest IQR/median, which)."""
    dt, base, out = device_type, results["baseline"], {}
    for key, how in MEASURED_BY.items():
        d, v = decisions.get(key), VARIANTS[key]
        if how == "gain":
            out[key] = _gain(key, d, results, dt, extra)
        elif how in ("data_prep", "tokenize"):
            out[key] = _data_prep(key, results, extra, dt, d)
            if v in results:
                out[key] = (out[key][0], out[key][1] + f"; end to end {_ablation_ratio(results, v):.2f}x "
                                                       f"(ablation timings, ratio of medians)")
        elif how == "attention":
            (seq, first), *rest = extra["attention"].items()
            others = "".join(f"; {g.value:.2f}x at length {s} (ratio of medians)" for s, g in rest)
            out[key] = (d, f"{_x(d)} on one attention layer (fwd+bwd) on {dt} at the study's LM length {seq} "
                           f"({_rounds(d)})" + others) if d is not None else \
                (None, f"eager over SDPA on one attention layer (fwd+bwd) on {dt}: {first.value:.2f}x at length {seq}"
                       f"{others}; not judged")
        elif how == "memory":
            r = results.get(v)
            if key == "grad_accum" and accum_steps < 2:
                out[key] = (None, "accum_steps=1: there is nothing to accumulate")
            elif r is not None and r.activation_bytes and base.activation_bytes:
                out[key] = (Measured.exact(base.activation_bytes / r.activation_bytes),
                            f"{base.activation_bytes / r.activation_bytes:.2f}x less activation memory on {dt}: "
                            f"{base.activation_bytes / 2**20:.1f} -> {r.activation_bytes / 2**20:.1f} MiB; speed "
                            f"{_ablation_ratio(results, v):.2f}x (ablation timings, ratio of medians)")
            else:
                out[key] = (None, f"no activation count for {v} in this run")
        elif how == "amp":
            out[key] = _amp(d, extra, results, dt)
        elif how == "mfu":
            out[key] = _mfu(extra.get("compiled"), extra.get("mfu"), dt)
        elif how == "spread" and extra.get("spread"):
            worst, which = extra["spread"]
            out[key] = (Measured.exact(worst), f"{worst:.1%} IQR/median at most on {dt}, the widest: {which}")
        else:
            out[key] = (None, CLAIMS[key].why_not or "not measured in this run")
    return out


def _amp(d: Decision | None, extra: dict, results: dict, dt: str) -> tuple:
    """bf16 over fp32 at the sweep's largest batch measured in both (decided on the GPU setup); the sweep's ratios
    and the ablation's batch-1 figure beside it."""
    gains = extra.get("amp") or {}
    notes = [f"{g.value:.2f}x at batch {b}" for b, g in sorted(gains.items())]
    if "amp_bf16" in results:
        notes.append(f"at batch 1 (the ablation's amp_bf16) {_ablation_ratio(results, 'amp_bf16'):.2f}x")
    sweep = ("the sweep's bf16 / fp32 (ratios of medians): " + ", ".join(notes)) if notes else ""
    if d is not None:
        return d, f"{_x(d)} samples/s, bf16 vs fp32 at batch {max(gains)} on {dt} ({_rounds(d)})" + \
            (f"; {sweep}" if sweep else "")
    why = CLAIMS["amp"].why_not if gains else "no batch measured in both fp32 and bf16"
    return None, "; ".join(x for x in (f"not judged on {dt}: {why}", sweep, extra.get("amp_note", "")) if x)


def _mfu(compiled, share: Measured | None, dt: str) -> tuple:
    """The compiled step's MFU when it runs bf16; else why not (its share of the fp32 floor is no bf16 MFU)."""
    if compiled is None or share is None:
        return None, "no compiled step in this run (compile='off')"
    if not compiled.variant.knobs.get("amp"):
        return None, (f"amp=False: the compiled step runs fp32 ({share.value:.1%} of the fp32 floor at batch "
                      f"{compiled.samples_per_step} on {dt}, not an MFU)")
    return share, (f"{_pct(share)} of the bf16 matmul floor on {dt}: the compiled step at batch "
                   f"{compiled.samples_per_step} (median over {len(compiled.measurement.times)} blocks, 99% interval)")


def claimed_by_variant() -> dict[str, str]:
    """The report's numbers per ablation variant, for the table beside the measured ratios."""
    out: dict[str, list[str]] = {}
    for c in CLAIMS:
        if VARIANTS[c.key] and not c.key.startswith("target"):
            out.setdefault(VARIANTS[c.key], []).append(f"{c.claimed} ({c.key})")
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
                   + (f"; bf16 wins (99% interval of the ratio of medians above 1x) at batch {', '.join(map(str, wins))}"
                      if wins else "; bf16 wins at no batch"))
    return out
