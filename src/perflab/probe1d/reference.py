"""The oracle: the same per-(latent, class) LM fit, dense and in float64, small problems only.

It loops over latents and sums over every row, zeros included, so it checks the sparse solvers'
closed form for the implicit zeros as well as their event sums. The LM rules (six tries, trust region,
lagged-rho damping, fallback) follow the research note's description, written out again here in numpy
rather than shared with the solvers under test. Memory: O(n_rows * n_classes) per latent.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.special import expit

from .config import LAM0, LAM_MAX, LAM_MIN, LM_TRIES, P_CLAMP, PRED_FLOOR, QX_MIN, RHO_BAD, RHO_GOOD, TRUST_RADIUS
from .data import as_csr, check_inputs

__all__ = ["Reference1DProbe"]


def _softplus(z: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z)


class Reference1DProbe:
    """Dense float64 LM solver. `fit(x, y)` -> self with coef_, intercept_ (n_latents, n_classes), n_iter_."""

    def __init__(self, max_iter: int = 100, tol: float = 1e-4, ridge: float = 1e-8, max_elements: int = 50_000_000):
        self.max_iter, self.tol, self.ridge, self.max_elements = max_iter, tol, ridge, max_elements

    def _dense(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        x, y = check_inputs(x, y)
        n, n_lat = x.shape
        if n * n_lat > self.max_elements:
            raise ValueError(f"Reference1DProbe is dense: {n} x {n_lat} is too large (max_elements={self.max_elements})")
        return as_csr(x).to_dense().double().cpu().numpy(), y.double().cpu().numpy()

    def _stats(self, X, Y, b, w):
        """Gradient, Hessian entries and loss of every (latent, class) problem at (b, w): each [L, C]."""
        n_lat, n_cls = b.shape
        out = np.zeros((6, n_lat, n_cls))
        for j in range(n_lat):
            xj = X[:, j:j + 1]                                  # [N, 1]
            z = b[j] + w[j] * xj                                # [N, C]
            mu = expit(z)
            s = mu * (1.0 - mu)
            r = mu - Y
            out[:, j] = (r.sum(0), (r * xj).sum(0), s.sum(0), (s * xj).sum(0), (s * xj * xj).sum(0),
                         (_softplus(z) - Y * z).sum(0))
        g0, g1, h0, h1, h2, loss = out
        rb = b - self.b0_
        g0 = g0 + self.ridge * rb
        g1 = g1 + self.ridge * w
        h0 = h0 + self.ridge
        h2 = h2 + self.ridge
        loss = loss + 0.5 * self.ridge * (w * w + rb * rb)
        return g0, g1, h0, h1, h2, loss

    def _lm_step(self, g0, g1, h0, h1, h2, lam, qx):
        db, dw, pred = np.zeros_like(g0), np.zeros_like(g0), np.zeros_like(g0)
        clipped, done = np.zeros(g0.shape, bool), np.zeros(g0.shape, bool)
        lam = lam.copy()
        for _ in range(LM_TRIES):
            h0e, h2e = h0 + lam, h2 + lam * qx * qx
            det = h0e * h2e - h1 * h1
            with np.errstate(all="ignore"):
                b_t = (h2e * g0 - h1 * g1) / det
                w_t = (h0e * g1 - h1 * g0) / det
                norm = np.sqrt(b_t * b_t + (qx * w_t) ** 2)
                clip_t = norm > TRUST_RADIUS
                scale = np.where(clip_t, TRUST_RADIUS / norm, 1.0)
                b_t, w_t = b_t * scale, w_t * scale
                p_t = g0 * b_t + g1 * w_t - 0.5 * (h0 * b_t * b_t + 2 * h1 * b_t * w_t + h2 * w_t * w_t)
            ok = np.isfinite(b_t) & np.isfinite(w_t) & np.isfinite(p_t) & (p_t > 0) & ~done
            db, dw, pred = np.where(ok, b_t, db), np.where(ok, w_t, dw), np.where(ok, p_t, pred)
            clipped = np.where(ok, clip_t, clipped)
            done |= ok
            lam = np.where(done, lam, lam * 10.0)
        self.fallbacks_ += int((~done).sum())               # the fallback: a zero step
        return db, dw, pred, clipped, np.clip(lam, LAM_MIN, LAM_MAX)

    def fit(self, x, y) -> Reference1DProbe:
        X, Y = self._dense(x, y)
        n = X.shape[0]
        nnz = (X != 0).sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rms = np.sqrt((X * X).sum(0) / nnz)
        qx = np.maximum(np.where(nnz > 0, rms, 1.0), QX_MIN)[:, None]       # [L, 1]
        p = np.clip(Y.sum(0) / n, P_CLAMP, 1 - P_CLAMP)
        self.b0_ = np.broadcast_to(np.log(p / (1 - p)), (X.shape[1], Y.shape[1])).copy()
        b, w = self.b0_.copy(), np.zeros_like(self.b0_)
        lam = np.full_like(b, LAM0)
        self.fallbacks_ = 0
        prev = None
        for it in range(self.max_iter):  # noqa: B007 (it + 1 iterations ran, read after the loop)
            g0, g1, h0, h1, h2, loss = self._stats(X, Y, b, w)
            if prev is not None:                             # lagged rho: last step's actual / predicted decrease
                prev_loss, prev_pred, prev_clip = prev
                rho = (prev_loss - loss) / np.maximum(prev_pred, PRED_FLOOR)
                lam = np.where((rho >= RHO_GOOD) & ~prev_clip, lam * 0.1, np.where((rho <= RHO_BAD) | prev_clip, lam * 10.0, lam))
                lam = np.clip(lam, LAM_MIN, LAM_MAX)
            db, dw, pred, clipped, lam = self._lm_step(g0, g1, h0, h1, h2, lam, qx)
            b, w = b - db, w - dw
            prev = (loss, pred, clipped)
            if max(np.abs(g0).max(), np.abs(g1).max()) < self.tol and max(np.abs(db).max(), np.abs(dw).max()) < self.tol:
                break
        self.intercept_, self.coef_ = b, w
        self.n_iter_ = np.full(Y.shape[1], it + 1)
        return self

    def loss_matrix(self, x, y) -> np.ndarray:
        """Mean binary cross-entropy over the rows for every (latent, class) at the fitted (b, w)."""
        return self.loss_matrix_with_aux(x, y)[0]

    def loss_matrix_with_aux(self, x, y, threshold: float = 0.5):
        """(loss, tp, fp, tn, fn), each [L, C]: mean BCE and confusion counts of sigmoid(b + w x) > threshold."""
        X, Y = self._dense(x, y)
        b, w = self.intercept_, self.coef_
        n_lat, n_cls = b.shape
        loss = np.zeros((n_lat, n_cls))
        counts = np.zeros((4, n_lat, n_cls), np.int64)
        for j in range(n_lat):
            z = b[j] + w[j] * X[:, j:j + 1]
            loss[j] = (_softplus(z) - Y * z).mean(0)
            pred, pos = expit(z) > threshold, Y > 0.5
            counts[:, j] = ((pred & pos).sum(0), (pred & ~pos).sum(0), (~pred & ~pos).sum(0), (~pred & pos).sum(0))
        return (loss, *counts)

    def as_torch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(self.coef_), torch.from_numpy(self.intercept_)
