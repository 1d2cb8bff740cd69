"""The captured training step: the optimized step's math, launched by the host once per step.

    step = CapturedStep(model, make_optimizer(model, capturable=True), Captured(step_config("optimized")))
    log = step.epoch(batches)          # one graph replay per batch on CUDA; metrics read every log_every steps

What the optimized step removed (host syncs) was the precondition; what stays is ~300 small kernels per step,
each launched from Python (the H100 run: ~6.2 ms per step at any batch from 16 to 16384, launch-bound). Here:
- static buffers: each batch is copied into the same `x`, `y` tensors; the schedule's step counter, the metric
  ring and its write slot live on the device too, so nothing in the step reads or passes a host value;
- one function holds forward, losses and the metric write (`_losses`); the body adds backward and a capturable
  fused Adam update (`_body`);
- on CUDA the whole body is recorded once with `torch.cuda.graph` (after warm-up steps whose effects are undone)
  and each step is two input copies and one `graph.replay()`; a host sync inside would fail the capture;
- `compile` (a torch.compile mode) picks the kernels inside: "off" eager aten kernels, else inductor's. On
  CPU, where there is no graph to record, the compiled function runs each step, so CI runs the same code.

Why `torch.cuda.graph` and not `torch.compile(mode="reduce-overhead")`: reduce-overhead records one CUDA graph
per compiled graph, and AOTAutograd splits a training step into a forward and a backward graph, with the
optimizer outside both: three launches or more per step with Python (the autograd engine) between them. Recording
the body by hand puts forward, backward and the Adam update into one replay. Inductor's own CUDA graphs are turned
off inside (they would split our graph again); its kernels stay, so "reduce-overhead" gives the kernels of
"default" here, and "max-autotune" its tuned ones.

Same math as the optimized step: the same ops in the same order; the schedule's weights come from the device
step counter (int64) in float64 arithmetic, cast to float32, as the host's Python floats are; randomness is
drawn by aten's own RNG ops (inductor's `fallback_random`), in the same order from the same generator, so the
same seed gives the same dropout masks and noise (on CUDA each replay advances the Philox offset as the eager
kernels would). With compile "off" the step runs the optimized step's own kernels (bit for bit on a CPU);
inductor's fused kernels round differently (sums in another order), so compiled curves agree to rounding.
"""
from __future__ import annotations

import dataclasses

import torch
from tqdm import tqdm

from ..compiles import compile_kwargs
from ..params import Backend, CompileMode
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


def inductor_options(compile: CompileMode, backend: Backend, device_type: str) -> dict | None:
    """`torch.compile` keywords for the captured step's `_losses` (None: eager)."""
    from torch._inductor import list_mode_options

    kw = compile_kwargs(compile, backend)
    if kw is None or kw["backend"] != "inductor":
        return kw
    options = dict(list_mode_options(kw.pop("mode")))
    options["fallback_random"] = True  # aten's RNG ops: the same draws as the optimized step, same seed
    if device_type == "cuda":
        options["triton.cudagraphs"] = False  # the whole step is one graph recorded here: no graphs inside it
    return kw | {"options": options}


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
        if self.device.type == "cuda" and not all(g.get("capturable") for g in optimizer.param_groups):
            raise ValueError("a captured step needs a capturable optimizer: make_optimizer(model, capturable=True)")
        self.step = start_step                                             # the host's step count
        # int64: dynamo treats a 0-d float64 tensor as a constant and drops its in-place update (torch 2.13)
        self.step_t = torch.full((), start_step, dtype=torch.long, device=self.device)
        self.ring = _Ring(impl.step.log_every, self.device)
        self.x = self.y = None                                             # static inputs, shaped at the first call
        kw = inductor_options(impl.compile, impl.backend, self.device.type)
        # one graph for forward, losses and the metric write: a host read inside would fail fullgraph
        self.losses = self._losses if kw is None else torch.compile(self._losses, fullgraph=True, **kw)
        self.graph: torch.cuda.CUDAGraph | None = None

    # ---- the step, as recorded -------------------------------------------------------------------
    def _losses(self) -> torch.Tensor:
        v = step_losses(self.model, self.x, self.y, self.step_t, self.impl.step, self.train)
        row = torch.stack([v[k].detach().to(self.ring.buf.dtype) for k in ROW])      # [5]
        self.ring.buf.index_copy_(0, self.ring.slot.view(1), row.view(1, -1))   # row `slot`, no host index
        self.ring.slot.copy_((self.ring.slot + 1) % len(self.ring.buf))
        self.step_t.add_(1)
        return v["loss"]

    def _body(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)  # no kernel: backward writes fresh grads (in a graph: its own)
        self.losses().backward()
        self.optimizer.step()

    # ---- the host's side -------------------------------------------------------------------------
    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One training step on (x [B, D], y [B]): copy into the static inputs, replay (CUDA) or run (CPU)."""
        self._check(x, y)
        self.x.copy_(x)
        self.y.copy_(y)
        if self.device.type != "cuda":
            self._body()
        else:
            if self.graph is None:
                self.graph = self._record()
            self.graph.replay()
        self.ring.advance()
        self.step += 1

    def _check(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Shapes, dtypes and devices against the static inputs (host metadata only: no sync)."""
        check_batch(x, y, self.model.cfg.input_dim, self.step)
        if self.x is None:
            self.x = torch.zeros(x.shape, dtype=torch.float32, device=self.device)
            self.y = torch.zeros(y.shape, dtype=torch.long, device=self.device)
        for name, got, want in (("x", x, self.x), ("y", y, self.y)):
            if got.shape != want.shape or got.dtype != want.dtype or got.device != want.device:
                raise ValueError(
                    f"step {self.step}: {name} is {tuple(got.shape)} {got.dtype} on {got.device}, but this step was "
                    f"captured for {tuple(want.shape)} {want.dtype} on {want.device}; a captured step replays fixed "
                    f"shapes: build another CapturedStep for another batch size (nothing was run)")

    def _record(self) -> torch.cuda.CUDAGraph:
        """Warm up on a side stream (compiles, cuBLAS workspaces, Adam's state), undo the warm-up's effects
        (weights, Adam state, RNG, counters), then record `_body` once."""
        saved = self._save()
        with torch.random.fork_rng(devices=[self.device]):  # the warm-up's draws are not the run's
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(self.impl.warmup):
                    self._body()
            torch.cuda.current_stream(self.device).wait_stream(side)
        self._restore(saved)
        self.optimizer.zero_grad(set_to_none=True)  # backward in the graph allocates the grads it rewrites each replay
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._body()
        return graph

    def _save(self) -> dict:
        state = {id(t): t.detach().clone() for st in self.optimizer.state.values() for t in st.values()
                 if torch.is_tensor(t)}
        return {"params": [p.detach().clone() for p in self.model.parameters()], "state": state,
                "step_t": self.step_t.clone()}

    @torch.no_grad()
    def _restore(self, saved: dict) -> None:
        """In place (the recorded graph keeps these addresses). Adam's state created by the warm-up is zeroed:
        a fresh Adam state is all zeros, its step count included."""
        for p, before in zip(self.model.parameters(), saved["params"]):
            p.copy_(before)
        for st in self.optimizer.state.values():
            for t in st.values():
                if torch.is_tensor(t):
                    t.copy_(saved["state"][id(t)]) if id(t) in saved["state"] else t.zero_()
        self.step_t.copy_(saved["step_t"])
        self.ring.slot.fill_(self.ring.pos)

    def epoch(self, batches, *, progress: bool = False, progress_file=None) -> EpochLog:
        """Train one pass over `batches`, as `train_epoch(impl="optimized")` does: a progress bar, the metric
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
