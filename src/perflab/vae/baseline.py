"""The original's per-step pieces, reproduced with their host syncs (each one commented).

- `remap_host`: labels -> 0..n-1 through the CPU and a Python dict (the seed's "before").
- `remap_unique`: the seed's "GPU-side" replacement: torch.unique plus a loop of masked writes.
  It still syncs: unique's output size depends on the data, and so does each boolean-mask write.
- `fisher_ratio_loop`: tr(S_B) / tr(S_W) with a Python loop over classes and boolean-mask indexing.
- `host_metrics`: float(t.detach().cpu().item()) for each metric, every step.

All remaps share one signature: remap(y [B] int64, num_labels) -> Remapped(labels, n_classes, n_bad).
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
