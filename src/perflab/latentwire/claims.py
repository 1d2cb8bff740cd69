"""06_latentwire_amp: the seed report's claims and issue 13's targets as data (`perflab.kit.claims`), and what measures
each (`study` and `evidence.evidence` make the measurements and this run's sentences). The rule of every
verdict is the kit's (`perflab.kit.verdicts.judge`): the whole interval on the claim's side: "holds"; wholly on the
other side: "does not hold", or "partly holds" when the whole interval still passes `partly` (a gain of 1.05x, a share
of the step of 2%); straddling: "within noise". A claim about the GPU (a GPU mechanism or a GPU-preset target) on
another device: "not tested here (measured on cpu)".

Each claim names the function that measures it (`measured_by`, from this package: `CLAIMS.measurer(key)`) and the
unit its number reads in ("x" a ratio, "%" a share kept as a fraction):
- `study.decide_gains`: samples/s of the ablation variant that tests the claim (`ablation.TESTED_BY`) over the
  baseline's, `decide_speedup` in paired rounds of whole optimizer steps of the ablation's own trainers, scaled by the
  ratio of samples per step; one decision per variant, every claim on it judged on that one (`Decision.rejudge`).
  "~X% overhead" claims tested end to end are read as the share X of the baseline's step the change removes, so their
  threshold is the speedup that implies, 1 / (1 - X) (`removes`); a claim without a number holds when the effect is
  real (1.05x);
- `study.decide_tokenize`: the share of the baseline's time per sample that tokenizing takes: on-the-fly preparation
  against the cache gather of one sample, `decide_saving` in paired rounds, per = 1 / the baseline's median time per
  sample (its own spread is not in the interval);
- `study.decide_data_prep`: the share that all on-the-fly preparation takes (the most a DataLoader can hide):
  `decide_time` over blocks of one-sample preparations (their mean, the machine's drift added), over the baseline's
  median time per sample;
- `study.decide_attention`: one attention layer, eager against SDPA (fwd+bwd), `decide_speedup` at the study's LM length;
- `study.decide_amp`: bf16 over fp32 at the largest batch the sweep measured in both, `decide_speedup` on a fresh pair;
- `ablation.prepare_variant`: the baseline's activation bytes over the variant's, counted in its first step (exact);
- `sweep.compiled_at`: the compiled step's model FLOP/s over the measured bf16 matmul floor, from its mean time over its
  timed blocks with the 99% interval (`floors.fraction_of_floor`); `findings.spreads`: the largest IQR/median of the
  run's timings, exact;
- `study.evidence` (`evidence.evidence`): claims nothing here measures (it says why).
"""
from __future__ import annotations

from ..kit.claims import Claim, Claims
from .params import LatentWireParams

MIN_GAIN = 1.05       # a real gain; below it, a ratio is a negligible effect
LESS_MEMORY = "x less activation memory"   # a memory claim's ratio says what it is a ratio of (not a speedup)
MIN_OVERHEAD = 0.02   # a share of the step below this is not worth a change
REAL_OVERHEAD = 0.05  # a bottleneck worth the name


def removes(share: float) -> float:
    """The speedup of removing `share` of the baseline's step: 1 / (1 - share)."""
    return 1 / (1 - share)


_GPU = {"device": "cuda"}
_SEED = "seed 003"
_GAIN, _MEMORY, _EVIDENCE = "study.decide_gains", "ablation.prepare_variant", "study.evidence"
_OVERHEAD = "samples/s over the baseline's (paired rounds); removing X of the step is 1/(1-X)"
CLAIMS = Claims(
    Claim("non_blocking", "Multiple .to(device) calls with non_blocking=False ... ~20-30% performance overhead "
          "from blocking transfers", "20-30%", at_least=removes(0.20), partly=removes(MIN_OVERHEAD), setup=_GPU,
          unit="x", measured_by=_GAIN, source=_SEED, metric=f"pin_memory: {_OVERHEAD}",
          why_not="a CPU run has no host-to-device copy: .to('cpu') is a no-op and nothing can be pinned"),
    Claim("dataloader", "No DataLoader usage - manual batch indexing ... CPU bottleneck during data preparation",
          "no number", at_least=REAL_OVERHEAD, partly=MIN_OVERHEAD, unit="%", measured_by="study.decide_data_prep",
          source=_SEED, metric="share of the baseline's time per sample that all on-the-fly preparation takes "
                               "(blocks of one-sample preparations)"),
    Claim("pretokenize", "Re-tokenizing chat templates every iteration ... ~10-15% overhead", "10-15%",
          at_least=0.10, partly=MIN_OVERHEAD, unit="%", measured_by="study.decide_tokenize", source=_SEED,
          metric="share of the baseline's time per sample that tokenizing takes (paired rounds vs the cache)"),
    Claim("grad_accum", "No gradient accumulation optimization ... Memory fragmentation leading to OOMs",
          "no number (memory)", at_least=MIN_GAIN, unit=LESS_MEMORY, measured_by=_MEMORY, source=_SEED,
          metric="activation bytes held for backward, baseline over grad_accum (counted)"),
    Claim("batch_size", "Default batch size of 1 severely underutilizes GPUs ... Increasing batch sizes "
          "(2-4x speedup)", "2-4x", at_least=2.0, partly=MIN_GAIN, unit="x", measured_by=_GAIN, source=_SEED,
          setup=_GPU, why_not="a claim about a GPU's utilization; the CPU ablation's gain is in the table",
          metric="batch_size: samples/s over the baseline's (paired rounds)"),
    Claim("loss_loop", "Sequential loss computation instead of batched ... Loop over K tokens ... ~5-10% overhead",
          "5-10%", at_least=removes(0.05), partly=removes(MIN_OVERHEAD), unit="x", measured_by=_GAIN, source=_SEED,
          metric=f"single_pass: {_OVERHEAD}"),
    Claim("amp", "No automatic mixed precision (AMP) ... 2-3x speedup possible with AMP", "2-3x", at_least=2.0,
          partly=MIN_GAIN, setup=_GPU, unit="x", measured_by="study.decide_amp", source=_SEED,
          metric="bf16 over fp32 samples/s at the largest batch of the sweep (paired rounds)",
          why_not="the claim is about tensor cores under an 8B LM, a GPU mechanism"),
    Claim("kv_cache", "KV cache not properly reused across steps ... Recreating attention caches ... ~15-20% "
          "overhead", "15-20%", at_least=removes(0.15), partly=removes(MIN_OVERHEAD), unit="x", measured_by=_GAIN,
          source=_SEED, metric=f"single_pass: {_OVERHEAD}"),
    Claim("fused_adamw", "Use fused optimizer: Already implemented but ensure it's active", "no number",
          at_least=MIN_GAIN, unit="x", measured_by=_GAIN, source=_SEED,
          metric="fused_adamw: samples/s over the baseline's (paired rounds)"),
    Claim("flash_attention", "Use Flash Attention 2: 2-4x speedup on attention layers", "2-4x", at_least=2.0,
          partly=MIN_GAIN, unit="x", measured_by="study.decide_attention", source=_SEED, setup=_GPU,
          why_not="Flash Attention 2 is a CUDA kernel; a CPU's SDPA is another",
          metric="one attention layer fwd+bwd, eager over SDPA (paired rounds)"),
    Claim("checkpointing", "Implement gradient checkpointing: Trade compute for memory", "no number (memory)",
          at_least=MIN_GAIN, unit=LESS_MEMORY, measured_by=_MEMORY, source=_SEED,
          metric="activation bytes held for backward, baseline over checkpointing (counted)"),
    Claim("quick_wins", "After Quick Wins: ~8-12 hours (2-3x speedup)", "2-3x", at_least=2.0, partly=MIN_GAIN,
          unit="x", measured_by=_GAIN, source=_SEED, metric="quick_wins: samples/s over the baseline's (paired rounds)"),
    Claim("all", "With All Optimizations: ~4-6 hours (4-6x speedup)", "4-6x", at_least=4.0, partly=MIN_GAIN,
          unit="x", measured_by=_GAIN, source=_SEED,
          metric="all_together: samples/s over the baseline's (paired rounds)"),
    Claim("target_5x", "GPU preset: all_together at least 5x the baseline's samples/s (the whole 99% interval of "
          "the speedup above 5x)", ">= 5x", at_least=5.0, partly=MIN_GAIN, setup=_GPU, unit="x", measured_by=_GAIN,
          source="issue 13", metric="all_together: samples/s over the baseline's (paired rounds)",
          why_not="a target for the GPU preset"),
    Claim("target_mfu", "GPU preset: the optimized step at its best batch at 30% or more of the bf16 matmul floor "
          "(MFU)", ">= 30%", at_least=0.30, setup=_GPU, unit="%", measured_by="sweep.compiled_at", source="issue 13",
          metric="the compiled step's model FLOP/s over the bf16 matmul floor: its mean time over its timed blocks, "
                 "99% interval", why_not="a target for the GPU preset"),
    Claim("target_spread", "GPU preset: every timing with IQR/median under 10%", "< 10%", at_most=0.10,
          setup=_GPU, unit="%", measured_by="findings.spreads", source="issue 13",
          metric="the largest IQR/median of the run's timings", why_not="a target for the GPU preset"),
    Claim("multi_gpu", "4x H100 GPUs running at ~10% utilization", "~10% utilization", at_most=0.10, unit="%",
          measured_by=_EVIDENCE, source=_SEED, metric="GPU utilization (not measured here)",
          why_not="GPU utilization needs GPUs; the DDP path is checked for correctness on CPU (gloo), its "
                  "throughput comes from params/gpu runs"),
    Claim("memory_strategy", "Use ZeRO ... dynamic batching ... torch.cuda.empty_cache() after each epoch",
          "no number", at_least=MIN_GAIN, unit="x", measured_by=_EVIDENCE, source=_SEED,
          metric="memory, baseline over the strategy (not implemented)",
          why_not="not implemented: no throughput claim to test, and empty_cache only hands cached blocks back "
                  "to the driver"),
    headline="all", params=LatentWireParams, shown=("ablation_batch", "accum_steps", "amp"))

OVERHEADS = ("non_blocking", "loss_loop", "kv_cache")  # "~X% overhead" claims tested end to end (a gain threshold)
