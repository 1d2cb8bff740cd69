"""Count device-to-host synchronizations, on any device.

A host sync is a point where Python must wait for the device: reading a value (`.item()`,
`.tolist()`, `float(t)`, `if t:`), copying to the host (`.cpu()`, `.numpy()`), an op whose output
size depends on the data (`torch.unique`, `nonzero`, boolean-mask indexing, `repeat_interleave`
without `output_size`), or a blocking copy *from* the host. On a GPU each one stalls the launch queue; on
a CPU they cost little, which is why they go unnoticed until a run moves to a GPU. This counter sees the
*calls*, so it counts them the same on CPU and GPU and CI can assert that a hot loop is sync-free:

    with count_host_syncs(device) as syncs:
        step(batch)
    assert syncs.total == 0, syncs.by_op

Copies from the host are counted as a GPU run makes them, on every device (`device` is the compute
device the block runs on; default: CUDA when present, else the CPU):
- a tensor built from Python data on a device (`torch.tensor(list, device=d)`, `torch.as_tensor`,
  `t.new_tensor(list)`) is a copy from pageable host memory, which CUDA runs as memcpy + stream synchronize:
  "tensor(host list) -> device";
- a move of a host tensor to the compute device (`.to(device)`, `.to(other)`, `.cuda()`, `copy_` into a
  device tensor) blocks unless it is `non_blocking=True` *from pinned memory* (from pageable memory CUDA
  synchronizes the stream before the copy, non_blocking or not): "to(device) from host". On a CPU run the
  compute device is the host, so `.to(device)` of a CPU tensor is that same call: it counts as the copy a GPU
  run makes (a `.to(device)` of data already on the device counts too: keep such no-ops out of hot loops).
  Pinned memory cannot exist without an accelerator, so `pin_memory(t)` marks the tensor instead there, and
  the counter reads the mark as a GPU host reads the page lock: the same code pins for real on a GPU.
  A `copy_` between two CPU tensors is not counted on a CPU run (host and device are one memory there);
  `count_host_operands()` on the meta device sees those.

`sites=True` also records where each sync was made: `.by_site` counts (op, stack) pairs, the stack being the user's
frames of the call (`perflab.kit.frames.user_stack`: innermost first, outside torch and the kit), so a report can name
the line (`.sites()`: {(op, innermost Site): count}). It costs a walk up the frames per sync, nothing per other call.
A read that torch's optimizers make of their step counters (0-d host tensors unless `capturable` or `fused`, so no
device sync on a GPU either: `torch.optim.optimizer._get_value`), or that a DataLoader's sampler makes
(`torch.randperm(n).tolist()`: the data side, before any copy to the device), is kept apart, in `.host_reads`, not in
`.by_site` (`.by_op` and `.total` count it as before).

It is a `TorchFunctionMode`: it sees calls made in eager mode, not inside a compiled graph. On CUDA,
`cuda_debug=True` also turns on `torch.cuda.set_sync_debug_mode("warn")` and counts the warnings
"called a synchronizing CUDA operation" that torch raises (`.cuda_debug_warnings`), a second opinion
from below the Python calls. Only those count: the first `set_sync_debug_mode` call of a process also
warns "Synchronization debug mode is a prototype feature and does not yet detect all synchronizing
operations", which is not a sync (the counter before this fix counted it: the one "sync" the H100 run
of the prover's `derive` reported).

`count_host_operands()` is the CPU-side check for the same class on a device: run the code on the `meta`
device (a device without data, which, like CUDA, keeps a Python scalar a scalar) and it counts the
dispatched ops that take a host tensor as an operand, i.e. the copies from the host a CUDA run would make;
any value read back (`.item()`, `nonzero`) raises there.
"""
from __future__ import annotations

import collections
import os
import sys
import warnings

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .frames import Site, calling_frame, user_stack

T = torch.Tensor

# Calls that always wait for the value on the host.
_ALWAYS = {
    T.item: "item", T.tolist: "tolist", T.cpu: "cpu", T.numpy: "numpy",
    T.__bool__: "__bool__", T.__float__: "__float__", T.__int__: "__int__", T.__index__: "__index__",
    T.__complex__: "__complex__", T.__repr__: "__repr__", T.__format__: "__format__",
    T.__array__: "__array__",
    torch.unique: "unique", T.unique: "unique", torch.unique_consecutive: "unique_consecutive",
    T.unique_consecutive: "unique_consecutive",
    torch.nonzero: "nonzero", T.nonzero: "nonzero", torch.argwhere: "argwhere", T.argwhere: "argwhere",
    torch.masked_select: "masked_select", T.masked_select: "masked_select",
    torch.bincount: "bincount", T.bincount: "bincount",
    torch.equal: "equal", T.equal: "equal", torch.allclose: "allclose", T.allclose: "allclose",
    torch.is_nonzero: "is_nonzero", T.is_nonzero: "is_nonzero",
}
for _name in ("_unique", "_unique2"):
    if hasattr(torch, _name):
        _ALWAYS[getattr(torch, _name)] = "unique"


def _has_bool_index(index) -> bool:
    idx = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, T) and i.dtype == torch.bool for i in idx)


def _target(args, kwargs) -> torch.device | None:
    """The device a Tensor.to(...) call names (its first argument: a device, a device index or another tensor; or
    device=...), or None when it names none (a dtype only)."""
    target = args[1] if len(args) > 1 else kwargs.get("device")
    if isinstance(target, T):
        return target.device
    if not isinstance(target, (str, torch.device, int)) or isinstance(target, bool):
        return None
    try:
        return torch.device(target)  # an int is a device index: the accelerator's
    except RuntimeError:  # an index on a host without an accelerator: the call itself will refuse it
        return None


# Tensors built from Python data: on a device, a blocking copy from pageable host memory.
_FROM_HOST_DATA = {torch.tensor, torch.as_tensor, torch.asarray}


def _host_data(args, kwargs, pos: int) -> bool:
    """Whether a tensor-building call's data (args[pos], or data=/obj= by keyword) is host data, not a tensor."""
    data = args[pos] if len(args) > pos else kwargs.get("data", kwargs.get("obj"))
    return data is not None and not isinstance(data, T)


def is_pinned(t: T) -> bool:
    """Page-locked host memory, or a tensor `pin_memory` marked on a host that cannot pin (module doc)."""
    return bool(getattr(t, "_perflab_pinned", False)) or t.is_pinned()


def pin_memory(t: T) -> T:
    """`t` in page-locked memory, so `.to(device, non_blocking=True)` really is asynchronous. A host without
    an accelerator cannot pin (torch raises): there `t` comes back as a view marked pinned, which the sync
    counter reads as the page lock a GPU host would have made (module doc)."""
    if torch.accelerator.is_available():
        return t.pin_memory()
    view = t.view_as(t)
    view._perflab_pinned = True
    return view


def _blocking(src: T, non_blocking: bool) -> bool:
    return not (non_blocking and is_pinned(src))


def _moves_to(src: T, target: torch.device | None, compute: torch.device) -> bool:
    """Does a copy of host tensor `src` to `target` cross to the compute device (module doc)?"""
    if src.device.type != "cpu" or target is None:
        return False
    if target.type == "cpu":
        return compute.type == "cpu"   # a CPU run: the host is the compute device, the call is the GPU run's copy
    return target.type != "meta"        # meta has no memory: count_host_operands covers it


def _non_blocking(args, kwargs, pos: int) -> bool:
    """The `non_blocking` of a call whose positional non_blocking is args[pos] (copy=... may follow it)."""
    return bool(kwargs.get("non_blocking") or (len(args) > pos and args[pos] is True))


def _to_non_blocking(args, kwargs) -> bool:
    """Tensor.to(device, dtype, non_blocking, copy) | to(dtype, non_blocking, copy) | to(other, non_blocking, copy)."""
    named_device = len(args) > 1 and not isinstance(args[1], (torch.dtype, T))
    return _non_blocking(args, kwargs, 3 if named_device else 2)


def _classify(func, args, kwargs, compute: torch.device) -> str | None:
    """Name of the sync this call causes on a run whose compute device is `compute`, or None."""
    name = _ALWAYS.get(func)
    if name is not None:
        return name
    if func in _FROM_HOST_DATA and kwargs.get("device") is not None and _host_data(args, kwargs, 0):
        return "tensor(host list) -> device"
    if func is T.new_tensor and _host_data(args, kwargs, 1):   # data given by keyword too
        return "tensor(host list) -> device"
    if func in (T.__getitem__, T.__setitem__) and len(args) > 1 and _has_bool_index(args[1]):
        return f"{func.__name__}[bool mask]"
    if func in (torch.repeat_interleave, T.repeat_interleave):
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats", args[0] if len(args) == 1 else None)
        # a tensor of repeats, any size (one element too: the output's size is its value times the input's):
        # the output's size is read from the device unless output_size gives it
        if isinstance(repeats, T) and kwargs.get("output_size") is None:
            return "repeat_interleave"
        return None
    if func in (torch.where, T.where) and len(args) == 1 and not kwargs:
        return "where(cond)"
    if func in (T.index_put_, T.index_put, torch.index_put) and any(   # the indices by position or keyword
            isinstance(i, T) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else kwargs.get("indices", ()))):
        return "index_put[bool mask]"
    if func is T.to and args and isinstance(args[0], T):
        target = _target(args, kwargs)
        if _moves_to(args[0], target, compute):
            return "to(device) from host" if _blocking(args[0], _to_non_blocking(args, kwargs)) else None
        if args[0].device.type != "cpu" and target is not None and target.type == "cpu":
            return "to(cpu)"
        return None
    if func is T.cuda and args and isinstance(args[0], T) and args[0].device.type == "cpu":
        return "to(device) from host" if _blocking(args[0], _non_blocking(args, kwargs, 2)) else None
    source = args[1] if len(args) > 1 else kwargs.get("src")   # the source by position or keyword
    if func is T.copy_ and args and isinstance(source, T):
        dst, src = args[0].device.type, source.device.type
        if dst == "cpu" and src != "cpu":
            return "copy_(to cpu)"
        if src == "cpu" and dst not in ("cpu", "meta") and _blocking(source, _non_blocking(args, kwargs, 2)):
            return "copy_(from host)"
    return None


def is_sync_warning(message) -> bool:
    """A warning CUDA's sync debug mode raises for a synchronizing call (not its one-time prototype notice)."""
    return "called a synchronizing" in str(message).lower()


_ACTIVE: list[HostSyncCounter] = []
_OPTIM = os.sep + os.path.join("torch", "optim") + os.sep
_DATA = os.sep + os.path.join("torch", "utils", "data") + os.sep


def _host_side(args, frame) -> bool:
    """A read torch makes of a tensor that a GPU run keeps on the host too (module doc): an optimizer's step counter
    (a 0-d host tensor read from torch/optim), a DataLoader's sampler or collate (torch/utils/data: before any copy
    to the device)."""
    t = args[0] if args and isinstance(args[0], T) else None
    if t is None or t.device.type != "cpu":
        return False
    file = frame.f_code.co_filename
    return (t.dim() == 0 and _OPTIM in file) or _DATA in file


def note_sync(name: str) -> None:
    """Record a sync that torch cannot see (e.g. `perflab.kit.env.synchronize` on CPU, a barrier) in every
    active counter, so counts stay the same on CPU and GPU."""
    for c in _ACTIVE:
        c.by_op[name] += 1
        if c.record_sites:
            c.record(name, calling_frame(sys._getframe(1)))


class _SyncMode(TorchFunctionMode):
    def __init__(self, counter: HostSyncCounter):
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _classify(func, args, kwargs, self.counter.device)
        if name is not None:
            self.counter.by_op[name] += 1
            if self.counter.record_sites and not torch.compiler.is_compiling():
                caller = calling_frame(sys._getframe(1))
                self.counter.record(name, caller, _host_side(args, caller))
        return func(*args, **kwargs)


class HostSyncCounter:
    """Result of `count_host_syncs()`: `.total` and `.by_op` (a Counter of sync kinds); with `sites=True`, `.by_site`
    (a Counter of (kind, user stack)) and `.sites()`."""

    def __init__(self, device: torch.device | str | None = None, cuda_debug: bool | None = None, sites: bool = False):
        # the default is env.pick_device("auto"), written out: env.synchronize reports to this module
        self.device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        self.by_op: collections.Counter[str] = collections.Counter()
        self.record_sites = sites
        self.by_site: collections.Counter[tuple[str, tuple[Site, ...]]] = collections.Counter()
        self.host_reads: collections.Counter[tuple[str, tuple[Site, ...]]] = collections.Counter()  # optimizers'
        self.callers: dict = collections.defaultdict(collections.Counter)   # key -> {(file, line) of the call: n}
        # CUDA's own second opinion (sync debug mode): on by default where the compute device is CUDA
        self.cuda_debug = (self.device.type == "cuda" if cuda_debug is None else cuda_debug) and torch.cuda.is_available()
        self.cuda_debug_warnings = 0
        self._mode = _SyncMode(self)
        self._sync_fn = None
        self._warn_ctx = None
        self._prev_debug_mode = None

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    def record(self, name: str, caller, host_side: bool = False) -> None:
        """One sync of kind `name` made from frame `caller` (with sites): its user stack, and the exact line that
        made it (`.callers`: library or not, where the time of the call itself is spent)."""
        key = (name, user_stack(caller))
        (self.host_reads if host_side else self.by_site)[key] += 1
        self.callers[key][(caller.f_code.co_filename, caller.f_lineno)] += 1

    def sites(self) -> collections.Counter[tuple[str, Site | None]]:
        """{(kind, the innermost user frame or None): count} (with `sites=True`)."""
        out: collections.Counter = collections.Counter()
        for (name, stack), n in self.by_site.items():
            out[(name, stack[0] if stack else None)] += n
        return out

    def __enter__(self) -> HostSyncCounter:
        self._patch_cuda_synchronize()
        if self.cuda_debug:
            self._warn_ctx = warnings.catch_warnings(record=True)
            self._records = self._warn_ctx.__enter__()
            warnings.simplefilter("always")
            self._prev_debug_mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")
        self._mode.__enter__()
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.remove(self)
        self._mode.__exit__(*exc)
        if self.cuda_debug:
            torch.cuda.set_sync_debug_mode(self._prev_debug_mode)
            self.cuda_debug_warnings = sum(is_sync_warning(r.message) for r in self._records)
            self._warn_ctx.__exit__(*exc)
        torch.cuda.synchronize = self._sync_fn

    def _patch_cuda_synchronize(self) -> None:
        # torch.cuda.synchronize is not a torch function, so the mode cannot see it; wrap it for the
        # duration of the block only (restored in __exit__).
        self._sync_fn = orig = torch.cuda.synchronize

        def counted_synchronize(*a, **k):
            self.by_op["synchronize"] += 1
            if self.record_sites:
                self.record("synchronize", calling_frame(sys._getframe(1)))
            if torch.cuda.is_available():
                return orig(*a, **k)

        torch.cuda.synchronize = counted_synchronize

    def __repr__(self) -> str:
        return f"HostSyncCounter(total={self.total}, by_op={dict(self.by_op)})"


def count_host_syncs(device: torch.device | str | None = None, cuda_debug: bool | None = None,
                     sites: bool = False) -> HostSyncCounter:
    """Context manager counting device-to-host synchronizations inside the block (see module doc); `device`
    is the compute device the block runs on (default: CUDA when present, else the CPU); `cuda_debug` (default:
    when that device is CUDA) adds CUDA's sync debug mode's warnings (`.cuda_debug_warnings`); `sites` records the
    user's line of each sync (`.by_site`, `.sites()`).

    `torch.cuda.synchronize()` and `perflab.kit.env.synchronize(device)` are counted as "synchronize" on
    every device (the former is a no-op inside the block on a CPU-only host).
    """
    return HostSyncCounter(device, cuda_debug=cuda_debug, sites=sites)


class HostSyncError(AssertionError):
    pass


class assert_no_host_syncs(HostSyncCounter):
    """Like `count_host_syncs()`, but raises HostSyncError at the end of the block if any sync happened."""

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if exc[0] is None and self.total:
            raise HostSyncError(f"{self.total} host sync(s) inside a block that must have none: {dict(self.by_op)}")


class HostOperandCounter:
    """Result of `count_host_operands()`: `.total` and `.by_op` (a Counter of aten ops given a host tensor)."""

    def __init__(self):
        self.by_op: collections.Counter[str] = collections.Counter()
        self._mode = _HostOperandMode(self)

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    def __enter__(self) -> HostOperandCounter:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)

    def __repr__(self) -> str:
        return f"HostOperandCounter(total={self.total}, by_op={dict(self.by_op)})"


class _HostOperandMode(TorchDispatchMode):
    def __init__(self, counter: HostOperandCounter):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, T)]
        if any(a.device.type == "cpu" for a in flat) and any(a.device.type != "cpu" for a in flat):
            self.counter.by_op[str(func.overloadpacket.__name__)] += 1
        return func(*args, **kwargs)


def count_host_operands() -> HostOperandCounter:
    """Context manager counting dispatched ops that mix a host tensor into work on another device (module
    doc): run the block's tensors on "meta" (CPU CI) or "cuda". On meta a value read back raises."""
    return HostOperandCounter()
