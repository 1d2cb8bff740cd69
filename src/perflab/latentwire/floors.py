"""The floors: FLOPs per sample of a training step against this device's measured matmul throughput.

    flops = step_flops(model, examples, batch_size=8, single_pass=True, device=device)   # per sample
    peaks = floors(p, device)                                 # {"fp32": (FLOP/s, Measurement), "bf16": ...}
    fraction_of_floor(result, flops["total"], peaks["bf16"][0])        # MFU: mean time over blocks, 99% interval

A step is compute-bound where its model FLOP/s come close to the fp32 floor: only there can bf16 autocast
pay, by up to the ratio of the two floors (`amp_gains` measures it batch by batch); where the step is far
below the floor, per-op overhead (launches, Python) sets its time and autocast only adds casts.
"""
from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..kit.bench import Measurement, matmul_peak
from ..kit.verdicts import Measured
from .batches import PretokenizedCache
from .model import LatentWire
from .params import LatentWireParams
from .timing import VariantResult


def step_flops(model: LatentWire, examples, *, batch_size: int, single_pass: bool, device,
               full_width: bool = False) -> dict[str, float]:
    """FLOPs per sample of one forward+backward (torch's FlopCounterMode: matmuls and attention), split into
    the byte encoder + pooler + adapter and the frozen LM; `full_width`: at the compiled step's padded shapes."""
    cache = PretokenizedCache.for_model(examples, model.tokenizer, model.cfg)
    batch = cache.batch(list(range(batch_size)), full_width=full_width).to(device)
    with FlopCounterMode(display=False) as fc:
        model(batch, single_pass=single_pass).total.backward()
    model.zero_grad(set_to_none=True)
    lm = sum(fc.get_flop_counts().get("LatentWire.lm", {}).values())
    total = fc.get_total_flops()
    return {"total": total / batch_size, "lm": lm / batch_size, "encoder_side": (total - lm) / batch_size}


def floors(p: LatentWireParams, device) -> dict[str, tuple[float, Measurement]]:
    """This device's measured dense matmul throughput (FLOP/s) in fp32 and bf16 (perflab.kit.bench.matmul_peak),
    both at one size: the kit's on CUDA (8192^3), 512^3 on a CPU (a CPU without bf16 units takes seconds
    for one 1024^3 bf16 product, and 512^3 already fills an fp32 core's vector units)."""
    kw = dict(min_run_time=p.min_run_time / 2, max_run_time=p.max_run_time / 2,
              n=None if torch.device(device).type != "cpu" else 512)
    return {"fp32": matmul_peak(device, torch.float32, **kw), "bf16": matmul_peak(device, torch.bfloat16, **kw)}


def fraction_of_floor(r: VariantResult, flops_per_sample: float, peak: float) -> Measured:
    """Model FLOP/s of a timed variant over a floor (MFU when the floor is the matmul peak): its FLOPs per step over
    its mean time per step (total FLOPs over total time), the interval from the mean time's 99% interval over its
    timed blocks (`Measured.from_samples`; unbounded with one block). The floor is taken as exact."""
    t = Measured.from_samples(list(r.measurement.times))
    c = flops_per_sample * r.samples_per_step / peak
    return Measured(c / t.value, c / t.high if t.high < math.inf else 0.0, c / t.low if t.low > 0 else math.inf)


def amp_gains(sweep: dict) -> dict[int, Measured]:
    """{batch: bf16 over fp32 samples/s} at every batch `study.batch_sweep` measured in both: the ratio of the two
    timings' means and its 99% interval (`Measured.ratio`)."""
    fp32 = {r.samples_per_step: r for r in sweep.get(False, [])}
    return {r.samples_per_step: Measured.ratio(fp32[r.samples_per_step].measurement, r.measurement)
            for r in sweep.get(True, []) if r.samples_per_step in fp32}


def sweep_amps(peaks: dict, amp: bool) -> tuple[bool, ...]:
    """The bf16 settings worth sweeping: both where this device's bf16 matmuls beat fp32 (AMP can win
    somewhere), else only the run's own (`amp`)."""
    return (False, True) if peaks["bf16"][0] > peaks["fp32"][0] else (amp,)
