"""Helpers for the 05_vae_sync notebook: sync counts per configuration, time per step, the batch
sweep's fit, the step's floor, and the seed's table with verdicts. Each does one thing; the
notebook calls them with its parameters."""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Iterator

import torch
from torch.utils.benchmark.utils.common import Measurement

from ..bench import measure, summary
from ..syncs import count_host_syncs
from .config import ModelConfig, StepConfig, TrainConfig
from .model import MixtureVAE, build_model, count_parameters, matmul_flops
from .train import EpochLog, make_optimizer, train_epoch


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with `n` torch intra-op threads (0: leave as is), then restore the previous count."""
    prev = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def fresh(model_cfg: ModelConfig, seed: int, device: torch.device | str):
    """A model and its optimizer from `seed`, with the global RNG (dropout, noise) seeded too."""
    torch.manual_seed(seed)
    model = build_model(model_cfg, seed=seed, device=device)
    return model, make_optimizer(model)


def run(config: StepConfig, batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
        device: torch.device | str, progress_file=None) -> tuple[EpochLog, MixtureVAE]:
    """One epoch over `batches` from a fresh model: the per-step metrics and the trained model."""
    model, opt = fresh(model_cfg, seed, device)
    log = train_epoch(model, batches, config=config, optimizer=opt, train=train_cfg,
                      progress=progress_file is not None, progress_file=progress_file)
    return log, model


def count_syncs(config: StepConfig, batches, *, cuda_debug: bool = False, **kw):
    """Host syncs over one epoch of `batches` (a HostSyncCounter), after one untimed warm-up step."""
    model, opt = fresh(kw["model_cfg"], kw["seed"], kw["device"])
    train_epoch(model, batches[:1], config=config, optimizer=opt, train=kw["train_cfg"], progress=False)
    with count_host_syncs(cuda_debug=cuda_debug) as c:
        train_epoch(model, batches, config=config, optimizer=opt, train=kw["train_cfg"], start_step=1,
                    progress=False)
    return c


def per_step(m: Measurement, steps: int) -> Measurement:
    """The same Measurement with its times divided by `steps` (each timed call ran `steps` steps)."""
    return Measurement(number_per_run=m.number_per_run * steps, raw_times=m.raw_times, task_spec=m.task_spec,
                       metadata=m.metadata)


@dataclasses.dataclass
class TimedJob:
    """One configuration to time: a StepConfig on its batches, with Compare's row and column names."""
    config: StepConfig
    batches: list
    sub_label: str
    description: str


def time_steps(jobs: dict[str, TimedJob], *, rounds: int, model_cfg: ModelConfig, train_cfg: TrainConfig,
               seed: int, device: torch.device | str, progress_file, min_run_time: float, max_run_time: float,
               num_threads: int | None = None) -> dict[str, Measurement]:
    """Time each job's epochs (the progress bar drawn into `progress_file`) with `perflab.bench.measure`,
    in `rounds` interleaved rounds (job 1, job 2, ..., job 1, job 2, ...) so a drift in the machine's
    load hits every job alike; the rounds are merged and reported per step. Each job trains its own
    fresh model across rounds; only the first round warms up."""
    state = {key: [*fresh(model_cfg, seed, device), 0] for key in jobs}  # model, optimizer, next step
    parts: dict[str, list[Measurement]] = {key: [] for key in jobs}

    def epoch(key: str) -> None:
        model, opt, step = state[key]
        job = jobs[key]
        train_epoch(model, job.batches, config=job.config, optimizer=opt, train=train_cfg, start_step=step,
                    progress=True, progress_file=progress_file)
        state[key][2] = step + len(job.batches)

    for r in range(rounds):
        for key, job in jobs.items():
            parts[key].append(measure(lambda key=key: epoch(key), label="VAE training step", sub_label=job.sub_label,
                                      description=job.description, device=device, warmup=1 if r == 0 else 0,
                                      min_run_time=min_run_time, max_run_time=max_run_time, num_threads=num_threads))
    return {key: per_step(Measurement.merge(parts[key])[0], len(jobs[key].batches)) for key in jobs}


def saving(base: Measurement, other: Measurement, steps: int) -> dict:
    """Seconds saved over `steps` steps by `other` vs `base`: median and a conservative range
    (base p20 - other p80, base p80 - other p20)."""
    b, o = summary(base), summary(other)
    return {"median_s": (b["median_s"] - o["median_s"]) * steps,
            "lo_s": (b["p20_s"] - o["p80_s"]) * steps, "hi_s": (b["p80_s"] - o["p20_s"]) * steps}


def saving_verdict(median: float, lo: float, claim_lo: float) -> str:
    """'holds' when the saving is real (its conservative range is above 0) and its median reaches the
    claim's low end; 'partly holds' when it is real but smaller; 'does not hold' when it cannot be
    told from zero, or is negative."""
    if lo <= 0:
        return "does not hold"
    return "holds" if median >= claim_lo else "partly holds"


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


# ---- the seed's table -------------------------------------------------------------------------

# Each seed claim as (what it says, the seed's numbers, claimed saving per 5000-batch epoch in s,
# the configuration before and after the change as single_changes() names them).
SEED_TABLE = [
    ("Label remapping GPU-side (torch.unique)", "60-115 s/epoch", (60.0, 115.0),
     "baseline", "remap torch.unique (seed 1)"),
    ("Lazy metric extraction (tensors in the dict)", "40 s/epoch", (40.0, 40.0),
     "baseline", "metrics on device, read every step (seed 2)"),
    ("Deferred CPU calls (read at display time)", "5-8 s/epoch", (5.0, 8.0),
     "metrics on device, read every step (seed 2)", "metrics on device, read every N (seed 3)"),
    ("Total of the three", "2-5 min/epoch (105-163 s in its table)", (105.0, 300.0),
     "baseline", "seed's three together"),
]


def seed_table(times: dict[str, Measurement], syncs: dict[str, float], epoch_batches: int, device_kind: str):
    """The seed's table with measured values: per-step saving, its extrapolation to an epoch of
    `epoch_batches` steps with a conservative range, syncs removed per step, and a verdict."""
    import pandas as pd

    rows = []
    for what, claim, (lo, hi), before, after in SEED_TABLE:
        s = saving(times[before], times[after], epoch_batches)
        verdict = saving_verdict(s["median_s"], s["lo_s"], lo)
        rows.append({"change": what, "seed claim": claim,
                     "measured saving per step": f"{s['median_s'] / epoch_batches * 1e3:+.3f} ms",
                     f"per {epoch_batches}-batch epoch": f"{s['median_s']:+.1f} s [{s['lo_s']:+.1f}, {s['hi_s']:+.1f}]",
                     "syncs removed per step": round(syncs[before] - syncs[after], 2),
                     "verdict": verdict, "device": device_kind,
                     "_claim_range_s": (lo, hi), "_saving": s})
    s = saving(times["baseline"], times["optimized"], epoch_batches)
    rows.append({"change": "All changes here (optimized, same math)", "seed claim": "-",
                 "measured saving per step": f"{s['median_s'] / epoch_batches * 1e3:+.3f} ms",
                 f"per {epoch_batches}-batch epoch": f"{s['median_s']:+.1f} s [{s['lo_s']:+.1f}, {s['hi_s']:+.1f}]",
                 "syncs removed per step": round(syncs["baseline"] - syncs["optimized"], 2),
                 "verdict": "-", "device": device_kind, "_claim_range_s": None, "_saving": s})
    return pd.DataFrame(rows)


def range_verdict(measured_lo: float, measured_hi: float, claim_lo: float, claim_hi: float) -> str:
    """'holds' when the measured range overlaps the claimed one, else 'does not hold'."""
    return "holds" if measured_hi >= claim_lo and measured_lo <= claim_hi else "does not hold"
