"""The study, by role: what notebook 06 calls, in its order. Each measuring function takes the run (`run.cfg`, the
parameters; `run.device`; `run.log`) and what is already found, logs what it measured, and returns what the notebook
stores in its `Findings` (findings.py); `evidence` (evidence.py) reads only the findings, so a claim is judged on
the very numbers the cells above it showed.

    found = study.Findings(*study.inputs(run))                     the training and held-out examples
    found.flops, found.peaks = study.flops_and_floors(run, found)  FLOPs per sample; this device's matmul floors
    found.ablation, found.gains = study.ablate(run, found)         every variant timed; the gain claims decided on
                                                                   the same trainers, in paired rounds
    found.attention, found.data, found.optimizer = study.time_parts(run, found)   parts of the step timed alone
    found.parts = study.decide_parts(run, found)                   attention, data preparation, tokenizing decided
    found.sweep, found.compiled = study.sweep_batches(run, found)  the batch sweep; the compiled step at its best batch
    found.amp = study.decide_amp(run, found)                       bf16 against fp32 (on a GPU)
    found.curves, found.untrained = study.loss_curves(run, found)  the loss curves
    study.evidence(run, found)                                     each claim's Evidence, for card.judge
                                                                   (evidence.py: it reads only `found`)

The measurements themselves live by subject: `ablation` (IMPLS, the variants, how one is prepared and timed),
`parts` (the parts timed alone), `sweep` (the batch sweep, the compiled step, the profile), `curves` (the loss
curves), `floors` (FLOPs against the matmul floors), `timing` (whole optimizer steps in blocks). Each claim names its
measuring function (`measured_by` in claims.py: `decide_gains`, `decide_attention`, ...).
"""
from __future__ import annotations

import dataclasses

from ..kit.bench import fmt
from ..kit.formatting import value_text
from ..kit.verdicts import Decision, decide_saving, decide_speedup, decide_time
from . import curves as curves_
from . import floors as floors_
from . import parts as parts_
from . import sweep as sweep_
from .ablation import IMPLS, TESTED_BY, variants
from .ablation import ablation as timed_ablation
from .claims import CLAIMS
from .config import Toggles
from .data import make_examples
from .evidence import evidence
from .findings import GAINS, Findings, dtype, mfu, per_sample
from .model import build_model
from .timing import VariantResult

__all__ = ["IMPLS", "Findings", "inputs", "flops_and_floors", "ablate", "decide_gains", "time_parts", "decide_parts",
           "decide_attention", "decide_data_prep", "decide_tokenize", "sweep_batches", "decide_amp", "sweep_findings",
           "profile", "loss_curves", "evidence"]



def inputs(run) -> tuple[list, list]:
    """The run's training and held-out examples (seeded; the held-out seed is the training seed + 10^6); printed."""
    cfg = run.cfg
    mc = cfg.model_config()
    examples = make_examples(cfg.n_examples, seed=cfg.seed, max_prompt_bytes=mc.max_bytes)
    heldout = make_examples(cfg.n_heldout, seed=cfg.seed + 10**6, max_prompt_bytes=mc.max_bytes)
    model = build_model(mc, seed=cfg.seed, lm=cfg.lm, device=run.device)
    n_train = sum(p.numel() for p in model.trainable_parameters())
    n_lm = sum(p.numel() for p in model.lm.parameters())
    print(f"{len(examples)} training and {len(heldout)} held-out examples (answer of the first: "
          f"{examples[0].answer!r}); trainable {n_train:,} params, frozen LM {n_lm:,}")
    return examples, heldout


def flops_and_floors(run, found: Findings) -> tuple[dict, dict]:
    """FLOPs per sample of one forward+backward at the ablation batch (`floors.step_flops`: the K-forward loop, the
    single pass, and the single pass padded to the compiled step's widths) and this device's matmul floors in fp32
    and bf16 (`floors.floors`); logged, printed. -> (flops, peaks)"""
    cfg, device = run.cfg, run.device

    def flops_of(**kw):
        model = build_model(cfg.model_config(), seed=cfg.seed, lm=cfg.lm, device=device)
        return floors_.step_flops(model, found.examples, batch_size=cfg.ablation_batch, device=device, **kw)
    flops = {sp: flops_of(single_pass=sp) for sp in (False, True)}
    flops["padded"] = flops_of(single_pass=True, full_width=True)
    peaks = floors_.floors(cfg, device)
    for sp in (False, True):
        f = flops[sp]
        print(f"{'single pass' if sp else 'K-forward loop'}: {f['total'] / 1e6:.0f} MFLOP/sample "
              f"({f['lm'] / f['total']:.0%} in the frozen LM): at most {peaks['fp32'][0] / f['total']:.0f} samples/s at "
              f"the fp32 floor")
    print(f"matmul floor on {device.type}: fp32 {peaks['fp32'][0] / 1e9:.3g} GFLOP/s, bf16 {peaks['bf16'][0] / 1e9:.3g}"
          f" GFLOP/s; FLOPs loop / single pass {flops[False]['total'] / flops[True]['total']:.2f}x (single_pass's "
          f"ceiling); padded to the data's widths (the compiled step) {flops['padded']['total'] / flops[True]['total']:.2f}x")
    run.log.value("MFLOP per sample, K-forward loop", flops[False]["total"] / 1e6, unit="MFLOP")
    run.log.value("MFLOP per sample, single pass", flops[True]["total"] / 1e6, unit="MFLOP")
    for name, (peak, m) in peaks.items():
        run.log.measurement(m, impl=f"floor {name}", metric="matmul peak", flops_per_s=peak)
    return flops, peaks


# ---- the ablation and its gain claims ---------------------------------------------------------------------------

def ablate(run, found: Findings) -> tuple[dict[str, VariantResult], dict[str, Decision | None]]:
    """Every variant of `ablation.variants(cfg)` prepared and timed in rounds (`ablation.ablation`), logged; then,
    on the same live trainers, the gain claims decided in paired rounds (`decide_gains`). -> (results, gains)"""
    cfg, device = run.cfg, run.device
    with timed_ablation(variants(cfg), found.examples, p=cfg, device=device) as (results, trainers):
        gains = decide_gains(run, results, trainers)
    for name, r in results.items():
        run.log.measurement(r.measurement, impl=name, metric="time per optimizer step", samples_per_step=r.samples_per_step,
                            samples_per_s=r.samples_per_s, iqr_over_median=r.iqr_ratio,
                            launches_per_step=r.launches["total"], peak_bytes=r.peak_bytes,
                            activation_bytes=r.activation_bytes, first_step_s=r.first_step_s)
    return results, gains


def decide_gains(run, results: dict, trainers: dict) -> dict[str, Decision | None]:
    """Every gain claim (`GAINS`): the variant that tests it (`ablation.TESTED_BY`) against the baseline in paired
    rounds of whole optimizer steps of the ablation's live trainers (`decide_speedup`, at most `verdict_time` s, stopped
    once decided; scale = the variant's samples per step over the baseline's). One decision per variant: made against
    the first of its claims this run is the setup of, and every other claim on the variant judged on that same
    decision (`Decision.rejudge`: the interval covers the value whatever rule stopped the rounds), so one comparison
    has one number. A variant's DataLoader workers are stopped after its rounds. None: off the claim's setup, or its
    variant not in the ablation."""
    cfg, device = run.cfg, run.device
    out: dict[str, Decision | None] = {k: None for k in GAINS}
    for v in dict.fromkeys(TESTED_BY[k] for k in GAINS):
        on = [k for k in GAINS if TESTED_BY[k] == v and not CLAIMS[k].off_setup(cfg, device.type)]
        if not on or v not in trainers:
            continue
        scale = results[v].samples_per_step / results["baseline"].samples_per_step
        try:
            d = CLAIMS[on[0]].decide(decide_speedup, trainers["baseline"].step, trainers[v].step, scale=scale, cfg=cfg,
                                     device=device)
        finally:
            trainers[v].pause()
        out.update({k: d.rejudge(**CLAIMS[k].rule) for k in on})
    return out


# ---- the parts timed alone --------------------------------------------------------------------------------------

def time_parts(run, found: Findings) -> tuple[dict, dict, tuple]:
    """One LM attention layer eager vs SDPA at the study's LM length and at 512 (`parts.attention_layer`), one sample
    on the fly vs from the cache (`parts.data_path`), AdamW.step default vs fused (`parts.optimizer_step`): each timed
    alone, logged and printed. -> (attention, data, optimizer)"""
    cfg, device = run.cfg, run.device
    seq = parts_.lm_sequence_length(build_model(cfg.model_config(), seed=cfg.seed, lm=cfg.lm), found.examples)
    attention = {}
    for b, s in ((cfg.ablation_batch, seq), (2, 512)):
        gain, ms = parts_.attention_layer(cfg, batch=b, seq=s, device=device)  # manual / sdpa, ratio of mean times
        attention[s] = (gain, ms)
        for m in ms:
            run.log.measurement(m, impl=m.task_spec.description, metric="attention layer fwd+bwd", seq=s, batch=b)
        print(f"attention [{b}, {s}, {cfg.d_lm}]: eager {fmt(ms[0])}, sdpa {fmt(ms[1])} -> "
              f"{value_text(gain.value, gain.low, gain.high, 'x')} (ratio of mean times, 99% interval)")
    data = parts_.data_path(cfg, found.examples, device)
    for key in ("on_the_fly", "cache", "worker_startup"):
        if key in data:
            run.log.measurement(data[key], impl=key, metric="data path" if key != "worker_startup" else
                                "first batch of an epoch")
    print(f"one sample: on the fly {fmt(data['on_the_fly'])}, from the cache {fmt(data['cache'])}; "
          f"{data['bytes_per_sample']} bytes host-to-device"
          + (f"; a non-persistent DataLoader with {cfg.num_workers} worker(s) pays {fmt(data['worker_startup'])} per "
             f"epoch to start" if "worker_startup" in data else ""))
    opt_gain, opt_ms = parts_.optimizer_step(cfg, device)
    for m in opt_ms:
        run.log.measurement(m, impl=m.task_spec.description, metric="AdamW.step")
    print(f"AdamW.step over {opt_ms[0].task_spec.sub_label}: default {fmt(opt_ms[0])}, fused {fmt(opt_ms[1])} -> "
          f"{opt_gain:.2f}x (ratio of medians)")
    return attention, data, (opt_gain, opt_ms)


def decide_attention(run, found: Findings) -> Decision | None:
    """flash_attention: one attention layer's forward+backward eager over SDPA at the study's LM length
    (`parts.attention_fns`), paired rounds; None off the claim's setup (a CUDA kernel)."""
    cfg = run.cfg
    fns = parts_.attention_fns(cfg, batch=cfg.ablation_batch, seq=found.seq, device=run.device)
    return CLAIMS["flash_attention"].decide(decide_speedup, fns["manual"], fns["sdpa"], cfg=cfg, device=run.device)


def decide_data_prep(run, found: Findings) -> Decision:
    """dataloader: the share of the baseline's time per sample that preparing one sample on the fly takes (the most a
    DataLoader can hide): `decide_time` over blocks of one-sample preparations, over the baseline's median time per
    sample."""
    fns = parts_.data_fns(run.cfg, found.examples, run.device)
    return decide_time(fns["on_the_fly"], scale=1 / per_sample(found), **CLAIMS["dataloader"].rule,
                       quantity="share of the baseline's time per sample", max_run_time=run.cfg.verdict_time,
                       device=run.device)


def decide_tokenize(run, found: Findings) -> Decision:
    """pretokenize: the share of the baseline's time per sample that tokenizing takes: one sample on the fly against
    a gather from the cache, `decide_saving` in paired rounds, per = 1 / the baseline's time per sample."""
    fns = parts_.data_fns(run.cfg, found.examples, run.device)
    return decide_saving(fns["on_the_fly"], fns["cache"], per=1 / per_sample(found), **CLAIMS["pretokenize"].rule,
                         max_run_time=run.cfg.verdict_time, device=run.device)


def decide_parts(run, found: Findings) -> dict[str, Decision | None]:
    """The claims about a part of the step (`decide_attention`, `decide_data_prep`, `decide_tokenize`), at most
    `verdict_time` s each."""
    return {"flash_attention": decide_attention(run, found), "dataloader": decide_data_prep(run, found),
            "pretokenize": decide_tokenize(run, found)}


# ---- the batch sweep and the compiled step ----------------------------------------------------------------------

def sweep_toggles(cfg) -> dict:
    """Every recommendation on (eager), the run's DataLoader workers and bf16 setting: the sweep's toggles."""
    return dataclasses.asdict(Toggles.all_on(num_workers=cfg.num_workers, amp=cfg.amp))


def sweep_batches(run, found: Findings) -> tuple[dict, VariantResult | None]:
    """The batch sweep in fp32 and, where bf16 can win here, bf16 (`sweep.batch_sweep`), then the compiled step at
    the best batch of the run's dtype (`sweep.compiled_at`); logged, and its MFU (the share of the floor of the dtype
    it runs in). -> (sweep, compiled or None)"""
    cfg, device = run.cfg, run.device
    toggles = sweep_toggles(cfg)
    points = sweep_.batch_sweep(found.examples, p=cfg, device=device, toggles=toggles,
                                amps=floors_.sweep_amps(found.peaks, cfg.amp))
    best = sweep_.best(points[cfg.amp])
    compiled = None
    if cfg.compile != "off":
        compiled = sweep_.compiled_at(best.samples_per_step, found.examples, p=cfg, device=device, toggles=toggles)
    for r in [*(r for rows in points.values() for r in rows), *([compiled] if compiled else [])]:
        run.log.measurement(r.measurement, impl=r.variant.name, metric="time per optimizer step",
                            batch=r.samples_per_step, samples_per_s=r.samples_per_s, iqr_over_median=r.iqr_ratio,
                            launches_per_step=r.launches["total"], peak_bytes=r.peak_bytes,
                            amp=r.variant.knobs.get("amp"))
    if compiled is not None:
        m = mfu(cfg, found.flops, found.peaks, compiled)
        run.log.value(f"compiled step at its best batch, share of the {dtype(cfg)} matmul floor", m.value, low=m.low,
                      high=m.high, batch=compiled.samples_per_step)
    return points, compiled


def compiled_line(run, found: Findings) -> str:
    """The compiled step at its batch, against the eager step there, and its share of the floor."""
    c = found.compiled
    if c is None:
        return "no compiled step in this run (compile='off')"
    eager = next(r for r in found.sweep[run.cfg.amp] if r.samples_per_step == c.samples_per_step)
    m = mfu(run.cfg, found.flops, found.peaks, c)
    return (f"compiled step at batch {c.samples_per_step}: {c.samples_per_s:.4g} samples/s, "
            f"{c.samples_per_s / eager.samples_per_s:.2f}x the eager step there (ratio of medians); "
            f"{value_text(m.value, m.low, m.high, '%')} of the {dtype(run.cfg)} floor (its mean time over "
            f"{len(c.measurement.times)} blocks, 99% interval); compile + first step {c.first_step_s:.1f} s")


def sweep_findings(run, found: Findings) -> list[str]:
    """The sweep read out (`sweep.sweep_findings`: rises, dips, compute-bound, bf16 against fp32), the AMP decision
    where one was made, and the compiled step (`compiled_line`): sentences from this run's numbers."""
    out = sweep_.sweep_findings(found.sweep, found.flops[True]["total"], found.peaks, floors_.amp_gains(found.sweep))
    if found.amp is not None:
        out.append(f"amp decided at batch {sweep_.amp_batch(found.sweep)} in paired rounds of a fresh pair: "
                   f"{value_text(found.amp.value, found.amp.low, found.amp.high, 'x')} ({found.amp.how}; the card's number)")
    return [*out, compiled_line(run, found)]


def profile(run, found: Findings) -> str:
    """torch.profiler's table of one step of the compiled step at its batch (the eager step at the best batch when
    compile="off"), ops by self time on the device (`sweep.profile_step`)."""
    v = found.compiled.variant if found.compiled is not None else sweep_.best(found.sweep[run.cfg.amp]).variant
    return f"{v.name}:\n" + sweep_.profile_step(v, found.examples, p=run.cfg, device=run.device, row_limit=8)


def decide_amp(run, found: Findings) -> Decision | None:
    """amp: bf16 over fp32 samples/s at the largest batch the sweep measured in both (`sweep.amp_batch`), in paired
    rounds of a fresh pair of trainers (`sweep.amp_pair`); None off the claim's setup or without such a batch."""
    cfg, device = run.cfg, run.device
    batch = sweep_.amp_batch(found.sweep)
    if batch is None or CLAIMS["amp"].off_setup(cfg, device.type):
        return None
    pair = sweep_.amp_pair(batch, found.examples, p=cfg, device=device, toggles=sweep_toggles(cfg))
    try:
        return CLAIMS["amp"].decide(decide_speedup, pair[False].step, pair[True].step, cfg=cfg, device=device)
    finally:
        for t in pair.values():
            t.close()


# ---- the loss curves ---------------------------------------------------------------------------------------------

def loss_curves(run, found: Findings) -> tuple[list, dict]:
    """The three loss curves (`curves.curve_runs`, `curves.loss_curve`) and the held-out quality of the initial weights
    they start from (`curves.untrained`); logged. -> (curves, untrained)"""
    cfg, device = run.cfg, run.device
    runs = [curves_.loss_curve(v, found.examples, found.heldout, p=cfg, device=device) for v in curves_.curve_runs(cfg)]
    untrained = curves_.untrained(cfg, found.heldout, device)
    for c in runs:
        run.log.value("held-out loss after the curve", c.heldout["loss"], impl=c.name, seconds=c.seconds)
    run.log.value("held-out loss of the initial weights", untrained["loss"])
    return runs, untrained


# ---- every timing's spread ---------------------------------------------------------------------------------------





