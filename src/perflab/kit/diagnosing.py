"""Why a step is slow: `diagnose(step)` runs it under the kit's counters and names each cause at the user's line.

    d = diagnose(step)                              # step: a callable of no arguments (one training/eval step)
    d = diagnose(setup=build)                       # build() returns the step (a model built first)
    d                                               # the findings, ranked by cost (perflab.kit.diagnosis.Diagnosis)

What it runs, in this order (compiles and recompiles are counted from the first call: a varying shape or a changing
Python value recompiles in the warm-up, and so does the first call of every compiled function):
1. `warmup` calls (the last one under `peak_memory`), then `calls` timed calls, each its own seconds
   (`perflab.kit.rounds.Stopwatch`): the step's time is their mean and its 99% interval. Nothing is instrumented in
   them, so diagnose's own cost is not the step's.
2. Calls under the line sampler (`perflab.kit.sampling`): each finding's share of the step's time, with its interval.
3. After the compile counter has stopped, calls under the counters with their sites: host syncs and host-to-device
   copies with the op and line of each (`count_host_syncs(sites=True)`), ops per step as the launch count and their
   lines (`count_launches(sites=True)`), tensors built from Python data. These modes make dynamo compile a compiled
   function once more (it guards on the mode stack); those compiles, and what runs while they do, are not counted.
4. With `setup`, where the setup built the step for a CUDA-graph mode (it asked `uses_cudagraphs` about one) and it
   compiled, or where `lifetimes=True`: the step built again under `check_lifetimes()` and called twice; a read of a
   CUDA-graph output after the next replay overwrote it raises there as on a GPU (`perflab.kit.cudagraphs`).
5. On CUDA, one call under torch.profiler with the device's activity: kernel time against the host's.
Then `perflab.kit.causes` turns what was seen into findings. A step longer than `budget` allows gets fewer calls
(down to 1 warm-up, 2 timed, 1 sampled, 1 counted), and the diagnosis says so in its notes.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import sys
import time
import traceback
from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode

from . import causes, cudagraphs
from .compiles import CompileCounter, count_compiles
from .cudagraphs import check_lifetimes
from .diagnosis import Diagnosis
from .env import pick_device
from .frames import Site, boundary, is_user_file, library, stack_from_traceback, user_stack
from .judge import Measured
from .launches import LaunchCounter, count_launches
from .memory import device_memory, peak_memory
from .rounds import Stopwatch
from .sampling import LineSampler
from .syncs import HostSyncCounter, count_host_syncs

MIN_TIMED, MIN_SAMPLED = 2, 1
SAMPLES_WANTED = 200          # the sampled calls last until about this many samples (at least 2 calls)


class StepError(RuntimeError):
    """The step (or its setup) raised: `.traceback` is the traceback from the user's frame on."""

    def __init__(self, what: str, exc: BaseException):
        self.original = exc
        self.traceback = user_traceback(exc)
        super().__init__(f"{what} raised {type(exc).__name__}: {exc}\n{self.traceback}")


def user_traceback(exc: BaseException) -> str:
    """The exception's traceback from its first frame in the user's code on (diagnose's own frames left out)."""
    te = traceback.TracebackException.from_exception(exc)
    frames = list(te.stack)
    first = next((i for i, fs in enumerate(frames) if is_user_file(fs.filename)), 0)
    te.stack = traceback.StackSummary.from_list(frames[first:])
    return "".join(te.format())




@dataclasses.dataclass
class Observed:
    """Everything the passes saw: what `perflab.kit.causes` reads."""
    device: torch.device
    times: list                         # seconds of each timed call
    first_call_s: float
    warmup: int
    compiles: CompileCounter            # from the first call on (details)
    compiles_before_timing: int         # compile events during warm-up (the rest: at steady state)
    steady_calls: int                   # plain calls after the warm-up (timed + sampled)
    sampler: LineSampler
    sampled_times: list
    syncs: HostSyncCounter
    launches: LaunchCounter
    host_data: collections.Counter      # tensors built from Python data on the host, by user stack
    calls: collections.Counter          # calls of the user's functions in the counted calls, by (caller, callee)
    counted_calls: int
    counted_s: float
    peak_bytes: int
    memory_total: int
    op_floor_s: float                   # one tiny op's host time on this device (dispatch or launch)
    floor_s: float | None               # the step's floor, when the caller knows one
    outer: tuple                        # the caller's frames above the step (stripped from every stack)
    lifetime: tuple | None = None       # (message, user stack) of a CUDA-graph lifetime error
    device_busy: dict | None = None     # CUDA: kernel time and the device's busy share of one call


class _HostData(TorchFunctionMode):
    """Counts tensors built on the host from Python data (`torch.tensor(list)`, `as_tensor`, `from_numpy`), by the
    user's stack: a batch built by hand in the step."""

    FUNCS = {torch.tensor, torch.as_tensor, torch.asarray, torch.from_numpy}

    def __init__(self):
        super().__init__()
        self.by_stack: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # no device named: a host tensor (with one, the sync counter's "tensor(host list) -> device" copy)
        if func in self.FUNCS and not torch.compiler.is_compiling() and kwargs.get("device") is None \
                and args and not isinstance(args[0], torch.Tensor):
            self.by_stack[user_stack(sys._getframe(1))] += 1
        return func(*args, **kwargs)


class _Calls:
    """Calls of the user's functions during the counted calls, by (caller, callee) (`sys.setprofile`; any profile
    function already set is restored after): what runs under a line that builds batches (a tokenizer called per
    step). Functions are (file, qualified name)."""

    def __init__(self):
        self.edges: collections.Counter = collections.Counter()
        self._saved = None

    def _hook(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if not is_user_file(code.co_filename):
            return
        caller = frame.f_back
        while caller is not None and not is_user_file(caller.f_code.co_filename):
            caller = caller.f_back
        self.edges[(_fn(caller.f_code) if caller is not None else None, _fn(code))] += 1

    def __enter__(self):
        self._saved = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._saved)


def _fn(code) -> tuple[str, str]:
    return code.co_filename, getattr(code, "co_qualname", code.co_name)


def diagnose(step: Callable[[], object] | None = None, *, setup: Callable[[], Callable[[], object]] | None = None,
             calls: int = 10, warmup: int = 2, device: str | torch.device | None = None, budget: float = 20.0,
             library_modules: tuple[str, ...] = (), floor: float | None = None, name: str | None = None,
             lifetimes: bool | None = None, interval: float = 0.001) -> Diagnosis:
    """Diagnose `step` (or the step `setup()` returns): the findings, ranked by cost (module doc).

    calls: timed calls (the step's time is their mean); warmup: untimed calls first (compiles counted from the first);
    device: the compute device ("auto": CUDA when present); budget: seconds of the step's calls at most (a longer step
    gets fewer calls, and the notes say so); library_modules: modules to count as library, not the user's code
    (`perflab.kit.frames.library`); floor: the step's floor in seconds, when known (a "far from the floor" finding);
    lifetimes: build the step again under `check_lifetimes()` (default: with `setup`, where it built a CUDA-graph step).
    Raises StepError when the step or setup raises (its traceback from the user's frame), ValueError for bad
    arguments or a device that is not there."""
    t_start = time.perf_counter()
    if step is None and setup is None:
        raise ValueError("diagnose: give the step (a callable of no arguments) or setup= (which returns it)")
    if calls < 1 or warmup < 1 or not budget > 0 or not interval > 0:
        raise ValueError(f"diagnose: need calls >= 1, warmup >= 1, budget > 0 and interval > 0, got calls={calls}, "
                         f"warmup={warmup}, budget={budget}, interval={interval}")
    dev = pick_device(device if device is not None else "auto")
    outer = ()   # the caller's frames: cut off every stack by the boundary below
    with library(*library_modules), boundary(sys._getframe(1)):
        asked = cudagraphs.ASKED[0]
        if setup is not None:
            step = _call_setup(setup)
        graphs = cudagraphs.ASKED[0] > asked   # the setup built a step for a CUDA-graph mode
        if not callable(step):
            raise ValueError(f"diagnose: the step must be callable, got {type(step).__name__}")
        label = name or _name(step)
        obs, notes, step_s = _observe(step, dev, calls, warmup, budget, floor, outer, interval)
        if setup is not None and (lifetimes or (lifetimes is None and graphs and obs.compiles.compiles)):
            obs.lifetime = _lifetimes(setup)
        obs.device_busy = _device_busy(step, dev)
        findings = causes.findings(obs)
    wall = time.perf_counter() - t_start
    mean_step = sum(obs.times) / len(obs.times)
    sampled = sum(obs.sampled_times) / len(obs.sampled_times) if obs.sampled_times else math.nan
    overhead = {"wall_s": wall, "step_calls_s": step_s, "own_s": max(0.0, wall - step_s),
                "sampling_slowdown": sampled / mean_step - 1 if mean_step > 0 and math.isfinite(sampled) else None,
                "counting_slowdown": obs.counted_s / obs.counted_calls / mean_step if mean_step > 0 else None,
                "samples": obs.sampler.samples, "interval_s": interval}
    return Diagnosis(target=label, device=str(dev), step=Measured.from_samples(obs.times), calls=len(obs.times),
                     findings=findings, counts=causes.counts(obs), overhead=overhead, notes=notes,
                     first_call_s=obs.first_call_s)


def _name(step) -> str:
    f = getattr(step, "__func__", step)
    mod, qual = getattr(f, "__module__", None), getattr(f, "__qualname__", None)
    return f"{mod}:{qual}" if mod and qual else type(step).__name__


def _call_setup(setup):
    try:
        return setup()
    except Exception as e:  # noqa: BLE001 (anything the user's code raises is reported with its traceback)
        raise StepError(f"the setup {_name(setup)}", e) from e


def _run(step, what: str = "the step"):
    try:
        return step()
    except Exception as e:  # noqa: BLE001
        raise StepError(f"{what} {_name(step)}", e) from e


def _observe(step, dev, calls, warmup, budget, floor, outer, interval) -> tuple[Observed, list[str], float]:
    sw = Stopwatch(dev)
    notes, spent = [], 0.0

    def timed(what="the step") -> float:
        nonlocal spent
        box = {}

        def call():
            box["out"] = _run(step, what)
        t = sw.time(call, 1)
        spent += t
        return t

    with count_compiles(details=True) as cc:
        first = timed()
        plan_w = 1 if first * (warmup + MIN_TIMED + MIN_SAMPLED + 1) > budget else warmup
        warm = [first] + [timed() for _ in range(plan_w - 2)]
        if plan_w == 1:
            n_before = len(cc.events)
        with peak_memory(dev) as mem:   # the last warm-up call (the first timed one where there is no other)
            t = timed()
        if plan_w > 1:
            warm.append(t)
        if plan_w > 1:
            n_before = len(cc.events)
        est = min(warm[1:]) if len(warm) > 1 else first
        n_timed, n_sampled = _plan(est, calls, budget - spent, interval)
        if n_timed < calls or plan_w < warmup:
            notes.append(f"fewer calls than asked: {plan_w} warm-up and {n_timed} timed (asked {warmup} and {calls}), "
                         f"{n_sampled} sampled: a step takes about {_s(est)} and the budget is {_s(budget)}; the "
                         "intervals are wider for it")
        times = ([] if plan_w > 1 else [t]) + [timed() for _ in range(n_timed - (plan_w == 1))]
        sampled = []
        with LineSampler(interval) as sampler:
            for _ in range(n_sampled):
                sampled.append(timed())
                sampler.mark()
    host_data, calls_seen = _HostData(), _Calls()
    t0 = time.perf_counter()
    counted_calls = 0
    try:
        with count_launches(dev, sites=True) as launches, count_host_syncs(dev, sites=True) as syncs, host_data, \
                calls_seen:
            while True:   # up to 3 calls, while counting costs under a quarter of the budget
                _run(step)
                counted_calls += 1
                took = time.perf_counter() - t0
                if counted_calls >= min(3, n_timed) or took * (counted_calls + 1) / counted_calls > budget / 4:
                    break
    except StepError as e:   # it ran plain but not under the modes: dynamo traces a compiled step through them
        notes.append(f"the step does not run under the counters' torch-function modes ({type(e.original).__name__}: "
                     f"{str(e.original).splitlines()[0]}): its ops are counted without their lines, its host syncs "
                     "and copies not at all (a fullgraph-compiled step has none: a host read would not compile)")
        host_data, calls_seen, syncs = _HostData(), _Calls(), HostSyncCounter(dev, cuda_debug=False, sites=True)
        t0 = time.perf_counter()
        with count_launches(dev, shapes=True) as launches:
            _run(step)
        counted_calls = 1
    counted_s = time.perf_counter() - t0
    total = device_memory(dev)["total_bytes"]
    obs = Observed(device=dev, times=times, first_call_s=first, warmup=plan_w, compiles=cc,
                   compiles_before_timing=n_before, steady_calls=n_timed + n_sampled, sampler=sampler,
                   sampled_times=sampled, syncs=syncs, launches=launches, host_data=host_data.by_stack,
                   counted_calls=counted_calls, counted_s=counted_s, peak_bytes=max(0, mem.peak_bytes),
                   memory_total=total, op_floor_s=_op_floor(dev), floor_s=floor, outer=outer, calls=calls_seen.edges)
    return obs, notes, spent


def _plan(est: float, calls: int, left: float, interval: float) -> tuple[int, int]:
    """Timed and sampled calls that fit `left` seconds (at least MIN_TIMED and MIN_SAMPLED): the sampled ones last
    until about SAMPLES_WANTED samples, at least 2 calls (two groups: an interval)."""
    sampled = max(2, math.ceil(SAMPLES_WANTED * interval / max(est, 1e-9)))
    sampled = min(sampled, max(MIN_SAMPLED, int(0.5 * left / max(est, 1e-9))))
    counted = 3
    timed = calls
    if est * (timed + sampled + counted) > left:
        room = max(0, int(left / max(est, 1e-9)) - sampled - counted)
        timed = max(MIN_TIMED, min(calls, room))
    return timed, max(MIN_SAMPLED, sampled)


def _s(x: float) -> str:
    from .formatting import fmt_seconds
    return fmt_seconds(x)


def _op_floor(dev: torch.device, n: int = 200) -> float:
    """The host's time for one tiny op on `dev` (an add of one element): what every op costs however small."""
    a = torch.ones(1, device=dev)
    sw = Stopwatch(dev)
    sw.time(lambda: a.add(a), n)   # warm
    return min(sw.time(lambda: a.add(a), n) for _ in range(5)) / n


def _lifetimes(setup) -> tuple | None:
    """The step built again under check_lifetimes() and called twice: the first lifetime error, or None."""
    with check_lifetimes() as check:
        step = _call_setup(setup)
        try:
            for _ in range(2):
                step()
        except RuntimeError as e:
            if "CUDAGraphs" in str(e) or "cudagraph" in str(e).lower():
                return str(e).splitlines()[0], stack_from_traceback(e.__traceback__)
            raise StepError(f"the step {_name(step)} (built under check_lifetimes)", e) from e
        if check.calls == 0:
            return None
    return None


def _device_busy(step, dev) -> dict | None:
    """CUDA (None elsewhere): one call under torch.profiler with CUDA's activity: its kernels, their time, the GPU's
    busy time (the union of the kernels' spans) and the call's wall time, for the launch-bound finding."""
    from torch.profiler import ProfilerActivity, profile

    if dev.type != "cuda":
        return None
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _run(step)
        torch.cuda.synchronize(dev)
    wall = time.perf_counter() - t0
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, kernel, end = 0.0, 0.0, -math.inf
    for s, e in spans:
        kernel += e - s
        if s > end:
            busy += e - s
        elif e > end:
            busy += e - end
        end = max(end, e)
    return {"kernels": len(spans), "kernel_s": kernel * 1e-6, "busy_s": busy * 1e-6, "wall_s": wall}


__all__ = ["diagnose", "StepError", "Observed", "Site"]
