"""One greedy proof step for a batch of slots (engine + policy + choice), and how it is compiled.

A slot holds a candidate's proof (`Slots`): states [B, A, 3], next_var [B], depth [B] (steps taken),
score [B] (sum of the chosen log-probabilities, plus log(weight) of each rule applied: a mined rule's
confidence, 1 for a rules.txt rule) and done [B]. `GreedyStep.advance` moves every slot that
is not done by one step; rows that are done are still computed (fixed shapes) but left unchanged, so a
finished row is frozen: its outcome can be read at any later time. The step reads no tensor value on the
host, so it compiles to one graph per batch size and can be replayed as a CUDA graph.

Compiling: `compile` is the torch.compile mode ("off": eager), `backend` the backend
(`perflab.kit.compiles.compile_kwargs`). The rollout loops (`rollout.py`) compile their whole per-step body
(the step plus the loop's bookkeeping, writing the slots in place) through `GreedyStep.compiled`, and
keep the slots in persistent buffers (`GreedyStep.buffers`): where the mode records CUDA graphs
(`GreedyStep.cudagraphs`, from `perflab.kit.cudagraphs.uses_cudagraphs`) the buffers are marked static, so a
replay neither copies its inputs in nor its outputs out, and nothing is allocated per step. Callers of a
CUDA-graph step follow torch's lifetime rule (`perflab.kit.cudagraphs`): `cudagraph_mark_step_begin()` where a
generation starts, and a clone of any output kept past the next one.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ...kit.compiles import allow_recompiles, compile_kwargs
from ...kit.cudagraphs import NO_CUDAGRAPHS, tracked, uses_cudagraphs
from .kg import FIRST_PRED, TRUE

MODES = ("off", "default", "reduce-overhead", "max-autotune")
BACKENDS = ("inductor", "eager", "aot_eager")


class Slots(NamedTuple):
    states: torch.Tensor    # [B, A, 3] current proof states
    next_var: torch.Tensor  # [B] variable counter
    depth: torch.Tensor     # [B] steps taken
    score: torch.Tensor     # [B] sum of the chosen log-probabilities and of log(weight) of the rules applied
    done: torch.Tensor      # [B] bool: proved, failed, gave up or at max_depth (frozen from then on)


class GreedyStep:
    """`step(states, next_var, depth, score, done) -> Slots advanced one step` (module doc)."""

    def __init__(self, engine, policy, max_depth: int, compile: str = "off", backend: str = "inductor"):
        if max_depth < 1:
            raise ValueError(f"max_depth must be >= 1, got {max_depth}")
        if compile not in MODES:
            hint = " ('eager' is a backend: compile='default', backend='eager')" if compile == "eager" else ""
            raise ValueError(f"compile must be one of {MODES}, got {compile!r}{hint}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.engine, self.policy, self.max_depth = engine, policy, max_depth
        self.mode, self.backend = compile, backend
        self.cudagraphs = uses_cudagraphs(compile, backend, engine.device)
        if self.cudagraphs:  # the engine's tables, read by every step, as static graph inputs: no copy per replay (T7)
            for t in vars(engine).values():
                if isinstance(t, torch.Tensor):
                    torch._dynamo.mark_static_address(t)
        self._compiled: dict = {}
        self._buffers: dict = {}
        self._fn = self.compiled("advance", self.advance)

    def compiled(self, name: str, fn, dynamic: bool = False):
        """`fn` compiled with this step's mode and backend (once per name), or `fn` itself when off.
        fullgraph: a graph break would split the step into several graphs and host round trips;
        dynamic=False: one graph per shape, which padding to a fixed batch makes free."""
        if name not in self._compiled:
            kw = compile_kwargs(self.mode, self.backend)
            if kw is not None:  # one graph per batch size and per bucket: past dynamo's default of 8 per
                allow_recompiles(64)  # function (shared by every GreedyStep) it would silently fall back to eager
            if kw is not None and dynamic and kw.get("mode") in NO_CUDAGRAPHS:
                kw = {**kw, "mode": NO_CUDAGRAPHS[kw["mode"]]}  # a CUDA graph per shape would be recorded for every size
            if kw is None:
                self._compiled[name] = fn
            else:
                compiled = torch.compile(fn, fullgraph=True, dynamic=dynamic, **kw)
                self._compiled[name] = tracked(compiled) if self.cudagraphs and not dynamic else compiled
        return self._compiled[name]

    def buffers(self, key, make):
        """Persistent tensors for `key` (built once by `make()`, a tuple or NamedTuple of tensors): the
        rollout loops keep their slots here and write them in place, so a compiled graph sees the same
        addresses every step (marked static for CUDA graphs: no copy in, no copy out)."""
        if key not in self._buffers:
            bufs = make()
            if self.cudagraphs:
                for t in bufs:
                    torch._dynamo.mark_static_address(t)
            self._buffers[key] = bufs
        return self._buffers[key]

    def advance(self, states, next_var, depth, score, done) -> Slots:
        """The step itself: derive every successor, score them, take the argmax for rows not done."""
        d = self.engine.derive(states, next_var)                      # [B, S, A, 3], [B], [B, S]
        logits = self.policy(states, d.states, d.counts)              # [B, S]
        a = logits.argmax(-1)                                         # greedy; ties go to the first successor
        lp = torch.log_softmax(logits, -1).gather(1, a[:, None])[:, 0]
        b = torch.arange(states.shape[0], device=states.device)
        active = ~done
        states = torch.where(active[:, None, None], d.states[b, a], states)
        next_var = torch.where(active, d.next_var[b, a], next_var)
        score = score + torch.where(active, lp + d.log_weight[b, a], 0.0)  # a rule's use costs log(weight)
        depth = depth + active.long()
        done = done | (states[:, 0, 0] < FIRST_PRED) | (depth >= self.max_depth)
        return Slots(states, next_var, depth, score, done)

    def __call__(self, states, next_var, depth, score, done) -> Slots:
        """One step as a function (new tensors out): the compact strategy, the memory model, timings."""
        if self.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
            out = self._fn(states, next_var, depth, score, done)
            return Slots(*(t.clone() for t in out))  # a CUDA graph's outputs are overwritten by its next replay
        return Slots(*self._fn(states, next_var, depth, score, done))

    def init(self, queries: torch.Tensor) -> Slots:
        """Fresh slots for queries [B, 3]."""
        states, nv = self.engine.initial(queries)
        B, dev = queries.shape[0], queries.device
        return Slots(states, nv, torch.zeros(B, dtype=torch.long, device=dev), torch.zeros(B, device=dev),
                     torch.zeros(B, dtype=torch.bool, device=dev))


def write(dst: Slots, src) -> None:
    """Copy slots `src` into the buffers `dst`, field by field (inside a compiled body: fused stores)."""
    for d, s in zip(dst, src):
        d.copy_(s)


def final_scores(states: torch.Tensor, score: torch.Tensor, fail_score: float):
    """Proved rows keep their log-probability sum; the rest get `fail_score`. -> (score, proven)."""
    proven = states[:, 0, 0] == TRUE
    return torch.where(proven, score, torch.full_like(score, fail_score)), proven
