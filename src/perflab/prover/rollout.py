"""Greedy rollouts of many candidate proofs with B slots, five ways (study 4; `full` is study 3's loop).

    res = rollout(step, candidates, batch=512, strategy="recycle")
    res.score, res.proven, res.steps          # per candidate, identical for every strategy
    res.steps_executed, res.wasted_slot_steps, res.ms_per_step

- full      chunks of B (the tail padded); every slot is stepped until the whole chunk is done: a step
            costs the same however many rows are finished (the seed's loop).
- masked    the same, but finished rows are swapped for an all-padding state before each step, so
            the engine does the cheapest thing for them. The shapes do not change, so the work barely
            does.
- compact   only the active rows are gathered and stepped (boolean indexing: dynamic shapes, eager).
- bucketed  the active rows are gathered into the smallest power-of-two bucket that holds them (at
            least `min_bucket`), so every step has one of a few static shapes: one compiled graph
            (and one CUDA graph) per bucket.
- recycle   B slots fed from a device-resident queue of every candidate's initial state: a slot whose
            proof ends takes the next candidate in the same step, so the batch stays full until the
            queue drains (continuous batching).
A row's trajectory depends only on its own state, so every strategy gives every candidate the same
steps, outcome and score (up to float rounding when a strategy computes a row in a batch of another size).
Each loop reads one value per step on the host (all done? how many active?) and says so.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from .step import GreedyStep, final_scores

STRATEGIES = ("full", "masked", "compact", "bucketed", "recycle")


@dataclasses.dataclass
class RolloutResult:
    score: torch.Tensor         # [N] sum of chosen log-probs when proved, else fail_score
    proven: torch.Tensor        # [N] bool
    steps: torch.Tensor         # [N] steps each candidate took
    steps_executed: int = 0     # calls of the step function
    slot_steps: int = 0         # rows computed, summed over steps
    wasted_slot_steps: int = 0  # rows computed that were finished, padding or idle
    seconds: float = 0.0
    batch: int = 0              # slots per step (the last batch used, after any OOM halving)
    oom_halvings: list = dataclasses.field(default_factory=list)  # batch sizes that ran out of memory
    records: torch.Tensor | None = None  # [N] times each candidate's outcome was written (1 = exactly once)
    trace: list = dataclasses.field(default_factory=list)  # per step: (seconds, rows computed, rows active)

    @property
    def ms_per_step(self) -> float:
        return 1e3 * self.seconds / max(1, self.steps_executed)


def pad_to(chunk: torch.Tensor, batch: int) -> torch.Tensor:
    """[n, 3] -> [batch, 3], repeating the last row (a real candidate, so padded rows do typical work)."""
    n = chunk.shape[0]
    if n == batch:
        return chunk
    return torch.cat([chunk, chunk[-1:].expand(batch - n, -1)], dim=0)


def rollout_full(step: GreedyStep, queries: torch.Tensor, n_real: int | None = None,
                 fail_score: float = -100.0, trace: list | None = None) -> RolloutResult:
    """Step all B slots of queries [B, 3] until every one is done. Rows from n_real on are padding:
    computed, not returned, counted as wasted. `trace` (a list) gets (seconds, B, active) per step."""
    t0 = time.perf_counter()
    B = queries.shape[0]
    n_real = B if n_real is None else n_real
    slots = step.init(queries)
    pad = torch.arange(B, device=queries.device) >= n_real
    wasted = torch.zeros((), dtype=torch.long, device=queries.device)
    n, t_prev = 0, t0
    for n in range(1, step.max_depth + 1):  # noqa: B007 (n counts the steps taken, read after the loop)
        idle = slots[4] | pad
        wasted = wasted + idle.sum()                              # rows already done (or padding)
        slots = step(*slots)
        all_done = bool(slots[4].all())  # one host sync per step: the seed's exit once every row is done
        if trace is not None:
            t_prev = _trace(trace, t_prev, B, B - idle.sum())
        if all_done:
            break
    score, proven = final_scores(slots[0], slots[3], fail_score)
    return RolloutResult(score[:n_real], proven[:n_real], slots[2][:n_real], steps_executed=n,
                         slot_steps=n * B, wasted_slot_steps=int(wasted), seconds=time.perf_counter() - t0,
                         batch=B, records=torch.ones(n_real, dtype=torch.long))


def _trace(trace: list, t_prev: float, computed, active) -> float:
    t = time.perf_counter()
    trace.append((t - t_prev, int(computed), int(active)))  # the value was ready: this step already synced
    return t


def concat(results: list[RolloutResult]) -> RolloutResult:
    """Results of consecutive chunks as one (counters summed)."""
    if not results:
        z = torch.zeros(0)
        return RolloutResult(z, z.bool(), z.long(), records=z.long())
    cat = lambda name: torch.cat([getattr(r, name) for r in results])  # noqa: E731
    return RolloutResult(cat("score"), cat("proven"), cat("steps"),
                         sum(r.steps_executed for r in results), sum(r.slot_steps for r in results),
                         sum(r.wasted_slot_steps for r in results), sum(r.seconds for r in results),
                         batch=results[-1].batch, records=cat("records"),
                         trace=[t for r in results for t in r.trace])


# ---- per-candidate outcomes, written when a candidate finishes ---------------------------------

class _Outcomes:
    """Per-candidate results, [N + 1] (the last entry is a dump for rows that are not real candidates)."""

    def __init__(self, n: int, device, fail_score: float):
        self.n, self.fail = n, fail_score
        self.table = torch.zeros(n + 1, 3, device=device)            # score, proven, steps: one write per step
        self.records = torch.zeros(n + 1, dtype=torch.long, device=device)

    def record(self, cand: torch.Tensor, finished: torch.Tensor, slots) -> None:
        """Write the outcome of rows `finished` [B] whose candidate ids are `cand` [B] (no host sync)."""
        idx = torch.where(finished & (cand >= 0), cand, self.n)
        score, proven = final_scores(slots[0], slots[3], self.fail)
        self.table.index_put_((idx,), torch.stack([score, proven.to(score.dtype), slots[2].to(score.dtype)], 1))
        self.records.index_add_(0, idx, torch.ones_like(idx))

    def result(self, **counters) -> RolloutResult:
        t = self.table[: self.n]
        return RolloutResult(t[:, 0].contiguous(), t[:, 1] > 0.5, t[:, 2].round().long(),
                             records=self.records[: self.n], **counters)


# ---- chunked strategies: masked, compact, bucketed -------------------------------------------

def _chunked(step: GreedyStep, cands: torch.Tensor, B: int, fail_score: float, advance, trace) -> RolloutResult:
    t0 = time.perf_counter()
    N, dev = len(cands), cands.device
    out = _Outcomes(N, dev, fail_score)
    n_steps, t_prev = 0, t0
    computed = torch.zeros((), dtype=torch.long, device=dev)
    wasted = torch.zeros((), dtype=torch.long, device=dev)
    for start in range(0, N, B):
        chunk = cands[start:start + B]
        ids = torch.arange(start, start + B, device=dev)
        ids = torch.where(ids < N, ids, -1)                          # padding rows: no candidate
        slots = list(step.init(pad_to(chunk, B)))
        slots[4] = ids < 0                                           # padding starts (and stays) done
        while True:
            was_done = slots[4]
            slots, rows, n_active = advance(step, slots)
            if n_active == 0:            # every loop here read n_active on the host (see advance)
                break
            n_steps += 1
            computed, wasted = computed + rows, wasted + rows - n_active
            out.record(ids, slots[4] & ~was_done, slots)
            if trace is not None:
                t_prev = _trace(trace, t_prev, rows, n_active)
    return out.result(steps_executed=n_steps, slot_steps=int(computed), wasted_slot_steps=int(wasted),
                      seconds=time.perf_counter() - t0, batch=B, trace=trace if trace is not None else [])


def _advance_masked(step, slots):
    active = ~slots[4]
    n_active = int(active.sum())  # host sync: the loop's exit test (full reads done.all() instead)
    if n_active == 0:
        return slots, 0, 0
    states = torch.where(active[:, None, None], slots[0], 0)      # finished rows: an all-padding state
    slots = step(states, *slots[1:])
    return list(slots), len(active), n_active


def _advance_compact(step, slots):
    idx = (~slots[4]).nonzero()[:, 0]  # host sync: the output size depends on the data (dynamic shape)
    n = len(idx)
    if n == 0:
        return slots, 0, 0
    sub = step(*(t[idx] for t in slots))
    return [t.index_copy(0, idx, s) for t, s in zip(slots, sub)], n, n


def _advance_bucketed(step, slots, min_bucket: int):
    done = slots[4]
    B = len(done)
    n = int((~done).sum())  # host sync: which bucket (a static shape) to run
    if n == 0:
        return slots, 0, 0
    bucket = min(B, max(min_bucket, 1 << (n - 1).bit_length()))  # smallest power of two >= n
    order = torch.argsort(done.to(torch.uint8), stable=True)[:bucket]  # active rows first, no nonzero
    sub = step(*(t[order] for t in slots))                          # finished rows in the bucket stay frozen
    return [t.index_copy(0, order, s) for t, s in zip(slots, sub)], bucket, n


# ---- recycle: continuous batching from a device-resident queue --------------------------------

def rollout_recycle(step: GreedyStep, cands: torch.Tensor, B: int, fail_score: float = -100.0,
                    trace: list | None = None) -> RolloutResult:
    """B slots; each finished slot takes the next queued candidate in the same step (module doc)."""
    t0 = time.perf_counter()
    N, dev = len(cands), cands.device
    out = _Outcomes(N, dev, fail_score)
    q_states, q_nv = step.engine.initial(cands)                     # [N, A, 3], [N]: the queue
    first = min(B, N)
    slot_cand = torch.arange(B, device=dev)
    slot_cand = torch.where(slot_cand < first, slot_cand, -1)       # [B] candidate id, -1 = idle
    slots = list(step.init(pad_to(cands[:first], B) if first else cands.new_zeros(B, 3)))
    slots[4] = slot_cand < 0
    next_id = torch.full((), first, dtype=torch.long, device=dev)   # head of the queue
    n_steps, t_prev = 0, t0
    wasted = torch.zeros((), dtype=torch.long, device=dev)
    while True:
        idle = slot_cand < 0
        if bool(idle.all()):  # one host sync per step: stop once the queue is drained and every slot idle
            break
        wasted = wasted + idle.sum()
        slots = list(step(*slots))
        n_steps += 1
        finished = slots[4] & ~idle
        out.record(slot_cand, finished, slots)
        slot_cand, next_id = _refill(slots, slot_cand, finished, next_id, q_states, q_nv, N)
        if trace is not None:
            t_prev = _trace(trace, t_prev, B, B - idle.sum())
    return out.result(steps_executed=n_steps, slot_steps=n_steps * B, wasted_slot_steps=int(wasted),
                      seconds=time.perf_counter() - t0, batch=B, trace=trace if trace is not None else [])


def _refill(slots, slot_cand, finished, next_id, q_states, q_nv, N):
    """Finished slots take the next candidates in queue order; slots left without one go idle. In place
    on `slots`; returns the new slot_cand and queue head. Fixed shapes, no host sync."""
    new = next_id + torch.cumsum(finished, 0) - 1                   # [B] queue position per finished slot
    take = finished & (new < N)
    slot_cand = torch.where(finished, torch.where(take, new, -1), slot_cand)
    src = new.clamp(0, max(N - 1, 0))
    slots[0] = torch.where(take[:, None, None], q_states[src], slots[0])
    slots[1] = torch.where(take, q_nv[src], slots[1])
    slots[2] = torch.where(take, 0, slots[2])
    slots[3] = torch.where(take, 0.0, slots[3])
    slots[4] = slots[4] & ~take
    return slot_cand, next_id + take.sum()


# ---- one entry point --------------------------------------------------------------------------

def rollout(step: GreedyStep, candidates: torch.Tensor, batch: int, strategy: str = "full",
            fail_score: float = -100.0, min_bucket: int = 8, trace: list | None = None) -> RolloutResult:
    """Greedy proofs of candidates [N, 3] with `batch` slots and the given strategy (module doc).
    `compact` always runs the step uncompiled (its shapes change every step)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if strategy == "full":
        t0 = time.perf_counter()
        parts = [rollout_full(step, pad_to(candidates[i:i + batch], batch), n_real=len(candidates[i:i + batch]),
                              fail_score=fail_score, trace=trace) for i in range(0, len(candidates), batch)]
        res = concat(parts)
        res.seconds, res.trace = time.perf_counter() - t0, trace if trace is not None else []
        return res
    if strategy == "recycle":
        return rollout_recycle(step, candidates, batch, fail_score, trace)
    if strategy == "compact":
        eager = step if step.mode == "off" else GreedyStep(step.engine, step.policy, step.max_depth, "off")
        return _chunked(eager, candidates, batch, fail_score, _advance_compact, trace)
    if strategy == "masked":
        return _chunked(step, candidates, batch, fail_score, _advance_masked, trace)
    return _chunked(step, candidates, batch, fail_score,
                    lambda s, sl: _advance_bucketed(s, sl, min_bucket), trace)
