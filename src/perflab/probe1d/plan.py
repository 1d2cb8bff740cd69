"""What the optimized solver builds once per fit, and the work lists its iterations walk.

`EventPlan` (once per fit, reused by the fit, loss and confusion passes): the events in latent order, cut
into tiles of T slots (a latent's events fill its tiles in order; its last tile is padded with zeros), each
slot's row (for the evaluation pass's labels), and every sum that does not depend on (b, w): nnz, qx, the
class counts pi, and per (latent, class) sum y and sum y v. Those come out of one sparse product, so the
iterations never touch the labels again and qx costs no extra pass.

Padding: a latent with n events has ceil(n / T) tiles and pad = T ceil(n / T) - n zero slots (< T). The fit
evaluates those slots like any other: each is a zero of the latent with label 0, so the closed form for the
zeros counts pad fewer of them (optimized.init_pass). Padding costs at most T - 1 slots per latent (~6% of
the events at the CPU defaults, ~2% at the seed's); a latent that never fires has no tile at all.

`Work` (rebuilt only when freezing has shrunk the work by half): the tiles one LM iteration evaluates, each
with its segment, against the segment's columns:
  - "block": segments = active latents, columns = active classes (the start: every latent, every class);
  - "pair":  segments = active (latent, class) coordinates, one column; each carries its latent's tiles.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .data import make_csr

__all__ = ["EventPlan", "Work", "build_plan", "full_work", "block_work", "pair_work", "tile_chunks"]


@dataclasses.dataclass
class EventPlan:
    n_rows: int
    n_lat: int
    n_cls: int
    tile: int                # T, slots per tile
    tile_lat: torch.Tensor   # [P] int64 latent of each tile (sorted)
    tile_vals: torch.Tensor  # [P, T] compute dtype: the latent's values in CSC order, then zeros
    tile_rows: torch.Tensor  # [P, T] int64 row of each slot; n_rows for padding
    toff: torch.Tensor       # [L+1] int64 first tile of each latent
    ntile_host: np.ndarray   # [L] int64 tiles per latent, on the host to size work lists without a sync
    nnz: torch.Tensor        # [L] accum dtype, events per latent
    pad: torch.Tensor        # [L] accum dtype, padding slots per latent
    qx: torch.Tensor         # [L] accum dtype
    pi: torch.Tensor         # [C] accum dtype, positives per class
    pos_nz: torch.Tensor     # [L, C] accum dtype, sum over a latent's events of y
    xy: torch.Tensor         # [L, C] accum dtype, sum over a latent's events of y v
    y: torch.Tensor          # [N, C] labels as given (uint8/bool/float) on the device

    @property
    def n_tiles(self) -> int:
        return int(self.tile_lat.numel())


def _off(sizes: torch.Tensor) -> torch.Tensor:
    return torch.cat([sizes.new_zeros(1), torch.cumsum(sizes, 0)])


def build_plan(x: torch.Tensor, y: torch.Tensor, device: torch.device, cdt: torch.dtype, adt: torch.dtype,
               qx_min: float, tile: int) -> EventPlan:
    """Latent-ordered events in tiles and the label sums, in one sort and one sparse product. Host syncs:
    one (the per-latent counts, needed on the host to size tiles and work lists)."""
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
    # tiles: event k of latent l goes to slot k % T of tile toff[l] + k // T
    nnz_host = np.asarray(nnz_long.tolist(), dtype=np.int64)  # the plan's one host sync
    ntile_host = -(-nnz_host // tile)
    n_tiles = int(ntile_host.sum())
    ntile = (nnz_long + tile - 1) // tile
    toff = _off(ntile)
    k = torch.arange(n_ev, device=device) - loff[ev_lat]
    slot = (toff[ev_lat] + k // tile) * tile + k % tile
    tile_vals = torch.zeros(n_tiles * tile, dtype=cdt, device=device).index_put_((slot,), v)
    tile_rows = torch.full((n_tiles * tile,), n_rows, dtype=torch.long, device=device).index_put_((slot,), ev_row)
    tile_lat = torch.repeat_interleave(torch.arange(n_lat, device=device), ntile, output_size=n_tiles)
    return EventPlan(n_rows=n_rows, n_lat=n_lat, n_cls=y.shape[1], tile=tile, tile_lat=tile_lat,
                     tile_vals=tile_vals.view(n_tiles, tile), tile_rows=tile_rows.view(n_tiles, tile), toff=toff,
                     ntile_host=ntile_host, nnz=nnz, pad=(ntile * tile - nnz_long).to(adt), qx=qx,
                     pi=y.to(adt).sum(0), pos_nz=sums[0, :, :-1].contiguous(), xy=sums[1, :, :-1].contiguous(), y=y)


def tile_chunks(n_tiles: int, per_chunk: int) -> list[tuple[int, int]]:
    """Tile ranges [p0, p1) of `per_chunk` tiles (cut on the host: no sync). A last chunk of one tile joins the
    one before it: a size of 1 would make the compiled kernel specialize (one more graph)."""
    per_chunk = max(1, per_chunk)
    cuts = [(p0, min(p0 + per_chunk, n_tiles)) for p0 in range(0, n_tiles, per_chunk)]
    if len(cuts) > 1 and cuts[-1][1] - cuts[-1][0] == 1:
        cuts[-2:] = [(cuts[-2][0], n_tiles)]
    return cuts


@dataclasses.dataclass
class Work:
    kind: str                   # "block" or "pair"
    coord: torch.Tensor | None  # [S, Cs] flat index into the pass state; None: the identity (whole pass)
    tile_seg: torch.Tensor      # [P] segment of each tile (sorted)
    tile_vals: torch.Tensor     # [P, T]
    n_seg: int
    n_col: int

    @property
    def n_tiles(self) -> int:
        return int(self.tile_seg.numel())

    @property
    def cost(self) -> int:
        """(slot, class) pairs one iteration evaluates."""
        return self.tile_vals.numel() * self.n_col


def full_work(plan: EventPlan, n_col: int) -> Work:
    """Every latent times every class of the pass: the plan's tiles as they are, no copy."""
    return Work("block", None, plan.tile_lat, plan.tile_vals, plan.n_lat, n_col)


def _gather_tiles(plan: EventPlan, seg_lat: torch.Tensor, ntiles_host: np.ndarray, n_seg: int):
    """The tiles of each segment's latent, segment after segment (counts known on the host: no sync)."""
    n_tiles = int(ntiles_host.sum())
    k = plan.toff[seg_lat + 1] - plan.toff[seg_lat]
    seg_off = _off(k)
    tile_seg = torch.repeat_interleave(torch.arange(n_seg, device=k.device), k, output_size=n_tiles)
    # tile j of segment s is the plan's tile toff[lat_s] + (j - seg_off[s]): one per-segment shift, gathered once
    src = (plan.toff[seg_lat] - seg_off[:-1])[tile_seg].add_(torch.arange(n_tiles, device=k.device))
    return tile_seg, plan.tile_vals[src]


def block_work(plan: EventPlan, lat_counts: torch.Tensor, cls_counts: torch.Tensor, lat_host: np.ndarray,
               cls_host: np.ndarray, n_cls_pass: int) -> Work:
    """Active latents x active classes (counts > 0), compacted; host arrays give the sizes."""
    lat_idx_host = np.flatnonzero(lat_host > 0)
    n_lat, n_col = len(lat_idx_host), int((cls_host > 0).sum())
    lat_ids = torch.nonzero_static(lat_counts > 0, size=n_lat).squeeze(1)
    cls_ids = torch.nonzero_static(cls_counts > 0, size=n_col).squeeze(1)
    tile_seg, vals = _gather_tiles(plan, lat_ids, plan.ntile_host[lat_idx_host], n_lat)
    coord = lat_ids[:, None] * n_cls_pass + cls_ids[None, :]            # [S, Cs]
    return Work("block", coord, tile_seg, vals, n_lat, n_col)


def pair_work(plan: EventPlan, active: torch.Tensor, lat_host: np.ndarray) -> Work:
    """One segment per active (latent, class), carrying its latent's tiles; one column."""
    n_pairs = int(lat_host.sum())
    n_cls_pass = active.shape[1]
    pairs = torch.nonzero_static(active.reshape(-1), size=n_pairs).squeeze(1)  # latent-major order
    ntiles_host = np.repeat(plan.ntile_host, lat_host.astype(np.int64))
    tile_seg, vals = _gather_tiles(plan, pairs // n_cls_pass, ntiles_host, n_pairs)
    return Work("pair", pairs[:, None], tile_seg, vals, n_pairs, 1)
