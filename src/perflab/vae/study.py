"""The 05_vae_sync notebook's measurements: trainers for every implementation, host syncs and launches per
step, time per step (interleaved rounds), the batch sweep's fit and the step's floor, and the claims' evidence
(`evidence(run, ev)` for `claims.CLAIMS`). Each does one thing; the notebook calls them with its parameters.

IMPLS names the versions (`train_epoch` of baseline.py, optimized.py, captured.py: one signature; `impls.py`, below
params.py, which checks a parameter naming them); `IMPLS[name]` looks a name up. What the notebook times is declared
as data (`variants`): kit Variants, one type for every configuration: `eager(StepConfig)` (a version's step, or one
change alone: `train.run_epoch` runs it) and `captured(Captured)` (the optimized step recorded once: a `CapturedStep`
runs it). `trainer(v)` builds either's trainer from a seed, with the same `.epoch(batches)`."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator

import torch
from torch.utils.benchmark.utils.common import Measurement

from ..kit.bench import measure_interleaved
from ..kit.claims import verdict_text
from ..kit.launches import LaunchCounter, count_launches
from ..kit.syncs import count_host_syncs
from ..kit.verdicts import Decision, Measured, decide_saving, decide_speedup, decide_time
from ..kit.versions import Variant
from .captured import Captured, CapturedStep, runnable
from .claims import CLAIMS, REMAPS, SAVINGS, SPEEDUPS
from .config import CHECKED_STEPS, ModelConfig, StepConfig, TrainConfig, single_changes
from .impls import IMPLS  # noqa: F401 (study.IMPLS, as in every study: the versions the notebook times)
from .model import MixtureVAE, build_model, count_parameters, matmul_flops
from .params import VAEParams
from .train import EpochLog, make_optimizer, run_epoch

# the versions, baseline first: one epoch each, the same signature


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
    """The timer for `perflab.kit.bench.measure`: None (wall time, CUDA-synchronized) or time.process_time.

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


def fresh(model_cfg: ModelConfig, seed: int, device: torch.device | str, *, capturable: bool = False):
    """A model and its optimizer from `seed`, with the global RNG (dropout, noise) seeded too."""
    torch.manual_seed(seed)
    model = build_model(model_cfg, seed=seed, device=device)
    return model, make_optimizer(model, capturable=capturable)


class EagerTrainer:
    """`run_epoch` of one StepConfig on one model and optimizer, counting steps across epochs (CapturedStep's
    interface)."""

    def __init__(self, config: StepConfig, model: MixtureVAE, optimizer: torch.optim.Optimizer, train: TrainConfig):
        self.config, self.model, self.optimizer, self.train, self.step = config, model, optimizer, train, 0

    def epoch(self, batches, *, progress: bool = False, progress_file=None) -> EpochLog:
        log = run_epoch(self.model, batches, self.config, optimizer=self.optimizer, train=self.train,
                        start_step=self.step, progress=progress, progress_file=progress_file)
        self.step += len(batches)
        return log


def _eager_trainer(model: MixtureVAE, optimizer, train: TrainConfig, *, step: StepConfig) -> EagerTrainer:
    return EagerTrainer(step, model, optimizer, train)


def _captured_trainer(model: MixtureVAE, optimizer, train: TrainConfig, *, step: Captured) -> CapturedStep:
    return CapturedStep(model, optimizer, step, train)


def eager(step: StepConfig, name: str = "") -> Variant:
    """A StepConfig (a version's step, or one change alone) as the kit Variant the notebook times: `train.run_epoch`
    of it, eagerly; its version is the one whose switches it has ("optimized" for the sync-free ones, else
    "baseline"). Called as `v(model, optimizer, train)` it builds its trainer."""
    sync_free = (step.remap, step.metrics, step.separability) == ("presence", "device", "vectorized")
    return Variant("optimized" if sync_free else "baseline", _eager_trainer, {"step": step}, name)


def captured(step: Captured, name: str = "captured") -> Variant:
    """A Captured (the optimized step recorded once, its kernels from its compile mode) as a kit Variant of the
    captured version; `v(model, optimizer, train)` builds its CapturedStep."""
    return Variant("captured", _captured_trainer, {"step": step}, name)


def variants(log_every: int, compile: str, backend: str) -> tuple[dict[str, Variant], str]:
    """What the notebook times, declared as data: every configuration of `single_changes` (the baseline, each change
    alone, the seed's three together, optimized, optimized + sep grad) and the optimized step captured, each a kit
    Variant (`eager`, `captured`). The captured one runs eagerly where this torch's dynamo cannot trace the step's
    backward (`captured.runnable`). -> ({name: Variant}, the fallback's reason or "")"""
    out = {name: eager(step, name) for name, step in single_changes(log_every).items()}
    cap, fallback = runnable(Captured(out["optimized"].knobs["step"], compile=compile, backend=backend))
    return {**out, "captured": captured(cap)}, fallback


def step_config(v: Variant) -> StepConfig:
    """The switches a variant's step runs (a captured step's: the step it records)."""
    step = v.knobs["step"]
    return step.step if isinstance(step, Captured) else step


def trainer(v: Variant, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
            device: torch.device | str) -> EagerTrainer | CapturedStep:
    """A fresh model from `seed` trained by variant `v` (`eager`, `captured`: a captured step compiles at its first
    batch)."""
    model, opt = fresh(model_cfg, seed, device, capturable=v.version == "captured")
    return v(model, opt, train_cfg)


def run(v: Variant, batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
        device: torch.device | str, progress_file=None) -> tuple[EpochLog, MixtureVAE]:
    """One epoch over `batches` from a fresh model: the per-step metrics and the trained model."""
    tr = trainer(v, model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
    log = tr.epoch(batches, progress=progress_file is not None, progress_file=progress_file)
    return log, tr.model


def count_syncs(v: Variant, batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int,
                device: torch.device | str, cuda_debug: bool | None = None):
    """Host syncs over one epoch of `batches` (a HostSyncCounter), after one uncounted warm-up step
    (its first-step allocations, e.g. Adam's state, and a captured step's recording are not what the loop
    does every step). A captured step is counted in its eager form (compile "off"): the counter sees eager
    calls only, and a compiled function called under it compiles again; the compiled form cannot hold a
    sync (fullgraph=True refuses one) and on CUDA the recording would fail on one."""
    if v.version == "captured":
        v = v.with_knobs(v.name, step=dataclasses.replace(v.knobs["step"], compile="off"))
    tr = trainer(v, model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
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
    each replay, PyTorch PR #143777) and its 2 input copies per step, plus the metric ring's read every
    log_every steps."""
    return {"graph": c.graph_launches / steps, "kernel": c.kernel_launches / steps, "copy": c.copy_calls / steps,
            "memset": c.memset_calls / steps}


def launch_kinds(c: LaunchCounter, steps: int) -> dict[str, float]:
    """A CPU count per step split by LAUNCH_KINDS (what a profile of the step is made of)."""
    out = {k: sum(c.by_op.get(n, 0) for n in names) / steps for k, names in LAUNCH_KINDS.items()}
    out["other (elementwise, reductions, views, host reads)"] = c.total / steps - sum(out.values())
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


# ---- the claims' evidence (`CLAIMS.judge`) ------------------------------------------------------------------

def decide_timed(impls: dict, batches, *, cfg: VAEParams, progress_file, captured=None, model_cfg, train_cfg,
                 seed: int, device) -> dict[str, Decision | None]:
    """The timed claims, each decided in paired rounds (`perflab.kit.verdicts`, at most `cfg.verdict_time` seconds of
    rounds, stopped once decided): the savings by `decide_saving`, the speed targets by `decide_speedup` where this
    run is their setup (else None: not timed). A call is one epoch over `batches` (log_every steps, the progress bar
    drawn into `progress_file`), as the timing table times it; each implementation trains its own model from the
    seed across its calls; `captured`: the captured step already compiled (and on CUDA recorded), reused as is.
    Wall time, whatever clock the study's tables use: the verdicts' budget is wall time, and on a CPU another
    process's turns on the core are taken out of each block (`perflab.kit.rounds.Stopwatch`)."""
    trainers = {}

    def epoch(name):
        if name not in trainers:
            trainers[name] = captured if name == "captured" and captured is not None else \
                trainer(impls[name], model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
        tr = trainers[name]
        return lambda: tr.epoch(batches, progress=True, progress_file=progress_file)

    out: dict[str, Decision | None] = {}
    for key, (before, after) in SAVINGS.items():   # a GPU claim on a CPU run: not timed (its table still is)
        out[key] = CLAIMS[key].decide(lambda b, a, **kw: decide_saving(epoch(b), epoch(a), **kw), before, after,
                                      per=cfg.epoch_batches / len(batches), cfg=cfg, device=device)
    for key, name in SPEEDUPS.items():
        out[key] = CLAIMS[key].decide(lambda n, **kw: decide_speedup(epoch("baseline"), epoch(n), **kw), name,
                                      cfg=cfg, device=device)
    return out


def decide_remaps(fns: dict[str, Callable[[], object]], *, cfg: VAEParams, device) -> dict[str, Decision | None]:
    """The remap cost claims: each remap of `fns` ({"remap_host": f, "remap_unique": f}) warmed up, then timed in
    blocks of calls, its mean ms per call (`perflab.kit.verdicts.decide_time`), until the 99% interval settles the
    claim or `cfg.verdict_time` seconds are spent."""
    return {key: CLAIMS[key].decide(decide_time, fns[name], scale=1e3, quantity="ms per call", cfg=cfg, device=device)
            for key, name in REMAPS.items()}


@dataclasses.dataclass
class Evidence:
    """What the notebook measured, by implementation name where it has one (the setup it ran at is the run's:
    `run.cfg.batch`, `run.cfg.epoch_batches`, `run.device`)."""
    times: dict                # time per step at `batch` (Measurements): baseline, each change, optimized, captured
    decisions: dict            # claim key -> Decision (decide_timed, decide_remaps), None where not timed
    syncs_per_step: dict       # host syncs per step, the loop's metric reads included
    step_syncs: dict           # host syncs inside the step itself (reads excluded): "optimized", "captured"
    launches: dict             # launches per step (kernels on CUDA, the aten-op proxy on CPU)
    host_launches: dict        # per implementation, host calls per step into the GPU runtime (study.host_calls)
    unique_remap_syncs: dict   # syncs of one torch.unique remap, by op
    curves: dict               # "baseline = optimized", "optimized = captured": equal to rounding (bool)
    curve_steps: int
    captured_gap: float        # largest relative gap between the optimized and captured curves, all steps
    sep_grad_steers: bool
    device_kind: str           # the device as the sentences name it (`perflab.kit.env.device_kind`)


def _ratio(times: dict, name: str) -> float:
    """Baseline / `name` time per step from the timing table: the ratio of medians (a figure, never judged: the
    table's few blocks give no useful 99% interval; the claims are decided in paired rounds)."""
    return times["baseline"].median / times[name].median


def _fewer(launches: dict) -> float:
    """Baseline's launches over the captured step's (inf when the profiler saw none for the captured step)."""
    return launches["baseline"] / launches["captured"] if launches["captured"] else math.inf


def _rounds(d: Decision) -> str:
    return f"{d.how}, {d.seconds:.1f} s"


def evidence(run, ev: Evidence) -> dict[str, tuple[Measured | Decision | None, str]]:
    """Each claim's measurement and the sentence that says what it is (on this run's device), for `CLAIMS.judge`."""
    out, dk, n = {}, ev.device_kind, run.cfg.epoch_batches
    base_epoch = ev.times["baseline"].median * n
    for key, (before, after) in SAVINGS.items():
        d = ev.decisions[key]
        if d is None:  # not this run's setup: the timing table's medians, not judged
            saved = (ev.times[before].median - ev.times[after].median) * n
            out[key] = (None, f"{saved:+.2f} s per {n}-batch epoch on {dk}, {after} vs {before}: the timing table's "
                              "medians, not judged")
            continue
        out[key] = (d, f"{d.value:+.2f} s [{d.low:+.2f}, {d.high:+.2f}] per {n}-batch epoch on {dk}, {after} vs "
                       f"{before} ({_rounds(d)}; {100 * d.value / base_epoch:+.1f}% of the baseline's "
                       f"{base_epoch:.0f} s epoch)")
    for key, impl in REMAPS.items():
        d = ev.decisions[key]
        if d is None:
            out[key] = (None, f"{impl} on {dk}: not judged (the remap timings above show what it costs here)")
            continue
        out[key] = (d, f"{d.value:.4f} ms [{d.low:.4f}, {d.high:.4f}] per call of {impl} on {dk} ({d.how}, "
                       f"{d.seconds:.2f} s)")
    u = sum(ev.unique_remap_syncs.values())
    out["unique_syncs"] = (Measured.exact(u), f"{u} syncs per call ({dict(ev.unique_remap_syncs)}) vs 2 for the CPU "
                                              f"round trip; the presence table: 0")
    same = ev.curves["baseline = optimized"]
    out["integrity"] = (Measured.exact(int(same)), f"baseline vs optimized equal to rounding over {ev.curve_steps} "
                                                   f"steps: {same}")
    out["sep_grad"] = (Measured.exact(int(ev.sep_grad_steers)),
                       f"with sep_grad=True its gradient reaches the encoder (weights differ: {ev.sep_grad_steers})")
    for impl in ("optimized", "captured"):
        k = ev.step_syncs[impl]
        out[f"{impl}_syncs"] = (Measured.exact(k), f"{k} in the step; {ev.syncs_per_step[impl]:.2f} per step with "
                                                   f"the metric reads (one per log_every steps)")
    for key, impl in SPEEDUPS.items():
        d = ev.decisions.get(key)
        out[key] = ((d, f"{d.value:.2f}x [{d.low:.2f}, {d.high:.2f}] (baseline / {impl}, per step, batch {run.cfg.batch}) "
                        f"on {dk} ({_rounds(d)})") if d is not None else
                    (None, f"{_ratio(ev.times, impl):.2f}x (baseline / {impl}, per step, batch {run.cfg.batch}) on {dk}: "
                           f"the timing table's ratio of medians, not judged"))
    cap = ev.curves["optimized = captured"]
    out["captured_math"] = (Measured.exact(int(cap)), f"optimized vs captured equal to rounding (checked over the "
                                                      f"first {min(ev.curve_steps, CHECKED_STEPS)} steps): {cap}; "
                                                      f"largest relative gap over {ev.curve_steps} steps "
                                                      f"{ev.captured_gap:.1e}")
    h = ev.host_launches["captured"]
    out["captured_launches"] = (Measured.exact(h["graph"] + h["kernel"]) if run.device.type == "cuda" else None,
                                f"{h['graph']:.2f} graph launch + {h['kernel']:.2f} kernel launches (the RNG "
                                f"prologue of a replay) per step; {h['copy']:.2f} copies apart (2 inputs, the metric "
                                f"ring's read)" if run.device.type == "cuda"
                                else f"no CUDA runtime on {dk}; {ev.launches['captured']:.1f} aten ops per step")
    r = _fewer(ev.launches)
    out["cpu_ops_10x"] = (Measured.exact(r), f"{ev.launches['baseline']:.0f} -> {ev.launches['captured']:.0f} "
                                             f"{'kernels' if run.device.type == 'cuda' else 'aten ops'} per step: "
                                             f"{r:.1f}x fewer on {dk}")
    return out


def seed_table(run, ev: Evidence, rows: list[dict]):
    """The seed's table with measured values: the saving per step (the timing table's medians), per epoch (the
    paired rounds' mean and 99% interval), syncs removed per step, the verdict (`CLAIMS.judge`'s rows), and a
    last row for all of ours together (medians only: no claim, no paired rounds)."""
    import pandas as pd

    verdicts = {r["key"]: verdict_text(r) for r in rows}
    out = []
    for key, (before, after) in {**SAVINGS, "all": ("baseline", "optimized")}.items():
        per_step = ev.times[before].median - ev.times[after].median
        d = ev.decisions.get(key)
        epoch = f"{d.value:+.1f} s [{d.low:+.1f}, {d.high:+.1f}]" if d is not None else \
            f"{per_step * run.cfg.epoch_batches:+.1f} s (medians)"
        change = CLAIMS[key].text.split(" save")[0] if key in SAVINGS else "All changes here (optimized, same math)"
        out.append({"change": change, "seed claim": CLAIMS[key].claimed if key in SAVINGS else "-",
                    "saving per step": f"{per_step * 1e3:+.3f} ms", f"per {run.cfg.epoch_batches}-batch epoch": epoch,
                    "syncs removed per step": round(ev.syncs_per_step[before] - ev.syncs_per_step[after], 2),
                    "verdict": verdicts.get(key, "-")})
    return pd.DataFrame(out)


def reading(run, ev: Evidence, rows: list[dict], kinds: dict[str, float]) -> list[str]:
    """Sentences for the notebook's reading of this run: time and launches per step, and for a missed launch
    target, by how much and what the captured step's remaining launches are (`kinds`: study.launch_kinds)."""
    v = {r["key"]: r["verdict"] for r in rows}
    unit = "kernels" if run.device.type == "cuda" else "aten ops"
    out = [f"Per step at batch {run.cfg.batch} on {ev.device_kind}: " + "; ".join(
        f"{impl} {ev.times[impl].median * 1e3:.2f} ms, {ev.launches[impl]:.0f} {unit}"
        for impl in ("baseline", "optimized", "captured")) + "."]
    r, o = _ratio(ev.times, "captured"), _ratio(ev.times, "optimized")
    out.append(f"The captured step runs at {r:.2f}x the baseline's speed (optimized: {o:.2f}x; the timing table's "
               f"ratios of medians).")
    ratio = _fewer(ev.launches)
    if run.device.type != "cuda" and v["cpu_ops_10x"] != "holds":
        top = sorted(kinds.items(), key=lambda kv: -kv[1])
        floor = kinds.get(MATMULS, 0) + kinds.get(DRAWS, 0) + kinds.get(GRAPH_CALLS, 0)
        out.append(f"CPU op target: {ratio:.1f}x fewer ops, short of 10x by {10 / ratio:.1f}x. The captured step's "
                   f"{ev.launches['captured']:.0f} ops per step are: " +
                   ", ".join(f"{k} {n:.0f}" for k, n in top if n >= 0.5) + ". " +
                   (f"The matmuls and the random draws, with the graph calls, are {floor:.0f} ops per step: while "
                    f"they stay aten calls the step cannot dispatch fewer, {ev.launches['baseline'] / floor:.1f}x "
                    f"fewer than the baseline at most." if floor else ""))
    if run.device.type == "cuda":
        out.append("Host calls into the CUDA runtime per step (all kinds): " + "; ".join(
            f"{impl} {sum(ev.host_launches[impl].values()):.1f}" for impl in ("baseline", "optimized", "captured")) + ".")
    return out
