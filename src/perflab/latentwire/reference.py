"""The losses by their definitions, one LM forward per prediction: the oracle the single-pass readout
(losses.py) must equal, and what the baseline runs (the origin's losses.py loops over t < K).

Given the LM's input context `ctx` [B, P, d] (scaffold + latent prefix + scaffold) and the answer's
embeddings `ans_emb` [B, La, d] with `labels` [B, La] (IGNORE at padding):
- teacher-forced CE: one forward over [ctx, answer[:-1]], CE of every answer token;
- first-token CE: a forward over ctx alone, CE of answer[0] at the last position;
- K-token CE: for t < K a forward over [ctx, answer[:t]], CE of answer[t] at the last position,
  averaged over the (example, t) pairs that are not padding.
Under causal attention the logits at a position depend only on what precedes it, so the last two
are readable from the teacher-forced pass: that is what losses.py does (K+1 fewer forwards).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .batches import IGNORE


def ce_sum(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of CE over targets that are not IGNORE, and their count. logits [..., V], targets [...]."""
    s = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                        ignore_index=IGNORE, reduction="sum")
    return s, (targets != IGNORE).sum()


def ce_mean(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    s, n = ce_sum(logits, targets)
    return s / n.clamp_min(1)  # a tensor divide: no host sync to read the count


def teacher_forced_logits(lm, ctx: torch.Tensor, ans_emb: torch.Tensor) -> torch.Tensor:
    """Logits predicting each answer token: [B, La, V] from one forward over [ctx, answer[:-1]]."""
    p = ctx.shape[1]
    logits = lm(torch.cat([ctx, ans_emb[:, :-1]], dim=1))  # [B, P + La - 1, V]
    return logits[:, p - 1:]                                # position P-1+t predicts answer[t]


def first_token_ce_loop(lm, ctx: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """CE of the first answer token from its own forward over the context."""
    return ce_mean(lm(ctx)[:, -1], labels[:, 0])


def k_token_ce_loop(lm, ctx: torch.Tensor, ans_emb: torch.Tensor, labels: torch.Tensor, k: int) -> torch.Tensor:
    """Mean CE of answer tokens t < K, one LM forward per t (the origin's loop)."""
    if labels.shape[1] < k:
        raise ValueError(f"K-token CE needs >= K={k} answer columns, got {labels.shape[1]} (collate pads to K)")
    total, count = 0.0, 0
    for t in range(k):
        s, n = ce_sum(lm(torch.cat([ctx, ans_emb[:, :t]], dim=1))[:, -1], labels[:, t])
        total, count = total + s, count + n
    return total / count.clamp_min(1)
