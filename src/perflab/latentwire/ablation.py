"""The versions and the ablation: IMPLS names the versions (a kit `Versions`), the one place that does: the trainer
factories `baseline.make_trainer` and `optimized.make_trainer` (one signature; the optimized one's further keywords are
its toggles); `variants(p)` the ablation's variants (the baseline, each recommendation alone, the report's quick
wins, all together, the compiled step) and `TESTED_BY` the claim each variant tests end to end.

Each variant gets a fresh model from the same seed and a first, untimed step (DataLoader workers start, the allocator
grows, compile runs) inside the peak-memory, activation-memory and LM-forward counters; then one step under
`count_launches`, one step to size its timing blocks (`timing.steps_per_block`), and `timing.time_rounds` over whole
optimizer steps, with only its own DataLoader workers alive. `ablation` keeps the timed trainers alive for the
claims' paired rounds (`study.decide_gains`).

    with ablation(variants(p), examples, p=p, device=device) as (results, trainers):   # {name: VariantResult}
        ...                                                                             # more steps of the same models
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import warnings

from ..kit.claims import ClaimError
from ..kit.env import synchronize
from ..kit.launches import count_launches
from ..kit.memory import peak_memory
from ..kit.versions import Variant, Versions
from . import baseline, optimized
from .activations import saved_activations
from .claims import CLAIMS
from .config import Toggles
from .model import build_model
from .params import LatentWireParams
from .timing import VariantResult, steps_per_block, time_rounds

IMPLS = Versions({"baseline": baseline.make_trainer, "optimized": optimized.make_trainer})  # baseline first

# The ablation variant each claim is tested on end to end (a claim of a part of the step is measured apart too:
# its claim's measured_by says how); claims no variant tests are absent
TESTED_BY = {"non_blocking": "pin_memory", "dataloader": "dataloader", "pretokenize": "pretokenize",
             "grad_accum": "grad_accum", "batch_size": "batch_size", "loss_loop": "single_pass", "amp": "amp_bf16",
             "kv_cache": "single_pass", "fused_adamw": "fused_adamw", "flash_attention": "sdpa",
             "checkpointing": "checkpointing", "quick_wins": "quick_wins", "all": "all_together",
             "target_5x": "all_together", "target_mfu": "compiled"}
if set(TESTED_BY) - set(CLAIMS.keys):  # a typo fails at import
    raise ClaimError(f"TESTED_BY names no claim: {sorted(set(TESTED_BY) - set(CLAIMS.keys))}")


def claims_of(variant: str) -> list[str]:
    """The claims `variant` tests end to end, in the claims' order."""
    return [k for k in CLAIMS.keys if TESTED_BY.get(k) == variant]


def variants(p: LatentWireParams) -> list[Variant]:
    """Baseline, each recommendation alone, the report's quick wins, all together, and all together compiled: kit
    Variants, each a version of IMPLS with its toggles (the optimized version's keywords) as knobs."""
    b = p.ablation_batch
    opt = functools.partial(IMPLS.variant, "optimized")
    alone = [opt("pin_memory", pin_memory=True),
             opt("dataloader", dataloader=True, num_workers=p.num_workers),
             opt("pretokenize", pretokenize=True),
             opt("grad_accum", grad_accum=True),
             opt("batch_size", batch_size=b),
             opt("amp_bf16", amp=True),
             opt("fused_adamw", fused_adamw=True),
             opt("sdpa", sdpa=True),
             opt("checkpointing", checkpointing=True),
             opt("single_pass", single_pass=True),
             opt("no_step_sync", no_step_sync=True)]
    quick = {"pin_memory": True, "batch_size": b, "amp": p.amp, "fused_adamw": True}  # the report's "quick wins"
    every = dataclasses.asdict(Toggles.all_on(batch_size=b, num_workers=p.num_workers, amp=p.amp))
    plan = [IMPLS.variant("baseline"), *alone, opt("quick_wins", **quick), opt("all_together", **every)]
    if p.compile != "off":
        plan.append(opt("compiled", **{**every, "compile": p.compile, "compile_backend": p.backend}))
    return plan


def prepare_variant(v: Variant, examples, *, p: LatentWireParams, device, accum_steps: int | None = None):
    """A fresh model and trainer for `v`: its first step under the memory and LM-forward counters (the activation
    bytes held for backward: the memory claims' measurement), one step under count_launches, one to size the timing
    blocks; its DataLoader workers stopped at the end. Returns (trainer, VariantResult without a timing)."""
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    trainer = v(model, examples, device=device, lr=p.lr, accum_steps=accum_steps or p.accum_steps, seed=p.seed)
    compiled = v.knobs.get("compile", "off") != "off"  # saved-tensor hooks would change what compile traces
    try:
        f0 = model.lm.forward_calls
        t0 = time.perf_counter()
        with peak_memory(device) as mem, (contextlib.nullcontext() if compiled else saved_activations(model)) as act:
            trainer.step()  # also the warm-up: DataLoader workers start, allocator grows, compile runs
        synchronize(device)
        first = time.perf_counter() - t0
        forwards = None if compiled else (model.lm.forward_calls - f0) / trainer.accum_steps
        with count_launches(device) as launches:
            trainer.step()
        if launches.on_device and launches.kernels == 0:  # kineto's errors are silenced (launches.py)
            warnings.warn("the profiler saw no CUDA kernels in a training step (CUPTI unavailable?)", stacklevel=2)
        n, _ = steps_per_block(trainer.step, device, p.block_s)
        trainer.pause()  # no worker pool waits beside the variants prepared or timed after this one
    except BaseException:
        trainer.close()
        raise
    return trainer, VariantResult(v, trainer.samples_per_step, mem.peak_bytes, mem.method,
                                  None if compiled else act.peak_bytes, forwards, first, launches.as_dict(), n)


def _attach(results: dict, timings: dict, label: str) -> None:
    for name, r in results.items():
        r.timing = timings[name]
        r.measurement = timings[name].measurement(label, name, r.variant.version)


@contextlib.contextmanager
def ablation(plan: list[Variant], examples, *, p: LatentWireParams, device, label: str = "latentwire step"):
    """`with ablation(...) as (results, trainers)`: every variant prepared, then timed in `p.rounds` rounds
    (timing.time_rounds: each variant in turn, only its own DataLoader workers alive), merged per variant; the
    trainers (paused: no workers) stay alive inside the block, for more steps of the same models, and are closed
    at its end."""
    trainers, results = {}, {}
    try:
        for v in plan:
            trainers[v.name], results[v.name] = prepare_variant(v, examples, p=p, device=device)
        timings = time_rounds({k: (trainers[k], results[k].steps_per_block) for k in trainers}, device=device,
                              rounds=p.rounds, min_time=p.min_run_time, max_time=p.max_run_time)
        _attach(results, timings, label)
        yield results, trainers
    finally:
        for t in trainers.values():
            t.close()


def run_ablation(plan: list[Variant], examples, *, p: LatentWireParams, device,
                 label: str = "latentwire step") -> dict[str, VariantResult]:
    """Every variant prepared and timed (`ablation`), its trainer closed."""
    with ablation(plan, examples, p=p, device=device, label=label) as (results, _):
        return results


def measure_variant(v: Variant, examples, *, p: LatentWireParams, device, label: str = "latentwire step",
                    accum_steps: int | None = None, min_blocks: int = 6) -> VariantResult:
    """One variant alone: `prepare_variant`, timed (one round, at least `min_blocks` blocks), closed."""
    trainer, res = prepare_variant(v, examples, p=p, device=device, accum_steps=accum_steps)
    try:
        timings = time_rounds({v.name: (trainer, res.steps_per_block)}, device=device, rounds=1,
                              min_time=p.min_run_time, max_time=p.max_run_time, min_blocks=min_blocks)
    finally:
        trainer.close()
    _attach({v.name: res}, timings, label)
    return res
