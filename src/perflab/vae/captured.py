"""The captured training step: the optimized step's math, launched by the host once per step.

    log = train_epoch(model, batches, optimizer=make_optimizer(model, capturable=True))   # the version, one epoch
    step = CapturedStep(model, optimizer, Captured(optimized.step_config()))              # kept across epochs
    log = step.epoch(batches)          # one graph replay per batch on CUDA; metrics read every log_every steps

`train_epoch` has the signature of `baseline.train_epoch` and `optimized.train_epoch` (`study.IMPLS` names the
three); a `CapturedStep` is what it runs, kept to train (and time) epoch after epoch without compiling again.

What the optimized step removed (host syncs) was the precondition; what stays is ~300 small kernels per step,
each launched from Python (the H100 run: ~6.2 ms per step at any batch from 16 to 16384, launch-bound). Here:
- the schedule's step counter, the metric ring and its write slot live on the device, so nothing in the step
  reads or passes a host value;
- one function is the whole step (`_step`): forward, losses, the metric write, backward and the Adam update;
- `compile` (a torch.compile mode) picks how it runs: "off" eagerly, the optimized step's own aten kernels;
  otherwise dynamo traces all of it, `loss.backward()` included (`trace_autograd_ops`), into one graph that
  inductor compiles (`fullgraph=True`: a host read or a graph break anywhere in the step is refused);
- on CUDA that step is recorded once with `torch.cuda.graph` over static input buffers (after warm-up steps
  whose effects are undone): each step is two input copies and one `graph.replay()`; a host sync inside would
  fail the recording. On a CPU there is no graph to record: the compiled function is called on the batch.

Why `torch.cuda.graph` and not `torch.compile(mode="reduce-overhead")`, now that the step is one compiled graph:
inductor records its CUDA graph only for a graph that mutates nothing but parameters and inputs marked static,
and this step also updates Adam's state, the metric ring and the step counter; recording by hand needs no such
marking and says what is recorded. Inductor's own CUDA graphs are turned off inside; its kernels stay, so
"reduce-overhead" gives the kernels of "default" here, and "max-autotune" its tuned ones.

Same math as the optimized step: the same ops in the same order; the schedule's weights come from the device
step counter (int64) in float64 arithmetic, cast to float32, as the host's Python floats are; randomness is
drawn by aten's own RNG ops (inductor's `fallback_random`), in the same order from the same generator
(`perflab.kit.compiles.same_draws_options`: on torch 2.11 that order needs a pass of ours), so the
same seed gives the same dropout masks and noise (on CUDA each replay advances the Philox offset as the eager
kernels would). The Adam update: eagerly the fused kernel, as in the optimized step; traced, torch.optim's
foreach form of the same update (the fused one is not traceable), which inductor fuses into the step's
graph, its bias corrections in float32 tensors where the fused kernel uses host doubles. With compile "off"
the step runs the optimized step's own kernels (bit for bit on a CPU); compiled, fused kernels sum in
another order and Adam's scalars round in float32, so the curves agree to rounding. (On a CPU the traced update
is slower than the fused kernel: inductor's C++ code recomputes the bias corrections for every vector of
parameters; it saves two dispatched ops per step there, and on a GPU the update is inside the replay either way.)

What a compiled step still dispatches on a CPU (`perflab.kit.launches` counts it): one compiled-graph call, and the
aten calls inductor's C++ code makes from inside it: every matmul (its C++ GEMM template needs weights that
are constants, i.e. frozen inference graphs, not weights a training step updates), the random draws kept in
aten for the same masks, and the labels' cumulative sum (no scan in the C++ backend).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import torch
from torch.optim.adam import adam
from tqdm import tqdm

from ..kit.compiles import compile_kwargs, same_draws_options
from ..kit.params import Backend, CompileMode
from . import optimized
from .config import StepConfig, TrainConfig
from .model import MixtureVAE
from .train import METRICS, EpochLog, _DeferredReads, check_batch, step_losses

ROW = METRICS + ("n_bad",)  # one row of the device metric ring per step


@dataclasses.dataclass(frozen=True)
class Captured:
    """The captured implementation: the step `step` (sync-free switches only), its kernels from `compile`."""
    step: StepConfig
    compile: CompileMode = "default"   # torch.compile mode of the kernels inside ("off": eager aten kernels)
    backend: Backend = "inductor"
    warmup: int = 2                    # CUDA: steps run (and undone) before recording

    def check(self) -> None:
        self.step.check()
        s = self.step
        if (s.remap, s.metrics, s.separability) != ("presence", "device", "vectorized"):
            raise ValueError(f"a captured step needs the sync-free switches (remap presence, metrics device, "
                             f"separability vectorized), got {s}")


TESTED_TORCH = "2.11"  # the oldest torch the compiled captured step is tested with (CI: 2.11 and 2.13 on a CPU)


@functools.cache
def traced_backward_problem() -> str | None:
    """None when this torch's dynamo traces `loss.backward()` into one graph (what a compiled captured step needs:
    `torch._dynamo.config.trace_autograd_ops` and dynamo's Tensor.backward rewrite, PyTorch PR #169415), else
    what is missing. Probed once per process on a two-element function through dynamo and AOTAutograd (backend
    "aot_eager": the rewritten backward, autograd.grad + accumulate_grad_, is traced as the step's would be; no
    code generation)."""
    if not hasattr(torch._dynamo.config, "trace_autograd_ops"):
        return f"torch {torch.__version__} has no torch._dynamo.config.trace_autograd_ops"
    w = torch.ones(2, requires_grad=True)

    def probe(x):
        (w * x).sum().backward()

    try:
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            torch.compile(probe, backend="aot_eager", fullgraph=True)(torch.ones(2))
    except Exception as e:  # dynamo's Unsupported (a graph break at backward) or an older API's error
        return f"torch {torch.__version__}'s dynamo cannot trace Tensor.backward() into one graph ({type(e).__name__})"
    return None


def unsupported_message(problem: str) -> str:
    return (f"a compiled captured step needs dynamo to trace loss.backward(): {problem}. Install torch "
            f">= {TESTED_TORCH} (the version it is tested with), or run it eagerly with compile=off (on CUDA still "
            f"one graph replay per step)")


def runnable(impl: Captured) -> tuple[Captured, str]:
    """`impl` itself when this torch can run it, else its eager form (compile "off") and the reason, which the
    notebook prints and logs: the report then says which form ran."""
    problem = None if impl.compile == "off" else traced_backward_problem()
    if problem is None:
        return impl, ""
    return dataclasses.replace(impl, compile="off"), f"compile={impl.compile} replaced by off: {problem}"


def inductor_options(compile: CompileMode, backend: Backend, device_type: str) -> dict | None:
    """`torch.compile` keywords for the captured step's `_step` (None: eager)."""
    from torch._inductor import list_mode_options

    kw = compile_kwargs(compile, backend)
    if kw is None or kw["backend"] != "inductor":
        return kw
    options = dict(list_mode_options(kw.pop("mode")))
    options |= same_draws_options()  # aten's RNG ops in the program's order: the optimized step's draws, same seed
    if device_type == "cuda":
        options["triton.cudagraphs"] = False  # the whole step is one graph recorded here: no graphs inside it
    return kw | {"options": options}


def check_adam(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """What the step's two Adam forms assume: a fused torch.optim.Adam without amsgrad; capturable on CUDA."""
    groups = optimizer.param_groups
    if not isinstance(optimizer, torch.optim.Adam) or not all(g["fused"] and not g["amsgrad"] for g in groups):
        raise ValueError("a captured step needs a fused Adam without amsgrad: make_optimizer(model, capturable=True)")
    if device.type == "cuda" and not all(g["capturable"] for g in groups):
        raise ValueError("a captured step needs a capturable optimizer: make_optimizer(model, capturable=True)")


def init_adam_state(optimizer: torch.optim.Adam) -> None:
    """Adam's state as its first step would create it (fused: zeros, and a float32 step count on the parameter's
    device); a parameter that has state keeps it."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not optimizer.state[p]:
                optimizer.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=p.device),
                                      "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                      "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}


@torch.no_grad()
def traced_adam(optimizer: torch.optim.Adam) -> None:
    """The same Adam update in torch.optim's traceable form (foreach, capturable: its scalars are device tensors),
    on the optimizer's own state; inside a compiled step inductor fuses it into the step's graph."""
    for g in optimizer.param_groups:
        params = [p for p in g["params"] if p.grad is not None]
        state = [optimizer.state[p] for p in params]
        adam(params, [p.grad for p in params], [s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state], [],
             [s["step"] for s in state], foreach=True, capturable=True, amsgrad=False, beta1=g["betas"][0],
             beta2=g["betas"][1], lr=g["lr"], weight_decay=g["weight_decay"], eps=g["eps"], maximize=g["maximize"],
             decoupled_weight_decay=g["decoupled_weight_decay"])


class _Ring:
    """The device metric ring: the step writes its row at the device index `slot` and moves it on (modulo the
    capacity: never out of bounds, whoever calls the step); the host mirrors the index (`advance`, no sync) and
    `read()` (one sync) returns the rows written since the last read, oldest first (the newest `capacity` ones)."""

    def __init__(self, capacity: int, device: torch.device):
        self.buf = torch.zeros(capacity, len(ROW), device=device)        # [log_every, 5]
        self.slot = torch.zeros((), dtype=torch.long, device=device)    # next row, on the device
        self.pos = 0                                                     # the host's copy of `slot`
        self.filled = 0                                                  # rows written since the last read

    def advance(self) -> None:
        self.pos = (self.pos + 1) % len(self.buf)
        self.filled = min(self.filled + 1, len(self.buf))

    def write(self, _values=None) -> None:
        """`_DeferredReads`' sink interface: the step wrote the row already (`advance` counted it)."""

    def read(self) -> list[dict[str, float]]:
        rows = self.buf.tolist()  # SYNC: once per log_every steps, by design
        n, cap = self.filled, len(rows)
        self.filled = 0
        return [dict(zip(ROW, rows[(self.pos - n + i) % cap])) for i in range(n)]


class CapturedStep:
    """A model and its optimizer trained one batch at a time by a recorded step (module doc). The first call
    fixes the batch shape; a batch of another shape, dtype or device afterwards raises ValueError."""

    def __init__(self, model: MixtureVAE, optimizer: torch.optim.Optimizer, impl: Captured,
                 train: TrainConfig = TrainConfig(), start_step: int = 0):
        impl.check()
        self.model, self.optimizer, self.impl, self.train = model, optimizer, impl, train
        self.device = next(model.parameters()).device
        check_adam(optimizer, self.device)
        init_adam_state(optimizer)  # the traced update reads the state: it must exist before the first trace
        self.step = start_step                                             # the host's step count
        # int64: dynamo treats a 0-d float64 tensor as a constant and drops its in-place update (torch 2.13)
        self.step_t = torch.full((), start_step, dtype=torch.long, device=self.device)
        self.ring = _Ring(impl.step.log_every, self.device)
        self.shapes: tuple | None = None                                   # (x, y) shapes, fixed at the first call
        self.x = self.y = None                                             # CUDA: the recorded graph's inputs
        kw = inductor_options(impl.compile, impl.backend, self.device.type)
        if kw is not None and (problem := traced_backward_problem()) is not None:
            raise RuntimeError(unsupported_message(problem))
        # the whole step, backward and Adam included, as one graph: a host read inside would fail fullgraph;
        # static shapes: each CapturedStep replays one batch size, so it gets its own graph, never a dynamic one
        # (dynamo would mark the batch dynamic at the second size it sees in a process: another program)
        self.compiled = None if kw is None else torch.compile(self._step, fullgraph=True, dynamic=False, **kw)
        self.graph: torch.cuda.CUDAGraph | None = None

    # ---- the step, as compiled and recorded -----------------------------------------------------
    def _losses(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        v = step_losses(self.model, x, y, self.step_t, self.impl.step, self.train)
        row = torch.stack([v[k].detach().to(self.ring.buf.dtype) for k in ROW])      # [5]
        self.ring.buf.index_copy_(0, self.ring.slot.view(1), row.view(1, -1))   # row `slot`, no host index
        self.ring.slot.copy_((self.ring.slot + 1) % len(self.ring.buf))
        self.step_t.add_(1)
        return v["loss"]

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Forward, losses, metric write, backward, Adam: one function, run eagerly or traced as one graph."""
        self._losses(x, y).backward()
        if torch.compiler.is_compiling():
            traced_adam(self.optimizer)  # fused Adam is not traceable (a graph break): its foreach form, in-graph
        else:
            self.optimizer.step()        # eager: the fused kernel of the optimized step

    def _body(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)  # no kernel: backward writes fresh grads (in a graph: its own)
        if self.compiled is None:
            self._step(x, y)
        else:
            with torch._dynamo.config.patch(trace_autograd_ops=True):  # dynamo traces backward into the graph
                self.compiled(x, y)

    # ---- the host's side -------------------------------------------------------------------------
    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One training step on (x [B, D], y [B]): on CUDA copy into the static inputs and replay; on a CPU run
        the step on the batch itself (no recorded graph reads fixed addresses there)."""
        self._check(x, y)
        if self.device.type != "cuda":
            self._body(x, y)
        else:
            if self.graph is None:
                self.graph = self._record(x, y)  # its static inputs self.x, self.y hold this batch
            else:
                self.x.copy_(x)
                self.y.copy_(y)
            self.graph.replay()
        self.ring.advance()
        self.step += 1

    def _check(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Shapes, dtypes and devices against the first batch's (host metadata only: no sync)."""
        check_batch(x, y, self.model.cfg.input_dim, self.step)
        if self.shapes is None:
            self.shapes = (x.shape, y.shape)
        for name, got, shape, dtype in (("x", x, self.shapes[0], torch.float32), ("y", y, self.shapes[1], torch.long)):
            if got.shape != shape or got.dtype != dtype or got.device != self.device:
                raise ValueError(
                    f"step {self.step}: {name} is {tuple(got.shape)} {got.dtype} on {got.device}, but this step was "
                    f"captured for {tuple(shape)} {dtype} on {self.device}; a captured step replays fixed "
                    f"shapes: build another CapturedStep for another batch size (nothing was run)")

    def _record(self, x: torch.Tensor, y: torch.Tensor) -> torch.cuda.CUDAGraph:
        """Copy (x, y) into new static inputs, warm up on a side stream (compiles, cuBLAS workspaces), undo the
        warm-up's effects (weights, Adam state, RNG, counters), then record `_body` once over the static inputs."""
        self.x, self.y = x.clone(), y.clone()
        saved = self._save()
        with torch.random.fork_rng(devices=[self.device]):  # the warm-up's draws are not the run's
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(self.impl.warmup):
                    self._body(self.x, self.y)
            torch.cuda.current_stream(self.device).wait_stream(side)
        self._restore(saved)
        self.optimizer.zero_grad(set_to_none=True)  # backward in the graph allocates the grads it rewrites each replay
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._body(self.x, self.y)
        return graph

    def _save(self) -> dict:
        state = [t.detach().clone() for st in self.optimizer.state.values() for t in st.values()]
        return {"params": [p.detach().clone() for p in self.model.parameters()], "state": state,
                "step_t": self.step_t.clone()}

    @torch.no_grad()
    def _restore(self, saved: dict) -> None:
        """In place (the recorded graph keeps these addresses); Adam's state existed before the warm-up
        (`init_adam_state`), so the same tensors are restored."""
        for p, before in zip(self.model.parameters(), saved["params"]):
            p.copy_(before)
        for t, before in zip((t for st in self.optimizer.state.values() for t in st.values()), saved["state"]):
            t.copy_(before)
        self.step_t.copy_(saved["step_t"])
        self.ring.slot.fill_(self.ring.pos)

    def epoch(self, batches, *, progress: bool = False, progress_file=None) -> EpochLog:
        """Train one pass over `batches`, as `optimized.train_epoch` does: a progress bar, the metric
        ring read every `log_every` steps and at the end (BadLabelsError there names the steps)."""
        log = EpochLog()
        total = len(batches) if hasattr(batches, "__len__") else None
        bar = tqdm(batches, total=total, file=progress_file, disable=not progress, leave=False, desc="captured")
        reads = _DeferredReads(log, bar, self.impl.step, self.train.num_labels)
        reads.sink = self.ring
        self.ring.filled = 0  # rows of steps called outside an epoch were never asked for: not this epoch's
        first = self.step
        try:
            for x, y in bar:
                step = self.step
                self(x, y)
                reads.after_step(step, None)
            reads.finish(first, self.step - 1)
        finally:
            bar.close()
        if self.step == first:
            raise ValueError("CapturedStep.epoch: `batches` yielded no batch")
        return log


def train_epoch(model: MixtureVAE, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], *,
                optimizer: torch.optim.Optimizer, train: TrainConfig = TrainConfig(), start_step: int = 0,
                progress: bool = True, progress_file=None, log_every: int = 50, sep_grad: bool = True,
                compile: CompileMode = "default", backend: Backend = "inductor") -> EpochLog:
    """One pass over `batches` by the optimized step recorded once (a new `CapturedStep`: it compiles at the first
    batch); `optimizer`: `make_optimizer(model, capturable=True)`."""
    step = CapturedStep(model, optimizer, Captured(optimized.step_config(log_every=log_every, sep_grad=sep_grad),
                                                   compile=compile, backend=backend), train, start_step)
    return step.epoch(batches, progress=progress, progress_file=progress_file)
