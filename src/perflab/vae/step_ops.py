"""The step's operations a StepConfig's switches pick between: the original's, with their host syncs, and the
sync-free ones of the optimized step (same signatures). The versions that assemble them are `baseline.py`,
`optimized.py` and `captured.py`; `train.py` runs a step and an epoch of any StepConfig.

The original's operations, reproduced with their host syncs (each one commented):
- `remap_host`: labels -> 0..n-1 through the CPU and a Python dict (the seed's "before").
- `remap_unique`: the seed's "GPU-side" replacement: torch.unique plus a loop of masked writes.
  It still syncs: unique's output size depends on the data, and so does each boolean-mask write.
- `fisher_ratio_loop`: tr(S_B) / tr(S_W) with a Python loop over classes and boolean-mask indexing.
- `host_metrics`: float(t.detach().cpu().item()) for each metric, every step.

All remaps share one signature: remap(y [B] int64, num_labels) -> Remapped(labels, n_classes, n_bad).

The sync-free operations, no host sync anywhere:
- `remap_presence`: a presence table over the declared label range and a cumulative sum give each
  label its rank among the labels present: no torch.unique, no data-dependent shape.
- `fisher_ratio_vectorized`: class sums and counts by one-hot matmuls over the declared range.
- `DeviceMetrics`: metrics written into a device buffer; the host reads the buffer once per
  `log_every` steps (the only sync of the optimized loop, where out-of-range labels are reported).
"""
from __future__ import annotations

from typing import NamedTuple

import torch


class Remapped(NamedTuple):
    labels: torch.Tensor            # [B] int64: class ids 0..n-1 in label order; -1 for a label out of range
    n_classes: int | torch.Tensor   # classes present: a host int, or a 0-d device tensor (sync-free remaps)
    n_bad: int | torch.Tensor       # labels outside [0, num_labels): 0 (host remap raises), or 0-d tensor


def check_labels_tensor(y: torch.Tensor, num_labels: int) -> None:
    """Shape and dtype checks (host metadata only: no sync)."""
    if not isinstance(y, torch.Tensor) or y.ndim != 1:
        raise ValueError(f"labels must be a 1-D tensor, got {getattr(y, 'shape', type(y))}")
    if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor, got {y.dtype}")
    if y.numel() == 0:
        raise ValueError("empty batch: labels have 0 elements")
    if num_labels < 1:
        raise ValueError(f"num_labels must be >= 1, got {num_labels}")


def out_of_range_message(bad: list[int], num_labels: int) -> str:
    return (f"labels outside the declared range [0, {num_labels}): {sorted(set(bad))[:8]} "
            f"({len(bad)} of them); declare num_labels to cover every label the data can hold")


def remap_host(y: torch.Tensor, num_labels: int) -> Remapped:
    """The seed's "before": a device -> host copy, a sorted set, a dict, and a host -> device copy."""
    check_labels_tensor(y, num_labels)
    y_host = y.detach().tolist()  # SYNC: the labels come to the host (the original: .to("cpu").numpy())
    bad = [v for v in y_host if not 0 <= v < num_labels]
    if bad:  # the labels are on the host already, so the check is free here
        raise ValueError(out_of_range_message(bad, num_labels))
    unique_labels = sorted(set(y_host))
    label_map = {lab: i for i, lab in enumerate(unique_labels)}
    # SYNC: a blocking copy from pageable host memory waits for the stream on a GPU (count_host_syncs
    # counts it as "tensor(host list) -> device" on every device, so counts match on CPU and GPU)
    labels = torch.tensor([label_map[v] for v in y_host], dtype=torch.long, device=y.device)
    return Remapped(labels, len(unique_labels), 0)


def remap_unique(y: torch.Tensor, num_labels: int) -> Remapped:
    """The seed's "after" ("GPU-side only"): still 1 + n_classes syncs per call."""
    check_labels_tensor(y, num_labels)
    unique_labels = torch.unique(y)  # SYNC: the output size depends on the data
    labels = torch.zeros_like(y)
    for idx, label in enumerate(unique_labels):
        labels[y == label] = idx  # SYNC: a boolean-mask write has a data-dependent size
    n_bad = ((y < 0) | (y >= num_labels)).sum()  # reported at the next host read (see train.py)
    return Remapped(labels, len(unique_labels), n_bad)


def fisher_ratio_loop(z: torch.Tensor, labels: torch.Tensor, n_classes: int | torch.Tensor,
                      eps: float = 1e-6) -> torch.Tensor:
    """tr(S_B) / (tr(S_W) + eps) over the classes 0..n_classes-1 of `labels` (-1: no class).

    S_W = sum_c sum_{i in c} (z_i - m_c)(z_i - m_c)^T, S_B = sum_c n_c (m_c - m)(m_c - m)^T,
    m = mean of the labelled rows. One boolean-mask gather (a sync) per class."""
    if isinstance(n_classes, torch.Tensor):
        n_classes = int(n_classes)  # SYNC: a Python loop needs its trip count on the host
    groups = [z[labels == c] for c in range(n_classes)]  # SYNC per class: data-dependent sizes
    groups = [g for g in groups if g.shape[0] > 0]
    if not groups:
        return z.new_zeros(())
    n = sum(g.shape[0] for g in groups)
    mean = sum(g.sum(dim=0) for g in groups) / n                    # [Z]
    s_w = z.new_zeros(())
    s_b = z.new_zeros(())
    for g in groups:
        m_c = g.mean(dim=0)                                          # [Z]
        s_w = s_w + ((g - m_c) ** 2).sum()
        s_b = s_b + g.shape[0] * ((m_c - mean) ** 2).sum()
    return s_b / (s_w + eps)


def host_metrics(values: dict[str, torch.Tensor]) -> dict[str, float]:
    """The original's metric dict: one .cpu().item() per metric (SYNC each), every step."""
    return {k: float(v.detach().cpu().item()) for k, v in values.items()}


# ---- the sync-free operations ----------------------------------------------------------------------------------


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
