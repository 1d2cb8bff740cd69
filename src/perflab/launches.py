"""Count the launches a call makes: device kernels on CUDA, dispatched aten ops on CPU.

A GPU step is launch-bound when the host needs longer to launch its kernels than the device needs to run
them; the cure is fewer launches (fusion, a compiled graph, a CUDA-graph replay). This counter says how many a
call makes, with the same interface as `perflab.syncs.count_host_syncs`:

    with count_launches() as launches:
        step(batch)
    print(launches.total, launches.by_op.most_common(5))

It runs the block under `torch.profiler` and reads its events:
- on CUDA, `.kernels` counts the device kernels the profiler saw (one per launch, CUDA-graph replays included)
  and `.total` is that count; `.runtime_launches` counts the host's launch calls (cudaLaunchKernel,
  cudaGraphLaunch, memcpy/memset), so a captured step shows many kernels for one launch;
- on CPU there are no kernels to see, so `.total` is the proxy a CPU can see: the aten ops dispatched from
  Python or from a compiled graph (ops nested inside another aten op are not counted again; each would be
  at least one kernel in eager CUDA), plus one per compiled-graph call (`.graph_calls`; the kernels inductor
  fused inside are invisible on CPU). The CPU count is thus a proxy for host work per step, not a kernel count.
Counting costs time (the profiler is on): count in one call, time in another.
"""
from __future__ import annotations

import collections
import os

import torch
from torch.profiler import ProfilerActivity, profile

_RUNTIME_LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cudaGraphLaunch",
                     "cudaMemcpyAsync", "cudaMemsetAsync", "cudaLaunchCooperativeKernel")
_GRAPH_CALL = "## Call CompiledFxGraph"


class LaunchCounter:
    """Result of `count_launches()`: `.total`, `.by_op` (a Counter of kernel or op names) and the parts."""

    def __init__(self, device: torch.device | str | None = None):
        dev = torch.device(device) if device is not None else \
            torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.device_type = dev.type
        self.kernels = 0            # device kernels (CUDA)
        self.runtime_launches = 0   # host launch calls into the CUDA runtime (CUDA)
        self.aten_ops = 0           # top-level aten ops dispatched (any device)
        self.graph_calls = 0        # compiled-graph calls (torch.compile)
        self.by_op: collections.Counter[str] = collections.Counter()
        self._prof = None

    @property
    def total(self) -> int:
        """Kernels on CUDA; on CPU the proxy: top-level aten ops plus compiled-graph calls (module doc)."""
        return self.kernels if self.device_type == "cuda" else self.aten_ops + self.graph_calls

    @property
    def what(self) -> str:
        return "CUDA kernels" if self.device_type == "cuda" else "aten ops + compiled-graph calls (CPU proxy)"

    def __enter__(self) -> LaunchCounter:
        # kineto writes two "USDT ... profiler_start/stop" lines to stderr per profile (into every notebook
        # cell that counts) unless its log level says otherwise; it reads the level once, at its first profile
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device_type == "cuda" else [])
        if self.device_type == "cuda":
            torch.cuda.synchronize()  # work queued before the block is not this block's
        self._prof = profile(activities=activities)
        self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize()  # kernels still queued at the end of the block are the block's
        self._prof.__exit__(*exc)
        if exc[0] is None:
            self._read(self._prof.events())

    def _read(self, events) -> None:
        for e in events:
            name = e.name
            if e.device_type == torch.autograd.DeviceType.CUDA:
                self.kernels += 1
                if self.device_type == "cuda":
                    self.by_op[name] += 1
            elif name.startswith(_GRAPH_CALL):
                self.graph_calls += 1
                if self.device_type != "cuda":
                    self.by_op["compiled graph"] += 1
            elif name in _RUNTIME_LAUNCHES:
                self.runtime_launches += 1
            elif name.startswith("aten::") and not _inside_aten(e):
                self.aten_ops += 1
                if self.device_type != "cuda":
                    self.by_op[name] += 1

    def as_dict(self) -> dict:
        return {"total": self.total, "what": self.what, "kernels": self.kernels,
                "runtime_launches": self.runtime_launches, "aten_ops": self.aten_ops, "graph_calls": self.graph_calls}

    def __repr__(self) -> str:
        return f"LaunchCounter(total={self.total} {self.what}, top={self.by_op.most_common(3)})"


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
