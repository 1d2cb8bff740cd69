"""CUDA graphs under torch.compile: which modes record them, and their outputs' lifetimes, seen on any device.

    uses_cudagraphs(compile, backend, device)   # the one place that says whether a compiled call replays a graph
    fn = tracked(torch.compile(f, **kw))        # where uses_cudagraphs: outputs follow the rule below under the check
    with check_lifetimes():                     # a test mode: on any device, reading a freed output raises
        search.score(candidates, batch)

The rule (torch's cudagraph trees: the "CUDAGraph Trees" page of the docs, `torch/_inductor/cudagraph_trees.py`):
- inductor records CUDA graphs in modes "reduce-overhead" and "max-autotune" (`torch._inductor.list_mode_options`:
  both set `triton.cudagraphs`), on CUDA only;
- a replay writes its outputs into a memory pool that the graphs of one *generation* share, and the first call of
  a CUDA-graph function in a new generation frees every output of the previous one: reading a freed output raises
  "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run" (`dealloc_current_path_weakrefs`);
- the generation (`CUDAGraphTreeManager.get_curr_generation`): once `torch.compiler.cudagraph_mark_step_begin()` has
  been called since the last `torch._dynamo.reset()`, it changes at each such call; before that, at every call of
  any torch.compile'd function (`GenerationTracker.generation`, counted by dynamo's frame entry). `reset()` zeroes
  both on CUDA (`reset_cudagraph_trees`), but the mark-step counter only where CUDA is available.
So within one generation a graph may read another's outputs (step 2 of a search reads step 1's); whatever must
outlive it is cloned, or written into a buffer of one's own, before the next generation starts.

`check_lifetimes()` applies that rule on any device: `uses_cudagraphs` then says yes for the two modes with any
backend (the eager backend compiles in no time on a CPU), `tracked` functions record their outputs' storages by
generation, and a torch-function mode makes any op that reads the storage of an output of an ended generation raise
the error a GPU raises (metadata such as `.shape` stays readable, as on a GPU). Outputs that alias an input (a
static buffer written in place and returned) are the caller's memory, not the pool's: never freed. Resets must go
through `perflab.compiles.reset()`, which tells the check (a CPU's `torch._dynamo.reset()` keeps the mark-step
counter that a GPU's zeroes).
"""
from __future__ import annotations

import contextlib
import functools

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")   # torch.compile modes whose inductor records CUDA graphs
NO_CUDAGRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}  # the same without

FREED = ("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run "
         "(perflab.cudagraphs.check_lifetimes: {what}). Clone the tensor outside of torch.compile() or call "
         "torch.compiler.cudagraph_mark_step_begin() before each model invocation.")

_CHECK: _Lifetimes | None = None   # the active check, if any


def checking() -> bool:
    """True inside `check_lifetimes()`."""
    return _CHECK is not None


def uses_cudagraphs(compile: str, backend: str, device) -> bool:
    """Whether a function compiled with this mode and backend replays CUDA graphs on `device`: inductor in
    reduce-overhead or max-autotune on CUDA; under `check_lifetimes()`, any backend on any device."""
    if compile not in CUDAGRAPH_MODES:
        return False
    return checking() or (backend == "inductor" and torch.device(device).type == "cuda")


def tracked(fn):
    """`fn` (a compiled function of a CUDA-graph mode) with its outputs' lifetimes checked, when built under
    `check_lifetimes()` (as `uses_cudagraphs` is asked when a step is built); `fn` itself otherwise: no cost."""
    if not checking():
        return fn

    @functools.wraps(fn, updated=())  # a compiled module's name and doc, not its attributes
    def call(*args, **kwargs):
        return _CHECK.call(fn, args, kwargs) if _CHECK is not None else fn(*args, **kwargs)
    return call


@contextlib.contextmanager
def check_lifetimes():
    """A CPU run that frees CUDA-graph outputs as a GPU run does (module doc). Not reentrant."""
    global _CHECK
    if _CHECK is not None:
        raise RuntimeError("check_lifetimes() is already active")
    _CHECK = _Lifetimes()
    try:
        with _CHECK:
            yield _CHECK
    finally:
        _CHECK = None


def note_reset() -> None:
    """`perflab.compiles.reset()` calls this: generations start again from every compiled call (module doc)."""
    if _CHECK is not None:
        _CHECK.marks_at_reset = _mark_steps()
        _CHECK.end_generation()


def _mark_steps() -> int:
    from torch._inductor.cudagraph_trees import MarkStepBox
    return MarkStepBox.mark_step_counter


def _calls() -> int:
    from torch._dynamo.mutation_guard import GenerationTracker
    return GenerationTracker.generation


def _storage(t) -> int | None:
    if not isinstance(t, torch.Tensor) or t.is_meta:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:  # sparse and other storage-less layouts
        return None


class _Lifetimes(TorchFunctionMode):
    """The state of one check: the current generation's outputs, and the freed ones (their storages held, so that
    no new tensor reuses their addresses while the check runs)."""

    def __init__(self):
        super().__init__()
        self.marks_at_reset = _mark_steps()
        self.generation = None      # the generation of the last tracked call
        self.live: dict = {}        # storage address -> (storage, what) of the current generation's outputs
        self.freed: dict = {}       # storage address -> (storage, what) of ended generations' outputs
        self.calls = 0              # tracked calls made
        self.generations = 0        # generations seen (each ended one freed its outputs)

    def current(self, calls_ahead: int = 0) -> tuple:
        marks = _mark_steps() - self.marks_at_reset
        return ("marked", marks) if marks != 0 else ("call", _calls() + calls_ahead)

    def end_generation(self) -> None:
        self.freed.update(self.live)
        self.live = {}
        self.generation = None

    def call(self, fn, args, kwargs):
        gen = self.current(calls_ahead=1)        # this call is one more compiled call (dynamo counts it on entry)
        if gen != self.generation:
            self.end_generation()
            self.generations += 1
        self._check(tree_leaves((args, kwargs)), f"an input of {getattr(fn, '__name__', 'a compiled function')}")
        inputs = {_storage(t) for t in tree_leaves((args, kwargs))}
        with torch._C.DisableTorchFunction():  # dynamo traces the function, not this mode
            out = fn(*args, **kwargs)
        self.calls += 1
        self.generation = self.current()
        name = getattr(fn, "__name__", "compiled function")
        for t in tree_leaves(out):
            ptr = _storage(t)
            if ptr is not None and ptr not in inputs:
                self.live[ptr] = (t.untyped_storage(), f"an output of {name}, call {self.calls}")
        return out

    def _check(self, leaves, where: str) -> None:
        for t in leaves:
            ptr = _storage(t)
            if ptr is not None and ptr in self.freed:
                raise RuntimeError(FREED.format(what=f"{where} is {self.freed[ptr][1]}, freed when a later generation began"))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # dynamo traces this mode into a graph it compiles: stay out of it
            return func(*args, **kwargs)
        if self.freed and getattr(func, "__name__", "") not in _METADATA:
            self._check(tree_leaves((args, kwargs)), f"a tensor read by {getattr(func, '__name__', func)}")
        return func(*args, **kwargs)


# what a GPU run can read of a freed output: its metadata, not its memory
_METADATA = {"__get__", "size", "dim", "numel", "stride", "storage_offset", "data_ptr", "untyped_storage",
             "is_contiguous", "element_size", "__len__", "__hash__"}
