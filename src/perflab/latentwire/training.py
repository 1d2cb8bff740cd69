"""Training runs of any version: `train(version, model, examples, steps=..., **its keywords)`, where `version`
is one of study.IMPLS (baseline.make_trainer or optimized.make_trainer), and `evaluate` on held-out examples.

    model = build_model(ModelConfig(), seed=0)
    res = train(optimized.make_trainer, model, examples, steps=20, batch_size=16, single_pass=True, amp=True)
    res.losses, res.samples, res.lm_forwards

The same call runs under torchrun with DDP (see ddp.py): a DDP-wrapped model is trained on this rank's
shard of the samples. A version itself gives the stepping object (for timing one step at a time).
"""
from __future__ import annotations

import dataclasses

import torch

from . import losses
from .batches import PretokenizedCache
from .reference import ce_mean
from .trainer_base import HISTORY_COLUMNS, unwrap


@dataclasses.dataclass
class TrainResult:
    losses: list[float]          # mean total loss per optimizer step
    parts: list[list[float]]     # [loss, tf, first, k] per step
    samples: int                 # samples consumed on this rank
    steps: int
    lm_forwards: int             # LM forwards on this rank (eager calls)


def train(version, model, examples, *, steps: int = 10, device="cpu", lr: float = 1e-3, accum_steps: int = 1,
          seed: int = 0, **toggles) -> TrainResult:
    """Train `model` with `version` (a trainer factory of study.IMPLS; `toggles`: the optimized version's) for
    `steps` optimizer steps and return the loss per step (see module doc)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    trainer = version(model, examples, device=device, lr=lr, accum_steps=accum_steps, seed=seed, **toggles)
    lm = unwrap(model).lm
    f0 = lm.forward_calls
    try:
        for _ in range(steps):
            trainer.step()
        rows = trainer.losses()
    finally:
        trainer.close()
    return TrainResult(losses=[r[0] for r in rows], parts=rows, samples=steps * trainer.samples_per_step,
                       steps=steps, lm_forwards=lm.forward_calls - f0)


@torch.no_grad()
def evaluate(model, examples, *, device="cpu", batch_size: int = 32) -> dict[str, float]:
    """Held-out quality: the loss and its parts (teacher-forced, first-token, K-token CE) and the
    first-token accuracy (argmax at the first answer position is the first answer token)."""
    core = unwrap(model)
    cfg = core.cfg
    cache = PretokenizedCache.for_model(examples, core.tokenizer, cfg)
    was_training = core.training
    core.eval()
    sums = torch.zeros(5, dtype=torch.float64, device=device)
    try:
        for lo in range(0, len(cache), batch_size):
            index = list(range(lo, min(lo + batch_size, len(cache))))
            batch = cache.batch(index).to(device)
            logits = core.answer_logits(batch)  # [B, La, V]
            tf = ce_mean(logits, batch.labels)
            first = losses.first_token_ce(logits, batch.labels)
            k = losses.k_token_ce(logits, batch.labels, cfg.k_tokens)
            total = tf + cfg.first_weight * first + cfg.k_weight * k
            acc = (logits[:, 0].argmax(-1) == batch.labels[:, 0]).double().mean()
            sums += torch.stack([total.double(), tf.double(), first.double(), k.double(), acc]) * len(index)
    finally:
        core.train(was_training)
    return dict(zip((*HISTORY_COLUMNS, "first_token_acc"), (sums / len(cache)).tolist()))  # one read at the end
