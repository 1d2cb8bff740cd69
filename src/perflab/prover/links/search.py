"""Beam search over the policy's choices: the proofs the engine can make that the greedy policy misses.

    search = BeamSearch(engine, policy, width=8, depth=3, compile="default", backend="eager")
    res = search.score(candidates, batch=512)   # per candidate: best proof found, its rule part, proved
    res.score, res.proven, res.log_weight, res.row_steps

Each candidate keeps `width` partial proofs (beams). One step derives every successor of every beam
(`engine.derive` on [B*W] states), scores each child as its parent's score plus the policy's
log-probability of the choice plus log(weight) of the rule it applies (the greedy step's proof score,
`step.GreedyStep`), records every child that is <true> as a proof found (best score kept), and keeps the
`width` best children that are still open goals (not <true>, <false> or <end>). A proof is detected among
*all* children, not only the kept ones, so `depth` steps find every proof of `depth` steps whose first
`depth - 1` steps stay among the kept beams: width >= S (the engine's successor slots) and depth 2 is the
exhaustive search of two steps, which is what one mined rule needs (the rule, then its facts).

Fixed shapes and no host read: `depth` steps of [B, W] beams whatever happens (a dead beam scores -inf and
is still computed), so the whole search of a chunk is `depth` calls of one compiled graph per shape (the
first step has W = 1: the query alone) and one read of the results at the end. Where the mode records CUDA
graphs, a chunk is one generation (`perflab.kit.cudagraphs`): step 2 reads step 1's outputs, and the chunk's
results are copied out before the next chunk frees them. Ties between children are
broken by their position (a stable sort), so a row's proof never depends on the other rows of its chunk.

The last step (`ClosingSearch`, the same search; issue 33): a child of the last step can only count as a proof,
never continue, so its successor rows need not be built. `UnificationEngine.closing` finds the same candidates,
unifiers and fact test as `derive` and says which children are <true> and which are in derive's list, without the
compaction and the scatters (on [B, M, N] planes, int32, a dense fact table); the policy's log-probabilities of the
list come from the candidates' atoms in place (`successor_log_probs`: the policy embeds a state as the mean of its
atoms, so order and padding do not matter), and the last step's parents carry only the atom columns that can be
real (1 + (depth - 1) of them from a one-atom query). `SparseClosingSearch` runs that policy only on the rows where
some child closes (a few percent of the rows on Kinship), at the price of one host read per chunk (not under CUDA
graphs: the CPU's). Same proofs, same scores up to float rounding (the tests: 1e-5). Measured side by side
(tools/link-throughput.py, outputs/kg/891c0b4/: 2-core CPU, 1 thread): on Nations' whole split 2.3x (ClosingSearch)
and 3.1x (SparseClosingSearch) today's candidates/s at batch 512, 3.7x and 5.9x at 2048.

Cost per candidate: 1 + width * (depth - 1) rows derived, against the greedy loop's one row per step
(until the chunk's slowest candidate is done, at most max_depth steps). `batch` counts rows per step: a
chunk holds batch // width candidates, so a step's memory is the greedy step's at the same batch.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ...kit.env import synchronize
from ..core.engine import BODY
from ..core.kg import END, FIRST_PRED, TRUE
from ..core.rollout import check_batch, pad_to
from ..core.step import GreedyStep

NEG_INF = float("-inf")


@dataclasses.dataclass
class SearchResult:
    score: torch.Tensor        # [N] best proof's score (log-probabilities + log rule weights); fail_score if none
    proven: torch.Tensor       # [N] bool: a proof was found
    log_weight: torch.Tensor   # [N] the best proof's sum of log rule weights (0 when none)
    depth: torch.Tensor        # [N] steps of the best proof (0 when none)
    row_steps: int = 0         # rows derived, padding included
    seconds: float = 0.0
    batch: int = 0             # rows per step

    @property
    def policy_log_prob(self) -> torch.Tensor:
        """[N] the best proof's sum of the policy's log-probabilities (0 when none)."""
        return torch.where(self.proven, self.score - self.log_weight, torch.zeros_like(self.score))


SCORE_TOL = 1e-5  # two searches' scores of one proof agree to this (module doc: the order of float32 sums)


def differences(a: SearchResult, b: SearchResult, tol: float = SCORE_TOL) -> tuple[int, int]:
    """Two searches' results of the same candidates: (differences, near ties). A difference is a proven flag or a
    depth that differs, except a depth of a candidate both prove whose two best scores differ, by at most `tol`, but
    not exactly: a near tie, counted apart. The searches share their first depth - 1 steps (`expand`: the same code on
    the same shapes keeps the same beams) and test every child of the last step, so ties cannot reach which candidates
    are proved; which proof is best can: a proof of the last step whose score is within float rounding of an earlier
    one wins (`_best_proof`: strictly better) in one search and loses in the other, where the two compute the last
    step's scores differently (a GPU's kernels, the closing step's table rows). Equal scores mean equal arithmetic,
    so no tie could choose there: a depth that differs at an exactly equal score is a difference."""
    flags = a.proven.cpu() != b.proven.cpu()
    depths = a.depth.cpu() != b.depth.cpu()
    gap = (a.score.cpu().double() - b.score.cpu().double()).abs()
    near = depths & a.proven.cpu() & b.proven.cpu() & (gap > 0) & (gap <= tol * (1 + b.score.cpu().double().abs()))
    return int(flags.sum() + (depths & ~near).sum()), int(near.sum())


class BeamSearch:
    """`width` proofs per candidate, `depth` steps (module doc). Compile mode and backend as GreedyStep's."""

    def __init__(self, engine, policy, width: int, depth: int, compile: str = "off", backend: str = "inductor"):
        if width < 1 or depth < 1:
            raise ValueError(f"need width >= 1 and depth >= 1, got width={width}, depth={depth}")
        self.engine, self.policy, self.width, self.depth = engine, policy, width, depth
        self._step = GreedyStep(engine, policy, depth, compile, backend)   # compile mode, backend, graph cache
        self.mode, self.backend = compile, backend

    def expand(self, states, next_var, score, log_w, best, best_w, best_d, t):
        """One step of [B, W] beams -> the next [B, width] beams and the best proof so far.
        states [B, W, A, 3], next_var/score/log_w [B, W]; best/best_w [B] float, best_d [B] long; t [] long."""
        B, W, A = states.shape[0], states.shape[1], self.engine.A
        d = self.engine.derive(states.reshape(B * W, A, 3), next_var.reshape(B * W))    # [BW, S, A, 3]
        lp = torch.log_softmax(self.policy(states.reshape(B * W, A, 3), d.states, d.counts), -1)  # [BW, S]
        S = lp.shape[1]
        child = (score.reshape(B * W, 1) + lp + d.log_weight).reshape(B, W * S)   # -inf: invalid or dead parent
        child_w = (log_w.reshape(B * W, 1) + d.log_weight).reshape(B, W * S)
        first = d.states[:, :, 0, 0].reshape(B, W * S)
        # every <true> child is a proof, kept or not; the first best one wins a tie (argmax: lowest index)
        proof = torch.where(first == TRUE, child, NEG_INF)
        i = proof.argmax(1, keepdim=True)
        found = proof.gather(1, i)[:, 0]
        better = found > best
        best = torch.where(better, found, best)
        best_w = torch.where(better, child_w.gather(1, i)[:, 0], best_w)
        best_d = torch.where(better, t + 1, best_d)                                 # steps of the proof
        # the `width` best open children continue; a stable sort breaks ties by position, row by row
        key = torch.where(first >= FIRST_PRED, child, NEG_INF)
        top, idx = torch.sort(key, dim=1, descending=True, stable=True)
        top, idx = top[:, : self.width], idx[:, : self.width]                       # [B, width]
        if top.shape[1] < self.width:                                               # W * S < width: dead pads
            pad = self.width - top.shape[1]
            top = torch.cat([top, top.new_full((B, pad), NEG_INF)], 1)
            idx = torch.cat([idx, idx[:, :1].expand(B, pad)], 1)
        rows = torch.arange(B, device=states.device)[:, None]
        new_states = d.states.reshape(B, W * S, A, 3)[rows, idx]                    # [B, width, A, 3]
        new_nv = d.next_var.reshape(B, W * S)[rows, idx]
        return new_states, new_nv, top, child_w.gather(1, idx), best, best_w, best_d, t + 1

    def chunk(self, queries: torch.Tensor):
        """The search of one chunk of queries [B, 3] -> (best [B], best_w [B], best_d [B])."""
        return self._steps(queries, self.depth)[4:7]

    def _steps(self, queries: torch.Tensor, n: int):
        """`n` steps of `expand` from queries [B, 3] -> its eight operands after them (states, next_var, score,
        log_w, best, best_w, best_d, t), in one CUDA-graph generation."""
        B, dev = queries.shape[0], queries.device
        states, nv = self.engine.initial(queries)
        states, nv = states[:, None], nv[:, None]                                   # [B, 1, A, 3]: W = 1 first
        score = torch.zeros(B, 1, device=dev)
        log_w = torch.zeros(B, 1, device=dev)
        best = torch.full((B,), NEG_INF, device=dev)
        best_w = torch.zeros(B, device=dev)
        best_d = torch.zeros(B, dtype=torch.long, device=dev)
        t = torch.zeros((), dtype=torch.long, device=dev)  # a device tensor: one graph for every step, no copy in
        if self._step.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()  # one generation per chunk: its steps read each other's outputs
        for _ in range(n):
            fn = self._step.compiled(f"beam{self.width}_w{states.shape[1]}", self.expand)
            states, nv, score, log_w, best, best_w, best_d, t = fn(states, nv, score, log_w, best, best_w, best_d, t)
        return states, nv, score, log_w, best, best_w, best_d, t

    def score(self, candidates: torch.Tensor, batch: int, fail_score: float = -100.0) -> SearchResult:
        """Best proof of each candidate [N, 3], chunks of batch // width candidates (the tail padded by
        repeating its last candidate, so every chunk has one shape)."""
        check_batch(batch)
        per_chunk = max(1, batch // self.width)
        N, dev = len(candidates), candidates.device
        t0 = time.perf_counter()
        with torch.inference_mode():
            # each chunk's results copied here: a CUDA graph's outputs live until the next chunk's generation
            best = torch.empty(N, device=dev)
            best_w = torch.empty(N, device=dev)
            best_d = torch.empty(N, dtype=torch.long, device=dev)
            for start in range(0, N, per_chunk):
                chunk = candidates[start:start + per_chunk]
                for dst, src in zip((best, best_w, best_d), self.chunk(pad_to(chunk, per_chunk))):
                    dst[start:start + len(chunk)] = src[: len(chunk)]
        synchronize(dev)  # the chunks run asynchronously on a GPU: their time ends when they do
        seconds = time.perf_counter() - t0
        proven = best > NEG_INF
        score = torch.where(proven, best, torch.full_like(best, fail_score))
        rows = -(-N // per_chunk) * per_chunk * (1 + self.width * (self.depth - 1))
        return SearchResult(score, proven, torch.where(proven, best_w, 0.0), torch.where(proven, best_d, 0), rows,
                            seconds, per_chunk * self.width)


class ClosingSearch(BeamSearch):
    """BeamSearch whose last step tests which children are <true> instead of building them (module doc, "The last
    step"): the same constructor, `score` and results (its policy must be `core.policy.Policy`: its table is read)."""

    def chunk(self, queries: torch.Tensor):
        """The search of one chunk of queries [B, 3] -> (best [B], best_w [B], best_d [B])."""
        beams = self._first_steps(queries)
        fn = self._step.compiled(f"close{self.width}_w{beams[0].shape[1]}", self.close)
        return fn(*beams)

    def _first_steps(self, queries: torch.Tensor):
        """All steps but the last (`expand`) -> the last step's beams: states [B, W, m, 3] cut to the m atoms a
        state can hold after depth - 1 steps from a one-atom query, and the other seven of `expand`'s operands."""
        states, *rest = self._steps(queries, self.depth - 1)
        m = min(self.engine.A, 1 + (self.depth - 1) * (BODY - 1))   # atoms a state holds after depth - 1 steps
        return states[:, :, :m], *rest

    def close(self, states, next_var, score, log_w, best, best_w, best_d, t):
        """The last step of [B, W] beams of m atoms -> the best proof (best [B], best_w [B], best_d [B])."""
        B, W, m = states.shape[0], states.shape[1], states.shape[2]
        flat = states.reshape(B * W, m, 3)
        c = self.engine.closing(flat, next_var.reshape(B * W))                      # [BW, N] each
        lp = successor_log_probs(self.policy, flat, c)                              # [BW, N]
        return _best_proof(score.reshape(B * W, 1) + lp + c.log_weight, log_w.reshape(B * W, 1) + c.log_weight,
                           c.closes, best, best_w, best_d, t)


class SparseClosingSearch(ClosingSearch):
    """ClosingSearch with the last step's policy run only on the rows where a proof closes (Kinship: ~8% of them):
    a row's log-probabilities count only in its proofs. The same results; one host read per chunk (how many rows
    close sets the policy's shape), so no CUDA graph and a wait per chunk on a GPU: for the CPU."""
    HOST_READS = True  # a host read per chunk: never compiled for a device (`study.compile_mode`)

    def chunk(self, queries: torch.Tensor):
        states, nv, score, log_w, best, best_w, best_d, t = self._first_steps(queries)
        B, W, m = states.shape[0], states.shape[1], states.shape[2]
        flat, nv = states.reshape(B * W, m, 3), nv.reshape(B * W)
        c = self._step.compiled(f"closing_w{W}", self.engine.closing)(flat, nv)     # [BW, N] each
        rows = c.closes.any(-1).nonzero()[:, 0]          # the host read: rows where some child is <true>
        if len(rows) == 0:
            return best, best_w, best_d                  # no proof closes in this chunk's last step
        fn = self._step.compiled("close_rows", self.close_rows, dynamic=True)
        return fn(flat[rows], type(c)(*(x[rows] for x in c)), rows, score.reshape(B * W), log_w.reshape(B * W),
                  best, best_w, best_d, t)

    def close_rows(self, flat, c, rows, score, log_w, best, best_w, best_d, t):
        """`close` on the rows that close ([K, m, 3], `engine.closing` of them, their indices [K] among the B*W)."""
        lp = successor_log_probs(self.policy, flat, c)                              # [K, N]
        shape = (score.shape[0], lp.shape[1])                                       # [BW, N]
        child = score.new_full(shape, NEG_INF).index_put((rows,), score[rows, None] + lp + c.log_weight)
        child_w = score.new_zeros(shape).index_put((rows,), log_w[rows, None] + c.log_weight)
        closes = torch.zeros(shape, dtype=torch.bool, device=lp.device).index_put((rows,), c.closes)
        return _best_proof(child, child_w, closes, best, best_w, best_d, t)


def _best_proof(child, child_w, closes, best, best_w, best_d, t):
    """The last step's children [BW, N] (scores, log-weights, <true>) -> the best proof of each of the B
    candidates (W beams each), or the one found before where that is at least as good."""
    B = best.shape[0]
    child, child_w, closes = (x.reshape(B, -1) for x in (child, child_w, closes))   # [B, W * N]
    # the first best <true> child wins a tie, as in `expand`: children in derive's order, beam by beam
    proof = torch.where(closes, child, NEG_INF)
    i = proof.argmax(1, keepdim=True)
    found = proof.gather(1, i)[:, 0]
    better = found > best
    return (torch.where(better, found, best), torch.where(better, child_w.gather(1, i)[:, 0], best_w),
            torch.where(better, t + 1, best_d))


def successor_log_probs(policy, states: torch.Tensor, c) -> torch.Tensor:
    """The policy's log-probabilities [B, N] of derive's list (c.listed candidates, then <end> where c.end), -inf off
    the list, from `engine.closing`'s atoms in place. A successor's logit is scale * q . mean of its kept atoms'
    (pred + arg1 - arg2) rows of the policy's table (`Policy.embed`'s rows: a predicate as is, a term capped at
    "any variable", after the predicates): each table row's dot product with q once ([B, V]: one matmul), then three
    scalars per atom, not three E-vectors (`Policy.embed`'s embedding_bag) per atom."""
    B = states.shape[0]
    proj = (policy.query(states) * policy.scale) @ policy.table.weight.T     # [B, V]
    P, V = policy.P, policy.C + 1                                  # a term's row: P + min(term, any variable)

    def scores(rows):                                              # [B, M, N] table rows -> their scores
        return proj.gather(1, rows.reshape(B, -1).long()).reshape(rows.shape)
    per_atom = (scores(c.pred) + scores(torch.clamp(c.arg1, max=V) + P)
                - scores(torch.clamp(c.arg2, max=V) + P))                           # pred + arg1 - arg2
    per_atom = torch.where(c.keep, per_atom, 0.0)                                   # [B, M, N]
    logit = per_atom.sum(1) / c.n_atoms.clamp(min=1)
    logit = torch.where(c.n_atoms == 0, proj[:, TRUE, None], logit)                  # <true>: its one atom
    logits = torch.cat([torch.where(c.listed, logit, NEG_INF), torch.where(c.end, proj[:, END], NEG_INF)[:, None]], 1)
    return torch.where(c.listed, torch.log_softmax(logits, -1)[:, :-1], NEG_INF)    # an empty list: no nan
