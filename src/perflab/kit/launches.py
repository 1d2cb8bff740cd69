"""Count the launches a call makes: device kernels on CUDA, dispatched aten ops on CPU.

A GPU step is launch-bound when the host needs longer to launch its kernels than the device needs to run
them; the cure is fewer launches (fusion, a compiled graph, a CUDA-graph replay). This counter says how many a
call makes, with the same interface as `perflab.kit.syncs.count_host_syncs`:

    with count_launches() as launches:
        step(batch)
    print(launches.total, launches.by_op.most_common(5))

It runs the block under `torch.profiler` and reads its events:
- on a GPU, `.kernels` counts the device kernels the profiler saw (one per launch, CUDA-graph replays included)
  and `.total` is that count; the device's copies and memsets are counted apart (`.copies`, `.memsets`), not as
  kernels. The host's calls into the CUDA runtime are split by what they start: `.kernel_launches`
  (cudaLaunchKernel, and cuLaunchKernel / cuLaunchKernelEx, the driver calls Triton's launcher makes),
  `.graph_launches` (cudaGraphLaunch), `.copy_calls` (cudaMemcpyAsync), `.memset_calls`; `.runtime_launches` is
  their sum (CUDA 13 names its <<<>>> launches `__cudaLaunchKernel`: matched by name too; any other runtime call
  is kept by name in `.other_calls`). A CUDA graph that draws random numbers launches two RNG-state fills before each replay (PyTorch PR
  #143777: `seed_extragraph_.fill_()` and `offset_extragraph_.fill_()` in `replay_prologue`), so one replay of
  such a graph is 1 graph launch + 2 kernel launches;
- on CPU there are no kernels to see, so `.total` is the proxy a CPU can see: the aten ops dispatched from
  Python or from a compiled graph (ops nested inside another aten op are not counted again; each would be
  at least one kernel in eager CUDA), plus one per compiled-graph call (`.graph_calls`; the kernels inductor
  fused inside are invisible on CPU). The CPU count is thus a proxy for host work per step, not a kernel count.
Counting costs time (the profiler is on): count in one call, time in another.

`sites=True` also says which line of the user's code each op came from: `.by_site` counts the ops (the same ones
`.total` counts: top-level aten ops and compiled-graph calls on CPU, kernels on a GPU) by the user's stack of the
torch call that made them (`perflab.kit.frames.user_stack`, innermost first). A torch-function mode wraps each torch
call made from Python in a profiler range named for its stack, and each op is credited to the range it ran in; an op
outside any (a compiled graph's call, the autograd engine's thread) is credited to the empty stack `()`. The
profiler then records shapes too, and `.sizes` keeps each op's elements (the largest input's) as a power of two per
(op, stack): whether an op is small enough that a GPU runs it in about the time of its launch. The mode
costs a few microseconds per call and, like any torch-function mode, makes dynamo compile a compiled function once
more for the block (it guards on the mode stack): count sites after timing, not before. What dynamo runs while it
compiles (its tracing dispatches aten ops on fake tensors) is not counted: each compile is a profiler range of its own
(dynamo's compile callbacks), and nothing inside one counts.
"""
from __future__ import annotations

import collections
import os
import re
import sys

import torch
from torch.autograd import DeviceType
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile, record_function

from .env import pick_device
from .frames import Site, user_stack

# host calls into the CUDA runtime / driver, told apart by name: cudaLaunchKernel, __cudaLaunchKernel (CUDA 13's
# entry point for <<<>>> launches), cuLaunchKernel(Ex) (Triton >= 3.2's launcher), cudaGraphLaunch, cudaMemcpy*,
# cudaMemset*; any other cuda*/cu* call is kept by name in `.other_calls` (a new name shows up there, not as 0)
_LAUNCH_KINDS = (("GraphLaunch", "graph_launches"), ("LaunchKernel", "kernel_launches"),
                 ("LaunchCooperativeKernel", "kernel_launches"), ("Memcpy", "copy_calls"), ("Memset", "memset_calls"))
_RUNTIME_CALL = re.compile(r"_*cu(da)?[A-Z]")   # cudaXxx, __cudaXxx, cuXxx: the runtime's and the driver's API
_GRAPH_CALL = "## Call CompiledFxGraph"
_SITE = "perflab.site:"   # the profiler range around one torch call, named for its user stack (`sites=True`)
_COMPILING = "perflab.compiling"   # the profiler range around one compile (`sites=True`): nothing in it counts


def profiler_activities(device: torch.device | str) -> list:
    """torch.profiler activities that see `device`'s work: the CPU's, plus the accelerator's own (CUDA, XPU...)."""
    kind = torch.device(device).type.upper()
    return [ProfilerActivity.CPU] + ([getattr(ProfilerActivity, kind)] if hasattr(ProfilerActivity, kind) and kind != "CPU" else [])


def self_time_key(device: torch.device | str) -> str:
    """The `key_averages()` attribute (and table sort key) of self time on `device`: the device's on an
    accelerator, the host's on a CPU (both attributes exist on every device; `self_cuda_time_total` does not
    exist on key_averages' events since torch 2.4)."""
    return "self_cpu_time_total" if torch.device(device).type == "cpu" else "self_device_time_total"


class LaunchCounter:
    """Result of `count_launches()`: `.total`, `.by_op` (a Counter of kernel or op names) and the parts."""

    def __init__(self, device: torch.device | str | None = None, sites: bool = False, shapes: bool = False):
        dev = torch.device(device) if device is not None else pick_device("auto")
        self.device = dev
        self.device_type = dev.type
        self.kernels = 0            # device kernels (GPU)
        self.copies = 0             # device memcpy activities (GPU)
        self.memsets = 0            # device memset activities (GPU)
        self.kernel_launches = 0    # host calls that launch one kernel (GPU)
        self.graph_launches = 0     # host calls that launch a CUDA graph (GPU)
        self.copy_calls = 0         # host calls that start a copy (GPU)
        self.memset_calls = 0       # host calls that start a memset (GPU)
        self.other_calls: collections.Counter[str] = collections.Counter()  # other runtime/driver calls, by name
        self.aten_ops = 0           # top-level aten ops dispatched (any device)
        self.graph_calls = 0        # compiled-graph calls (torch.compile)
        self.by_op: collections.Counter[str] = collections.Counter()
        self.record_sites = sites
        self.record_shapes = sites or shapes   # `.sizes` (and compiles left out); sites: their lines too
        self.by_site: collections.Counter[tuple[Site, ...]] = collections.Counter()   # ops per user stack
        self.op_sites: collections.Counter[tuple[str, tuple[Site, ...]]] = collections.Counter()  # (op, stack)
        self.sizes: collections.Counter[tuple[str, tuple[Site, ...], int]] = collections.Counter()  # +bit_length
        self._stacks: list[tuple[Site, ...]] = []
        self._mode = None
        self._prof = None

    @property
    def on_device(self) -> bool:
        return self.device_type != "cpu"

    @property
    def runtime_launches(self) -> int:
        """Host calls into the GPU runtime that start device work: kernels, graphs, copies, memsets."""
        return self.kernel_launches + self.graph_launches + self.copy_calls + self.memset_calls

    @property
    def total(self) -> int:
        """Kernels on a GPU; on CPU the proxy: top-level aten ops plus compiled-graph calls (module doc)."""
        return self.kernels if self.on_device else self.aten_ops + self.graph_calls

    @property
    def what(self) -> str:
        return "device kernels" if self.on_device else "aten ops + compiled-graph calls (CPU proxy)"

    def __enter__(self) -> LaunchCounter:
        # kineto writes two "USDT ... profiler_start/stop" lines to stderr per profile (into every notebook
        # cell that counts) unless its log level says otherwise; it reads the level once, at its first profile
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
        self._sync()  # work queued before the block is not this block's
        self._prof = profile(activities=profiler_activities(self.device), record_shapes=self.record_shapes)
        self._prof.__enter__()
        if self.record_shapes:
            self._compile_ranges(True)
        if self.record_sites:
            self._mode = _SiteMode(self._stacks)
            self._mode.__enter__()
        return self

    def _compile_ranges(self, on: bool) -> None:
        from torch._dynamo.callback import callback_handler

        if on:
            self._open: list = []
            self._on_start = lambda args: self._open.append(record_function(_COMPILING).__enter__())
            self._on_end = lambda args: self._open.pop().__exit__(None, None, None) if self._open else None
            callback_handler.register_start_callback(self._on_start)
            callback_handler.register_end_callback(self._on_end)
        else:
            callback_handler.remove_start_callback(self._on_start)
            callback_handler.remove_end_callback(self._on_end)

    def __exit__(self, *exc) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None
        if self.record_shapes:
            self._compile_ranges(False)
        self._sync()  # kernels still queued at the end of the block are the block's
        self._prof.__exit__(*exc)
        if exc[0] is None:
            # with sites or shapes, torch's own events (FunctionEvents and their tree: ~0.2 ms an op) are read directly
            # from kineto's results and nested here, five times faster; the counts are the same (tested)
            self._read(_events(self._prof) if self.record_shapes else self._prof.events())

    def _sync(self) -> None:
        if self.on_device:
            torch.accelerator.synchronize(self.device)  # not the sync counter's wrapped torch.cuda.synchronize

    def _read(self, events) -> None:
        for e in events:
            name = e.name
            if self.record_shapes and _compiling(e):
                continue
            if e.device_type != DeviceType.CPU:
                kind = "copies" if name.startswith("Memcpy") else "memsets" if name.startswith("Memset") else "kernels"
                setattr(self, kind, getattr(self, kind) + 1)
                if self.on_device and kind == "kernels":
                    self.by_op[name] += 1
                    self._credit(name, e)
            elif name.startswith(_GRAPH_CALL):
                self.graph_calls += 1
                if not self.on_device:
                    self.by_op["compiled graph"] += 1
                    self._credit("compiled graph", e)
            elif _RUNTIME_CALL.match(name):
                if _inside_runtime_call(e):
                    continue  # one launch, however many entry points it passes through: the outermost counts
                kind = next((k for part, k in _LAUNCH_KINDS if part in name), None)
                if kind is None:
                    self.other_calls[name] += 1
                else:
                    setattr(self, kind, getattr(self, kind) + 1)
            elif name.startswith("aten::") and not _inside_aten(e):
                self.aten_ops += 1
                if not self.on_device:
                    self.by_op[name] += 1
                    self._credit(name, e)

    def _credit(self, op: str, event) -> None:
        """The op's user stack: the site range it ran in (a kernel: the range of the host call that launched it)."""
        if not self.record_shapes:
            return
        host = event.cpu_parent if event.device_type != DeviceType.CPU else event
        stack = _site_of(host, self._stacks) if self.record_sites else ()
        self.by_site[stack] += 1
        self.op_sites[(op, stack)] += 1
        self.sizes[(op, stack, _elements(host).bit_length())] += 1

    def sites(self) -> collections.Counter[Site | None]:
        """{the innermost user frame (None: no user frame): ops} (with `sites=True`)."""
        out: collections.Counter = collections.Counter()
        for stack, n in self.by_site.items():
            out[stack[0] if stack else None] += n
        return out

    def as_dict(self) -> dict:
        return {"total": self.total, "what": self.what, "kernels": self.kernels, "copies": self.copies,
                "memsets": self.memsets, "kernel_launches": self.kernel_launches,
                "graph_launches": self.graph_launches, "copy_calls": self.copy_calls,
                "memset_calls": self.memset_calls, "runtime_launches": self.runtime_launches,
                "other_calls": dict(self.other_calls),
                "aten_ops": self.aten_ops, "graph_calls": self.graph_calls}

    def __repr__(self) -> str:
        return f"LaunchCounter(total={self.total} {self.what}, top={self.by_op.most_common(3)})"


def _inside_runtime_call(event) -> bool:
    """Whether a runtime call runs inside another one. How CUPTI names CUDA 13's <<<>>> launches is not in torch's
    source (kineto takes CUPTI's callback names); if `__cudaLaunchKernel` were reported and the
    `cudaLaunchKernel` it calls too, the two would nest: torch's profiler makes an event the child of any CPU event
    whose [start, end) holds it, runtime calls included (`EventList._populate_cpu_children`, profiler_util.py)."""
    parent = event.cpu_parent
    while parent is not None:
        if _RUNTIME_CALL.match(parent.name):
            return True
        parent = parent.cpu_parent
    return False


class _SiteMode(TorchFunctionMode):
    """Each torch call from Python inside a profiler range named for its user stack (`sites=True`)."""

    def __init__(self, stacks: list):
        super().__init__()
        self.stacks, self.index = stacks, {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():   # dynamo traces this mode into a graph: stay out of it
            return func(*args, **kwargs)
        stack = user_stack(sys._getframe(1))
        i = self.index.get(stack)
        if i is None:
            i = self.index[stack] = len(self.stacks)
            self.stacks.append(stack)
        with record_function(f"{_SITE}{i}"):
            return func(*args, **kwargs)


class _Raw:
    """What `_read` uses of a profiler event (name, device_type, cpu_parent, input_shapes), from kineto's results."""
    __slots__ = ("name", "device_type", "cpu_parent", "input_shapes", "start", "end", "corr")

    def __init__(self, e):
        self.name, self.device_type = e.name(), e.device_type()
        self.start, self.end = e.start_ns(), e.start_ns() + e.duration_ns()
        self.input_shapes = e.shapes() if self.device_type == DeviceType.CPU else None
        self.cpu_parent = None
        self.corr = e.correlation_id()


def _events(prof) -> list:
    """Kineto's events nested here (`_raw_events`), or torch's own FunctionEvents where this torch's kineto results
    lack what the nesting reads (the same events, slower)."""
    try:
        return _raw_events(prof)
    except (AttributeError, TypeError):
        return list(prof.events())


def _raw_events(prof) -> list:
    """Kineto's events with their CPU parents: per thread, by start (longer first), each the child of the innermost
    event still open around it (torch's own rule, `EventList._populate_cpu_children`); a device event's parent is
    the host call that launched it (the same correlation id)."""
    raw = prof.profiler.kineto_results.events()
    by_thread: dict = collections.defaultdict(list)
    events, launched = [], {}
    for e in raw:
        r = _Raw(e)
        events.append(r)
        if r.device_type == DeviceType.CPU:
            by_thread[e.start_thread_id()].append(r)
            if r.corr and _RUNTIME_CALL.match(r.name):
                launched[r.corr] = r
    for evs in by_thread.values():
        evs.sort(key=lambda r: (r.start, -r.end))
        open_: list = []
        for r in evs:
            while open_ and open_[-1].end <= r.start:
                open_.pop()
            if open_ and r.end <= open_[-1].end:
                r.cpu_parent = open_[-1]
            open_.append(r)
    for r in events:
        if r.device_type != DeviceType.CPU:
            r.cpu_parent = launched.get(r.corr)
    return events


def _elements(event) -> int:
    """The largest input's elements of an op (its recorded shapes; 0 where none were recorded)."""
    best = 0
    for shape in getattr(event, "input_shapes", None) or ():
        if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
            n = 1
            for d in shape:
                n *= d
            best = max(best, n)
    return best


def _compiling(event) -> bool:
    """Whether the event ran while dynamo compiled (inside a `perflab.compiling` range; a kernel: its launch)."""
    e = event.cpu_parent if event.device_type != DeviceType.CPU else event
    while e is not None:
        if e.name == _COMPILING:
            return True
        e = e.cpu_parent
    return False


def _site_of(event, stacks: list) -> tuple[Site, ...]:
    while event is not None:
        if event.name.startswith(_SITE):
            return stacks[int(event.name[len(_SITE):])]
        event = event.cpu_parent
    return ()


def _inside_aten(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def count_launches(device: torch.device | str | None = None, sites: bool = False,
                   shapes: bool = False) -> LaunchCounter:
    """Context manager counting the launches of the block (module doc). `device` says which count is the
    headline `.total` (default: CUDA when present); `sites` credits each to the user's line (`.by_site`); `shapes`
    keeps each op's size (`.sizes`, under the empty stack) without the sites' torch-function mode."""
    return LaunchCounter(device, sites=sites, shapes=shapes)
