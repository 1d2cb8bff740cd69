"""The optimized solver: same fit, same LM rules, none of the seed's per-chunk costs.

Every item of the seed's "Updated priorities" / "Next steps", and beyond:
  - plan once per fit (`plan.build_plan`): events sorted by latent, rows, offsets, values in the compute
    dtype; no repeat_interleave, arange, cast or `.item()` per chunk, the chunk cuts made on the host once;
  - the label sums (sum y, sum y v per latent and class) computed once, so an iteration never reads y:
    it needs only the values, and (b, w) per (latent, class);
  - fused statistics: the events are laid out once in tiles of T slots per latent (plan.py), and one
    kernel computes all six (b, w)-dependent sums of every tile (kernels.tile_sums; instead of seven
    index_add_ over [events, classes] arrays); `compile="default"` (a torch.compile mode, with `backend`)
    compiles it and the LM update;
  - as many classes per pass as `memory_budget_mb` allows (all 151 at the seed's shapes with the GPU preset);
  - zero-gradient coordinates skip the LM tries (no fallback), converged ones are frozen, and the work
    list is compacted when freezing has halved it, so frozen coordinates cost nothing;
  - the six LM tries evaluated at once, no host check per try; one host sync per iteration (the
    convergence check, which also sizes the compacted work list);
  - `accum_dtype="float64"`: float64 sums and LM math with float32 weights (the seed's open question);
  - qx from the plan's product (sum v^2 comes out with the label sums).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sys
import warnings
from collections.abc import Callable

import numpy as np
import torch

from ..kit.compiles import allow_recompiles, compile_kwargs
from ..kit.cudagraphs import tracked, uses_cudagraphs
from .baseline import FALLBACK_WARNING
from .config import DTYPES, LAM0, LM_TRIES, P_CLAMP, QX_MIN, ProbeConfig
from .evaluate import loss_and_confusion
from .kernels import lm_iteration, tile_sums, tile_sums_into
from .plan import EventPlan, Work, block_work, build_plan, full_work, pair_work, tile_chunks
from .probe import Sparse1DProbeBase

log = logging.getLogger("perflab.probe1d")


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../perflab


def _outside_perflab(frame) -> int:
    """warnings.warn's stacklevel, from `frame` (the one that calls warn), of the first frame outside the perflab
    package: the user's line that called fit, however many of perflab's frames lie between (3.12's
    skip_file_prefixes)."""
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level


@dataclasses.dataclass
class PassState:
    """A class pass: the (latent, class) coordinates of classes [c0, c1), all latents.

    The LM state lives work-local: `loc` holds, for each coordinate of the current work list (in its order),
    its weights, damping, lagged-rho memory, active flag and per-coordinate constants ([K] each). The
    closed form, the LM tries and the updates run over those K, so a frozen coordinate costs nothing once
    a compaction has dropped it. `b`, `w` are the pass's full results, written back at each compaction."""
    c0: int
    c1: int
    b: torch.Tensor          # [L, Cp] compute dtype (float32 weights)
    w: torch.Tensor
    work: Work
    loc: dict                # name -> [K] tensor (see init_pass)
    has_prev: bool = False
    it: int = 0
    n_active: int = 0
    cls_active: np.ndarray | None = None   # [Cp] host: classes with an active coordinate
    n_iter: np.ndarray | None = None       # [Cp] host
    fallbacks: torch.Tensor | None = None  # 0-d int64 device counter (read once per fit)
    zero_grad: torch.Tensor | None = None  # 0-d int64: coordinates skipped for an exactly zero gradient
    rebuilds: int = 0


class OptimizedSolver:
    def __init__(self, cfg: ProbeConfig, device: torch.device, iteration_hook: Callable[[dict], None] | None = None):
        self.cfg, self.device, self.hook = cfg, device, iteration_hook
        self.cdt, self.adt = DTYPES[cfg.compute_dtype], DTYPES[cfg.accum_dtype]
        self.budget = int(cfg.memory_budget_mb * 2**20)
        self.tile = cfg.tile_events
        self._plan_key: tuple | None = None
        self._plan: EventPlan | None = None
        self._works: dict = {}
        self._ws: tuple | None = None
        self._sums_compiled = self._lm_compiled = None
        # reduce-overhead / max-autotune: each compiled call is its own CUDA-graph generation (_graph_call)
        self.cudagraphs = uses_cudagraphs(cfg.compile, cfg.backend, device)
        kw = compile_kwargs(cfg.compile, cfg.backend)
        if kw is not None:
            # compile is the mode and backend the backend, as in every study: inductor turns the tile kernel's
            # ~25 eager passes into two loops per chunk and the LM update into one; eager counts graphs cheaply
            allow_recompiles(64)  # has_prev x tol x dtype x device variants pass dynamo's 8 on a GPU run (T5)
            self._sums_compiled = tracked(torch.compile(tile_sums, **kw))
            self._lm_compiled = tracked(torch.compile(lm_iteration, **kw))

    # ---- sizes from the memory budget ----------------------------------------------------------------
    def _coord_bytes(self) -> int:
        acc = torch.finfo(self.adt).bits // 8
        return 3 * 4 + acc * (24 + 8 * LM_TRIES)     # weights + stats, LM state, the batched tries

    def classes_per_pass(self, n_lat: int, n_cls: int) -> int:
        """All classes when the pass state fits in half the budget; `class_slab_size` caps it."""
        fit = max(1, (self.budget // 2) // max(1, n_lat * self._coord_bytes()))
        return max(1, min(n_cls, self.cfg.class_slab_size or n_cls, fit))

    def _chunk_tiles(self, n_col: int) -> int:
        """Tiles per kernel call: `chunk_pair_events` (slot, class) pairs, by default 2^18 on CPU and 2^26 on
        CUDA, within half the memory budget (the eager workspace: 6 planes + casts per pair).
        CPU: a chunk's [p, T, Cs] arrays then stay in cache: the eager workspace, and the compiled kernel's two
        materialized planes (inductor's CPU code stores a reused exp between its two loops: at 2^20 pairs per
        call, or a whole pass, it ran ~2x slower; below 2^17 the ~40 us of each compiled call adds up).
        CUDA: a few dozen calls per iteration at the seed's shapes (each call costs a launch and a guard check)."""
        pairs = self.cfg.chunk_pair_events or (2**26 if self.device.type != "cpu" else 2**18)
        per_pair = 6 * (torch.finfo(self.cdt).bits // 8) + 2 * (torch.finfo(self.adt).bits // 8)
        pairs = min(pairs, (self.budget // 2) // per_pair)
        return max(1, pairs // (self.tile * max(n_col, 1)))

    # ---- plan (once per fit; reused by loss and confusion passes on the same x, y) ----------------------
    def plan(self, x: torch.Tensor, y: torch.Tensor) -> EventPlan:
        if self._plan_key is not None and self._plan_key[0] is x and self._plan_key[1] is y:
            return self._plan
        self._plan = build_plan(x, y, self.device, self.cdt, self.adt, QX_MIN, self.tile)
        self._plan_key = (x, y)
        self._works = {}
        return self._plan

    def _full_work(self, plan: EventPlan, n_col: int) -> Work:
        """The whole-pass work list (the plan's tiles, no copy), per pass width."""
        if n_col not in self._works:
            self._works[n_col] = full_work(plan, n_col)
        return self._works[n_col]

    def init_pass(self, plan: EventPlan, c0: int, c1: int) -> PassState:
        n_lat, n_cls, adt = plan.n_lat, c1 - c0, self.adt
        p = (plan.pi[c0:c1] / plan.n_rows).clamp(P_CLAMP, 1 - P_CLAMP)
        b0 = torch.log(p / (1 - p))                                           # [Cp]
        lat = torch.arange(n_lat, device=self.device).repeat_interleave(n_cls)  # [K = L Cp], latent-major
        cls = torch.arange(n_cls, device=self.device).repeat(n_lat)
        # The zeros of a coordinate in closed form: n0 rows, pos_zero of them positive. The tiles' padding
        # slots are zeros with label 0 that the kernel already evaluates: the closed form takes the rest,
        # n0 - pad zeros for mu and s, and n0 - pos_zero - pad negatives for the loss (plan.py).
        n0 = (plan.n_rows - plan.nnz)[lat]
        pi, pos_nz = plan.pi[c0:c1][cls], plan.pos_nz[:, c0:c1].reshape(-1)
        pos_zero = torch.minimum((pi - pos_nz).clamp(min=0), n0)
        loc = dict(coord=torch.arange(n_lat * n_cls, device=self.device), lat=lat, cls=cls,
                   zeros_out=n0 - plan.pad[lat], pos_zero=pos_zero, neg_out=n0 - pos_zero - plan.pad[lat],
                   pi=pi, qx=plan.qx[lat], b0=b0[cls], pos_nz=pos_nz, xy=plan.xy[:, c0:c1].reshape(-1),
                   b=b0[cls].to(self.cdt), w=torch.zeros(lat.shape, dtype=self.cdt, device=self.device),
                   lam=torch.full(lat.shape, LAM0, dtype=adt, device=self.device),
                   prev_loss=torch.zeros(lat.shape, dtype=adt, device=self.device),
                   prev_pred=torch.zeros(lat.shape, dtype=adt, device=self.device),
                   prev_clip=torch.zeros(lat.shape, dtype=torch.bool, device=self.device),
                   active=torch.ones(lat.shape, dtype=torch.bool, device=self.device))
        return PassState(c0=c0, c1=c1, b=b0.to(self.cdt).expand(n_lat, n_cls).contiguous(),
                         w=torch.zeros(n_lat, n_cls, dtype=self.cdt, device=self.device),
                         work=self._full_work(plan, n_cls), loc=loc, n_active=n_lat * n_cls,
                         cls_active=np.ones(n_cls, bool), n_iter=np.zeros(n_cls, np.int64),
                         fallbacks=torch.zeros((), dtype=torch.long, device=self.device),
                         zero_grad=torch.zeros((), dtype=torch.long, device=self.device))

    # ---- the event pass: six sums for every coordinate of the work list ---------------------------
    def event_stats(self, st: PassState) -> torch.Tensor:
        """The six event sums [6, K] of the work list's coordinates, in its order: per chunk of tiles, the
        kernel's [p, 6, Cs] tile sums, added into their segments (rows of Cs x 6 values: one index_add_)."""
        work, n_col = st.work, st.work.n_col
        bs, ws = st.loc["b"].view(work.n_seg, n_col), st.loc["w"].view(work.n_seg, n_col)   # [S, Cs]
        r = torch.zeros(work.n_seg, 6, n_col, dtype=self.adt, device=self.device)
        for p0, p1 in tile_chunks(work.n_tiles, self._chunk_tiles(n_col)):
            seg, v = work.tile_seg[p0:p1], work.tile_vals[p0:p1]
            r.index_add_(0, seg, self._tile_sums(bs, ws, seg, v))
        return r.transpose(0, 1).reshape(6, -1).contiguous()    # [6, K] (contiguous: one layout to compile)

    def _tile_sums(self, bs, ws, seg, v) -> torch.Tensor:
        if self._sums_compiled is None:
            buf, vpow = self._workspace(v.shape[0], bs.shape[1])
            return tile_sums_into(bs, ws, seg, v, buf, vpow, self.adt)
        # Tiles, segments and columns change with every chunk and compaction: dynamic from the first call, so a
        # fit compiles two graphs (several columns; the pair lists' one column). Backed sizes: unbacked ones
        # (no size-1 specialization) made the kernel ~1.3x and the LM update ~3.7x slower.
        for t, dims in ((bs, (0, 1)), (ws, (0, 1)), (seg, (0,)), (v, (0,))):
            for d in dims:
                torch._dynamo.maybe_mark_dynamic(t, d)
        return self._graph_call(self._sums_compiled, bs, ws, seg, v, self.adt)

    def _workspace(self, p: int, n_col: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The eager kernel's buffers, grown on demand and reused by every chunk: 6 planes of p T Cs slots
        (compute dtype) and the [p, 3, T] powers of v (row 0: ones)."""
        n = p * self.tile * n_col
        if self._ws is None or self._ws[0].shape[1] < n or self._ws[1].shape[0] < p:
            m = max(n, 0 if self._ws is None else self._ws[0].shape[1])
            q = max(p, 0 if self._ws is None else self._ws[1].shape[0])
            self._ws = (torch.empty(6, m, dtype=self.cdt, device=self.device),
                        torch.ones(q, 3, self.tile, dtype=self.adt, device=self.device))
        return self._ws

    # ---- one LM iteration ------------------------------------------------------------------------------
    def _lm(self, s: torch.Tensor, st: PassState) -> dict:
        args = (s, st.loc, st.has_prev, self.cfg.ridge, self.cfg.tol, self.cfg.freeze)
        if self._lm_compiled is None:
            return lm_iteration(*args)
        # The coordinate count K changes at each compaction: dynamic from the first call (no recompile, but
        # for K = 1: a fit's last coordinate, one more small graph)
        torch._dynamo.maybe_mark_dynamic(s, 1)
        for t in st.loc.values():
            torch._dynamo.maybe_mark_dynamic(t, 0)
        out = self._graph_call(self._lm_compiled, *args)
        if self.cudagraphs:  # the LM state is read by the next iteration's graphs: out of the pool first
            out = {k: v.clone() for k, v in out.items()}
        return out

    def _graph_call(self, fn, *args):
        """A compiled call; under CUDA graphs its own generation, so that its outputs live until the next
        compiled call whatever else ran in this process (the tile sums are added up before it)."""
        if self.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        return fn(*args)

    def iterate(self, plan: EventPlan, st: PassState) -> bool:
        """One LM iteration of every active coordinate of the pass; True when the pass is done.
        Exactly one host sync (the `.tolist()` at the end) unless a hook or debug logging asks for more."""
        c = st.loc
        out = self._lm(self.event_stats(st), st)
        st.fallbacks += out["fallback"].sum()
        st.zero_grad += out["zero"].sum()
        for k in ("b", "w", "lam", "prev_loss", "prev_pred", "prev_clip", "active"):
            c[k] = out[k]
        st.has_prev = True
        st.it += 1
        st.n_iter[st.cls_active] = st.it
        active = c["active"]
        if self.cfg.freeze:
            done = torch.zeros(1, dtype=torch.long, device=self.device)
        else:                                        # the slab rule: every coordinate converged at once
            done = (out["conv"] | ~active).all().reshape(1).long()
        n_lat, n_cls = plan.n_lat, st.c1 - st.c0
        lat_counts = torch.zeros(n_lat, dtype=torch.long, device=self.device).index_add_(0, c["lat"], active.long())
        cls_counts = torch.zeros(n_cls, dtype=torch.long, device=self.device).index_add_(0, c["cls"], active.long())
        host = torch.cat([lat_counts, cls_counts, done]).tolist()   # the one host sync of the iteration
        lat_host, cls_host = np.asarray(host[:n_lat]), np.asarray(host[n_lat:-1])
        self._report(st, out)
        st.cls_active, st.n_active = cls_host > 0, int(lat_host.sum())
        if host[-1] or st.n_active == 0:
            self._write_back(st)
            return True
        if self.cfg.freeze:
            self._maybe_compact(plan, st, lat_counts, cls_counts, lat_host, cls_host)
        return False

    def _write_back(self, st: PassState) -> None:
        """The work list's (b, w) into the pass's full result tensors."""
        st.b.view(-1)[st.loc["coord"]] = st.loc["b"]
        st.w.view(-1)[st.loc["coord"]] = st.loc["w"]

    def _maybe_compact(self, plan, st, lat_counts, cls_counts, lat_host, cls_host) -> None:
        """Rebuild the work list when a compacted one would cost at most half of the current one; carry
        the work-local state over to the new list's coordinates."""
        ntile = plan.ntile_host
        block = int(ntile[lat_host > 0].sum()) * plan.tile * int((cls_host > 0).sum())
        pair = int((ntile * lat_host).sum()) * plan.tile
        pair_fits = pair * 5 <= self.budget // 2     # a pair list copies its latents' tiles: values + segment
        best = min(block, pair) if pair_fits else block
        if best > st.work.cost // 2:
            return
        n_cls, c = st.c1 - st.c0, st.loc
        self._write_back(st)
        if pair_fits and pair < block:
            active_full = torch.zeros(plan.n_lat * n_cls, dtype=torch.bool, device=self.device)
            active_full[c["coord"]] = c["active"]
            st.work = pair_work(plan, active_full.view(plan.n_lat, n_cls), lat_host)
        else:
            st.work = block_work(plan, lat_counts, cls_counts, lat_host, cls_host, n_cls)
        # Every new coordinate is in the old list: block -> block shrinks both sides; pair cost <= block cost
        # and both only shrink, so once a pair list is chosen a block comes back only when the two are equal
        # (every active latent has all active classes), i.e. the same coordinates.
        where = torch.full((plan.n_lat * n_cls,), -1, dtype=torch.long, device=self.device)
        where[c["coord"]] = torch.arange(c["coord"].numel(), device=self.device)
        keep = where[st.work.coord.reshape(-1)]       # old work-local position of each new coordinate
        st.loc = {k: v[keep] for k, v in c.items()}
        st.rebuilds += 1

    def _report(self, st, out: dict) -> None:
        """Debug logging and the iteration hook: extra host syncs, only when asked for."""
        if self.hook is None and not log.isEnabledFor(logging.DEBUG):
            return
        loss, g0, g1, db, dw, fb = (out[k] for k in ("prev_loss", "g0", "g1", "db", "dw", "fallback"))
        info = dict(impl="optimized", classes=(st.c0, st.c1), iteration=st.it, loss=float(loss.sum().item()),
                    max_grad=float(torch.maximum(g0.abs(), g1.abs()).max().item()),
                    max_step=float(torch.maximum(db.abs(), dw.abs()).max().item()), fallbacks=int(fb.sum().item()))
        log.debug("classes %d-%d iter %d: loss %.6g max|grad| %.3g max|step| %.3g fallbacks %d", st.c0, st.c1,
                  info["iteration"], info["loss"], info["max_grad"], info["max_step"], info["fallbacks"])
        if self.hook is not None:
            self.hook(info)

    # ---- fit and evaluation ----------------------------------------------------------------------------
    def fit(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        plan = self.plan(x, y)
        n_lat, n_cls = plan.n_lat, plan.n_cls
        coef = torch.zeros(n_lat, n_cls, dtype=self.cdt, device=self.device)
        intercept, n_iter = torch.zeros_like(coef), torch.zeros(n_cls, dtype=torch.long)
        fallbacks = torch.zeros((), dtype=torch.long, device=self.device)
        zero_grad = torch.zeros((), dtype=torch.long, device=self.device)
        step = self.classes_per_pass(n_lat, n_cls)
        rebuilds = frozen = 0
        for c0 in range(0, n_cls, step):
            c1 = min(c0 + step, n_cls)
            st = self.init_pass(plan, c0, c1)
            for _ in range(self.cfg.max_iter):
                if self.iterate(plan, st):
                    break
            else:
                self._write_back(st)
            coef[:, c0:c1], intercept[:, c0:c1] = st.w, st.b
            n_iter[c0:c1] = torch.from_numpy(st.n_iter)
            fallbacks += st.fallbacks
            zero_grad += st.zero_grad
            rebuilds += st.rebuilds
            frozen += n_lat * (c1 - c0) - st.n_active if self.cfg.freeze else 0
        n_fb, n_zero = torch.stack([fallbacks, zero_grad]).tolist()   # one sync per fit for the counters
        if n_fb:
            warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=_outside_perflab(sys._getframe()))
        counters = dict(fallback_coord_iters=n_fb, zero_grad_fallback_coord_iters=0, zero_grad_fallback_coords=0,
                        zero_grad_skipped_coords=n_zero, frozen_coords=frozen, classes_per_pass=step,
                        work_rebuilds=rebuilds)
        return dict(coef=coef, intercept=intercept, n_iter=n_iter, counters=counters)

    def timed_iteration(self, x: torch.Tensor, y: torch.Tensor):
        """(setup, one_iteration, scale) for timing one LM iteration of every class pass from a fresh start:
        `setup()` builds the plan (what a fit does once; done here once already); scale 1."""
        x, y = x.to(self.device), y.to(self.device)
        n_lat, n_cls = x.shape[1], y.shape[1]
        state = {}

        def setup():
            self._plan_key = None
            state["plan"] = self.plan(x, y)

        def one_iteration():
            plan = state["plan"]
            step = self.classes_per_pass(n_lat, n_cls)
            for c0 in range(0, n_cls, step):
                self.iterate(plan, self.init_pass(plan, c0, min(c0 + step, n_cls)))
        setup()
        return setup, one_iteration, 1.0

    def loss_matrix_with_aux(self, x, y, coef, intercept, threshold: float = 0.5):
        """(loss, tp, fp, tn, fn), each [L, C]: one pass over the plan's tiles per class pass (evaluate.py)."""
        plan = self.plan(x, y)
        step = self.classes_per_pass(plan.n_lat, plan.n_cls)
        # float64 terms and counts, ~4 [p, T, Cs] arrays of 8 B per slot and class
        chunk = max(1, (self.budget // 2) // (40 * plan.tile * step))
        return loss_and_confusion(plan, coef, intercept, threshold, step, self.cdt, chunk)


class Sparse1DProbe(Sparse1DProbeBase):
    """The optimized solver behind the shared front (`probe.Sparse1DProbeBase`: its arguments, fit, loss matrices)."""
    Solver = OptimizedSolver
