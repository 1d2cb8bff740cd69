"""The notebook's measurements, declared as data. IMPLS names the versions (a kit `Versions`), the one place that does: the
trainer factories `baseline.make_trainer` and `optimized.make_trainer` (one signature; the optimized one's further
keywords are its toggles). Then the ablation variants (the baseline, the optimized version with each toggle alone,
the report's quick wins, all together, the compiled step), how one variant is prepared and timed, the batch sweep,
the floors (FLOPs per sample against this device's measured matmul throughput), and the parts timed alone
(one attention layer, eager against SDPA: a model option, not a version; the data path, AdamW.step) and the loss
curves.

Each variant gets a fresh model from the same seed and a first, untimed step (DataLoader workers start, the
allocator grows, compile runs) inside the peak-memory, activation-memory and LM-forward counters; then one
step under `count_launches`, one step to size its timing blocks (`timing.steps_per_block`), and
`timing.time_rounds` over whole optimizer steps, with only its own DataLoader workers alive.
samples/s = samples per step / median time per step. `ablation` keeps the timed trainers alive for the claims'
paired rounds (`decide_gains`); the parts timed alone hand out their callables (`attention_fns`,
`data_fns`) for the same reason.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import time
import warnings

import torch

from ..kit.bench import Measurement, measure, measure_interleaved, speedup, summary
from ..kit.env import synchronize
from ..kit.launches import count_launches, profiler_activities, self_time_key
from ..kit.memory import peak_memory
from ..kit.verdicts import Decision, Measured, decide_saving, decide_speedup, decide_time
from ..kit.versions import Variant, Versions
from . import baseline, optimized
from .activations import saved_activations
from .batches import PretokenizedCache, batch_on_the_fly
from .claims import _SHARES, CLAIMS, MEASURED_BY, VARIANTS
from .config import Toggles
from .gpt import CausalSelfAttention
from .model import LatentWire, build_model
from .optimized import make_loader
from .params import LatentWireParams
from .timing import StepTiming, iqr_ratio, steps_per_block, time_rounds
from .tokenizer import Tokenizer
from .training import evaluate

IMPLS = Versions({"baseline": baseline.make_trainer, "optimized": optimized.make_trainer})  # baseline first


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


@dataclasses.dataclass
class VariantResult:
    variant: Variant
    samples_per_step: int
    peak_bytes: int                   # perflab.kit.memory.peak_memory over the first step (CUDA allocator / CPU RSS)
    memory_method: str
    activation_bytes: int | None      # peak bytes held for backward in the first step (None under compile)
    lm_forwards_per_micro_batch: float | None  # None under compile (the counter sees eager calls only)
    first_step_s: float               # the untimed first step: worker start-up and compilation included
    launches: dict                    # perflab.kit.launches.count_launches over one step (.as_dict())
    steps_per_block: int              # optimizer steps per timed block
    timing: StepTiming | None = None  # None until timed
    measurement: Measurement | None = None

    @property
    def samples_per_s(self) -> float:
        return self.samples_per_step / self.measurement.median

    def samples_per_s_range(self) -> tuple[float, float]:
        """samples/s at the step time's p80 and p20."""
        s = summary(self.measurement)
        return self.samples_per_step / s["p80_s"], self.samples_per_step / s["p20_s"]

    @property
    def iqr_ratio(self) -> float:
        return iqr_ratio(self.timing.step_times)


def prepare_variant(v: Variant, examples, *, p: LatentWireParams, device, accum_steps: int | None = None):
    """A fresh model and trainer for `v`: its first step under the memory and LM-forward counters, one step
    under count_launches, one to size the timing blocks; its DataLoader workers stopped at the end.
    Returns (trainer, VariantResult without a timing)."""
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


# ---- parts timed alone -----------------------------------------------------------------------------------

def lm_sequence_length(model: LatentWire, examples) -> int:
    """Positions of the teacher-forced LM input for a typical example (scaffold + M + answer - 1)."""
    cache = PretokenizedCache.for_model(examples, model.tokenizer, model.cfg)
    b = cache.batch([0])
    median_answer = sorted(cache.ans_len)[len(cache) // 2]
    return b.pre_ids.shape[1] + model.cfg.latent_len + b.post_ids.shape[1] + median_answer - 1


def attention_fns(p: LatentWireParams, *, batch: int, seq: int, device) -> dict:
    """{"manual": eager softmax(QK^T)V, "sdpa": scaled_dot_product_attention}: each a call of one LM attention
    layer's forward+backward at [batch, seq, d_lm], on the same layer and input."""
    cfg = p.model_config()
    attn = CausalSelfAttention(cfg.d_lm, cfg.lm_heads).to(device)
    x = torch.randn(batch, seq, cfg.d_lm, device=device, requires_grad=True)

    def run(attention: str):
        attn.attention = attention
        attn(x).sum().backward()
    return {a: (lambda a=a: run(a)) for a in ("manual", "sdpa")}


def attention_layer(p: LatentWireParams, *, batch: int, seq: int, device) -> tuple[Measured, list[Measurement]]:
    """Forward+backward of one LM attention layer, eager vs SDPA (`attention_fns`), timed side by side
    (`measure_interleaved`: a drifting machine slows both alike).
    Returns (manual / sdpa: the ratio of mean times with its 99% interval (`Measured.ratio`), [manual, sdpa]
    measurements)."""
    fns = attention_fns(p, batch=batch, seq=seq, device=device)
    ms = measure_interleaved(fns, label="attention layer fwd+bwd", descriptions={k: k for k in fns},
                             sub_labels={k: f"[{batch}, {seq}, {p.d_lm}]" for k in fns},
                             min_run_time=p.min_run_time, max_run_time=p.max_run_time, device=device)
    ms = [ms["manual"], ms["sdpa"]]
    return Measured.ratio(*ms), ms


def data_fns(p: LatentWireParams, examples, device) -> dict:
    """{"on_the_fly": prepare one sample (tokenize bytes, scaffolds and answer, collate, move), "cache": gather one
    from the pre-tokenized cache (and move)}: each call takes the next example (as in training)."""
    model_cfg, tok = p.model_config(), Tokenizer()
    cache = PretokenizedCache.for_model(examples, tok, model_cfg)
    order = itertools.cycle(range(len(examples)))  # a different example each call, as in training
    return {"on_the_fly": lambda: batch_on_the_fly(examples, [next(order)], tok, model_cfg).to(device),
            "cache": lambda: cache.batch([next(order)]).to(device)}


def data_path(p: LatentWireParams, examples, device) -> dict:
    """What the data recommendations can remove, measured directly: one sample on the fly vs from the cache
    (`data_fns`), each timed on its own, and the bytes one sample moves host-to-device."""
    model_cfg, tok = p.model_config(), Tokenizer()
    cache = PretokenizedCache.for_model(examples, tok, model_cfg)
    kw = dict(label="data path, one sample", min_run_time=p.min_run_time / 2, max_run_time=p.max_run_time / 2,
              device=device)
    fns = data_fns(p, examples, device)
    fly = measure(fns["on_the_fly"], description="tokenize+collate", **kw)
    gather = measure(fns["cache"], description="cache", **kw)
    nbytes = sum(t.numel() * t.element_size() for k, t in cache.batch([0]).tensors().items() if k != "index")
    out = {"on_the_fly": fly, "cache": gather, "bytes_per_sample": nbytes}
    if p.num_workers:  # what a non-persistent DataLoader pays at every epoch: start workers, get the first batch
        loader, _ = make_loader(examples, tok, model_cfg, cache, batch_size=p.ablation_batch, num_workers=p.num_workers,
                                persistent_workers=False, pin_memory=False, seed=p.seed)
        out["worker_startup"] = measure(lambda: next(iter(loader)), label="DataLoader first batch",
                                        description=f"{p.num_workers} worker(s)", min_run_time=p.min_run_time / 2,
                                        max_run_time=p.max_run_time / 2)
    return out


def optimizer_step(p: LatentWireParams, device) -> tuple[float, list[Measurement]]:
    """AdamW.step() alone over the trainable parameters: the default kernels vs fused=True."""
    params = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device).trainable_parameters()
    for q in params:
        q.grad = torch.randn_like(q) * 1e-3
    ms = []
    for fused in (False, True):
        opt = torch.optim.AdamW(params, lr=p.lr, **({"fused": True} if fused else {}))
        ms.append(measure(opt.step, label="AdamW.step", sub_label=f"{len(params)} tensors",
                          description="fused" if fused else "default", min_run_time=p.min_run_time / 2,
                          max_run_time=p.max_run_time / 2, device=device))
    return speedup(*ms), ms


# ---- loss curves ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Curve:
    name: str
    samples: list[int]      # samples seen after each step
    losses: list[float]     # training loss of each step
    seconds: float          # wall time of the run (device synchronized at the end)
    heldout: dict           # evaluate() on the held-out examples after the run


def loss_curve(v: Variant, examples, heldout, *, p: LatentWireParams, device) -> Curve:
    """Train a fresh model (same seed) as variant `v` on `p.curve_samples` samples, one micro-batch per step."""
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    trainer = v(model, examples, device=device, lr=p.lr, accum_steps=1, seed=p.seed)
    steps = max(1, p.curve_samples // trainer.samples_per_step)
    t0 = time.perf_counter()
    try:
        for _ in range(steps):
            trainer.step()
        synchronize(device)
        seconds = time.perf_counter() - t0
        rows = trainer.losses()
    finally:
        trainer.close()
    per = trainer.samples_per_step
    return Curve(v.name, [per * (i + 1) for i in range(steps)], [r[0] for r in rows], seconds,
                 evaluate(model, heldout, device=device))


def curve_runs(p: LatentWireParams) -> list[Variant]:
    """The loss curves' variants: the baseline; every recommendation at batch 1 in the baseline's sample order
    (manual indexing), so only numerics differ; and every recommendation at p.curve_batch. Eager: the
    compiled step's numerics are checked against the eager step in the correctness cell."""
    same_order = dataclasses.asdict(Toggles.all_on(batch_size=1, amp=p.amp))
    same_order.update(dataloader=False, num_workers=0)
    batched = dataclasses.asdict(Toggles.all_on(batch_size=p.curve_batch, num_workers=p.num_workers, amp=p.amp))
    return [IMPLS.variant("baseline"), IMPLS.variant("optimized", "optimized, batch 1", **same_order),
            IMPLS.variant("optimized", f"optimized, batch {p.curve_batch}", **batched)]


# ---- the claims' evidence (`CLAIMS.judge`) ------------------------------------------------------------------

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


def evidence(run, results: dict, decisions: dict, extra: dict) -> dict[str, tuple]:
    """Each claim's (measurement, sentence) for `CLAIMS.judge`, at the run's device and accum_steps. `results`: the
    ablation's VariantResults by variant;
    `decisions`: `decide_gains` and `decide_parts` together; `extra`: "attention" -> {seq: Measured} with the study's
    length first, "data" -> data_path(...), "optimizer" -> (gain, [default, fused]), "amp" -> {batch:
    Measured bf16/fp32} from the sweep, "amp_note", "compiled" -> the compiled step at its best batch (or None),
    "mfu" -> its share of the floor of the dtype it runs in, "spread" -> (largest IQR/median, which)."""
    dt, accum_steps, base, out = run.device.type, run.cfg.accum_steps, results["baseline"], {}
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
            others = "".join(f"; {g.value:.2f}x at length {s} (ratio of mean times)" for s, g in rest)
            out[key] = (d, f"{_x(d)} on one attention layer (fwd+bwd) on {dt} at the study's LM length {seq} "
                           f"({_rounds(d)})" + others) if d is not None else \
                (None, f"eager over SDPA on one attention layer (fwd+bwd) on {dt}: {first.value:.2f}x at length {seq} "
                       f"(ratio of mean times)"
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
                   + (f"; bf16 wins (99% interval of the ratio of mean times above 1x) at batch {', '.join(map(str, wins))}"
                      if wins else "; bf16 wins at no batch"))
    return out
