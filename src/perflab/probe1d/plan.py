"""What the optimized solver builds once per fit, and the work lists its iterations walk.

`EventPlan` (once per fit, reused by the fit, loss and confusion passes): the events in latent order
(CSC), their values, squares, rows and latents, per-latent offsets, and every sum that does not depend
on (b, w): nnz, qx, the class counts pi, and per (latent, class) sum y and sum y v. Those come out of one
sparse product, so the iterations never touch the labels again and qx costs no extra pass.

`Work` (rebuilt only when freezing has shrunk the work by half): the (event, class) pairs one LM
iteration must evaluate, as segments of events times columns, cut into chunks on the host once, each
chunk carrying the one sparse matrix that sums its terms into its segments (see FIT_BLOCKS).
  - "block": segments = active latents, columns = active classes (the start: every latent, every class);
  - "pair":  segments = active (latent, class) coordinates, one column; each carries its latent's events.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .data import make_csr

__all__ = ["EventPlan", "Work", "build_plan", "full_work", "block_work", "pair_work", "FIT_BLOCKS", "EVAL_BLOCKS"]


@dataclasses.dataclass
class EventPlan:
    n_rows: int
    n_lat: int
    n_cls: int
    vals: torch.Tensor       # [E] compute dtype, events in latent order
    ev_lat: torch.Tensor     # [E] int64 latent of each event (sorted)
    ev_row: torch.Tensor     # [E] int64 row of each event (for the confusion pass)
    loff: torch.Tensor       # [L+1] int64 event offset of each latent
    nnz_host: np.ndarray     # [L] int64 events per latent, on the host for chunk plans
    nnz: torch.Tensor        # [L] accum dtype
    qx: torch.Tensor         # [L] accum dtype
    pi: torch.Tensor         # [C] accum dtype, positives per class
    pos_nz: torch.Tensor     # [L, C] accum dtype, sum over a latent's events of y
    xy: torch.Tensor         # [L, C] accum dtype, sum over a latent's events of y v
    y: torch.Tensor          # [N, C] labels as given (uint8/bool/float) on the device

    @property
    def n_events(self) -> int:
        return int(self.vals.numel())


def build_plan(x: torch.Tensor, y: torch.Tensor, device: torch.device, cdt: torch.dtype, adt: torch.dtype,
               qx_min: float) -> EventPlan:
    """Latent-ordered events and the label sums, in one sort and one sparse product. Host syncs: one
    (the per-latent counts, needed on the host to cut chunks)."""
    x, y = x.to(device), y.to(device)
    n_rows, n_lat = x.shape
    crow, col, vals = x.crow_indices(), x.col_indices(), x.values()
    n_ev = vals.numel()
    rows = torch.repeat_interleave(torch.arange(n_rows, device=device), crow.diff(), output_size=n_ev)
    order = torch.argsort(col, stable=True)                 # CSR -> CSC order, once per fit
    ev_lat, ev_row = col[order], rows[order]
    v = vals[order].to(cdt)
    loff = torch.searchsorted(ev_lat, torch.arange(n_lat + 1, device=device))  # no bincount: no sync
    nnz_long = loff.diff()
    # one product for every (b, w)-free sum: [1; v; v^2] (3L x N, CSR) @ [y | 1] (N x (C+1))
    ones = torch.ones(n_ev, dtype=adt, device=device)
    a3 = make_csr(torch.cat([loff, loff[1:] + n_ev, loff[1:] + 2 * n_ev]), ev_row.repeat(3),
                  torch.cat([ones, v.to(adt), v.to(adt) ** 2]), (3 * n_lat, n_rows))
    rhs = torch.cat([y.to(adt), torch.ones(n_rows, 1, dtype=adt, device=device)], 1)
    sums = (a3 @ rhs).view(3, n_lat, -1)                     # [3, L, C+1]
    nnz, sumsq = sums[0, :, -1], sums[2, :, -1]
    qx = torch.where(nnz > 0, torch.sqrt(sumsq / nnz.clamp(min=1)), torch.ones_like(nnz)).clamp(min=qx_min)
    return EventPlan(n_rows=n_rows, n_lat=n_lat, n_cls=y.shape[1], vals=v, ev_lat=ev_lat, ev_row=ev_row,
                     loff=loff, nnz_host=np.asarray(nnz_long.tolist(), dtype=np.int64), nnz=nnz, qx=qx,
                     pi=y.to(adt).sum(0), pos_nz=sums[0, :, :-1].contiguous(), xy=sums[1, :, :-1].contiguous(), y=y)


# The summing matrix of a chunk: the terms T = [mu; s; softplus] lie as 3 planes of [Ec, Cs] rows, and
# block k of rows sums plane PLANE[k] weighted by v^POWER[k] into the chunk's segments:
#   sum mu, sum mu v, sum s, sum s v, sum s v^2, sum softplus   (6 statistics, one sparse product)
FIT_BLOCKS = ((0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0))   # (plane, power of v)
EVAL_BLOCKS = ((0, 0), (1, 0), (2, 0))                          # plain sums of 3 planes (loss, counts)


@dataclasses.dataclass
class Chunk:
    e0: int          # event range [e0, e1) of the work list
    e1: int
    s0: int          # segments [s0, s1) it touches (a segment may straddle two chunks: sums add)
    s1: int
    a: torch.Tensor  # [len(blocks) * n, 3 * (e1 - e0)] CSR, int32 indices


@dataclasses.dataclass
class Work:
    kind: str                  # "block" or "pair"
    coord: torch.Tensor | None  # [S, Cs] flat index into the pass state; None: the identity (whole pass)
    ev_seg: torch.Tensor       # [Es] segment of each event
    vals: torch.Tensor         # [Es]
    n_seg: int
    n_col: int
    chunks: list[Chunk]

    @property
    def n_events(self) -> int:
        return int(self.vals.numel())

    @property
    def cost(self) -> int:
        """(event, class) pairs one iteration evaluates."""
        return self.n_events * self.n_col


def _summing_matrix(crow: torch.Tensor, v: torch.Tensor, blocks, adt: torch.dtype) -> torch.Tensor:
    """Stack one CSR row block per (plane, power) over the 3 term planes of a chunk (int32: fewer bytes)."""
    ec = v.numel()
    ar = torch.arange(ec, device=v.device, dtype=torch.int32)
    powers = {0: torch.ones(ec, dtype=adt, device=v.device), 1: v.to(adt)}
    powers[2] = powers[1] * powers[1]
    crow32 = crow.to(torch.int32)
    crows = [crow32] + [crow32[1:] + k * ec for k in range(1, len(blocks))]
    col = torch.cat([ar + plane * ec for plane, _ in blocks])
    val = torch.cat([powers[p] for _, p in blocks])
    return make_csr(torch.cat(crows), col, val, (len(blocks) * (crow.numel() - 1), 3 * ec))


def _chunks(seg_off_host: np.ndarray, seg_off: torch.Tensor, vals: torch.Tensor, chunk_events: int,
            adt: torch.dtype, blocks=FIT_BLOCKS) -> list[Chunk]:
    """Cut the event list into chunks of `chunk_events` on the host, each with its summing matrix."""
    out = []
    n_ev = vals.numel()
    for e0 in range(0, n_ev, chunk_events):
        e1 = min(e0 + chunk_events, n_ev)
        s0 = int(np.searchsorted(seg_off_host, e0, side="right")) - 1
        s1 = int(np.searchsorted(seg_off_host, e1 - 1, side="right"))
        crow = seg_off[s0:s1 + 1].clamp(e0, e1) - e0                      # [n+1]
        out.append(Chunk(e0, e1, s0, s1, _summing_matrix(crow, vals[e0:e1], blocks, adt)))
    return out


def _off(sizes: torch.Tensor) -> torch.Tensor:
    return torch.cat([sizes.new_zeros(1), torch.cumsum(sizes, 0)])


def full_work(plan: EventPlan, n_col: int, chunk_pair_events: int, adt: torch.dtype, blocks=FIT_BLOCKS) -> Work:
    """Every latent times every class of the pass: the plan's arrays as they are, no copy."""
    ce = max(1, chunk_pair_events // max(n_col, 1))
    off_host = np.concatenate([[0], np.cumsum(plan.nnz_host)])
    chunks = _chunks(off_host, plan.loff, plan.vals, ce, adt, blocks)
    return Work("block", None, plan.ev_lat, plan.vals, plan.n_lat, n_col, chunks)


def _gather_events(plan: EventPlan, seg_lat: torch.Tensor, sizes_host: np.ndarray, n_seg: int):
    """Events of each segment's latent, segment after segment (sizes known on the host: no sync)."""
    off_host = np.concatenate([[0], np.cumsum(sizes_host)]).astype(np.int64)
    n_ev = int(off_host[-1])
    k = plan.loff[seg_lat + 1] - plan.loff[seg_lat]
    seg_off = _off(k)
    ev_seg = torch.repeat_interleave(torch.arange(n_seg, device=k.device), k, output_size=n_ev)
    # event e of segment j sits at loff[lat_j] + (e - seg_off[j]): one per-segment shift, gathered once
    ev = (plan.loff[seg_lat] - seg_off[:-1])[ev_seg].add_(torch.arange(n_ev, device=k.device))
    return off_host, seg_off, ev_seg, plan.vals[ev]


def block_work(plan: EventPlan, lat_counts: torch.Tensor, cls_counts: torch.Tensor, lat_host: np.ndarray,
               cls_host: np.ndarray, n_cls_pass: int, chunk_pair_events: int, adt: torch.dtype) -> Work:
    """Active latents x active classes (counts > 0), compacted; host arrays give the sizes."""
    lat_idx_host = np.flatnonzero(lat_host > 0)
    n_lat, n_col = len(lat_idx_host), int((cls_host > 0).sum())
    lat_ids = torch.nonzero_static(lat_counts > 0, size=n_lat).squeeze(1)
    cls_ids = torch.nonzero_static(cls_counts > 0, size=n_col).squeeze(1)
    off_host, seg_off, ev_seg, vals = _gather_events(plan, lat_ids, plan.nnz_host[lat_idx_host], n_lat)
    chunks = _chunks(off_host, seg_off, vals, max(1, chunk_pair_events // max(n_col, 1)), adt)
    coord = lat_ids[:, None] * n_cls_pass + cls_ids[None, :]            # [S, Cs]
    return Work("block", coord, ev_seg, vals, n_lat, n_col, chunks)


def pair_work(plan: EventPlan, active: torch.Tensor, lat_host: np.ndarray, chunk_pair_events: int,
              adt: torch.dtype) -> Work:
    """One segment per active (latent, class), carrying its latent's events; one column."""
    n_pairs = int(lat_host.sum())
    n_cls_pass = active.shape[1]
    pairs = torch.nonzero_static(active.reshape(-1), size=n_pairs).squeeze(1)  # latent-major order
    sizes_host = np.repeat(plan.nnz_host, lat_host.astype(np.int64))
    off_host, seg_off, ev_seg, vals = _gather_events(plan, pairs // n_cls_pass, sizes_host, n_pairs)
    chunks = _chunks(off_host, seg_off, vals, chunk_pair_events, adt)
    return Work("pair", pairs[:, None], ev_seg, vals, n_pairs, 1, chunks)
