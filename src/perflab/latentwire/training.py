"""The entry point: `train(model, examples, impl="baseline"|"optimized", **toggles)`.

    model = build_model(ModelConfig(), seed=0)
    res = train(model, examples, impl="optimized", steps=20, batch_size=16, single_pass=True, amp=True)
    res.losses, res.samples, res.lm_forwards

The same call runs under torchrun with DDP (see ddp.py): a DDP-wrapped model is trained on this rank's
shard of the samples. `make_trainer` gives the stepping object itself (for timing one step at a time).
"""
from __future__ import annotations

import dataclasses

import torch

from . import losses
from .baseline import BaselineTrainer
from .batches import PretokenizedCache
from .config import Toggles
from .optimized import OptimizedTrainer
from .reference import ce_mean
from .trainer_base import HISTORY_COLUMNS, unwrap

IMPLS = ("baseline", "optimized")


def make_trainer(model, examples, *, impl: str = "baseline", device="cpu", lr: float = 1e-3,
                 accum_steps: int = 1, seed: int = 0, **toggles):
    """A trainer whose `.step()` runs one optimizer step. Unknown toggles are refused by name."""
    if impl not in IMPLS:
        raise ValueError(f"unknown impl {impl!r}: expected one of {IMPLS}")
    if impl == "baseline":
        if toggles:
            raise ValueError(f"impl='baseline' takes no toggles (got {', '.join(sorted(toggles))}); "
                             "toggles switch the recommendations of impl='optimized'")
        return BaselineTrainer(model, examples, device=device, lr=lr, accum_steps=accum_steps, seed=seed)
    return OptimizedTrainer(model, examples, device=device, lr=lr, accum_steps=accum_steps, seed=seed,
                            toggles=Toggles.from_kwargs(**toggles))


@dataclasses.dataclass
class TrainResult:
    losses: list[float]          # mean total loss per optimizer step
    parts: list[list[float]]     # [loss, tf, first, k] per step
    samples: int                 # samples consumed on this rank
    steps: int
    lm_forwards: int             # LM forwards on this rank (eager calls)


def train(model, examples, *, impl: str = "baseline", steps: int = 10, device="cpu", lr: float = 1e-3,
          accum_steps: int = 1, seed: int = 0, **toggles) -> TrainResult:
    """Train `model` for `steps` optimizer steps and return the loss per step (see module doc)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    trainer = make_trainer(model, examples, impl=impl, device=device, lr=lr, accum_steps=accum_steps, seed=seed,
                           **toggles)
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
