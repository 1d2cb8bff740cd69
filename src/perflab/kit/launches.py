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
"""
from __future__ import annotations

import collections
import os
import re

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from .env import pick_device

# host calls into the CUDA runtime / driver, told apart by name: cudaLaunchKernel, __cudaLaunchKernel (CUDA 13's
# entry point for <<<>>> launches), cuLaunchKernel(Ex) (Triton >= 3.2's launcher), cudaGraphLaunch, cudaMemcpy*,
# cudaMemset*; any other cuda*/cu* call is kept by name in `.other_calls` (a new name shows up there, not as 0)
_LAUNCH_KINDS = (("GraphLaunch", "graph_launches"), ("LaunchKernel", "kernel_launches"),
                 ("LaunchCooperativeKernel", "kernel_launches"), ("Memcpy", "copy_calls"), ("Memset", "memset_calls"))
_RUNTIME_CALL = re.compile(r"_*cu(da)?[A-Z]")   # cudaXxx, __cudaXxx, cuXxx: the runtime's and the driver's API
_GRAPH_CALL = "## Call CompiledFxGraph"


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

    def __init__(self, device: torch.device | str | None = None):
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
        self._prof = profile(activities=profiler_activities(self.device))
        self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._sync()  # kernels still queued at the end of the block are the block's
        self._prof.__exit__(*exc)
        if exc[0] is None:
            self._read(self._prof.events())

    def _sync(self) -> None:
        if self.on_device:
            torch.accelerator.synchronize(self.device)  # not the sync counter's wrapped torch.cuda.synchronize

    def _read(self, events) -> None:
        for e in events:
            name = e.name
            if e.device_type != DeviceType.CPU:
                kind = "copies" if name.startswith("Memcpy") else "memsets" if name.startswith("Memset") else "kernels"
                setattr(self, kind, getattr(self, kind) + 1)
                if self.on_device and kind == "kernels":
                    self.by_op[name] += 1
            elif name.startswith(_GRAPH_CALL):
                self.graph_calls += 1
                if not self.on_device:
                    self.by_op["compiled graph"] += 1
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


def _inside_aten(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def count_launches(device: torch.device | str | None = None) -> LaunchCounter:
    """Context manager counting the launches of the block (module doc). `device` says which count is the
    headline `.total` (default: CUDA when present)."""
    return LaunchCounter(device)
