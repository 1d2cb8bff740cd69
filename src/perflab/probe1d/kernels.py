"""The optimized solver's arithmetic: the per-chunk elementwise chain and the batched LM step.

Both are pure tensor functions (no host sync, no Python branching on data), so they run the same on CPU
and CUDA, and `chunk_terms` can be handed to torch.compile as one fused kernel.
"""
from __future__ import annotations

import torch

from .config import LAM_MAX, LAM_MIN, LM_TRIES, TRUST_RADIUS

# x86 handles float32 denormals ~100x slower. exp(-60) = 8.8e-27 keeps mu, s and s v^2 normal (v >= 1e-5);
# past |z| = 60 each term changes by < 1e-26.
Z_CLAMP = 60.0
# Vectorized log1p has ~10x slower bands for arguments near 1e-13 and 1e-21 (its polynomial underflows);
# below 1e-12, log1p(e) = e to float32 precision, so evaluate it at max(e, 1e-12) and add back e - that.
LOG1P_FLOOR = 1e-12


def chunk_terms(bs: torch.Tensor, ws: torch.Tensor, seg: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[mu; s; softplus(z)] for z = b + w v of every (event, class) of a chunk: [3, E, C], from the per-segment
    weights bs, ws [S, C], each event's segment seg [E] and value v [E, 1]. Written for torch.compile: the
    gathers sit inside, so a fused kernel reads b and w from the small [S, C] tables, not [E, C] copies.
    - mu = torch.sigmoid(z): the baseline's function, so predictions at a threshold count the same.
    - s = mu (1 - mu) = e / (1 + e)^2 with e = exp(-|z|): precise in both tails (1 - mu would round to 0).
    - softplus(z) = relu(z) + log1p(e): exact to float32 rounding even when it is ~1e-7 (a class with no
      positives), where log(1 + e) -- and binary_cross_entropy_with_logits -- round to multiples of 1.2e-7
      and make the lagged rho see quantized loss decreases. log1p(e) = log(u) - ((u - 1) - e) / u with
      u = 1 + e (the rounding error of u corrected; e tiny gives e back): only log and arithmetic, which
      inductor's CPU code vectorizes; with its log1p, which it does not, the fused chain was no faster.
    mu, s and the log1p term use z clamped to +-60 (see Z_CLAMP), so no denormal reaches the sums."""
    z = ws.index_select(0, seg) * v + bs.index_select(0, seg)   # same rounding as the baseline's b + w * v
    zc = z.clamp(-Z_CLAMP, Z_CLAMP)
    e = torch.exp(-zc.abs())
    u = 1 + e
    r = 1 / u
    softplus = z.clamp_min(0) + (torch.log(u) - ((u - 1) - e) * r)
    return torch.stack([torch.sigmoid(zc), e * r * r, softplus])


def chunk_terms_into(bs, ws, seg, v, buf):
    """chunk_terms with every intermediate in a reused workspace: `buf` is [7, E, C] (3 term planes, then
    z, q, and the two gathers). Fresh tensors per op would be written cold: on CPU that costs 3-10x the
    arithmetic (measured in the profile of an iteration). From q = exp(-z) (z clamped): mu = 1 / (1 + q),
    1 - mu = q mu and exp(-|z|) = min(q, 1 / q): one exp for all three, each precise in both tails, and
    no torch.sigmoid (~1.5 ns per element on this CPU against ~0.3 for exp or a reciprocal)."""
    t, z, q, bg, wg = buf[:3], buf[3], buf[4], buf[5], buf[6]
    if bs.shape[1] == 1:                             # one column (pair work lists): gather scalars, not rows
        torch.index_select(bs.view(-1), 0, seg, out=bg.view(-1))
        torch.index_select(ws.view(-1), 0, seg, out=wg.view(-1))
    else:
        torch.index_select(bs, 0, seg, out=bg)
        torch.index_select(ws, 0, seg, out=wg)
    torch.mul(wg, v, out=z)
    z.add_(bg)                                       # same rounding as the baseline's b + w * v
    torch.clamp(z, -Z_CLAMP, Z_CLAMP, out=q).neg_().exp_()
    mu = torch.add(q, 1.0, out=t[0]).reciprocal_()
    torch.mul(mu, torch.mul(q, mu, out=wg), out=t[1])            # s = mu (1 - mu)
    e = torch.minimum(q, torch.reciprocal(q, out=bg), out=bg)   # exp(-|z|)
    ec = torch.clamp_min(e, LOG1P_FLOOR, out=wg)
    torch.log1p(ec, out=t[2]).add_(e.sub_(ec))                  # log1p(exp(-|z|)); below the floor within ~1e-19
    t[2].add_(z.clamp_min_(0))                                   # softplus(z) = relu(z) + log1p(exp(-|z|))
    return t


def trust_region_step(g0, g1, h0, h1, h2, lam, qx):
    """One damped Newton step per coordinate (lam broadcasts: one try, or all tries as [T, *coords]) clipped to
    the elliptical trust region: (db, dw, predicted decrease, clipped?, acceptable?). Shared by both solvers."""
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
    """All six LM tries at once ([T, *coords]); the first acceptable one per coordinate. No host sync."""
    scale10 = 10.0 ** torch.arange(LM_TRIES, dtype=lam.dtype, device=lam.device)
    lam_t = lam * scale10.view(-1, *[1] * lam.dim())                       # [T, *coords]
    db, dw, pred, clip, ok = trust_region_step(g0, g1, h0, h1, h2, lam_t, qx)
    first = torch.zeros_like(g0, dtype=torch.long)
    for t in range(LM_TRIES - 1, 0, -1):         # index of the first accepted try (argmax(0) is slow on CPU)
        first = torch.where(ok[t], t, first)
    first = torch.where(ok[0], 0, first)[None]
    pick = lambda t: t.gather(0, first).squeeze(0)
    accepted = ok.any(0)
    lam_new = torch.where(accepted, pick(lam_t), lam * 10.0 ** LM_TRIES).clamp(LAM_MIN, LAM_MAX)
    zero = torch.zeros_like(g0)
    return (torch.where(accepted, pick(db), zero), torch.where(accepted, pick(dw), zero),
            torch.where(accepted, pick(pred), zero), accepted & pick(clip), lam_new, accepted)
