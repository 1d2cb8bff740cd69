"""What the study's measurements are made of: host syncs and launches per step, a step's time in interleaved
rounds, the batch sweep's fit, the step's floor.

    c = count_syncs(v, batches, **kw)                   # a HostSyncCounter over one epoch, after a warm-up step
    per, c = count_step_launches(tr, batches)          # launches per step (kernels on CUDA, aten ops on a CPU)
    times = time_steps(jobs, rounds=2, ...)             # {key: Measurement per step}, interleaved rounds
    fit_fixed_and_per_sample(sizes, medians)            # t(B) = a + b B: the fixed cost and the per-sample work"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from torch.utils.benchmark.utils.common import Measurement

from ..kit.bench import measure_interleaved
from ..kit.launches import LaunchCounter, count_launches
from ..kit.syncs import count_host_syncs
from ..kit.versions import Variant
from .captured import CapturedStep
from .config import ModelConfig, TrainConfig
from .model import MixtureVAE, count_parameters, matmul_flops
from .trainers import EagerTrainer, eager_form, trainer


def count_syncs(v: Variant, batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
                device: torch.device | str, cuda_debug: bool | None = None):
    """Host syncs over one epoch of `batches` (a HostSyncCounter: `.total`, `.by_op`, and on CUDA
    `.cuda_debug_warnings`, CUDA's sync debug mode beside the counter), after one uncounted warm-up step (its
    first-step allocations, e.g. Adam's state, and a captured step's recording are not what the loop does every
    step). A captured step is counted in its eager form (compile "off"): the counter sees eager calls only, and a
    compiled function called under it compiles again; the compiled form cannot hold a sync (fullgraph=True refuses
    one) and on CUDA the recording would fail on one."""
    tr = trainer(eager_form(v), model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
    tr.epoch(batches[:1])
    with count_host_syncs(device, cuda_debug=cuda_debug) as c:
        tr.epoch(batches)
    return c


def count_step_launches(tr: EagerTrainer | CapturedStep, batches) -> tuple[float, LaunchCounter]:
    """Launches per step over one epoch of `batches` (after one uncounted warm-up step): kernels on CUDA,
    the aten-op proxy on CPU (`perflab.kit.launches`). Counting runs the profiler: never time in the same call."""
    tr.epoch(batches[:1])
    with count_launches(next(tr.model.parameters()).device) as c:
        tr.epoch(batches)
    return c.total / len(batches), c


# What each op dispatched in a CPU step is, by name (the rest: elementwise ops, reductions, views, reads)
MATMULS, DRAWS, GRAPH_CALLS = "matmuls (aten BLAS calls)", "random draws (aten RNG)", "compiled-graph calls"
OTHER = "other (elementwise, reductions, views, host reads)"
LAUNCH_KINDS = {
    MATMULS: ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::t"),
    # aten::randn: the noise in a step compiled by torch 2.11's inductor, which decomposes randn_like into it
    DRAWS: ("aten::dropout", "aten::native_dropout", "aten::randn_like", "aten::randn", "aten::bernoulli_"),
    "detach (autograd hands over each gradient; metrics)": ("aten::detach", "aten::detach_"),
    GRAPH_CALLS: ("compiled graph",),
    "Adam, eager (the fused kernel and its step count)": ("aten::_fused_adam_", "aten::_foreach_add_"),
    "copies (metric writes)": ("aten::copy_",),
    "cumsum (the remap's ranks: no scan in inductor's C++ code)": ("aten::cumsum",),
}


def host_calls(c: LaunchCounter, steps: int) -> dict[str, float]:
    """The host's calls into the GPU runtime per step, by what they start (`perflab.kit.launches`; all 0 on a CPU).
    A captured step that draws random numbers: 1 graph launch, 2 kernel launches (the RNG-state fills before
    each replay, PyTorch PR 143777) and its 2 input copies per step, plus the metric ring's read every
    log_every steps."""
    return {"graph": c.graph_launches / steps, "kernel": c.kernel_launches / steps, "copy": c.copy_calls / steps,
            "memset": c.memset_calls / steps}


def launch_kinds(c: LaunchCounter, steps: int) -> dict[str, float]:
    """A CPU count per step split by LAUNCH_KINDS (what a profile of the step is made of)."""
    out = {k: sum(c.by_op.get(n, 0) for n in names) / steps for k, names in LAUNCH_KINDS.items()}
    out[OTHER] = c.total / steps - sum(out.values())
    return out


def per_step(m: Measurement, steps: int) -> Measurement:
    """The same Measurement with its times divided by `steps` (each timed call ran `steps` steps)."""
    return Measurement(number_per_run=m.number_per_run * steps, raw_times=m.raw_times, task_spec=m.task_spec,
                       metadata=m.metadata)


@dataclasses.dataclass
class TimedJob:
    """One implementation to time on its batches, with Compare's row and column names; `trainer`: an existing
    trainer to time (a compiled captured step: no second compile), else a fresh one from the seed."""
    impl: Variant
    batches: list
    sub_label: str
    description: str
    trainer: EagerTrainer | CapturedStep | None = None


def time_steps(jobs: dict, *, rounds: int, model_cfg: ModelConfig, train_cfg: TrainConfig,
               seed: int, device: torch.device | str, progress_file, min_run_time: float, max_run_time: float,
               timer: Callable[[], float] | None = None, label: str = "VAE training step") -> dict[str, Measurement]:
    """Time each job's epochs (the progress bar drawn into `progress_file`) with `perflab.kit.bench.measure`,
    in `rounds` interleaved rounds (job 1, job 2, ..., job 1, job 2, ...) so a drift in the machine's
    load hits every job alike; the rounds are merged and reported per step. Each job trains its own
    model across rounds; only the first round warms up (a fresh captured step compiles there)."""
    kw = dict(model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
    trainers = {key: job.trainer or trainer(job.impl, **kw) for key, job in jobs.items()}

    def epoch(key) -> None:
        trainers[key].epoch(jobs[key].batches, progress=True, progress_file=progress_file)

    times = measure_interleaved({key: (lambda key=key: epoch(key)) for key in jobs}, label=label,
                                rounds=rounds, sub_labels={k: j.sub_label for k, j in jobs.items()},
                                descriptions={k: j.description for k, j in jobs.items()}, device=device,
                                min_run_time=min_run_time * rounds, max_run_time=max_run_time * rounds, timer=timer)
    return {key: per_step(times[key], len(jobs[key].batches)) for key in jobs}


def fit_fixed_and_per_sample(batch_sizes: list[int], seconds: list[float]) -> dict:
    """Least-squares t(B) = a + b * B; B* = a / b is the batch where per-sample work equals the fixed
    per-step cost (launches, syncs, Python, weight-sized work): below it the step is overhead-bound."""
    n = len(batch_sizes)
    mx, my = sum(batch_sizes) / n, sum(seconds) / n
    sxx = sum((x - mx) ** 2 for x in batch_sizes)
    b = sum((x - mx) * (y - my) for x, y in zip(batch_sizes, seconds)) / sxx
    a = my - b * mx
    return {"fixed_s": a, "per_sample_s": b, "crossover_batch": a / b if b > 0 else math.inf}


def step_floor(model: MixtureVAE, batch: int, sep_grad: bool, flops_per_s: float, bytes_per_s: float) -> dict:
    """A lower bound for one step: matmul FLOPs over the measured peak, and parameter-sized traffic
    over the measured bandwidth (forward reads W, backward reads W and writes dW, fused Adam reads
    p, g, m, v and writes p, m, v: ~10 passes over the fp32 parameters). The floor is the larger."""
    f = matmul_flops(model, batch)
    flops = 3 * f["forward"] + (0 if sep_grad else f["encoder"])  # fwd + bwd (2x fwd) + no-grad encoder pass
    bytes_ = 10 * 4 * count_parameters(model)
    t_flops, t_bytes = flops / flops_per_s, bytes_ / bytes_per_s
    return {"flops": flops, "bytes": bytes_, "flops_s": t_flops, "bytes_s": t_bytes,
            "floor_s": max(t_flops, t_bytes), "bound": "FLOPs" if t_flops >= t_bytes else "bytes"}


def crossover_text(f: dict) -> str:
    """What a sweep's fit says: 'overhead-bound below batch ~58', or why it names no batch."""
    b = f["crossover_batch"]
    return (f"overhead-bound below batch ~{b:.0f}" if math.isfinite(b) and b > 0 else
            "no crossover (the fixed cost fits at or below 0, or the time does not grow with the batch)")
