"""The slow solver the seed profiled, reproduced on purpose (research note, "Slow pattern").

Per class slab (8 classes) and per LM iteration, `compute_slab_stats`:
  - casts the values again (`values.to(compute_dtype)`),
  - takes its chunks (row_batch_size * 32 events) from `_iter_event_chunks`, which walks the rows with
    one `.item()` per row and per chunk copies the row lengths to the device, builds `arange` +
    `repeat_interleave` row indices and casts the chunk's latent indices and values,
  - per chunk gathers and casts the labels, and launches seven `index_add_`;
then `_lm_step` retries up to six times with a host check per try, and coordinates whose gradient is
exactly zero (empty latents) always exhaust the six tries and take the fallback (a zero step, a warning).
The slab stops when max |grad| and max |step| (two `.item()`) are both below tol.
Do not "fix" this file: it is what the optimized solver is measured against.
"""
from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from .config import (
    DTYPES,
    LAM0,
    LAM_MAX,
    LAM_MIN,
    LM_TRIES,
    P_CLAMP,
    PRED_FLOOR,
    QX_MIN,
    RHO_BAD,
    RHO_GOOD,
    ProbeConfig,
)
from .kernels import trust_region_step
from .probe import Sparse1DProbeBase

log = logging.getLogger("perflab.probe1d")
FALLBACK_WARNING = "LM step fallback: coordinates rejected all 6 tries and took a zero step"


def _iter_event_chunks(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, row_batch_size: int,
                       device: torch.device, dtype: torch.dtype) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(row_idx_chunk, latent_idx, values) for chunks of about row_batch_size * 32 events, as the seed's
    generator made them: the rows walked one `.item()` at a time, and per chunk the row lengths copied
    to the device, an `arange`, a `repeat_interleave` and the casts of the chunk's indices and values."""
    n_rows = crow.numel() - 1
    chunk_target = row_batch_size * 32
    crow_host = crow.cpu()
    row_start, start = 0, int(crow[0].item())
    while row_start < n_rows:
        row_end, end = row_start, start
        while row_end < n_rows and end - start < chunk_target:
            row_end += 1
            end = int(crow[row_end].item())
        lengths = (crow_host[row_start + 1:row_end + 1] - crow_host[row_start:row_end]).to(device)
        rows = torch.arange(row_start, row_end, device=device)
        row_idx_chunk = torch.repeat_interleave(rows, lengths)
        yield row_idx_chunk, col[start:end].to(device, torch.long), values[start:end].to(device, dtype)
        row_start, start = row_end, end


class BaselineSolver:
    """The seed's solver: slabs of `class_slab_size` classes (default 8), everything per chunk."""

    def __init__(self, cfg: ProbeConfig, device: torch.device, iteration_hook: Callable[[dict], None] | None = None):
        self.cfg, self.device, self.hook = cfg, device, iteration_hook
        self.dtype = DTYPES[cfg.compute_dtype]
        self.slab = cfg.class_slab_size or 8

    # ---- per-chunk statistics (the hot path of the seed's profile) ----------------------------------
    def _chunks(self, x: torch.Tensor):
        values = x.values().to(self.dtype)            # the per-pass cast of every value
        return _iter_event_chunks(x.crow_indices(), x.col_indices(), values, self.cfg.row_batch_size,
                                  self.device, self.dtype)

    def compute_slab_stats(self, x: torch.Tensor, y_slab: torch.Tensor, b: torch.Tensor, w: torch.Tensor):
        """Sums over the nonzero events: mu, (mu - y) v, s, s v, s v^2, BCE, y; each [L, C_slab]."""
        n_lat, n_cls = b.shape
        mu_nz, g1, h0, h1, h2, loss_nz, pos_nz = (torch.zeros(n_lat, n_cls, dtype=self.dtype, device=self.device)
                                                  for _ in range(7))
        for row_idx, idx, v in self._chunks(x):
            v = v[:, None]
            y_ev = y_slab[row_idx].to(self.dtype)
            z = b[idx] + w[idx] * v
            mu = torch.sigmoid(z)
            s = mu * (1 - mu)
            mu_nz.index_add_(0, idx, mu)
            g1.index_add_(0, idx, (mu - y_ev) * v)
            h0.index_add_(0, idx, s)
            h1.index_add_(0, idx, s * v)
            h2.index_add_(0, idx, s * v * v)
            loss_nz.index_add_(0, idx, F.binary_cross_entropy_with_logits(z, y_ev, reduction="none"))
            pos_nz.index_add_(0, idx, y_ev)
        return mu_nz, g1, h0, h1, h2, loss_nz, pos_nz

    def _add_implicit_zeros(self, stats, b, w, slab):
        """Closed form for the rows where a latent is zero: n0 = N - nnz rows with logit b."""
        mu_nz, g1, h0, h1, h2, loss_nz, pos_nz = stats
        n0, pi, b0, ridge = slab["n0"], slab["pi"], slab["b0"], self.cfg.ridge
        mu0 = torch.sigmoid(b)
        s0 = mu0 * (1 - mu0)
        pos_zero = torch.minimum((pi - pos_nz).clamp(min=0), n0)
        g0 = mu_nz + n0 * mu0 - pi + ridge * (b - b0)
        g1 = g1 + ridge * w
        h0 = h0 + n0 * s0 + ridge
        h2 = h2 + ridge
        loss = (loss_nz + pos_zero * F.softplus(-b) + (n0 - pos_zero) * F.softplus(b)
                + 0.5 * ridge * (w * w + (b - b0) ** 2))
        return g0, g1, h0, h1, h2, loss

    # ---- the LM step, one host check per try -------------------------------------------------------
    def _lm_step(self, g0, g1, h0, h1, h2, lam, qx, counters):
        db, dw, pred = torch.zeros_like(g0), torch.zeros_like(g0), torch.zeros_like(g0)
        clipped = torch.zeros_like(g0, dtype=torch.bool)
        accepted = torch.zeros_like(g0, dtype=torch.bool)
        lam_try = lam.clone()
        for _ in range(LM_TRIES):
            db_t, dw_t, pred_t, clip_t, ok = trust_region_step(g0, g1, h0, h1, h2, lam_try, qx)
            ok = ok & ~accepted
            db, dw, pred = torch.where(ok, db_t, db), torch.where(ok, dw_t, dw), torch.where(ok, pred_t, pred)
            clipped = torch.where(ok, clip_t, clipped)
            accepted |= ok
            lam_try = torch.where(accepted, lam_try, lam_try * 10)
            if bool(accepted.all()):
                break
        fallback = ~accepted
        n_fb = int(fallback.sum().item())
        if n_fb:
            zero = fallback & (g0 == 0) & (g1 == 0)
            counters["fallback_coord_iters"] += n_fb
            counters["zero_grad_fallback_coord_iters"] += int(zero.sum().item())
            counters["zero_grad_mask"] |= zero
            warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)
        return db, dw, pred, clipped, lam_try.clamp(LAM_MIN, LAM_MAX), n_fb

    # ---- one slab ----------------------------------------------------------------------------------
    def _latent_scale(self, x: torch.Tensor, n_lat: int):
        """nnz and qx per latent, from a separate pass over the values."""
        col = x.col_indices()
        v = x.values().to(self.dtype)
        nnz = torch.zeros(n_lat, dtype=self.dtype, device=self.device).index_add_(0, col, torch.ones_like(v))
        sumsq = torch.zeros(n_lat, dtype=self.dtype, device=self.device).index_add_(0, col, v * v)
        qx = torch.where(nnz > 0, torch.sqrt(sumsq / nnz.clamp(min=1)), torch.ones_like(nnz)).clamp(min=QX_MIN)
        return nnz[:, None], qx[:, None]

    def init_slab(self, x: torch.Tensor, y: torch.Tensor, c0: int, c1: int, nnz, qx) -> dict:
        n_rows, n_lat = x.shape
        y_slab = y[:, c0:c1]
        pi = y_slab.sum(0).to(self.dtype)
        p = (pi / n_rows).clamp(P_CLAMP, 1 - P_CLAMP)
        b0 = torch.log(p / (1 - p)).expand(n_lat, c1 - c0).contiguous()
        return dict(x=x, y_slab=y_slab, c0=c0, c1=c1, pi=pi, b0=b0, n0=n_rows - nnz, qx=qx, b=b0.clone(),
                    w=torch.zeros_like(b0), lam=torch.full_like(b0, LAM0), prev=None, it=0, done=False,
                    counters=dict(fallback_coord_iters=0, zero_grad_fallback_coord_iters=0,
                                  zero_grad_mask=torch.zeros_like(b0, dtype=torch.bool)))

    def iterate(self, slab: dict) -> bool:
        """One LM iteration of one slab; True when the slab has converged."""
        b, w = slab["b"], slab["w"]
        stats = self.compute_slab_stats(slab["x"], slab["y_slab"], b, w)
        g0, g1, h0, h1, h2, loss = self._add_implicit_zeros(stats, b, w, slab)
        lam = slab["lam"]
        if slab["prev"] is not None:
            prev_loss, prev_pred, prev_clip = slab["prev"]
            rho = (prev_loss - loss) / prev_pred.clamp(min=PRED_FLOOR)
            lam = torch.where((rho >= RHO_GOOD) & ~prev_clip, lam * 0.1,
                              torch.where((rho <= RHO_BAD) | prev_clip, lam * 10, lam)).clamp(LAM_MIN, LAM_MAX)
        db, dw, pred, clipped, slab["lam"], n_fb = self._lm_step(g0, g1, h0, h1, h2, lam, slab["qx"], slab["counters"])
        slab["b"], slab["w"] = b - db, w - dw
        slab["prev"] = (loss, pred, clipped)
        slab["it"] += 1
        max_grad = max(g0.abs().max().item(), g1.abs().max().item())
        max_step = max(db.abs().max().item(), dw.abs().max().item())
        if log.isEnabledFor(logging.DEBUG):
            log.debug("slab %d-%d iter %d: loss %.6g max|grad| %.3g max|step| %.3g fallbacks %d",
                      slab["c0"], slab["c1"], slab["it"], loss.sum().item(), max_grad, max_step, n_fb)
        if self.hook is not None:
            self.hook(dict(impl="baseline", classes=(slab["c0"], slab["c1"]), iteration=slab["it"],
                           loss=float(loss.sum().item()), max_grad=max_grad, max_step=max_step, fallbacks=n_fb))
        slab["done"] = max_grad < self.cfg.tol and max_step < self.cfg.tol
        return slab["done"]

    def timed_iteration(self, x: torch.Tensor, y: torch.Tensor, slabs: int = 0):
        """(setup, one_iteration, scale) for timing one LM iteration of every class slab from a fresh start
        (`setup` does nothing: the baseline has no per-fit plan). With `slabs` > 0 only the first slabs run
        (every slab costs the same: same events, same rows): multiply its time by `scale` for a whole iteration."""
        x, y = x.to(self.device), y.to(self.device)
        n_lat, n_cls = x.shape[1], y.shape[1]
        nnz, qx = self._latent_scale(x, n_lat)
        starts = list(range(0, n_cls, self.slab))
        timed = starts[:slabs] if slabs else starts

        def one_iteration():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                for c0 in timed:
                    self.iterate(self.init_slab(x, y, c0, min(c0 + self.slab, n_cls), nnz, qx))
        scale = sum(min(self.slab, n_cls - c) for c in starts) / sum(min(self.slab, n_cls - c) for c in timed)
        return (lambda: None), one_iteration, scale

    # ---- fit and evaluation ------------------------------------------------------------------------
    def fit(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        x, y = x.to(self.device), y.to(self.device)
        n_lat, n_cls = x.shape[1], y.shape[1]
        nnz, qx = self._latent_scale(x, n_lat)
        coef = torch.zeros(n_lat, n_cls, dtype=self.dtype, device=self.device)
        intercept, n_iter = torch.zeros_like(coef), torch.zeros(n_cls, dtype=torch.long)
        counters = dict(fallback_coord_iters=0, zero_grad_fallback_coord_iters=0, zero_grad_fallback_coords=0,
                        zero_grad_fallback_on_empty_latents=0)
        for c0 in range(0, n_cls, self.slab):
            c1 = min(c0 + self.slab, n_cls)
            slab = self.init_slab(x, y, c0, c1, nnz, qx)
            for _ in range(self.cfg.max_iter):
                if self.iterate(slab):
                    break
            coef[:, c0:c1], intercept[:, c0:c1], n_iter[c0:c1] = slab["w"], slab["b"], slab["it"]
            c = slab["counters"]
            counters["fallback_coord_iters"] += c["fallback_coord_iters"]
            counters["zero_grad_fallback_coord_iters"] += c["zero_grad_fallback_coord_iters"]
            counters["zero_grad_fallback_coords"] += int(c["zero_grad_mask"].sum().item())
            counters["zero_grad_fallback_on_empty_latents"] += int((c["zero_grad_mask"] & (nnz == 0)).sum().item())
        return dict(coef=coef, intercept=intercept, n_iter=n_iter, counters=counters)

    def _compute_loss_slab(self, x, y_slab, b, w) -> torch.Tensor:
        """Summed BCE over the nonzero events, [L, C_slab] (its own pass over the chunks)."""
        loss = torch.zeros_like(b)
        for row_idx, idx, v in self._chunks(x):
            z = b[idx] + w[idx] * v[:, None]
            loss.index_add_(0, idx, F.binary_cross_entropy_with_logits(z, y_slab[row_idx].to(self.dtype), reduction="none"))
        return loss

    def _compute_confusion_slab(self, x, y_slab, b, w, threshold: float):
        """tp, fp, fn, tn over the nonzero events (another pass) and the labels' sum, [L, C_slab] each."""
        tp, fp, fn, tn, pos = (torch.zeros(b.shape, dtype=torch.float64, device=self.device) for _ in range(5))
        for row_idx, idx, v in self._chunks(x):
            z = b[idx] + w[idx] * v[:, None]
            pred, yb = torch.sigmoid(z) > threshold, y_slab[row_idx] > 0
            for acc, m in ((tp, pred & yb), (fp, pred & ~yb), (fn, ~pred & yb), (tn, ~pred & ~yb)):
                acc.index_add_(0, idx, m.double())
            pos.index_add_(0, idx, yb.double())
        return tp, fp, fn, tn, pos

    def loss_matrix_with_aux(self, x, y, coef, intercept, threshold: float = 0.5):
        """(loss, tp, fp, tn, fn), each [L, C]: mean BCE and confusion counts, slab by slab."""
        x, y = x.to(self.device), y.to(self.device)
        n_rows, n_lat = x.shape
        n_cls = y.shape[1]
        nnz = torch.zeros(n_lat, dtype=torch.float64, device=self.device).index_add_(
            0, x.col_indices(), torch.ones(x.values().shape, dtype=torch.float64, device=self.device))[:, None]
        out = [torch.zeros(n_lat, n_cls, dtype=torch.float64, device=self.device) for _ in range(5)]
        for c0 in range(0, n_cls, self.slab):
            c1 = min(c0 + self.slab, n_cls)
            y_slab, b, w = y[:, c0:c1], intercept[:, c0:c1].to(self.dtype), coef[:, c0:c1].to(self.dtype)
            pi = y_slab.sum(0).double()
            loss_nz = self._compute_loss_slab(x, y_slab, b, w)
            tp, fp, fn, tn, pos_nz = self._compute_confusion_slab(x, y_slab, b, w, threshold)
            n0 = n_rows - nnz
            pos_zero = (pi - pos_nz).clamp(min=0)
            loss = loss_nz.double() + pos_zero * F.softplus(-b).double() + (n0 - pos_zero) * F.softplus(b).double()
            pred0 = torch.sigmoid(b) > threshold
            tp += torch.where(pred0, pos_zero, 0.0)
            fp += torch.where(pred0, n0 - pos_zero, 0.0)
            fn += torch.where(pred0, 0.0, pos_zero)
            tn += torch.where(pred0, 0.0, n0 - pos_zero)
            for o, v in zip(out, (loss / n_rows, tp, fp, tn, fn)):
                o[:, c0:c1] = v
        loss, *counts = out
        return (loss.float(), *(c.round().long() for c in counts))


class Sparse1DProbe(Sparse1DProbeBase):
    """The seed's solver behind the shared front (`probe.Sparse1DProbeBase`: its arguments, fit, loss matrices)."""
    Solver = BaselineSolver
