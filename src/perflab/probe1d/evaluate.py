"""The evaluation pass of the optimized solver: mean BCE and confusion counts of every (latent, class) at
fitted (b, w), from the plan built for the fit (its tiles and each slot's row: no new sort)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .plan import EventPlan, tile_chunks


def _tile_counts(plan: EventPlan, b, w, yx, p0: int, p1: int, threshold: float) -> torch.Tensor:
    """[p, 3, Cs] float64 per tile: sum softplus(z), predicted positives, predicted & labelled positives.
    Padding slots (row n_rows) are masked out, so the counts are exact."""
    f64 = torch.float64
    seg, rows = plan.tile_lat[p0:p1], plan.tile_rows[p0:p1]
    z = w[seg][:, None, :] * plan.tile_vals[p0:p1, :, None] + b[seg][:, None, :]   # [p, T, Cs], the fit's rounding
    real = (rows < plan.n_rows)[:, :, None]
    pred = (torch.sigmoid(z) > threshold) & real       # torch.sigmoid, as the baseline: the same counts
    zd = z.to(f64)
    sp = torch.where(real, zd.clamp_min(0) + torch.log1p(torch.exp(-zd.abs())), 0.0)
    return torch.stack([sp.sum(1), pred.sum(1, dtype=f64), (pred & yx[rows]).sum(1, dtype=f64)], 1)


def loss_and_confusion(plan: EventPlan, coef: torch.Tensor, intercept: torch.Tensor, threshold: float,
                       step: int, cdt: torch.dtype, chunk_tiles: int):
    """(loss, tp, fp, tn, fn), each [L, C], for class passes of `step` classes, `chunk_tiles` tiles at a time."""
    dev, f64 = plan.tile_vals.device, torch.float64
    n_lat, n_cls = plan.n_lat, plan.n_cls
    out = [torch.zeros(n_lat, n_cls, dtype=f64, device=dev) for _ in range(5)]
    n0 = (plan.n_rows - plan.nnz.to(f64))[:, None]
    for c0 in range(0, n_cls, step):
        c1 = min(c0 + step, n_cls)
        nc = c1 - c0
        b, w = intercept[:, c0:c1].to(dev, cdt), coef[:, c0:c1].to(dev, cdt)
        yx = torch.cat([plan.y[:, c0:c1] > 0, torch.zeros(1, nc, dtype=torch.bool, device=dev)])  # row n_rows: padding
        r = torch.zeros(n_lat, 3, nc, dtype=f64, device=dev)   # [softplus, pred, pred & y]
        for p0, p1 in tile_chunks(plan.n_tiles, chunk_tiles):
            r.index_add_(0, plan.tile_lat[p0:p1], _tile_counts(plan, b, w, yx, p0, p1, threshold))
        sp_sum, p_nz, tp_nz = r.unbind(1)
        pi, pos_nz, xy = plan.pi[c0:c1].to(f64), plan.pos_nz[:, c0:c1].to(f64), plan.xy[:, c0:c1].to(f64)
        bd, wd = b.to(f64), w.to(f64)
        pos_zero = (pi - pos_nz).clamp(min=0)
        loss = (sp_sum - bd * pos_nz - wd * xy + pos_zero * F.softplus(-bd) + (n0 - pos_zero) * F.softplus(bd))
        pred0 = torch.sigmoid(b) > threshold                  # the zeros: one prediction per (latent, class)
        fp_nz, fn_nz = p_nz - tp_nz, pos_nz - tp_nz
        tn_nz = plan.nnz.to(f64)[:, None] - p_nz - fn_nz
        neg_zero = n0 - pos_zero
        vals = (loss / plan.n_rows, tp_nz + torch.where(pred0, pos_zero, 0.0), fp_nz + torch.where(pred0, neg_zero, 0.0),
                tn_nz + torch.where(pred0, 0.0, neg_zero), fn_nz + torch.where(pred0, 0.0, pos_zero))
        for o, v in zip(out, vals):
            o[:, c0:c1] = v
    loss, *counts = out
    return (loss.float(), *(c.round().long() for c in counts))
