"""Peak memory of a block: the CUDA caching allocator on GPU, resident set size (RSS) on CPU.

    with peak_memory(device) as mem:
        run()
    mem.peak_bytes, mem.delta_bytes   # peak during the block; peak minus what was in use at entry

On CPU the peak comes from the kernel's high-water mark (VmHWM), reset at entry through
/proc/self/clear_refs; where that is not allowed a 1 ms sampling thread takes its place (and can miss
spikes shorter than that, which `.method` records).
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from pathlib import Path

import psutil
import torch


def _rss() -> int:
    return psutil.Process(os.getpid()).memory_info().rss


def _vm_hwm() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None


def _trim_heap() -> None:
    """Give the C heap's free pages back to the OS. Freed memory the allocator keeps is still resident:
    a block that reuses it would raise no high-water mark, and its peak would read as ~0."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # 5 = reset the peak RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


class PeakMemory:
    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.method = ""
        self.start_bytes = 0
        self.peak_bytes = 0
        self._stop = None

    @property
    def delta_bytes(self) -> int:
        return max(0, self.peak_bytes - self.start_bytes)

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            self.method = "cuda_allocator"
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start_bytes = torch.cuda.memory_allocated(self.device)
            return self
        _trim_heap()
        if _reset_hwm() and _vm_hwm() is not None:
            self.method = "rss_hwm"
            self.start_bytes = _rss()
        else:
            self.method = "rss_sampled"
            self.start_bytes = self.peak_bytes = _rss()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self.peak_bytes = max(self.peak_bytes, _rss())

    def __exit__(self, *exc) -> None:
        if self.method == "cuda_allocator":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device)
        elif self.method == "rss_hwm":
            self.peak_bytes = max(_vm_hwm() or 0, _rss())
        else:
            self._stop.set()
            self._thread.join()
            self.peak_bytes = max(self.peak_bytes, _rss())

    def __repr__(self) -> str:
        return (f"PeakMemory({self.method}: peak {self.peak_bytes / 2**20:.1f} MiB, "
                f"+{self.delta_bytes / 2**20:.1f} MiB over entry)")


def peak_memory(device: torch.device | str = "cpu") -> PeakMemory:
    """Context manager measuring the peak memory of the block on `device` (see module doc)."""
    return PeakMemory(device)


def device_memory(device: torch.device | str) -> dict:
    """Free and total memory of the device in bytes (CUDA: the driver's free memory after torch's caching allocator
    hands back the blocks it holds unused, which the driver counts as used; blocks in a live CUDA graph's private
    pool stay, since ordinary allocations cannot use them either; CPU: system RAM)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(dev)
        return {"free_bytes": free, "total_bytes": total}
    vm = psutil.virtual_memory()
    return {"free_bytes": vm.available, "total_bytes": vm.total}
