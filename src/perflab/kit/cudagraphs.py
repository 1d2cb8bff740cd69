"""CUDA graphs under torch.compile: which modes record them, and their outputs' lifetimes, seen on any device.

    uses_cudagraphs(compile, backend, device)   # the one place that says whether a compiled call replays a graph
    fn = tracked(torch.compile(f, **kw))        # where uses_cudagraphs: outputs follow the rule below under the check
    with check_lifetimes():                     # a test mode: on any device, reading an ended generation's output raises
        search.score(candidates, batch)

The rule (torch's cudagraph trees: the "CUDAGraph Trees" page of the docs, `torch/_inductor/cudagraph_trees.py`):
- inductor records CUDA graphs in modes "reduce-overhead" and "max-autotune" (`torch._inductor.list_mode_options`:
  both set `triton.cudagraphs`), on CUDA only;
- the graphs of one *generation* write their outputs into a memory pool they share; what the next generation does
  to the old outputs depends on the state of the path it runs. While a path is warming up or being recorded (its first
  generations), the first call of a CUDA-graph function in a new generation frees every output of the previous one,
  and reading one raises "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run"
  (`dealloc_current_path_weakrefs`). Once the path is recorded, a replay frees nothing: it returns the same tensors
  and writes the new values into the memory the old outputs still point at (`try_end_curr_execution`; the cached
  TensorImpls of `CUDAGraphNode`), so a stale output silently holds a later replay's values, or another path's. On a
  GPU a lifetime bug raises only in the first generations and gives wrong numbers ever after: a GPU test of a
  CUDA-graph path compares values with eager, not only "no error";
- the generation (`CUDAGraphTreeManager.get_curr_generation`): once `torch.compiler.cudagraph_mark_step_begin()` has
  been called since the last `torch._dynamo.reset()`, it changes at each such call; before that, at every call of
  any torch.compile'd function (`GenerationTracker.generation`, counted by dynamo's frame entry), except that without
  a mark a generation does not end while a forward's backward is pending. `reset()` zeroes both on CUDA
  (`reset_cudagraph_trees`), but the mark-step counter only where CUDA is available.
So within one generation a graph may read another's outputs (step 2 of a search reads step 1's); whatever must
outlive it is cloned, or written into a buffer of one's own, before the next generation starts. That includes what
autograd keeps: a training forward's saved activations are outputs of its forward graph, in the pool, so its
backward must run in the generation of its forward (one mark per optimizer step, not per micro-batch).

`check_lifetimes()` applies that rule on any device, and is stricter than a GPU: it treats every ended generation's
outputs as freed (a GPU raises only for a path's first generations). `uses_cudagraphs` then says yes for the two
modes with any backend (the eager backend compiles in no time on a CPU), `tracked` functions record their outputs'
storages by generation, and a torch-function mode makes any op that reads the storage of an output of an ended
generation raise the error a GPU raises (metadata such as `.shape` stays readable, as on a GPU). Outputs that alias
an input (a static buffer written in place and returned) are the caller's memory, not the pool's: never freed.
Tensors autograd saves during a tracked call (`torch.autograd.graph.saved_tensors_hooks` around it), other than the
call's inputs and the compiled module's parameters and buffers, are the pool's too: a backward that unpacks one after
its generation ended raises (a micro-batch's forward, a mark, then the backward of both). A tracked compiled
module's gradients are its backward's outputs, pool memory of the backward's generation (AccumulateGrad steals them
into `.grad`): accumulating into one after its generation ended raises, and so does reading it (an optimizer step
after the next mark, `zero_grad(set_to_none=False)` across a mark). Resets must go through
`perflab.kit.compiles.reset()`, which tells the check (a CPU's `torch._dynamo.reset()` keeps the mark-step counter that a
GPU's zeroes).

What the check cannot see (blind spots; a `-m gpu` test comparing values with eager covers them,
`tests/gpu/test_cuda_branches.py` lists those tests):
- reads outside Python torch functions: autograd's engine reading anything but the saved tensors and gradients
  above, C++ extensions, `.data_ptr()` / `.untyped_storage()` users (metadata to the check);
- the backward of a compiled *function* (not a module): gradients of the tensors it closes over, and the gradients
  its backward returns to the caller's leaves, are not tracked; saved tensors are, for modules and functions alike;
- on a CPU autograd saves what the eager backend's ops save, where inductor's AOTAutograd saves its own choice of
  activations: the same rule, other tensors (a lifetime bug shows either way, being about the backward's timing);
- code it does not track: compiled functions not wrapped in `tracked()`, or built before the check began (they run
  unchecked), and reads inside another compiled function (the mode stands aside while dynamo traces);
- the rest of the trees' rules: recording's liveness invariant (a parent output that died while recording must be
  dead at replay), static-input addresses, the skips for mutated or CPU inputs.
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
         "(perflab.kit.cudagraphs.check_lifetimes: {what}). Clone the tensor outside of torch.compile() or call "
         "torch.compiler.cudagraph_mark_step_begin() before each model invocation.")

_CHECK: _Lifetimes | None = None   # the active check, if any
ASKED = [0]   # times uses_cudagraphs was asked about a CUDA-graph mode: a step built so may replay graphs (diagnose)


def checking() -> bool:
    """True inside `check_lifetimes()`."""
    return _CHECK is not None


def uses_cudagraphs(compile: str, backend: str, device) -> bool:
    """Whether a function compiled with this mode and backend replays CUDA graphs on `device`: inductor in
    reduce-overhead or max-autotune on CUDA; under `check_lifetimes()`, any backend on any device."""
    if compile not in CUDAGRAPH_MODES:
        return False
    ASKED[0] += 1
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
        _CHECK.close()
        _CHECK = None


def note_reset() -> None:
    """`perflab.kit.compiles.reset()` calls this: generations start again from every compiled call (module doc)."""
    if _CHECK is not None:
        _CHECK.marks_at_reset = _mark_steps()
        _CHECK.end_generation()


def _mark_steps() -> int:
    from torch._inductor.cudagraph_trees import MarkStepBox
    return MarkStepBox.mark_step_counter


def _calls() -> int:
    from torch._dynamo.mutation_guard import GenerationTracker
    return GenerationTracker.generation


def _name(fn) -> str:
    """A compiled function's name, or its module's class (torch.compile of a module: an OptimizedModule)."""
    if isinstance(fn, torch.nn.Module):
        return type(getattr(fn, "_orig_mod", fn)).__name__
    return getattr(fn, "__name__", "compiled function")


def _storage(t) -> int | None:
    if not isinstance(t, torch.Tensor) or t.is_meta:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:  # sparse and other storage-less layouts
        return None


class _Lifetimes(TorchFunctionMode):
    """The state of one check: the current generation's outputs, and the freed ones (their storages held, so that
    no new tensor reuses their addresses while the check runs); autograd's saved tensors of tracked calls, by the
    epoch (count of ended generations) they were saved in."""

    def __init__(self):
        super().__init__()
        self.marks_at_reset = _mark_steps()
        self.generation = None      # the generation of the last tracked call
        self.live: dict = {}        # storage address -> (storage, what) of the current generation's outputs
        self.freed: dict = {}       # storage address -> (storage, what) of ended generations' outputs
        self.calls = 0              # tracked calls made
        self.generations = 0        # generations seen (each ended one freed its outputs)
        self.epoch = 0              # generations ended (by a new one or a reset)
        self.saved = 0              # tensors saved for backward inside tracked calls (pool memory on a GPU)
        self.pending_backward = False  # a forward of the current generation awaits its backward
        self.grad_hooks: dict = {}  # id(parameter) -> its post-accumulate-grad hook's handle

    def current(self, calls_ahead: int = 0) -> tuple:
        marks = _mark_steps() - self.marks_at_reset
        return ("marked", marks) if marks != 0 else ("call", _calls() + calls_ahead)

    def end_generation(self) -> None:
        self.freed.update(self.live)
        self.live = {}
        self.generation = None
        self.epoch += 1
        self.pending_backward = False

    def call(self, fn, args, kwargs):
        gen = self.current(calls_ahead=1)        # this call is one more compiled call (dynamo counts it on entry)
        # without a mark, torch keeps a generation open while a forward's backward is pending (module doc)
        if gen != self.generation and not (gen[0] == "call" and self.pending_backward):
            self.end_generation()
            self.generations += 1
        name = _name(fn)
        self._check(tree_leaves((args, kwargs)), f"an input of {name}")
        inputs = {_storage(t) for t in tree_leaves((args, kwargs))}
        with torch._C.DisableTorchFunction(), self._saving(fn, inputs, name):  # dynamo traces the function, not this mode
            out = fn(*args, **kwargs)
        self.calls += 1
        self.generation = self.current()
        for t in tree_leaves(out):
            ptr = _storage(t)
            if ptr is not None and ptr not in inputs:
                self.live[ptr] = (t.untyped_storage(), f"an output of {name}, call {self.calls}")
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:   # a forward whose backward is pending
                self.pending_backward = True
                t.grad_fn.register_prehook(self._backward_ran)
        return out

    def _backward_ran(self, grad_outputs):
        self.pending_backward = False

    def _saving(self, fn, inputs: set, name: str):
        """autograd's saved tensors of this call, tagged with the epoch; unpacked after it ended: the GPU's error."""
        if not (torch.is_grad_enabled() and torch._C._autograd._saved_tensors_hooks_is_enabled()):
            return contextlib.nullcontext()
        outside = set(inputs)  # the caller's memory: the inputs, and a compiled module's parameters and buffers
        if isinstance(fn, torch.nn.Module):
            outside |= {_storage(t) for t in (*fn.parameters(), *fn.buffers())}
            self._watch_grads(fn, name)
        call = self.calls + 1

        def pack(t):
            if _storage(t) in outside:
                return t, None
            self.saved += 1
            return t, self.epoch

        def unpack(packed):
            t, epoch = packed
            if epoch is not None and epoch != self.epoch:
                raise RuntimeError(FREED.format(what=f"a tensor autograd saved in {name}, call {call}, read by the "
                                                     "backward after a later generation began"))
            return t

        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def _watch_grads(self, module, name: str) -> None:
        """A compiled module's gradients are its backward graph's outputs: pool memory of the backward's generation,
        which AccumulateGrad steals into `.grad`. Accumulating into one of an ended generation raises (as on a GPU,
        where it was freed); reading one later, e.g. by the optimizer, raises through the mode."""
        def accumulated(p):
            ptr = _storage(p.grad)
            if ptr in self.freed:
                raise RuntimeError(FREED.format(what=f"a gradient of {name} accumulated into {self.freed[ptr][1]}, "
                                                     "freed when a later generation began"))
            if ptr is not None and ptr not in self.live:
                self.live[ptr] = (p.grad.untyped_storage(), f"a gradient of {name}'s parameters (its backward)")

        for p in module.parameters():
            if p.requires_grad and id(p) not in self.grad_hooks:
                self.grad_hooks[id(p)] = p.register_post_accumulate_grad_hook(accumulated)

    def close(self) -> None:
        for handle in self.grad_hooks.values():
            handle.remove()
        self.grad_hooks = {}

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
