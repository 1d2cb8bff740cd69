"""The sync-free per-step pieces: same signatures as baseline.py, no host sync anywhere.

- `remap_presence`: a presence table over the declared label range and a cumulative sum give each
  label its rank among the labels present: no torch.unique, no data-dependent shape.
- `fisher_ratio_vectorized`: class sums and counts by one-hot matmuls over the declared range.
- `DeviceMetrics`: metrics written into a device buffer; the host reads the buffer once per
  `log_every` steps (the only sync of the optimized loop, where out-of-range labels are reported).
"""
from __future__ import annotations

import torch

from .baseline import Remapped, check_labels_tensor, out_of_range_message


def remap_presence(y: torch.Tensor, num_labels: int, *, check: bool = False) -> Remapped:
    """Labels in [0, num_labels) -> their rank among the labels present in `y`; anything else -> -1.

    Sync-free, so it cannot raise on a bad label: it counts them (`n_bad`, a device tensor) for the
    next host read to report. `check=True` reads that count now (one sync) and raises: a validation
    mode for use outside the hot loop."""
    check_labels_tensor(y, num_labels)
    valid = (y >= 0) & (y < num_labels)                                   # [B] bool
    slot = torch.where(valid, y, num_labels)                              # [B]: bad labels -> spare slot K
    present = torch.zeros(num_labels + 1, dtype=torch.long, device=y.device)
    present = present.index_fill(0, slot, 1)[:num_labels]                 # [K] 1 where label k occurs
    rank = present.cumsum(0) - 1                                          # [K] rank of each present label
    labels = torch.where(valid, rank.gather(0, slot.clamp(max=num_labels - 1)), -1)  # [B]
    n_bad = (~valid).sum()
    if check and int(n_bad):  # SYNC: validation mode only
        bad = y[~valid].tolist()
        raise ValueError(out_of_range_message(bad, num_labels))
    return Remapped(labels, present.sum(), n_bad)


def fisher_ratio_vectorized(z: torch.Tensor, labels: torch.Tensor, n_classes: int | torch.Tensor,
                            eps: float = 1e-6, *, num_labels: int | None = None) -> torch.Tensor:
    """Same value as `fisher_ratio_loop`, with no loop and no sync: the one-hot spans the declared
    range (`num_labels`, a host int; default: labels.numel(), an upper bound on any class count)."""
    k = num_labels if num_labels is not None else labels.numel()
    onehot = (labels[:, None] == torch.arange(k, device=z.device)).to(z.dtype)  # [B, K]; -1 -> zero row
    counts = onehot.sum(dim=0)                                                  # [K]
    sums = onehot.T @ z                                                         # [K, Z]
    means = sums / counts.clamp(min=1)[:, None]                                 # [K, Z]; empty class -> 0
    mean = sums.sum(dim=0) / counts.sum().clamp(min=1)                          # [Z] over labelled rows
    resid = (z - onehot @ means) * onehot.sum(dim=1, keepdim=True)              # [B, Z]; unlabelled -> 0
    s_w = (resid ** 2).sum()
    s_b = (counts * ((means - mean) ** 2).sum(dim=1)).sum()
    return s_b / (s_w + eps)


class DeviceMetrics:
    """A [capacity, M] device buffer of per-step metrics; `read()` copies the filled rows to the host."""

    def __init__(self, names: tuple[str, ...], capacity: int, device: torch.device):
        self.names = names
        self.buf = torch.zeros(capacity, len(names), device=device)
        self.filled = 0

    def write(self, values: dict[str, torch.Tensor]) -> None:
        # an integer row index and a stack of 0-d tensors: no sync (a host int becomes a fill, not a copy)
        row = [values[k].detach().to(self.buf.dtype) if isinstance(values[k], torch.Tensor)
               else torch.full((), float(values[k]), device=self.buf.device) for k in self.names]
        self.buf[self.filled] = torch.stack(row)
        self.filled += 1

    def read(self) -> list[dict[str, float]]:
        rows = self.buf[:self.filled].tolist()  # SYNC: once per log_every steps, by design
        self.filled = 0
        return [dict(zip(self.names, r)) for r in rows]
