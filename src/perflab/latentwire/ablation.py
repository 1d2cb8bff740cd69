"""The notebook's experiments, declared as data: the ablation variants (baseline, each toggle alone, the
report's quick wins, all together), how one variant is measured, and the batch-size sweep.

Each variant gets a fresh model from the same seed and one untimed step (the warm-up: DataLoader workers
start, the allocator grows, compile runs) inside the peak-memory, activation-memory and LM-forward
counters, then `perflab.bench.measure` over whole optimizer steps. samples/s = samples per step / median.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time

import torch

from ..bench import Measurement, measure, measure_interleaved
from ..env import synchronize
from ..memory import peak_memory
from .activations import saved_activations
from .config import Toggles
from .model import build_model
from .params import LatentWireParams
from .training import make_trainer


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    impl: str = "optimized"
    toggles: dict = dataclasses.field(default_factory=dict)


def variants(p: LatentWireParams) -> list[Variant]:
    """Baseline, each recommendation alone, the report's quick wins, and all together."""
    b = p.ablation_batch
    alone = [Variant("pin_memory", toggles={"pin_memory": True}),
             Variant("dataloader", toggles={"dataloader": True, "num_workers": p.num_workers}),
             Variant("pretokenize", toggles={"pretokenize": True}),
             Variant("grad_accum", toggles={"grad_accum": True}),
             Variant("batch_size", toggles={"batch_size": b}),
             Variant("amp_bf16", toggles={"amp": True}),
             Variant("fused_adamw", toggles={"fused_adamw": True}),
             Variant("sdpa", toggles={"sdpa": True}),
             Variant("checkpointing", toggles={"checkpointing": True}),
             Variant("single_pass", toggles={"single_pass": True}),
             Variant("no_step_sync", toggles={"no_step_sync": True})]
    if p.compile != "off":
        alone.append(Variant(f"compile={p.compile}", toggles={"compile": p.compile}))
    quick = {"pin_memory": True, "batch_size": b, "amp": p.amp, "fused_adamw": True}  # the report's "quick wins"
    every = dataclasses.asdict(Toggles.all_on(batch_size=b, num_workers=p.num_workers, compile=p.compile, amp=p.amp))
    return [Variant("baseline", impl="baseline"), *alone, Variant("quick_wins", toggles=quick),
            Variant("all_together", toggles=every)]


@dataclasses.dataclass
class VariantResult:
    variant: Variant
    measurement: Measurement | None  # None until timed
    samples_per_step: int
    peak_bytes: int                   # perflab.memory.peak_memory over the first step (CUDA allocator / CPU RSS)
    memory_method: str
    activation_bytes: int | None      # peak bytes held for backward in the first step (None under compile)
    lm_forwards_per_micro_batch: float | None  # None under compile (the counter sees eager calls only)
    first_step_s: float                        # the untimed first step, start-up included

    @property
    def samples_per_s(self) -> float:
        return self.samples_per_step / self.measurement.median


def prepare_variant(v: Variant, examples, *, p: LatentWireParams, device, accum_steps: int | None = None):
    """A fresh model and trainer for `v`, and its first step (untimed: it is also the warm-up) under the
    memory and LM-forward counters. Returns (trainer, VariantResult without a measurement)."""
    accum = accum_steps or p.accum_steps
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    trainer = make_trainer(model, examples, impl=v.impl, device=device, lr=p.lr, accum_steps=accum,
                           seed=p.seed, **v.toggles)
    compiled = v.toggles.get("compile", "off") != "off"  # saved-tensor hooks would change what compile traces
    try:
        f0 = model.lm.forward_calls
        t0 = time.perf_counter()
        with peak_memory(device) as mem, (contextlib.nullcontext() if compiled else saved_activations(model)) as act:
            trainer.step()  # also the warm-up: DataLoader workers start, allocator grows, compile runs
        synchronize(device)
        first = time.perf_counter() - t0  # start-up costs (workers, compilation) show here, not in the median
    except BaseException:
        trainer.close()
        raise
    forwards = None if compiled else (model.lm.forward_calls - f0) / accum  # a compiled graph is not counted
    return trainer, VariantResult(v, None, trainer.samples_per_step, mem.peak_bytes, mem.method,
                                  None if compiled else act.peak_bytes, forwards, first)


def measure_variant(v: Variant, examples, *, p: LatentWireParams, device, label: str = "latentwire step",
                    accum_steps: int | None = None) -> VariantResult:
    """One variant on a fresh model: `prepare_variant`, then `measure` over whole optimizer steps."""
    trainer, res = prepare_variant(v, examples, p=p, device=device, accum_steps=accum_steps)
    try:
        res.measurement = measure(trainer.step, label=label, sub_label=v.name, description=v.impl,
                                  min_run_time=p.min_run_time, max_run_time=p.max_run_time, warmup=0, device=device)
    finally:
        trainer.close()
    return res


def run_ablation(plan: list[Variant], examples, *, p: LatentWireParams, device, rounds: int = 3,
                 label: str = "latentwire step") -> dict[str, VariantResult]:
    """Every variant prepared, then timed in `rounds` interleaved rounds (each variant in turn, again and
    again, 1/rounds of the time budget each), merged per variant: a machine whose speed drifts during the
    run (a shared CPU, a GPU warming up) then slows every variant alike instead of whichever ran last."""
    trainers, results = {}, {}
    try:
        for v in plan:
            trainers[v.name], results[v.name] = prepare_variant(v, examples, p=p, device=device)
        times = measure_interleaved({v.name: trainers[v.name].step for v in plan}, label=label, rounds=rounds,
                                    descriptions={v.name: v.impl for v in plan}, min_run_time=p.min_run_time,
                                    max_run_time=p.max_run_time, warmup=0, device=device)
    finally:
        for t in trainers.values():
            t.close()
    for name, r in results.items():
        r.measurement = times[name]
    return results


def is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def batch_sweep(examples, *, p: LatentWireParams, device, toggles: dict, budget_bytes: int) -> list[VariantResult]:
    """samples/s of `toggles` at batch 1, 4, 16, ... up to p.max_batch, stopping at the first batch whose
    peak memory exceeds `budget_bytes` or that runs out of memory (on CUDA the allocator's peak)."""
    out, b = [], 1
    while b <= p.max_batch and b <= len(examples):
        v = Variant(f"batch={b}", toggles={**toggles, "batch_size": b})
        try:
            r = measure_variant(v, examples, p=p, device=device, label="batch sweep", accum_steps=1)
        except RuntimeError as e:
            if not is_oom(e):
                raise
            torch.cuda.empty_cache()
            break
        out.append(r)
        if r.peak_bytes > budget_bytes:
            break
        b *= 4
    return out
