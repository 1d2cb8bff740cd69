"""Devices and environment stamps.

`pick_device` turns a user's device string into a `torch.device` (or a clear error), and
`fingerprint` records what a number was measured on: torch, CUDA, device name, host, git commit, time.
"""
from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import re
import socket
import subprocess
from pathlib import Path

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


def pick_device(spec: str | torch.device = "auto") -> torch.device:
    """Return the device asked for, or raise ValueError saying why it is not there.

    "auto" picks CUDA when present, else CPU. "cuda" and "cuda:N" require a visible CUDA device.
    """
    if isinstance(spec, torch.device):
        spec = str(spec)
    if not isinstance(spec, str):
        raise ValueError(f"device must be a string like {DEVICE_CHOICES}, got {spec!r}")
    s = spec.strip().lower()
    if s == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if s == "cpu":
        return torch.device("cpu")
    if s == "cuda" or s.startswith("cuda:"):
        if not torch.cuda.is_available():
            built = f"torch {torch.__version__} built " + (
                f"with CUDA {torch.version.cuda}" if torch.version.cuda else "without CUDA (a CPU build)")
            raise ValueError(f"device {spec!r} was asked for but no CUDA device is visible here ({built}); "
                             "use device='cpu' or 'auto', or install a CUDA build of torch (see docs/gpu-hosts.md)")
        dev = torch.device(s)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {spec!r} was asked for but only {torch.cuda.device_count()} CUDA "
                             f"device(s) are visible (cuda:0..cuda:{torch.cuda.device_count() - 1})")
        return dev
    if s == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ValueError("device 'mps' was asked for but MPS is not available here")
        return torch.device("mps")
    raise ValueError(f"unknown device {spec!r}: expected one of {', '.join(DEVICE_CHOICES)}")


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait for queued work on `device`. On CPU there is nothing to wait for, but the call is still
    counted by `perflab.kit.syncs.count_host_syncs`, so sync counts are the same on every device."""
    from .syncs import note_sync

    dev = torch.device(device) if device is not None else pick_device("auto")
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # counted by the counter's wrapper
    else:
        note_sync("synchronize")


def device_name(device: torch.device | str | None = None) -> str:
    """Human-readable name: the GPU model for CUDA, the CPU model otherwise."""
    dev = torch.device(device) if device is not None else pick_device("auto")
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return _cpu_model()


def device_kind(device: torch.device | str | None = None) -> str:
    """Short tag for output folders: 'h100', 'h200', 'a100', ... for GPUs, the device type otherwise."""
    dev = torch.device(device) if device is not None else pick_device("auto")
    if dev.type != "cuda":
        return dev.type
    name = torch.cuda.get_device_name(dev).lower()
    for tag in ("h200", "h100", "a100", "l40s", "a10g", "v100", "t4"):
        if tag in name:
            return tag
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=4)
def git_commit(root: str | None = None) -> dict:
    """The commit of the perflab checkout at `root` (default: the repo perflab runs from) and whether it is dirty.

    Only a repository that tracks this checkout's files counts: a copy of the tree without `.git` placed inside
    another repository (a GPU host's work folder) must not be stamped with that repository's commit. There it comes from
    $PERFLAB_COMMIT (`tools/gpu-session.sh` sets it from the commit the copy was made of: "<sha>" or "<sha>-dirty"),
    else it is unknown (None). $PERFLAB_COMMIT_AT_START, where set ("<sha>" or "<sha>-dirty"), is the state of the tree
    before a command that rewrites its own files began (`perflab refresh` writes each notebook back in place: without
    it, every notebook after the first read its predecessor's rewrite as a dirty tree)."""
    from .paths import repo_root

    at_start = os.environ.get("PERFLAB_COMMIT_AT_START", "").strip()
    if re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", at_start):
        return {"commit": at_start.removesuffix("-dirty"), "dirty": at_start.endswith("-dirty")}
    cwd = Path(root or repo_root()).resolve()
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "pyproject.toml"], cwd=cwd,
                                 capture_output=True, text=True, timeout=10)
        if tracked.returncode == 0:
            sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                   capture_output=True, text=True, timeout=10).stdout.strip() != ""
            return {"commit": sha, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        pass
    given = os.environ.get("PERFLAB_COMMIT", "").strip()
    if re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", given):
        return {"commit": given.removesuffix("-dirty"), "dirty": given.endswith("-dirty")}
    return {"commit": None, "dirty": None}


def host_stamp() -> dict:
    """Where and when, without touching any device: time, host, Python, platform, torch, git commit. The runner
    stamps its status rows with it (a CUDA context in the runner would hold GPU memory the notebook needs)."""
    return {
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torch": torch.__version__,
        **git_commit(),
    }


def fingerprint(device: torch.device | str | None = None) -> dict:
    """What a result was measured on. Stamped on every row of a ResultsLog."""
    dev = pick_device(device if device is not None else "auto")
    fp = {
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": str(dev),
        "device_name": device_name(dev),
        "device_kind": device_kind(dev),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        fp.update(gpu_count=torch.cuda.device_count(), gpu_memory_bytes=props.total_memory,
                  gpu_sm_count=props.multi_processor_count, cudnn=torch.backends.cudnn.version())
    fp.update(git_commit())
    return fp
