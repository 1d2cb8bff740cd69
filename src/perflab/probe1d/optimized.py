"""The optimized solver: same fit, same LM rules, none of the seed's per-chunk costs.

Every item of the seed's "Updated priorities" / "Next steps", and beyond:
  - plan once per fit (`plan.build_plan`): events sorted by latent, rows, offsets, values in the compute
    dtype; no repeat_interleave, arange, cast or `.item()` per chunk, the chunk cuts made on the host once;
  - the label sums (sum y, sum y v per latent and class) computed once, so an iteration never reads y:
    it needs only the values, and (b, w) per (latent, class);
  - fused statistics: per chunk one elementwise chain (z, mu, s, softplus) and one sparse product that
    sums all six (b, w)-dependent statistics into their latents (instead of seven index_add_);
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
import warnings
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from .baseline import FALLBACK_WARNING
from .config import (DTYPES, LAM0, LAM_MAX, LAM_MIN, LM_TRIES, P_CLAMP, PRED_FLOOR, QX_MIN, RHO_BAD, RHO_GOOD,
                     ProbeConfig)
from .evaluate import loss_and_confusion
from .kernels import chunk_terms, chunk_terms_into, lm_tries
from .plan import EVAL_BLOCKS, FIT_BLOCKS, EventPlan, Work, block_work, build_plan, full_work, pair_work

log = logging.getLogger("perflab.probe1d")


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
        default_chunk = 2**24 if device.type == "cuda" else 2**17  # CPU: a chunk's buffers stay in L2
        self.chunk_pair_events = cfg.chunk_pair_events or default_chunk
        self._plan_key: tuple | None = None
        self._plan: EventPlan | None = None
        self._works: dict = {}
        self._ws: torch.Tensor | None = None
        self._terms = None
        if cfg.compile != "off":
            backend = "eager" if cfg.compile == "eager" else "inductor"
            # dynamic: the last chunk and compacted work lists change the row count, not the code
            self._terms = torch.compile(chunk_terms, dynamic=True, backend=backend)

    # ---- sizes from the memory budget ----------------------------------------------------------------
    def _coord_bytes(self) -> int:
        acc = torch.finfo(self.adt).bits // 8
        return 3 * 4 + acc * (24 + 8 * LM_TRIES)     # weights + stats, LM state, the batched tries

    def classes_per_pass(self, n_lat: int, n_cls: int) -> int:
        """All classes when the pass state fits in half the budget; `class_slab_size` caps it."""
        fit = max(1, (self.budget // 2) // max(1, n_lat * self._coord_bytes()))
        return max(1, min(n_cls, self.cfg.class_slab_size or n_cls, fit))

    def _chunk_pairs(self) -> int:
        per_pair = 7 * 4 + 3 * (torch.finfo(self.adt).bits // 8)    # the 7-plane workspace (+ float64 casts)
        return max(1, min(self.chunk_pair_events, (self.budget // 2) // per_pair))

    # ---- plan (once per fit; reused by loss and confusion passes on the same x, y) ----------------------
    def plan(self, x: torch.Tensor, y: torch.Tensor) -> EventPlan:
        if self._plan_key is not None and self._plan_key[0] is x and self._plan_key[1] is y:
            return self._plan
        self._plan = build_plan(x, y, self.device, self.cdt, self.adt, QX_MIN)
        self._plan_key = (x, y)
        self._works = {}
        return self._plan

    def _full_work(self, plan: EventPlan, n_col: int, adt: torch.dtype, blocks=FIT_BLOCKS) -> Work:
        """The whole-pass work list and its chunk matrices: built once per fit (per pass width)."""
        key = (n_col, adt, blocks)
        if key not in self._works:
            self._works[key] = full_work(plan, n_col, self._chunk_pairs(), adt, blocks)
        return self._works[key]

    def init_pass(self, plan: EventPlan, c0: int, c1: int) -> PassState:
        n_lat, n_cls, adt = plan.n_lat, c1 - c0, self.adt
        p = (plan.pi[c0:c1] / plan.n_rows).clamp(P_CLAMP, 1 - P_CLAMP)
        b0 = torch.log(p / (1 - p))                                           # [Cp]
        lat = torch.arange(n_lat, device=self.device).repeat_interleave(n_cls)  # [K = L Cp], latent-major
        cls = torch.arange(n_cls, device=self.device).repeat(n_lat)
        loc = dict(coord=torch.arange(n_lat * n_cls, device=self.device), lat=lat, cls=cls,
                   n0=(plan.n_rows - plan.nnz)[lat], pi=plan.pi[c0:c1][cls], qx=plan.qx[lat], b0=b0[cls],
                   pos_nz=plan.pos_nz[:, c0:c1].reshape(-1), xy=plan.xy[:, c0:c1].reshape(-1),
                   b=b0[cls].to(self.cdt), w=torch.zeros(lat.shape, dtype=self.cdt, device=self.device),
                   lam=torch.full(lat.shape, LAM0, dtype=adt, device=self.device),
                   prev_loss=torch.zeros(lat.shape, dtype=adt, device=self.device),
                   prev_pred=torch.zeros(lat.shape, dtype=adt, device=self.device),
                   prev_clip=torch.zeros(lat.shape, dtype=torch.bool, device=self.device),
                   active=torch.ones(lat.shape, dtype=torch.bool, device=self.device))
        return PassState(c0=c0, c1=c1, b=b0.to(self.cdt).expand(n_lat, n_cls).contiguous(),
                         w=torch.zeros(n_lat, n_cls, dtype=self.cdt, device=self.device),
                         work=self._full_work(plan, n_cls, adt), loc=loc, n_active=n_lat * n_cls,
                         cls_active=np.ones(n_cls, bool), n_iter=np.zeros(n_cls, np.int64),
                         fallbacks=torch.zeros((), dtype=torch.long, device=self.device),
                         zero_grad=torch.zeros((), dtype=torch.long, device=self.device))

    # ---- the event pass: six sums for every coordinate of the work list ---------------------------
    def event_stats(self, st: PassState) -> torch.Tensor:
        """The six event sums [6, K] of the work list's coordinates, in its order."""
        work, n_col = st.work, st.work.n_col
        bs, ws = st.loc["b"].view(work.n_seg, n_col), st.loc["w"].view(work.n_seg, n_col)   # [S, Cs]
        r = torch.zeros(6, work.n_seg, n_col, dtype=self.adt, device=self.device)
        for ch in work.chunks:
            seg, v, m = work.ev_seg[ch.e0:ch.e1], work.vals[ch.e0:ch.e1, None], (ch.e1 - ch.e0) * n_col
            if self._terms is None:
                t = chunk_terms_into(bs, ws, seg, v, self._workspace(m)[:7 * m].view(7, ch.e1 - ch.e0, n_col))
            else:
                t = self._terms(bs, ws, seg, v)
            # all six sums in one sparse product: [6n, 3Ec] @ [3Ec, Cs] -> [6, n, Cs]
            r[:, ch.s0:ch.s1] += (ch.a @ t.view(-1, n_col).to(self.adt)).view(6, ch.s1 - ch.s0, n_col)
        return r.view(6, -1)

    def _workspace(self, m: int) -> torch.Tensor:
        """A flat buffer for 7 planes of m elements, grown on demand and reused by every chunk."""
        if self._ws is None or self._ws.numel() < 7 * m:
            self._ws = torch.empty(7 * m, dtype=self.cdt, device=self.device)
        return self._ws

    # ---- one LM iteration ------------------------------------------------------------------------------
    def _derivatives(self, st: PassState):
        """Gradient, Hessian and loss [K] from the event sums and the closed form for the zeros."""
        s, ridge, c = self.event_stats(st), self.cfg.ridge, st.loc
        n0, pi, pos_nz, xy = c["n0"], c["pi"], c["pos_nz"], c["xy"]
        b, w = c["b"].to(self.adt), c["w"].to(self.adt)
        mu0 = torch.sigmoid(b)
        s0 = mu0 * (1 - mu0)
        pos_zero = torch.minimum((pi - pos_nz).clamp(min=0), n0)
        g0 = s[0] + n0 * mu0 - pi + ridge * (b - c["b0"])
        g1 = (s[1] - xy) + ridge * w
        h0, h1, h2 = s[2] + n0 * s0 + ridge, s[3], s[4] + ridge
        loss = ((s[5] - b * pos_nz - w * xy) + pos_zero * F.softplus(-b) + (n0 - pos_zero) * F.softplus(b)
                + 0.5 * ridge * (w * w + (b - c["b0"]) ** 2))
        return b, w, g0, g1, h0, h1, h2, loss

    def iterate(self, plan: EventPlan, st: PassState) -> bool:
        """One LM iteration of every active coordinate of the pass; True when the pass is done.
        Exactly one host sync (the `.tolist()` at the end) unless a hook or debug logging asks for more."""
        cfg, c = self.cfg, st.loc
        b, w, g0, g1, h0, h1, h2, loss = self._derivatives(st)
        lam = c["lam"]
        if st.has_prev:                              # lagged rho: last step's actual / predicted decrease
            rho = (c["prev_loss"] - loss) / c["prev_pred"].clamp(min=PRED_FLOOR)
            lam = torch.where((rho >= RHO_GOOD) & ~c["prev_clip"], lam * 0.1,
                              torch.where((rho <= RHO_BAD) | c["prev_clip"], lam * 10, lam)).clamp(LAM_MIN, LAM_MAX)
        db, dw, pred, clip, lam_new, accepted = lm_tries(g0, g1, h0, h1, h2, lam, c["qx"])
        active = c["active"]
        zero = (g0 == 0) & (g1 == 0) & active        # exact zero gradient: the step is zero, skip the tries
        upd = active & ~zero
        st.fallbacks += (upd & ~accepted).sum()
        st.zero_grad += zero.sum()
        db, dw = torch.where(upd, db, 0.0), torch.where(upd, dw, 0.0)
        c["b"], c["w"] = (b - db).to(self.cdt), (w - dw).to(self.cdt)
        c["lam"] = torch.where(upd, lam_new, c["lam"])
        c["prev_loss"], c["prev_pred"], c["prev_clip"] = loss, torch.where(upd, pred, 0.0), clip & upd
        st.has_prev = True
        st.it += 1
        st.n_iter[st.cls_active] = st.it
        conv = (torch.maximum(g0.abs(), g1.abs()) < cfg.tol) & (torch.maximum(db.abs(), dw.abs()) < cfg.tol)
        if cfg.freeze:
            c["active"] = active = active & ~(conv | zero)
            done = torch.zeros(1, dtype=torch.long, device=self.device)
        else:                                        # the slab rule: every coordinate converged at once
            done = (conv | ~active).all().reshape(1).long()
        n_lat, n_cls = plan.n_lat, st.c1 - st.c0
        lat_counts = torch.zeros(n_lat, dtype=torch.long, device=self.device).index_add_(0, c["lat"], active.long())
        cls_counts = torch.zeros(n_cls, dtype=torch.long, device=self.device).index_add_(0, c["cls"], active.long())
        host = torch.cat([lat_counts, cls_counts, done]).tolist()   # the one host sync of the iteration
        lat_host, cls_host = np.asarray(host[:n_lat]), np.asarray(host[n_lat:-1])
        self._report(st, loss, g0, g1, db, dw, upd & ~accepted)
        st.cls_active, st.n_active = cls_host > 0, int(lat_host.sum())
        if host[-1] or st.n_active == 0:
            self._write_back(st)
            return True
        if cfg.freeze:
            self._maybe_compact(plan, st, lat_counts, cls_counts, lat_host, cls_host)
        return False

    def _write_back(self, st: PassState) -> None:
        """The work list's (b, w) into the pass's full result tensors."""
        st.b.view(-1)[st.loc["coord"]] = st.loc["b"]
        st.w.view(-1)[st.loc["coord"]] = st.loc["w"]

    def _maybe_compact(self, plan, st, lat_counts, cls_counts, lat_host, cls_host) -> None:
        """Rebuild the work list when a compacted one would cost at most half of the current one; carry
        the work-local state over to the new list's coordinates."""
        block = int(plan.nnz_host[lat_host > 0].sum()) * int((cls_host > 0).sum())
        pair = int((plan.nnz_host * lat_host).sum())
        pair_fits = pair * 48 <= self.budget // 2    # a pair list copies its events: values, index, matrix
        best = min(block, pair) if pair_fits else block
        if best > st.work.cost // 2:
            return
        chunk, n_cls, c = self._chunk_pairs(), st.c1 - st.c0, st.loc
        self._write_back(st)
        if pair_fits and pair < block:
            active_full = torch.zeros(plan.n_lat * n_cls, dtype=torch.bool, device=self.device)
            active_full[c["coord"]] = c["active"]
            st.work = pair_work(plan, active_full.view(plan.n_lat, n_cls), lat_host, chunk, self.adt)
        else:
            st.work = block_work(plan, lat_counts, cls_counts, lat_host, cls_host, n_cls, chunk, self.adt)
        # Every new coordinate is in the old list: block -> block shrinks both sides; pair cost <= block cost
        # and both only shrink, so once a pair list is chosen a block comes back only when the two are equal
        # (every active latent has all active classes), i.e. the same coordinates.
        where = torch.full((plan.n_lat * n_cls,), -1, dtype=torch.long, device=self.device)
        where[c["coord"]] = torch.arange(c["coord"].numel(), device=self.device)
        keep = where[st.work.coord.reshape(-1)]       # old work-local position of each new coordinate
        st.loc = {k: v[keep] for k, v in c.items()}
        st.rebuilds += 1

    def _report(self, st, loss, g0, g1, db, dw, fb) -> None:
        """Debug logging and the iteration hook: extra host syncs, only when asked for."""
        if self.hook is None and not log.isEnabledFor(logging.DEBUG):
            return
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
            warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)
        counters = dict(fallback_coord_iters=n_fb, zero_grad_fallback_coord_iters=0, zero_grad_fallback_coords=0,
                        zero_grad_skipped_coords=n_zero, frozen_coords=frozen, classes_per_pass=step,
                        work_rebuilds=rebuilds)
        return dict(coef=coef, intercept=intercept, n_iter=n_iter, counters=counters)

    def loss_matrix_with_aux(self, x, y, coef, intercept, threshold: float = 0.5):
        """(loss, tp, fp, tn, fn), each [L, C]: one pass over the plan's events per class pass (evaluate.py)."""
        plan = self.plan(x, y)
        step = self.classes_per_pass(plan.n_lat, plan.n_cls)
        works = {nc: self._full_work(plan, 3 * nc, torch.float64, EVAL_BLOCKS)
                 for nc in {min(step, plan.n_cls - c0) for c0 in range(0, plan.n_cls, step)}}
        return loss_and_confusion(plan, works, coef, intercept, threshold, step, self.cdt)
