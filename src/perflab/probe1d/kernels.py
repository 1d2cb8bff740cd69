"""The optimized solver's arithmetic: the per-tile sums of one LM iteration, and the LM update.

An iteration's work is a list of tiles (plan.py): T slots of one segment's events (a latent, or a (latent,
class) pair), zero-padded, against the segment's C columns of (b, w). For every tile and column the solver
needs six sums over its slots of functions of z = b + w v:
    sum mu, sum mu v, sum s, sum s v, sum s v^2, sum softplus(z)      (mu = sigmoid(z), s = mu (1 - mu))
`tile_sums` computes them as one expression, written for torch.compile: one exp, one reciprocal and one
division per (slot, class), and no [events, classes] array in the iteration's own code. (Inductor's CPU code
still stores two [tiles, T, C] planes between its two loops, since it always materializes a reused exp; the
solver keeps them cache-sized by calling it per chunk. Its CUDA code has no such rule.) `tile_sums_into` is the
same arithmetic for eager mode, in a reused workspace. `lm_iteration` turns the sums into one LM iteration
of every coordinate. All of it is pure tensor code (no host sync, no Python branch on data), so it runs the
same on CPU and CUDA and compiles as it stands.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import LAM_MAX, LAM_MIN, LM_TRIES, PRED_FLOOR, RHO_BAD, RHO_GOOD, TRUST_RADIUS

# x86 handles float32 denormals ~100x slower. exp(-60) = 8.8e-27 keeps e, mu, s normal (v >= 1e-5);
# past |z| = 60 each term changes by < 1e-26.
Z_CLAMP = 60.0

# log1p(e) for e in (0, 1] as 2 atanh(t), t = e / (2 + e) in (0, 1/3]: 2 t (1 + t^2/3 + ... + t^12/13). The
# series' tail is < 1e-8 relative; rounding keeps it within 4 float32 ulps (tests/probe1d/test_probe1d_kernels.py),
# e -> 0 gives e back exactly, and it costs a division and 7 multiply-adds instead of a log.
LOG1P_COEFS = tuple(1.0 / (2 * k + 1) for k in range(7))


def log1p_unit(e: torch.Tensor) -> torch.Tensor:
    """log1p(e) for e in [0, 1] (see LOG1P_COEFS)."""
    t = e / (2 + e)
    t2 = t * t
    p = torch.full_like(t, LOG1P_COEFS[-1])
    for c in reversed(LOG1P_COEFS[:-1]):
        p = p * t2 + c
    return 2 * t * p


def slot_terms(z: torch.Tensor):
    """(mu, s, softplus) of z, each precise to float32 rounding in both tails:
    - e = exp(-|z|) in (0, 1], r = 1 / (1 + e): mu = r for z >= 0, e r below (1 - mu would round to 0);
    - s = mu (1 - mu) = e r^2;
    - softplus(z) = relu(z) + log1p(e), log1p by a short series (log1p_unit): precise for e ~ 1e-9 (a class
      with no positives), where log(1 + e) gives 0 and makes the lagged rho see quantized loss decreases.
      One exp per (slot, class) and otherwise arithmetic, which inductor's CPU code vectorizes.
    mu, s and the log1p term use z clamped to +-60 (see Z_CLAMP)."""
    zc = z.clamp(-Z_CLAMP, Z_CLAMP)
    e = torch.exp(-zc.abs())
    r = 1 / (1 + e)
    mu = torch.where(zc >= 0, r, e * r)
    return mu, e * r * r, z.clamp_min(0) + log1p_unit(e)


def tile_sums(bs: torch.Tensor, ws: torch.Tensor, seg: torch.Tensor, v: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
    """The six sums of every tile and column, [P, 6, C] in dtype `acc` (sum mu, mu v, s, s v, s v^2, softplus,
    in that order along dim 1), from the per-segment weights
    bs, ws [S, C], each tile's segment seg [P] and its values v [P, T] (padding: 0). Written for torch.compile:
    the gathers sit inside, so the fused loop reads b and w once per tile from the small [S, C] tables."""
    b = bs.index_select(0, seg)[:, None, :]                 # [P, 1, C]
    w = ws.index_select(0, seg)[:, None, :]
    vv = v[:, :, None]                                       # [P, T, 1]
    mu, s, sp = slot_terms(w * vv + b)                       # [P, T, C]; w v + b: the baseline's rounding
    mu, s, sp, vv = mu.to(acc), s.to(acc), sp.to(acc), vv.to(acc)
    return torch.stack([mu.sum(1), (mu * vv).sum(1), s.sum(1), (s * vv).sum(1), (s * vv * vv).sum(1), sp.sum(1)], 1)


def tile_sums_into(bs, ws, seg, v, buf: torch.Tensor, vpow: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
    """tile_sums in eager mode, every [P, T, C] intermediate in a reused workspace: `buf` is [6, >= P T C]
    (compute dtype), `vpow` [>= P, 3, T] (acc dtype) whose row 0 holds ones. Fresh tensors per op would be
    written cold: on CPU that costs several times the arithmetic. From q = exp(-z) (z clamped): mu = 1 / (1 + q),
    1 - mu = q mu and exp(-|z|) = min(q, 1 / q): one exp for all three, each precise in both tails. The
    weighted sums are batched matrix products [P, 3, T] @ [P, T, C] (rows 1, v, v^2), not 5 more passes."""
    p, t = v.shape
    c = bs.shape[1]
    n = p * t * c
    mu, s, sp, z, q, tmp = (buf[k, :n].view(p, t, c) for k in range(6))
    vv = v[:, :, None]
    torch.mul(ws.index_select(0, seg)[:, None, :], vv, out=z)
    z.add_(bs.index_select(0, seg)[:, None, :])              # w v + b: the baseline's rounding
    torch.clamp(z, -Z_CLAMP, Z_CLAMP, out=q).neg_().exp_()    # q = exp(-z)
    torch.add(q, 1.0, out=mu).reciprocal_()                   # mu = 1 / (1 + q)
    torch.mul(q, mu, out=s).mul_(mu)                          # s = mu (1 - mu) = mu q mu
    e = torch.minimum(q, torch.reciprocal(q, out=tmp), out=q)  # exp(-|z|)
    # log1p(e) = log(u) - ((u - 1) - e) / u, u = 1 + e: the rounding of u corrected (within 3 float32 ulps).
    # Eager, one log pass and 3 small ones beat log1p_unit's 14 passes; compiled, the series is cheaper.
    u = torch.add(e, 1.0, out=sp)
    corr = torch.sub(u, 1.0, out=tmp).sub_(e).div_(u)
    sp.log_().sub_(corr).add_(z.clamp_min_(0))                 # relu(z) + log1p(e)
    vp = vpow[:p]
    vp[:, 1] = v
    torch.mul(vp[:, 1], vp[:, 1], out=vp[:, 2])
    out = torch.empty(p, 6, c, dtype=acc, device=v.device)
    out[:, 0:2] = torch.bmm(vp, mu.to(acc))[:, :2]           # [P, 3, T] @ [P, T, C]: sum mu, sum mu v
    out[:, 2:5] = torch.bmm(vp, s.to(acc))                   # sum s, s v, s v^2
    torch.sum(sp, 1, dtype=acc, out=out[:, 5])
    return out


def trust_region_step(g0, g1, h0, h1, h2, lam, qx):
    """One damped Newton step per coordinate clipped to the elliptical trust region: (db, dw, predicted
    decrease, clipped?, acceptable?). Shared by both solvers."""
    h0e, h2e = h0 + lam, h2 + lam * qx * qx
    det = h0e * h2e - h1 * h1
    db, dw = (h2e * g0 - h1 * g1) / det, (h0e * g1 - h1 * g0) / det
    norm = torch.sqrt(db * db + (qx * dw) ** 2)
    clip = norm > TRUST_RADIUS
    scale = torch.where(clip, TRUST_RADIUS / norm, torch.ones_like(norm))
    db, dw = db * scale, dw * scale
    pred = g0 * db + g1 * dw - 0.5 * (h0 * db * db + 2 * h1 * db * dw + h2 * dw * dw)
    ok = torch.isfinite(db) & torch.isfinite(dw) & torch.isfinite(pred) & (pred > 0)
    return db, dw, pred, clip, ok


def lm_tries(g0, g1, h0, h1, h2, lam, qx):
    """The six LM tries, lam x 10^t for t = 0..5, the first acceptable one per coordinate: (db, dw, predicted
    decrease, clipped?, new lam, accepted?). No host sync; try after try, elementwise over the coordinates
    (not [6, K] arrays and a gather): fewer ops eager (2.3 against 3.1 ms at K = 16k), one vectorized loop compiled."""
    false = torch.zeros_like(g0, dtype=torch.bool)
    db = dw = pred = torch.zeros_like(g0)
    clip = accepted = false
    lam_new = lam * 10.0 ** LM_TRIES                 # every try failed: the fallback's zero step, lam x 10^6
    for t in range(LM_TRIES):
        lam_t = lam * 10.0 ** t
        db_t, dw_t, pred_t, clip_t, ok = trust_region_step(g0, g1, h0, h1, h2, lam_t, qx)
        take = ok & ~accepted
        db, dw, pred = torch.where(take, db_t, db), torch.where(take, dw_t, dw), torch.where(take, pred_t, pred)
        clip, lam_new = torch.where(take, clip_t, clip), torch.where(take, lam_t, lam_new)
        accepted = accepted | ok
    return db, dw, pred, clip, lam_new.clamp(LAM_MIN, LAM_MAX), accepted


def lm_iteration(s: torch.Tensor, c: dict, has_prev: bool, ridge: float, tol: float, freeze: bool) -> dict:
    """One LM iteration of every coordinate of a work list, from its six event sums s [6, K] and its state c
    (work-local [K] tensors, see optimized.PassState): the closed form for the zeros, the lagged-rho damping,
    the six tries, the update and the convergence test. Returns the new state (b, w, lam, prev_*, active) and
    what the solver counts and reports. ~150 small ops in eager mode; one or two loops compiled."""
    cdt = c["b"].dtype
    b, w = c["b"].to(s.dtype), c["w"].to(s.dtype)
    mu0 = torch.sigmoid(b)
    s0 = mu0 * (1 - mu0)
    g0 = s[0] + c["zeros_out"] * mu0 - c["pi"] + ridge * (b - c["b0"])
    g1 = (s[1] - c["xy"]) + ridge * w
    h0, h1, h2 = s[2] + c["zeros_out"] * s0 + ridge, s[3], s[4] + ridge
    loss = ((s[5] - b * c["pos_nz"] - w * c["xy"]) + c["pos_zero"] * F.softplus(-b) + c["neg_out"] * F.softplus(b)
            + 0.5 * ridge * (w * w + (b - c["b0"]) ** 2))
    lam = c["lam"]
    if has_prev:                                 # lagged rho: last step's actual / predicted decrease
        rho = (c["prev_loss"] - loss) / c["prev_pred"].clamp(min=PRED_FLOOR)
        lam = torch.where((rho >= RHO_GOOD) & ~c["prev_clip"], lam * 0.1,
                          torch.where((rho <= RHO_BAD) | c["prev_clip"], lam * 10, lam)).clamp(LAM_MIN, LAM_MAX)
    db, dw, pred, clip, lam_new, accepted = lm_tries(g0, g1, h0, h1, h2, lam, c["qx"])
    active = c["active"]
    zero = (g0 == 0) & (g1 == 0) & active        # exact zero gradient: the step is zero, skip the tries
    upd = active & ~zero
    db, dw = torch.where(upd, db, 0.0), torch.where(upd, dw, 0.0)
    conv = (torch.maximum(g0.abs(), g1.abs()) < tol) & (torch.maximum(db.abs(), dw.abs()) < tol)
    return dict(b=(b - db).to(cdt), w=(w - dw).to(cdt), lam=torch.where(upd, lam_new, c["lam"]), prev_loss=loss,
                prev_pred=torch.where(upd, pred, 0.0), prev_clip=clip & upd,
                active=active & ~(conv | zero) if freeze else active,
                conv=conv, fallback=upd & ~accepted, zero=zero, g0=g0, g1=g1, db=db, dw=dw)
