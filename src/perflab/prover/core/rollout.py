"""Greedy rollouts of many candidate proofs with B slots, five ways: the engine library's loops (study 3 runs `full`
chunk by chunk; study 4, `perflab.prover.early_exit`, names all five in its IMPLS).

    res = recycle(step, candidates, batch=512)   # or full, masked, compact, bucketed: one signature
    res.score, res.proven, res.steps          # per candidate, identical for every loop
    res.steps_executed, res.wasted_slot_steps, res.host_reads

- full      chunks of B (the tail padded); every slot is stepped until the whole chunk is done: a step
            costs the same however many rows are finished (the seed's loop).
- masked    the same, but finished rows are swapped for an all-padding state before each step, so
            the engine does the cheapest thing for them. The shapes do not change, so the work barely
            does.
- compact   only the active rows are gathered and stepped: the number of rows changes every step
            (`nonzero`, a host sync), so no CUDA graph; compiled, it is one dynamic-shape graph.
- bucketed  the active rows are gathered into the smallest power-of-two bucket that holds them (at
            least `min_bucket`), so every step has one of a few static shapes: one compiled graph
            (and one CUDA graph) per bucket.
- recycle   B slots fed from a device-resident queue of every candidate's initial state: a slot whose
            proof ends records its outcome and takes the next candidate in the same step, so the batch
            stays full until the queue drains (continuous batching).
A row's trajectory depends only on its own state, so every strategy gives every candidate the same
steps, outcome and score (up to float rounding when a strategy computes a row in a batch of another size).

Each loop's per-step body (the step, the gather/scatter, the outcome table and the refill) is one
compiled function writing the slots in place (`GreedyStep.compiled`, `GreedyStep.buffers`), so a step is
one graph launch plus the host reads the loop needs, counted in `host_reads`: full and masked read
"all done?" every step (the seed's exit), bucketed the number of active rows (to pick the bucket),
compact the active rows themselves (`nonzero`). recycle reads "how many queued, all idle?" and then runs
ceil(queued / B) steps without a read: each step admits at most B new candidates, so neither the queue
nor the loop can end sooner. A finished row is frozen, so the chunked strategies read outcomes once per
chunk; recycle writes each outcome into a per-candidate table when its slot finishes.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import NamedTuple

import torch

from .step import GreedyStep, Slots, final_scores, write


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
    host_reads: int = 0         # values the loop read on the host (each one a device sync on a GPU)

    @property
    def ms_per_step(self) -> float:
        return 1e3 * self.seconds / max(1, self.steps_executed)


def check_batch(batch: int) -> int:
    """The one check of a resolved batch size (0, "the memory model picks", is `batching.resolve_batch`'s)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    return batch


def pad_to(chunk: torch.Tensor, batch: int) -> torch.Tensor:
    """[n, 3] -> [batch, 3], repeating the last row (a real candidate, so padded rows do typical work)."""
    n = chunk.shape[0]
    if n == batch:
        return chunk
    return torch.cat([chunk, chunk[-1:].expand(batch - n, -1)], dim=0)


def fill(candidates: torch.Tensor, b: int) -> torch.Tensor:
    """b candidates: the given ones, repeated."""
    return candidates.repeat((b + len(candidates) - 1) // len(candidates), 1)[:b]


def _call(step: GreedyStep, fn, *args):
    if step.cudagraphs:
        torch.compiler.cudagraph_mark_step_begin()  # the previous replay's outputs were read (or are dead)
    return fn(*args)


def _slot_buffers(step: GreedyStep, B: int, dev) -> Slots:
    A = step.engine.A
    return step.buffers(("slots", B), lambda: Slots(
        torch.zeros(B, A, 3, dtype=torch.long, device=dev), torch.zeros(B, dtype=torch.long, device=dev),
        torch.zeros(B, dtype=torch.long, device=dev), torch.zeros(B, device=dev),
        torch.zeros(B, dtype=torch.bool, device=dev)))


def _trace(trace: list | None, t_prev: float, computed, active) -> float:
    t = time.perf_counter()
    if trace is not None:
        trace.append((t - t_prev, int(computed), int(active)))  # values already read: no extra sync
    return t


# ---- compiled per-step bodies: the step and the loop's bookkeeping, slots written in place -----

def _full_body(step: GreedyStep, masked: bool, s: Slots, pad: torch.Tensor) -> torch.Tensor:
    """One step of every row; -> [active real rows before, rows not done after]."""
    active = (~s.done & ~pad).sum()
    states = torch.where(s.done[:, None, None], 0, s.states) if masked else s.states
    new = step.advance(states, s.next_var, s.depth, s.score, s.done)
    if masked:  # a finished row's real state stays (it was swapped for padding only to be stepped)
        new = new._replace(states=torch.where(s.done[:, None, None], s.states, new.states))
    write(s, new)
    return torch.stack([active, (~new.done).sum()])


def _bucket_body(step: GreedyStep, bucket: int, s: Slots) -> torch.Tensor:
    """Step the first `bucket` rows in order active-first (finished rows in the bucket stay frozen);
    -> rows not done after."""
    order = torch.argsort(s.done.to(torch.uint8), stable=True)[:bucket]   # active rows first, no nonzero
    new = step.advance(*(t[order] for t in s))
    for t, v in zip(s, new):
        t.index_copy_(0, order, v)
    return (~s.done).sum()


def _compact_body(step: GreedyStep, s: Slots, idx: torch.Tensor) -> None:
    new = step.advance(*(t[idx] for t in s))
    for t, v in zip(s, new):
        t.index_copy_(0, idx, v)


# ---- chunked strategies: full, masked, compact, bucketed ---------------------------------------

def rollout_full(step: GreedyStep, queries: torch.Tensor, n_real: int | None = None, fail_score: float = -100.0,
                 trace: list | None = None) -> RolloutResult:
    """Step all B slots of queries [B, 3] until every one is done (one chunk of `full`). Rows from n_real on are
    padding: computed, not returned, counted as wasted. `trace` (a list) gets (seconds, B, active) per step."""
    return _chunks(step, queries, len(queries), fail_score, _loop_full, trace, n_real=n_real)


def _chunks(step, cands, B, fail_score, loop, trace, n_real=None, skip_padding=False) -> RolloutResult:
    """Chunks of B candidates, each stepped by `loop` until done; `skip_padding`: padding rows start done."""
    t0 = t_prev = time.perf_counter()
    dev = cands.device
    parts, steps_run, reads, computed = [], 0, 0, 0
    with torch.inference_mode():
        s = _slot_buffers(step, B, dev)
        useful = torch.zeros((), dtype=torch.long, device=dev)
        for start in range(0, len(cands), B):
            chunk = cands[start:start + B]
            real = len(chunk) if n_real is None else n_real
            pad = step.buffers(("pad", B), lambda: (torch.zeros(B, dtype=torch.bool, device=dev),))[0]
            pad.copy_(torch.arange(B, device=dev) >= real)             # a buffer: a static graph input
            fresh = step.init(pad_to(chunk, B))
            if skip_padding:  # compact, bucketed: padding rows start (and stay) done: never computed
                fresh = fresh._replace(done=pad)
            write(s, fresh)
            n, r, c, t_prev = loop(step, s, pad, trace, t_prev)
            steps_run, reads, computed = steps_run + n, reads + r, computed + c
            sc, proven = final_scores(s.states[:real], s.score[:real], fail_score)
            parts.append((sc, proven, s.depth[:real].clone()))   # finished rows are frozen: read once
            useful = useful + s.depth[:real].sum()
    cat = [torch.cat(x) if parts else torch.zeros(0) for x in zip(*parts)] or [torch.zeros(0)] * 3
    n_all = int(useful)
    return RolloutResult(cat[0], cat[1].bool(), cat[2].long(), steps_run, computed, computed - n_all,
                         time.perf_counter() - t0, B, records=torch.ones(len(cat[0]), dtype=torch.long),
                         trace=trace if trace is not None else [], host_reads=reads + 1)


def _loop_full(step, s, pad, trace, t_prev, masked=False):
    body = step.compiled("masked" if masked else "full", functools.partial(_full_body, step, masked))
    n = 0
    for n in range(1, step.max_depth + 1):  # noqa: B007 (n counts the steps taken)
        active, left = _call(step, body, s, pad).tolist()  # one host read per step: the seed's exit
        t_prev = _trace(trace, t_prev, len(pad), active)
        if left == 0:
            break
    return n, n, n * len(pad), t_prev


def _loop_bucketed(step, s, pad, trace, t_prev, min_bucket=8):
    B, n, computed = len(pad), 0, 0
    active = int((~s.done).sum())                          # host read: the first bucket
    reads = 1
    while active:
        bucket = min(B, max(min_bucket, 1 << (active - 1).bit_length()))  # smallest power of two >= active
        body = step.compiled(f"bucketed{bucket}", functools.partial(_bucket_body, step, bucket))
        left = int(_call(step, body, s))                   # host read: the next bucket, or the exit
        n, reads, computed = n + 1, reads + 1, computed + bucket
        t_prev = _trace(trace, t_prev, bucket, active)
        active = left
    return n, reads, computed, t_prev


def _loop_compact(step, s, pad, trace, t_prev):
    body = step.compiled("compact", functools.partial(_compact_body, step), dynamic=True)
    n, reads, computed = 0, 0, 0
    while True:
        idx = (~s.done).nonzero()[:, 0]  # host sync: the output size depends on the data (dynamic shape)
        reads += 1
        if len(idx) == 0:
            return n, reads, computed, t_prev
        body(s, idx)
        n, computed = n + 1, computed + len(idx)
        t_prev = _trace(trace, t_prev, len(idx), len(idx))


_loop_masked = functools.partial(_loop_full, masked=True)


def full(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
         trace: list | None = None) -> RolloutResult:
    """Chunks of `batch` (the tail padded); every slot stepped until the whole chunk is done (module doc)."""
    return _chunks(step, candidates, check_batch(batch), fail_score, _loop_full, trace)


def masked(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
           trace: list | None = None) -> RolloutResult:
    """`full`, finished rows swapped for an all-padding state before each step (module doc)."""
    return _chunks(step, candidates, check_batch(batch), fail_score, _loop_masked, trace)


def compact(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
            trace: list | None = None) -> RolloutResult:
    """Only the active rows of each chunk gathered and stepped: a shape per step (module doc)."""
    return _chunks(step, candidates, check_batch(batch), fail_score, _loop_compact, trace, skip_padding=True)


def bucketed(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
             trace: list | None = None, min_bucket: int = 8) -> RolloutResult:
    """The active rows in the smallest power-of-two bucket >= `min_bucket` that holds them (module doc)."""
    loop = functools.partial(_loop_bucketed, min_bucket=min_bucket)
    return _chunks(step, candidates, check_batch(batch), fail_score, loop, trace, skip_padding=True)


# ---- recycle: continuous batching from a device-resident queue --------------------------------

class Queue(NamedTuple):
    states: torch.Tensor     # [N, A, 3] every candidate's initial state
    next_var: torch.Tensor   # [N]
    slot_cand: torch.Tensor  # [B] candidate id per slot, -1 = idle
    head: torch.Tensor       # [] next candidate to admit
    table: torch.Tensor      # [N + 1, 3] score, proven, steps per candidate (the last row: a dump)
    records: torch.Tensor    # [N + 1] outcome writes per candidate


def _recycle_body(step: GreedyStep, fail_score: float, s: Slots, q: Queue) -> torch.Tensor:
    """One step; finished slots write their outcome and take the next queued candidates, in queue order.
    -> [all slots idle, candidates still queued, rows active before the step]."""
    N = q.states.shape[0]
    idle = q.slot_cand < 0                                          # idle slots are done: frozen
    new = step.advance(*s)
    finished = new.done & ~idle
    idx = torch.where(finished, q.slot_cand, N)                     # the rest write to the dump row
    score, proven = final_scores(new.states, new.score, fail_score)
    q.table.index_put_((idx,), torch.stack([score, proven.to(score.dtype), new.depth.to(score.dtype)], 1))
    q.records.index_add_(0, idx, torch.ones_like(idx))
    pos = q.head + torch.cumsum(finished, 0) - 1                    # queue position per finished slot
    take = finished & (pos < N)
    src = pos.clamp(0, N - 1)
    write(s, Slots(torch.where(take[:, None, None], q.states[src], new.states),
                   torch.where(take, q.next_var[src], new.next_var), torch.where(take, 0, new.depth),
                   torch.where(take, 0.0, new.score), new.done & ~take))
    slot_cand = torch.where(finished, torch.where(take, pos, -1), q.slot_cand)
    q.slot_cand.copy_(slot_cand)
    head = q.head + take.sum()
    q.head.copy_(head)
    return torch.stack([(slot_cand < 0).all().long(), N - head, (~idle).sum()])


def recycle(step: GreedyStep, candidates: torch.Tensor, batch: int, fail_score: float = -100.0,
            trace: list | None = None) -> RolloutResult:
    """`batch` slots; each finished slot takes the next queued candidate in the same step (module doc)."""
    t0 = t_prev = time.perf_counter()
    cands, B = candidates, check_batch(batch)
    N, dev = len(cands), cands.device
    if N == 0:
        z = torch.zeros(0, device=dev)
        return RolloutResult(z, z.bool(), z.long(), batch=B, records=z.long(), trace=trace if trace is not None else [])
    with torch.inference_mode():
        s = _slot_buffers(step, B, dev)
        q = step.buffers(("queue", B, N), lambda: Queue(
            torch.zeros(N, step.engine.A, 3, dtype=torch.long, device=dev), torch.zeros(N, dtype=torch.long, device=dev),
            torch.zeros(B, dtype=torch.long, device=dev), torch.zeros((), dtype=torch.long, device=dev),
            torch.zeros(N + 1, 3, device=dev), torch.zeros(N + 1, dtype=torch.long, device=dev)))
        first = min(B, N)
        slot_cand = torch.arange(B, device=dev)
        slot_cand = torch.where(slot_cand < first, slot_cand, -1)
        write(s, step.init(pad_to(cands[:first], B))._replace(done=slot_cand < 0))
        q_states, q_nv = step.engine.initial(cands)
        for buf, v in zip(q, (q_states, q_nv, slot_cand, first, 0.0, 0)):
            if isinstance(v, torch.Tensor):
                buf.copy_(v)
            else:
                buf.fill_(v)
        body = step.compiled(f"recycle{fail_score}", functools.partial(_recycle_body, step, fail_score))
        n, reads, skip = 0, 0, 0
        while True:
            status = _call(step, body, s, q)
            n += 1
            if skip and trace is None:
                skip -= 1  # the queue holds candidates: the loop cannot end at this step (module doc)
                continue
            all_idle, queued, active = status.tolist()  # one host read
            reads += 1
            t_prev = _trace(trace, t_prev, B, active)
            if all_idle:
                break
            skip = -(-queued // B)
            if n > N * step.max_depth + 1:
                raise RuntimeError("recycle did not drain its queue: a slot never finished")
        table, records = q.table[:N].clone(), q.records[:N].clone()
        steps = table[:, 2].round().long()
        useful = int(steps.sum())
    return RolloutResult(table[:, 0].contiguous(), table[:, 1] > 0.5, steps, n, n * B, n * B - useful,
                         time.perf_counter() - t0, B, records=records, trace=trace if trace is not None else [],
                         host_reads=reads + 1)


# ---- results of several chunks --------------------------------------------------------------------------

def concat(results: list[RolloutResult]) -> RolloutResult:
    """Results of consecutive chunks as one (counters summed)."""
    if not results:
        z = torch.zeros(0)
        return RolloutResult(z, z.bool(), z.long(), records=z.long())
    cat = lambda name: torch.cat([getattr(r, name) for r in results])  # noqa: E731
    total = lambda name: sum(getattr(r, name) for r in results)  # noqa: E731
    return RolloutResult(cat("score"), cat("proven"), cat("steps"), total("steps_executed"), total("slot_steps"),
                         total("wasted_slot_steps"), total("seconds"), batch=results[-1].batch, records=cat("records"),
                         trace=[t for r in results for t in r.trace], host_reads=total("host_reads"))

