"""Findings of known truth for 05's claim glue (tests/vae/test_vae_evidence.py, test_vae_study.py): fixed times,
counts and decisions, no training. `findings(device_type, **over)` is what the notebook would have found on that
device: every field of `study.Findings` filled, each number chosen so that its claim's verdict is known."""
from __future__ import annotations

import dataclasses
import types

import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from perflab.kit.claims import Check
from perflab.kit.verdicts import Decision
from perflab.vae import ModelConfig, TrainConfig, single_changes
from perflab.vae.checks import SEP_GRAD_STEERS
from perflab.vae.claims import CLAIMS, SAVINGS
from perflab.vae.findings import Curves, Findings, Inputs, Launches, Remaps, Sweep, Syncs
from perflab.vae.params import VAEParams
from perflab.vae.trainers import variants

NAMES = list(single_changes()) + ["captured"]
SEED2, SEED3 = "metrics on device, read every step (seed 2)", "metrics on device, read every N (seed 3)"


def measurement(times, name: str = "x") -> Measurement:
    """A Measurement of per-step times (seconds), one step per block."""
    spec = TaskSpec(stmt="fn()", setup="", global_setup="", label="t", sub_label=name, description="", env="",
                    num_threads=1)
    return Measurement(number_per_run=1, raw_times=list(times), task_spec=spec)


def around(ms: float, name: str = "x", spread: float = 0.01) -> Measurement:
    """Four blocks whose median is exactly `ms` milliseconds (p20-p80 within `spread` of it)."""
    t = ms * 1e-3
    return measurement([t * (1 - spread), t, t, t * (1 + spread)], name)


def decision(key: str, value: float, low: float, high: float, rounds: int = 12) -> Decision:
    """A Decision made against claim `key`'s rule."""
    return Decision("", value, low, high, rounds=rounds, seconds=0.4, confidence=0.99,
                    quantity="saving" if key in SAVINGS else "speedup", calls=(3, 8), **CLAIMS[key].rule)


# per-step medians in ms: each change's saving is known (baseline 10 ms; remap torch.unique 9 ms: +1 ms a step)
TIMES_MS = {"baseline": 10.0, "remap torch.unique (seed 1)": 9.0, "remap presence table": 10.0, SEED2: 8.0,
            SEED3: 7.0, "separability vectorized": 10.0, "seed's three together": 6.0, "optimized": 5.0,
            "optimized + sep grad": 5.0, "captured": 0.5}

# what a GPU run at the preset's setup decided, and the verdict each gives (the claims' rules)
GPU_DECISIONS = {"remap": (80.0, 70.0, 90.0), "lazy": (30.0, 25.0, 35.0), "deferred": (0.2, -0.5, 0.8),
                 "total": (120.0, 100.0, 130.0), "remap_host_ms": (15.0, 14.0, 16.0),
                 "remap_unique_ms": (0.5, 0.4, 0.6), "optimized_2x": (2.0, 1.9, 2.1), "captured_10x": (20.0, 18.0, 22.0)}


def run(device_type: str = "cpu", **params):
    """A run as the notebook's: its parameters (the seed table's 5000-batch epochs, batch 64 unless given), its
    device, and a log that keeps what is written to it."""
    log = types.SimpleNamespace(rows=[])
    for kind in ("note", "headline", "value", "measurement", "claim", "check"):
        setattr(log, kind, lambda *a, _k=kind, **k: log.rows.append((_k, a, k)))
    return types.SimpleNamespace(cfg=VAEParams(**{"epoch_batches": 5000, **params}), device=torch.device(device_type),
                                 log=log, study="05_vae_sync")


def findings(device_type: str = "cpu", **over) -> Findings:
    """Everything the notebook measures, of known value: the times above, 13 syncs a step for the baseline's kind and
    0.1 for the sync-free ones, 248 -> 31 aten ops (7.95x), the curves equal, the gradient steering, 4 syncs in a
    torch.unique remap; on "cuda" the decisions of GPU_DECISIONS and one replay per step (1 graph + 2 kernel
    launches), on "cpu" no decision (not this run's setup). `over`: fields replaced."""
    gpu = device_type == "cuda"
    impls, _ = variants(10, "off", "inductor")
    inputs = Inputs(model_cfg=ModelConfig(), train_cfg=TrainConfig(), impls=impls, fallback="", curve_batches=[],
                    timed_batches=[None] * 10, clock=None, model0=None, device_kind="h100" if gpu else "cpu",
                    device=device_type)
    times = {n: around(TIMES_MS[n], n) for n in NAMES}
    per_step = {n: 13.0 for n in NAMES} | {"optimized": 0.1, "optimized + sep grad": 0.1, "captured": 0.1}
    by_op = {n: {"item": int(20 * per_step[n])} for n in NAMES}
    decided = {k: decision(k, *v) for k, v in GPU_DECISIONS.items()} if gpu else {}
    per = {"baseline": 248.0, "optimized": 237.0, "captured": 31.0}
    kinds = {n: {"matmuls (aten BLAS calls)": 22.0, "random draws (aten RNG)": 7.0, "compiled-graph calls": 1.0,
                 "other (elementwise, reductions, views, host reads)": per[n] - 30.0} for n in per}
    host = {n: dict(graph=0.0, kernel=280.0, copy=0.0, memset=0.0) for n in per}
    if gpu:
        host["captured"] = dict(graph=1.0, kernel=2.0, copy=2.02, memset=0.0)
    sweep_times = {(n, b): around(ms, n) for n in ("baseline", "optimized")
                   for b, ms in ((16, 4.0), (64, 5.0), (256, 8.0), (1024, 20.0))} | {("captured", 64): around(9.0)}
    fits = {n: {"fixed_s": 4e-3, "per_sample_s": 1.5e-5, "crossover_batch": 4e-3 / 1.5e-5} for n in
            ("baseline", "optimized")}
    logs = {}
    got = Findings(
        inputs=inputs,
        checks=[Check(SEP_GRAD_STEERS, True, "20 of 20 parameter tensors differ")],
        curves=Curves(logs, [], baseline_optimized=True, optimized_captured=True, steps=100, gap=2e-5),
        syncs=Syncs(per_step, by_op, {"optimized": 0, "captured": 0}, steps=20, reads=2),
        launches=Launches(per, host, kinds, "device kernels" if gpu else "aten ops + compiled-graph calls (CPU proxy)"),
        times=times,
        speedups={k: decided.get(k) for k in ("optimized_2x", "captured_10x")},
        remaps=Remaps({"remap_host": around(0.014), "remap_unique": around(0.034), "remap_presence": around(0.038)},
                      {"unique": 1, "__setitem__[bool mask]": 3},
                      {k: decided.get(k) for k in ("remap_host_ms", "remap_unique_ms")}),
        savings={k: decided.get(k) for k in SAVINGS},
        sweep=Sweep(sweep_times, fits, "captured at batch 64 only"))
    return dataclasses.replace(got, **over)
