"""The 05_vae_sync notebook's measurements, in its order, each filling one field of `Findings` (findings.py):

    found = study.Findings(inputs=study.inputs(run))      the data, the versions, the clock (printed)
    found.checks = study.correctness(run, found)           the correctness checks (checks.py), before anything is timed
    found.captured = study.compile_captured(run, found)    the captured step's first epoch, its compile included
    found.curves = study.loss_curves(run, found)           the same seed through baseline, optimized, captured
    found.syncs = study.host_syncs(run, found)             host syncs per step, each configuration (counted)
    found.launches = study.launches(run, found)            launches per step (kernels; aten ops on a CPU), by kind
    found.times = study.time_per_step(run, found)          time per step, each configuration, interleaved rounds
    found.speedups = study.decide_speedups(run, found)     the speed targets in paired rounds (batch 64 on CUDA)
    found.remaps = study.remap_costs(run, found)           the label remap alone: time per call, syncs, its claims
    found.savings = study.decide_savings(run, found)       the seed's savings in paired rounds (on CUDA)
    found.sweep = study.batch_sweep(run, found)            time per step against the batch size, and its fit
    found.floors = study.floors(run, found)                the step's floor (FLOPs, bytes), the appendix's
    rows = card.judge(study.evidence(run, found))          each claim's Evidence, read from `found` only (evidence.py)
    study.conclude(run, found, rows)                       this run's sentences, logged (evidence.py)

Each takes the run (`run.cfg`, `run.device`, `run.log`) and the findings so far; those that measure log what they
measured and show it (tables.py). Each claim names the function that measures it (`measured_by` in claims.py). How
the versions are built and timed: trainers.py and measuring.py; the figures: figures.py; IMPLS names the versions."""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import torch
from torch.utils.benchmark.utils.common import Measurement

from ..kit.bench import fmt_seconds, matmul_peak, measure, memory_bandwidth, show
from ..kit.claims import Check, report_checks
from ..kit.compiles import count_compiles
from ..kit.env import device_kind, device_name
from ..kit.syncs import count_host_syncs
from ..kit.verdicts import Decision, decide_saving, decide_speedup, decide_time
from . import checks as vae_checks
from . import tables
from .captured import CapturedStep
from .claims import CLAIMS, REMAPS, SAVINGS, SPEEDUPS
from .claims import headline as _headline_of
from .config import ModelConfig, TrainConfig
from .data import make_batches
from .evidence import conclude, evidence  # the notebook's study.evidence, study.conclude
from .findings import Compiled, Curves, Findings, Inputs, Launches, Remaps, Sweep, Syncs
from .impls import IMPLS  # study.IMPLS, as in every study: the versions the notebook times
from .measuring import (
    TimedJob,
    count_step_launches,
    count_syncs,
    crossover_text,
    fit_fixed_and_per_sample,
    host_calls,
    launch_kinds,
    step_floor,
    time_steps,
)
from .model import count_parameters
from .step_ops import remap_host, remap_presence, remap_unique
from .trainers import fresh, pick_clock, step_config, train_fresh, trainer, variants

__all__ = ["Findings", "IMPLS", "batch_sweep", "compile_captured", "conclude", "correctness", "decide_savings",
           "decide_speedups", "evidence", "floors", "host_syncs", "inputs", "launches", "loss_curves", "remap_costs",
           "time_per_step"]

CURVES = ("baseline", "optimized", "optimized + sep grad")  # the eager loss curves; the captured step's is its own
SAME_CURVES = "baseline vs optimized curves identical to rounding"


def headline(run) -> str:
    """The claim this run leads with (its card, REPORT.md, the README): the CPU's op count on a CPU, the captured
    step's speed elsewhere (`claims.headline`)."""
    return _headline_of(run.device.type)


def inputs(run) -> Inputs:
    """The run's data and versions: the curve batches (the same for every configuration), one timed call's batches,
    every configuration as a kit Variant (the captured one eager where this torch's dynamo cannot trace backward:
    said and logged), the clock (`trainers.pick_clock`); printed in one line."""
    cfg, device = run.cfg, run.device
    data = dict(batch=cfg.batch, group=cfg.group, seed=cfg.seed, device=device)
    impls, fallback = variants(cfg.log_every, cfg.compile, cfg.backend)
    if fallback:
        run.log.value("captured step fallback", fallback)
        print("captured step:", fallback)
    model_cfg = ModelConfig(kind=cfg.model)
    model0, _ = fresh(model_cfg, cfg.seed, device)
    got = Inputs(model_cfg=model_cfg, train_cfg=TrainConfig(), impls=impls, fallback=fallback,
                 curve_batches=make_batches(cfg.curve_steps, **data), timed_batches=make_batches(cfg.log_every, **data),
                 clock=pick_clock(cfg.clock, device), model0=model0, device_kind=device_kind(device), seed=cfg.seed,
                 device=device, progress_file=open(os.devnull, "w"))
    print(f"{device} ({device_name(device)}), torch threads {torch.get_num_threads()}, timings in {got.clock_name}, "
          f"{cfg.model} model with {count_parameters(model0):,} parameters, batch {cfg.batch}, "
          f"labels {3 * cfg.group}-{3 * cfg.group + 2}, captured step compile={cfg.compile} backend={cfg.backend}")
    return got


def correctness(run, found: Findings) -> list[Check]:
    """Every correctness check of checks.py on the run's data (remaps, separability, ComplexLinear, same math,
    bad labels, one graph), logged and printed; stops the notebook on a failure, before anything is timed."""
    i = found.inputs
    batches, labels = i.curve_batches, i.train_cfg.num_labels
    got = report_checks(run, vae_checks.remap_checks(batches, labels)
                        + vae_checks.separability_checks(i.model0, batches, labels)
                        + vae_checks.complex_linear_check(i.device)
                        + vae_checks.same_math_checks(batches[:20], **i.kw)
                        + vae_checks.bad_label_checks(batches, **i.kw)
                        + vae_checks.fullgraph_checks(batches, **i.kw))
    print(f"{len(got)} checks passed")
    return got


def compile_captured(run, found: Findings) -> Compiled:
    """The captured step from the seed, trained one epoch over the curve batches: it compiles (and on CUDA records)
    at its first batch; that epoch's time, compile included, is logged and printed, apart from every timing."""
    i, cfg = found.inputs, run.cfg
    tr = trainer(i.impls["captured"], **i.kw)
    t0 = time.perf_counter()
    with count_compiles() as compiled:
        log = tr.epoch(i.curve_batches)
    first = time.perf_counter() - t0
    run.log.value("captured: first epoch, compile included", round(first, 2), unit="s", steps=len(i.curve_batches),
                  compile=cfg.compile, backend=cfg.backend)
    recorded = " and the CUDA-graph recording" if tr.graph is not None else ""
    print(f"captured (compile={cfg.compile}, backend={cfg.backend}) on {run.device.type}: first epoch of "
          f"{len(i.curve_batches)} steps {first:.1f} s, including the compile{recorded}")
    return Compiled(tr, log, first, compiled)


def loss_curves(run, found: Findings) -> Curves:
    """The same seed and data through the baseline, the optimized loop (the original's no_grad separability: the
    same math) and with the separability gradient, beside the captured step's first epoch; checked: baseline equals
    optimized to rounding, the captured step compiled once and equals the optimized step (checks.captured_checks).
    Printed and logged; stops the notebook on a failure."""
    i = found.inputs
    logs = {name: train_fresh(i.impls[name], i.curve_batches, **i.kw)[0] for name in CURVES}
    logs["captured"] = found.captured.log
    print("host reads of the metrics:", {name: c.reads for name, c in logs.items()})
    # baseline vs optimized, relative 1e-5: J differs between the loop and the matmuls by float32 rounding
    # (~1e-7), nothing else (1e-4 on a GPU, whose BLAS may round differently between two runs)
    got = [vae_checks.curve_check(logs["baseline"], logs["optimized"], what=SAME_CURVES,
                                  rtol=1e-5 if run.device.type == "cpu" else 1e-4)]
    # captured vs optimized, relative 1e-4: fused kernels sum in another order and the traced Adam's bias corrections
    # are float32 (rounding, which Adam carries from step to step: ~1e-5 after 100 steps on a CPU); other dropout
    # masks or noise differ by 1e-3 from step 0
    got += vae_checks.captured_checks(found.captured.trainer, found.captured.compiles, logs, i.curve_batches,
                                      rtol=1e-4)
    got = report_checks(run, got)
    same = next(c.passed for c in got if c.name.startswith("captured: curves equal"))
    return Curves(logs, got, baseline_optimized=got[0].passed, optimized_captured=same, steps=len(i.curve_batches),
                  gap=vae_checks.curve_gap(logs["optimized"], logs["captured"]))


def host_syncs(run, found: Findings) -> Syncs:
    """Host syncs per step of every configuration over 2 x log_every steps after a warm-up step
    (`measuring.count_syncs`: the calls that wait for a device value, the same on every device; on CUDA its sync
    debug mode's warnings beside them), logged and shown as a table, one column per op; raises if the optimized or the
    captured step syncs beyond its metric reads."""
    i, cfg = found.inputs, run.cfg
    batches = i.curve_batches[:2 * cfg.log_every]
    counts = {name: count_syncs(impl, batches, **i.kw) for name, impl in i.impls.items()}
    per_step = {name: c.total / len(batches) for name, c in counts.items()}
    for name, c in counts.items():
        run.log.value("host syncs per step", round(per_step[name], 3), unit="syncs", impl=name, by_op=dict(c.by_op))
    reads = -(-len(batches) // cfg.log_every)
    step_syncs = {name: counts[name].total - reads for name in ("optimized", "captured")}
    debug = {name: c.cuda_debug_warnings for name, c in counts.items()} if any(
        c.cuda_debug for c in counts.values()) else None
    got = Syncs(per_step, {name: dict(c.by_op) for name, c in counts.items()}, step_syncs, len(batches), reads, debug)
    show(tables.syncs_table(got))
    if any(step_syncs.values()):
        raise AssertionError(f"syncs inside the step (beyond {reads} metric reads): {step_syncs}")
    print(f"optimized and captured: 0 syncs in the step, {reads} metric reads in {len(batches)} steps")
    return got


def launches(run, found: Findings) -> Launches:
    """Launches per step of baseline, optimized and captured over log_every steps after a warm-up step
    (`measuring.count_step_launches`: kernels on CUDA, with the host's calls into the runtime apart; aten ops plus
    compiled-graph calls on a CPU), each split by what the ops are; logged and shown as a table. Counting runs the
    profiler: nothing is timed here."""
    i = found.inputs
    batches = i.curve_batches[:run.cfg.log_every]
    counts = {name: count_step_launches(found.captured.trainer if name == "captured" else trainer(i.impls[name], **i.kw),
                                        batches) for name in ("baseline", "optimized", "captured")}
    per = {name: p for name, (p, _) in counts.items()}
    host = {name: host_calls(c, len(batches)) for name, (_, c) in counts.items()}
    kinds = {name: launch_kinds(c, len(batches)) for name, (_, c) in counts.items()}
    what = counts["captured"][1].what
    for name in per:
        run.log.value("launches per step", round(per[name], 2), unit=what, impl=name,
                      host_calls={k: round(v, 2) for k, v in host[name].items()})
    top = {} if run.device.type == "cpu" else dict(sorted(counts["captured"][1].by_op.items(), key=lambda kv: -kv[1])[:12])
    got = Launches(per, host, kinds, what, top)
    show(tables.launches_table(got))
    if top:  # kernel names, not aten ops: the captured step's most frequent kernels inside its replay
        show(tables.kernels_table(got, len(batches)))
    return got


def time_per_step(run, found: Findings) -> dict[str, Measurement]:
    """Every configuration on the same data (`batch` samples a step), timed in calls of log_every steps (the one
    metric read per window inside) in `rounds` interleaved rounds (`measuring.time_steps`), per step; the captured
    step on the trainer compiled above (no second compile). Logged: each configuration's time; printed: the compile's
    share of the captured step's first epoch. A ratio a claim judges is decided in paired rounds (`decide_speedups`)
    where this run is its setup, not read off these blocks: too few for a useful interval of a ratio."""
    i, cfg = found.inputs, run.cfg
    jobs = {name: TimedJob(v, i.timed_batches, sub_label=f"batch {cfg.batch}", description=name,
                           trainer=found.captured.trainer if name == "captured" else None)
            for name, v in i.impls.items()}
    times = time_steps(jobs, **_timing(run, i))
    for name, m in times.items():
        run.log.measurement(m, metric="time per step", impl=name, batch=cfg.batch)
    compile_s = found.captured.first_epoch_s - len(i.curve_batches) * times["captured"].median
    print(f"captured: the first epoch took {found.captured.first_epoch_s:.1f} s, of which ~{compile_s:.1f} s compile"
          + (" and the CUDA-graph recording" if found.captured.trainer.graph is not None else ""))
    return times


def _timing(run, i: Inputs) -> dict:
    cfg = run.cfg
    return dict(rounds=cfg.rounds, progress_file=i.progress_file, min_run_time=cfg.min_run_time,
                max_run_time=cfg.max_run_time, timer=i.clock, **i.kw)


def _epochs(i: Inputs, batches, captured: CapturedStep | None = None) -> Callable[[str], Callable[[], object]]:
    """name -> one call of that configuration (an epoch over `batches`), each configuration training its own model
    from the seed across its calls (made at its first call: nothing is built for a claim that is not timed)."""
    trainers: dict = {}

    def epoch(name: str) -> Callable[[], object]:
        if name not in trainers:
            trainers[name] = captured if name == "captured" and captured is not None else trainer(i.impls[name], **i.kw)
        tr = trainers[name]
        return lambda: tr.epoch(batches, progress=True, progress_file=i.progress_file)
    return epoch


def decide_speedups(run, found: Findings) -> dict[str, Decision | None]:
    """The speed targets (claims.SPEEDUPS): baseline against optimized / captured in paired rounds of the timing
    table's calls (`decide_speedup` with the claim's rule: the ratio of mean times per step, at most `verdict_time`
    seconds, the captured step reused as compiled), where this run is their setup (batch 64 on CUDA); else None, no
    time spent (the timing table's ratio of medians is then shown, marked indicative)."""
    i, cfg = found.inputs, run.cfg
    epoch = _epochs(i, i.timed_batches, found.captured.trainer)
    out = {key: CLAIMS[key].decide(lambda n, **kw: decide_speedup(epoch("baseline"), epoch(n), **kw), name, cfg=cfg,
                                   device=run.device) for key, name in SPEEDUPS.items()}
    _log(run, out, "speedup vs baseline (paired rounds)", "x", {k: {"impl": n} for k, n in SPEEDUPS.items()})
    return out


def _log(run, decisions: dict[str, Decision], metric: str, unit: str, fields: dict) -> None:
    for key, d in decisions.items():
        if d is None:
            continue
        run.log.value(metric, d.value, unit=unit, low=d.low, high=d.high, rounds=d.rounds, how=d.how, claim=key,
                      batch=run.cfg.batch, **fields[key])


def remap_costs(run, found: Findings) -> Remaps:
    """The label remap alone on one batch's labels: each remap's time per call (`perflab.kit.bench.measure`, logged),
    the host syncs of one torch.unique remap by op (counted), and the remap cost claims (claims.REMAPS) decided by
    `decide_time` (blocks of calls, the mean and its 99% interval) where this run is their setup (on CUDA)."""
    i, cfg = found.inputs, run.cfg
    y, n = i.timed_batches[0][1], i.train_cfg.num_labels
    fns = {f.__name__: (lambda f=f: f(y, n)) for f in (remap_host, remap_unique, remap_presence)}
    times = {}
    for name, fn in fns.items():
        times[name] = measure(fn, label="label remap", sub_label=f"batch {cfg.batch}", description=name,
                              device=run.device, min_run_time=cfg.min_run_time, max_run_time=cfg.max_run_time,
                              timer=i.clock)
        run.log.measurement(times[name], metric="label remap time", impl=name)
    with count_host_syncs(run.device) as c:
        remap_unique(y, n)
    decisions = {key: CLAIMS[key].decide(decide_time, fns[name], scale=1e3, quantity="ms per call", cfg=cfg,
                                         device=run.device) for key, name in REMAPS.items()}
    return Remaps(times, dict(c.by_op), decisions)


def decide_savings(run, found: Findings) -> dict[str, Decision | None]:
    """The seed's savings (claims.SAVINGS): the configurations before and after each change in paired rounds of the
    timing table's calls (`decide_saving` with the claim's rule: the difference of their mean times per call, scaled
    to an epoch of `epoch_batches` steps, at most `verdict_time` seconds each), where this run is their setup (CUDA,
    5000-batch epochs); else None, no time spent (the seed table then shows the timing table's medians)."""
    i, cfg = found.inputs, run.cfg
    epoch = _epochs(i, i.timed_batches)
    out = {key: CLAIMS[key].decide(lambda b, a, **kw: decide_saving(epoch(b), epoch(a), **kw), before, after,
                                   per=cfg.epoch_batches / len(i.timed_batches), cfg=cfg, device=run.device)
           for key, (before, after) in SAVINGS.items()}
    _log(run, out, f"seconds saved per {cfg.epoch_batches}-batch epoch (paired rounds)", "s",
         {k: {"before": b, "after": a} for k, (b, a) in SAVINGS.items()})
    return out


def batch_sweep(run, found: Findings) -> Sweep:
    """The versions of `sweep_impls` at each batch size of `sweep_batches` (`sweep_steps` steps per timed call, in
    interleaved rounds), and the fit t(B) = a + b B of each (`measuring.fit_fixed_and_per_sample`, on the medians);
    logged and shown. A captured step compiles a static graph per batch size (tens of seconds on a CPU): where
    `sweep_impls` leaves it out it is timed at the run's batch only, on the step compiled above (no compile)."""
    i, cfg = found.inputs, run.cfg
    jobs, note = {}, ""
    for bsz in cfg.sweep_batches:  # declared as data: batch sizes x versions
        data = make_batches(cfg.sweep_steps, batch=bsz, group=cfg.group, seed=cfg.seed, device=run.device)
        names = list(cfg.sweep_impls)
        if "captured" not in names and bsz == cfg.batch:
            names.append("captured")
            compile_s = found.captured.first_epoch_s - len(i.curve_batches) * found.times["captured"].median
            note = (f"captured at batch {bsz} only: a compile per batch size ({compile_s:.0f} s here); "
                    f"sweep_impls with captured sweeps it")
        for name in names:
            jobs[name, bsz] = TimedJob(i.impls[name], data, sub_label=f"batch {bsz}", description=name,
                                       trainer=found.captured.trainer if name == "captured" and bsz == cfg.batch else None)
    times = time_steps(jobs, label="VAE training step, batch sweep", **_timing(run, i))
    for (name, bsz), m in times.items():
        run.log.measurement(m, metric="time per step (sweep)", impl=name, batch=bsz)
    fits = {}
    for name in cfg.sweep_impls:
        f = fit_fixed_and_per_sample(list(cfg.sweep_batches), [times[name, b].median for b in cfg.sweep_batches])
        fits[name] = f
        run.log.value("overhead-bound below batch", round(f["crossover_batch"]) if math.isfinite(f["crossover_batch"])
                      else "inf", impl=name, fixed_s=float(f"{f['fixed_s']:.3g}"),
                      per_sample_s=float(f"{f['per_sample_s']:.3g}"))
    got = Sweep(times, fits, note)
    show(tables.sweep_table(run, got))
    for name, f in fits.items():
        print(f"{name:10s} fixed {fmt_seconds(f['fixed_s'])} per step + {fmt_seconds(f['per_sample_s'])} per sample: "
              f"{crossover_text(f)}")
    return got


def floors(run, found: Findings) -> dict[str, dict]:
    """The step's floor (`measuring.step_floor`: matmul FLOPs over the measured peak, parameter traffic over the
    measured bandwidth) against each configuration's median time per step; logged, shown."""
    i, cfg = found.inputs, run.cfg
    kw = dict(min_run_time=cfg.min_run_time, max_run_time=cfg.max_run_time, timer=i.clock)
    peak, _ = matmul_peak(run.device, **kw)
    bandwidth, _ = memory_bandwidth(run.device, **kw)
    print(f"{i.device_kind}: matmul peak {peak / 1e9:.1f} GFLOP/s, copy bandwidth {bandwidth / 1e9:.1f} GB/s "
          f"(measured, {torch.get_num_threads()} thread(s))")
    out = {}
    for name in ("baseline", "optimized", "optimized + sep grad", "captured"):
        f = step_floor(i.model0, cfg.batch, step_config(i.impls[name]).sep_grad, peak, bandwidth)
        f["fraction"] = f["floor_s"] / found.times[name].median
        out[name] = f
        run.log.value("fraction of floor", round(f["fraction"], 4), impl=name, floor_s=float(f"{f['floor_s']:.3g}"),
                      bound=f["bound"])
    show(tables.floors_table(run, found, out))
    return out


def profile_captured(run, found: Findings) -> None:
    """The captured step's own profile (the appendix): one epoch of log_every steps under `torch.profiler`, its ops
    (nested calls included) sorted by their self time on this device, printed."""
    from ..kit.launches import profiler_activities, self_time_key

    with torch.profiler.profile(activities=profiler_activities(run.device)) as prof:
        found.captured.trainer.epoch(found.inputs.timed_batches)
    print(prof.key_averages().table(sort_by=self_time_key(run.device), row_limit=15, max_name_column_width=40))
