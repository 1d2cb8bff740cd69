"""The batch sweep: every recommendation on (eager), one micro-batch per step, at batch 1, 4, 16, ... up to the
memory budget, in fp32 and (where this device's bf16 matmul floor beats its fp32 floor) in bf16 autocast, each point
a fresh model timed alone (`ablation.measure_variant`); the compiled step at the best batch (its MFU: `floors`);
bf16 against fp32 at one batch, a pair of trainers for paired rounds (`amp_pair`, `study.decide_amp`); one step under
torch.profiler (`profile_step`); and the sweep read out in sentences (`sweep_findings`).
"""
from __future__ import annotations

import torch

from ..kit.env import synchronize
from ..kit.launches import profiler_activities, self_time_key
from ..kit.versions import Variant
from .ablation import IMPLS, measure_variant, prepare_variant
from .floors import fraction_of_floor
from .params import LatentWireParams
from .timing import VariantResult


def is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def batch_sweep(examples, *, p: LatentWireParams, device, toggles: dict, amps=(False,)) -> dict[bool, list]:
    """{amp: [VariantResult]}: `toggles` at batch 1, 4, 16, ... up to p.max_batch (one micro-batch per step),
    for each bf16 setting in `amps`, stopping after the first batch whose peak memory passes p.mem_budget_gb
    or at an out-of-memory error (on CUDA the allocator's peak)."""
    out = {}
    for amp in amps:
        rows, b = [], 1
        while b <= min(p.max_batch, len(examples)):
            v = IMPLS.variant("optimized", f"batch={b}{', bf16' if amp else ''}", **{**toggles, "batch_size": b, "amp": amp})
            try:
                r = measure_variant(v, examples, p=p, device=device, label="batch sweep", accum_steps=1)
            except RuntimeError as e:
                if not is_oom(e):
                    raise
                torch.cuda.empty_cache()
                break
            rows.append(r)
            if r.peak_bytes > p.mem_budget_gb * 2**30:
                break
            b *= 4
        out[amp] = rows
    return out


def best(rows: list[VariantResult]) -> VariantResult:
    return max(rows, key=lambda r: r.samples_per_s)


def compiled_at(batch: int, examples, *, p: LatentWireParams, device, toggles: dict) -> VariantResult:
    """The compiled step (`toggles` + p.compile/p.backend, bf16 per p.amp) at one batch, timed like a sweep point,
    in at least 8 blocks: the fewest whose median has a 99% interval (its MFU's, `floors.fraction_of_floor`)."""
    v = IMPLS.variant("optimized", f"compiled, batch={batch}", **{**toggles, "batch_size": batch, "amp": p.amp,
                                                                   "compile": p.compile, "compile_backend": p.backend})
    return measure_variant(v, examples, p=p, device=device, label="batch sweep", accum_steps=1, min_blocks=8)


def profile_step(v: Variant, examples, *, p: LatentWireParams, device, row_limit: int = 12) -> str:
    """Where one step of `v` (one micro-batch) spends its time: torch.profiler's table of the ops with the
    most self time on the device (CUDA kernels on a GPU, host time on a CPU)."""
    trainer, _ = prepare_variant(v, examples, p=p, device=device, accum_steps=1)
    try:
        trainer.step()  # its DataLoader workers start again (prepare_variant paused them)
        synchronize(device)
        with torch.profiler.profile(activities=profiler_activities(device)) as prof:
            trainer.step()
            synchronize(device)
    finally:
        trainer.close()
    return prof.key_averages().table(sort_by=self_time_key(device), row_limit=row_limit)


def amp_pair(batch: int, examples, *, p: LatentWireParams, device, toggles: dict) -> dict:
    """{False: fp32 trainer, True: bf16 trainer} of `toggles` at one batch (one micro-batch per step), prepared as
    a sweep point (`prepare_variant`), for paired rounds of the two; the caller closes them."""
    out = {}
    try:
        for amp in (False, True):
            v = IMPLS.variant("optimized", f"batch={batch}{', bf16' if amp else ''}",
                              **{**toggles, "batch_size": batch, "amp": amp})
            out[amp], _ = prepare_variant(v, examples, p=p, device=device, accum_steps=1)
    except BaseException:
        for t in out.values():
            t.close()
        raise
    return out


def dips(rows: list[VariantResult]) -> list[tuple[VariantResult, VariantResult]]:
    """Consecutive sweep points whose larger batch trains fewer samples/s, beyond noise (the larger batch's
    p20-p80 samples/s range lies wholly below the smaller one's)."""
    return [(a, b) for a, b in zip(rows, rows[1:]) if b.samples_per_s_range()[1] < a.samples_per_s_range()[0]]


def amp_batch(sweep: dict) -> int | None:
    """The largest batch the sweep measured in fp32 and in bf16 (where AMP can pay), or None."""
    both = {r.samples_per_step for r in sweep.get(False, [])} & {r.samples_per_step for r in sweep.get(True, [])}
    return max(both) if both else None


COMPUTE_BOUND = 0.5  # a step at half its fp32 matmul floor or more is compute-bound: bf16 can pay there


def floor_ratio(peaks: dict) -> str:
    """The bf16 over fp32 matmul floor, and what it means for AMP on this device."""
    ratio = peaks["bf16"][0] / peaks["fp32"][0]
    return (f"bf16 matmul floor / fp32 floor on this device: {ratio:.2f}x"
            + ("" if ratio > 1 else ": bf16 autocast cannot win at any batch here (bf16 sweep skipped)"))


def sweep_findings(sweep: dict, flops_per_sample: float, peaks: dict, gains: dict) -> list[str]:
    """The batch sweep read out: where samples/s rises or dips (beyond noise), where the step is
    compute-bound, and where bf16 autocast wins. Sentences from this run's numbers."""
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
        ratios = ", ".join(f"{g.value:.2f}x at batch {b}" for b, g in sorted(gains.items()))
        out.append(f"bf16 over fp32 (ratios of mean times, each point timed alone): {ratios}"
                   + (f"; bf16 wins (99% interval of the ratio of mean times above 1x) at batch {', '.join(map(str, wins))}"
                      if wins else "; bf16 wins at no batch"))
    return out
