"""Helpers for the 05_vae_sync notebook: sync counts per configuration, time per step, the batch
sweep's fit, the step's floor, and the seed's table with verdicts. Each does one thing; the
notebook calls them with its parameters."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator

import torch
from torch.utils.benchmark.utils.common import Measurement

from ..bench import measure_interleaved, summary
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


def pick_clock(clock: str, device: torch.device) -> Callable[[], float] | None:
    """The timer for `perflab.bench.measure`: None (wall time, CUDA-synchronized) or time.process_time.

    "auto" picks CPU time on a CPU device running one torch thread: on a shared host it counts only
    this process's work, and with one thread it equals what an idle host's wall clock would show."""
    one_thread_cpu = device.type == "cpu" and torch.get_num_threads() == 1
    if clock == "wall" or (clock == "auto" and not one_thread_cpu):
        return None
    if clock in ("auto", "cpu"):
        if not one_thread_cpu:
            raise ValueError(f"clock 'cpu' needs a cpu device and one torch thread (threads 1); got {device} "
                             f"with {torch.get_num_threads()} threads: use clock 'wall'")
        return time.process_time
    raise ValueError(f"clock must be 'auto', 'wall' or 'cpu', got {clock!r}")


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


def count_syncs(config: StepConfig, batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
                device: torch.device | str, cuda_debug: bool = False):
    """Host syncs over one epoch of `batches` (a HostSyncCounter), after one uncounted warm-up step
    (its first-step allocations, e.g. Adam's state, are not what the loop does every step)."""
    model, opt = fresh(model_cfg, seed, device)
    train_epoch(model, batches[:1], config=config, optimizer=opt, train=train_cfg, progress=False)
    with count_host_syncs(cuda_debug=cuda_debug) as c:
        train_epoch(model, batches, config=config, optimizer=opt, train=train_cfg, start_step=1, progress=False)
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
               timer: Callable[[], float] | None = None) -> dict[str, Measurement]:
    """Time each job's epochs (the progress bar drawn into `progress_file`) with `perflab.bench.measure`,
    in `rounds` interleaved rounds (job 1, job 2, ..., job 1, job 2, ...) so a drift in the machine's
    load hits every job alike; the rounds are merged and reported per step. Each job trains its own
    fresh model across rounds; only the first round warms up."""
    state = {key: [*fresh(model_cfg, seed, device), 0] for key in jobs}  # model, optimizer, next step

    def epoch(key: str) -> None:
        model, opt, step = state[key]
        job = jobs[key]
        train_epoch(model, job.batches, config=job.config, optimizer=opt, train=train_cfg, start_step=step,
                    progress=True, progress_file=progress_file)
        state[key][2] = step + len(job.batches)

    times = measure_interleaved({key: (lambda key=key: epoch(key)) for key in jobs}, label="VAE training step",
                                rounds=rounds, sub_labels={k: j.sub_label for k, j in jobs.items()},
                                descriptions={k: j.description for k, j in jobs.items()}, device=device,
                                min_run_time=min_run_time * rounds, max_run_time=max_run_time * rounds, timer=timer)
    return {key: per_step(times[key], len(jobs[key].batches)) for key in jobs}


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


MIN_BLOCKS = 4  # fewer timed blocks than this per side: the p20/p80 range means little, no verdict


def seed_table(times: dict[str, Measurement], syncs: dict[str, float], epoch_batches: int, device_kind: str):
    """The seed's table with measured values: per-step saving, its extrapolation to an epoch of
    `epoch_batches` steps with a conservative range, syncs removed per step, and a verdict ("not
    tested here" when either timing has fewer than MIN_BLOCKS blocks)."""
    import pandas as pd

    rows = []
    for what, claim, (lo, hi), before, after in SEED_TABLE:
        s = saving(times[before], times[after], epoch_batches)
        enough = min(summary(times[before])["n"], summary(times[after])["n"]) >= MIN_BLOCKS
        verdict = saving_verdict(s["median_s"], s["lo_s"], lo) if enough else "not tested here"
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


def seed_claims(table, remap_times: dict[str, Measurement], unique_remap_syncs: dict, curves_identical: bool,
                curve_steps: int, sep_grad_steers: bool, epoch_batches: int, device_kind: str) -> list[tuple]:
    """Every seed claim as (claim, what the seed says, what was measured here, verdict)."""
    out = []
    for (what, seed_says, _, _, _), (_, row) in zip(SEED_TABLE, table.iterrows()):
        s = row["_saving"]
        out.append((f"{what} saves {seed_says} ({epoch_batches}-batch epoch)", seed_says,
                    f"{s['median_s']:+.1f} s [{s['lo_s']:+.1f}, {s['hi_s']:+.1f}] per epoch on {device_kind}",
                    row["verdict"]))
    ms = {k: (summary(m)["p20_s"] * 1e3, summary(m)["p80_s"] * 1e3) for k, m in remap_times.items()}
    for impl, claim, (lo, hi) in (("remap_host", "CPU round-trip remap costs 13-25 ms per batch", (13.0, 25.0)),
                                  ("remap_unique", "GPU-side remap costs ~1-2 ms per batch", (1.0, 2.0))):
        out.append((claim, f"{lo:g}-{hi:g} ms", f"{ms[impl][0]:.3f}-{ms[impl][1]:.3f} ms (p20-p80) on {device_kind}",
                    range_verdict(*ms[impl], lo, hi)))
    n = sum(unique_remap_syncs.values())
    out.append(("GPU-side remap (torch.unique) removes the remap's syncs", "GPU-side only",
                f"{n} syncs per call ({unique_remap_syncs}) vs 2 for the CPU round trip; the presence table: 0",
                "does not hold" if n > 0 else "holds"))
    out.append(("Algorithm integrity: loss and curves unchanged", "NO changes to forward pass, loss, gradient flow",
                f"baseline vs optimized identical to rounding over {curve_steps} steps: {curves_identical}",
                "holds" if curves_identical else "does not hold"))
    out.append(("The separability term shapes the latent space",
                "computed under no_grad in the origin (research note)",
                f"with sep_grad=True its gradient reaches the encoder (weights differ: {sep_grad_steers})",
                "fixed" if sep_grad_steers else "does not hold"))
    return out
