"""One greedy proof step for a batch of slots (engine + policy + choice), and how it is compiled.

A slot holds a candidate's proof: states [B, A, 3], next_var [B], depth [B] (steps taken), score [B]
(sum of the chosen log-probabilities) and done [B]. `GreedyStep` advances every slot that is not done by
one step; rows that are done are still computed (fixed shapes) but left unchanged. The step reads no
tensor value on the host, so it compiles to one graph per batch size and can be replayed as a CUDA graph.
"""
from __future__ import annotations

import torch

from .kg import FIRST_PRED, TRUE

COMPILE_MODES = ("off", "eager", "default", "reduce-overhead")


def compile_fn(fn, mode: str):
    """`mode`: off (plain eager), eager (dynamo graphs run by the eager backend: counts graphs and
    recompiles without inductor's codegen), default or reduce-overhead (inductor; CUDA graphs)."""
    if mode == "off":
        return fn
    if mode == "eager":
        return torch.compile(fn, backend="eager", fullgraph=True, dynamic=False)
    if mode in ("default", "reduce-overhead"):
        # dynamic=False: one graph per batch size, which is what padding to a fixed batch makes free
        return torch.compile(fn, mode=mode, fullgraph=True, dynamic=False)
    raise ValueError(f"compile mode {mode!r} is not one of {COMPILE_MODES}")


class GreedyStep:
    """`step(states, next_var, depth, score, done) -> same five, advanced one step` (module doc)."""

    def __init__(self, engine, policy, max_depth: int, compile: str = "off"):
        if max_depth < 1:
            raise ValueError(f"max_depth must be >= 1, got {max_depth}")
        self.engine, self.policy, self.max_depth, self.mode = engine, policy, max_depth, compile
        self.cudagraphs = compile == "reduce-overhead" and engine.device.type == "cuda"
        self._fn = compile_fn(self._step, compile)

    def _step(self, states, next_var, depth, score, done):
        d = self.engine.derive(states, next_var)                      # [B, S, A, 3], [B], [B, S]
        logits = self.policy(states, d.states, d.counts)              # [B, S]
        a = logits.argmax(-1)                                         # greedy; ties go to the first successor
        lp = torch.log_softmax(logits, -1).gather(1, a[:, None])[:, 0]
        b = torch.arange(states.shape[0], device=states.device)
        active = ~done
        states = torch.where(active[:, None, None], d.states[b, a], states)
        next_var = torch.where(active, d.next_var[b, a], next_var)
        score = score + torch.where(active, lp, 0.0)
        depth = depth + active.long()
        done = done | (states[:, 0, 0] < FIRST_PRED) | (depth >= self.max_depth)
        return states, next_var, depth, score, done

    def __call__(self, states, next_var, depth, score, done):
        if self.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
            out = self._fn(states, next_var, depth, score, done)
            return tuple(t.clone() for t in out)  # a CUDA graph's outputs are overwritten by its next replay
        return self._fn(states, next_var, depth, score, done)

    def init(self, queries: torch.Tensor):
        """Fresh slots for queries [B, 3]."""
        states, nv = self.engine.initial(queries)
        B, dev = queries.shape[0], queries.device
        return (states, nv, torch.zeros(B, dtype=torch.long, device=dev), torch.zeros(B, device=dev),
                torch.zeros(B, dtype=torch.bool, device=dev))


def final_scores(states: torch.Tensor, score: torch.Tensor, fail_score: float):
    """Proved rows keep their log-probability sum; the rest get `fail_score`. -> (score, proven)."""
    proven = states[:, 0, 0] == TRUE
    return torch.where(proven, score, torch.full_like(score, fail_score)), proven
