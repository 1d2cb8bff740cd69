"""First-token and K-token CE read from the single teacher-forced pass (beyond the report).

The teacher-forced logits `ans_logits` [B, La, V] at answer position t were computed from the context
and answer[:t] only (causal attention), exactly what the t-th forward of reference.k_token_ce_loop sees.
So both losses are slices of logits already in memory: K+1 LM forwards (and their backward) fewer per
step, at the price of nothing. Equal to the loop versions to float rounding (tests/latentwire/test_latentwire_losses.py).
"""
from __future__ import annotations

import torch

from .reference import ce_mean


def first_token_ce(ans_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """CE of answer[0]: column 0 of the teacher-forced logits."""
    return ce_mean(ans_logits[:, 0], labels[:, 0])


def k_token_ce(ans_logits: torch.Tensor, labels: torch.Tensor, k: int) -> torch.Tensor:
    """Mean CE of answer tokens t < K over non-padding (example, t): columns :K of the same logits."""
    if labels.shape[1] < k:
        raise ValueError(f"K-token CE needs >= K={k} answer columns, got {labels.shape[1]} (collate pads to K)")
    return ce_mean(ans_logits[:, :k], labels[:, :k])
