"""The evaluation pass of the optimized solver: mean BCE and confusion counts of every (latent, class) at
fitted (b, w), from the plan built for the fit (no new sort, no new row indices)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .kernels import chunk_terms
from .plan import EventPlan, Work


def loss_and_confusion(plan: EventPlan, works: dict[int, Work], coef: torch.Tensor, intercept: torch.Tensor,
                       threshold: float, step: int, cdt: torch.dtype):
    """(loss, tp, fp, tn, fn), each [L, C]; `works[nc]` is the whole-pass work list of a pass of nc classes
    (float64 summing matrices: the counts are exact)."""
    dev, f64 = plan.vals.device, torch.float64
    n_lat, n_cls = plan.n_lat, plan.n_cls
    out = [torch.zeros(n_lat, n_cls, dtype=f64, device=dev) for _ in range(5)]
    n0 = (plan.n_rows - plan.nnz.to(f64))[:, None]
    for c0 in range(0, n_cls, step):
        c1 = min(c0 + step, n_cls)
        nc = c1 - c0
        b, w = intercept[:, c0:c1].to(dev, cdt), coef[:, c0:c1].to(dev, cdt)
        work = works[nc]
        r = torch.zeros(3, n_lat, nc, dtype=f64, device=dev)   # [softplus, pred, pred & y]
        for ch in work.chunks:
            seg = plan.ev_lat[ch.e0:ch.e1]
            t = chunk_terms(b, w, seg, plan.vals[ch.e0:ch.e1, None])
            pred = t[0] > threshold            # torch.sigmoid, as the baseline: the same counts at the threshold
            yb = plan.y[plan.ev_row[ch.e0:ch.e1], c0:c1] > 0
            t = torch.stack([t[2].to(f64), pred.to(f64), (pred & yb).to(f64)])
            r[:, ch.s0:ch.s1] += (ch.a @ t.view(-1, nc)).view(3, ch.s1 - ch.s0, nc)
        sp_sum, p_nz, tp_nz = r
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
