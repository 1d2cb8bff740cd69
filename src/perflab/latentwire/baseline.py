"""The report's starting point, reproduced (origin: LatentWire train.py at a146b3ef, per the research note):
`make_trainer`, the baseline version (study.IMPLS["baseline"]); it has no toggles.

One optimizer step of `accum_steps` micro-batches of ONE example each (--batch_size default 1):
- manual indexing into the examples, bytes built and chat-template scaffolds + answer tokenized on the
  CPU for every example of every step, tensors moved with blocking `.to(device)`;
- fp32 throughout; the LM's eager ("manual") attention; AdamW with its default (non-fused) kernels;
- losses by their definitions: 1 teacher-forced + 1 first-token + K K-token LM forwards per micro-batch;
- accumulation by `total_loss += loss` and one backward (every micro-batch's graph alive until then);
- `synchronize` at the start and end of the step (origin: torch.cuda.synchronize() twice per step),
  a barrier under DDP, and `.item()` of the loss and its parts for the log.
"""
from __future__ import annotations

import torch

from ..kit.env import synchronize
from .batches import IndexStream, batch_on_the_fly
from .trainer_base import TrainerBase


class BaselineTrainer(TrainerBase):
    def __init__(self, model, examples, *, device, lr: float = 1e-3, accum_steps: int = 1, seed: int = 0):
        super().__init__(model, examples, device=device, accum_steps=accum_steps, batch_size=1)
        self.core.set_options(attention="manual", checkpointing=False)
        self.order = IndexStream(len(examples), 1, seed, rank=self.rank, world=self.world)
        self.opt = torch.optim.AdamW(self.core.trainable_parameters(), lr=lr)

    def _batch(self, index: list[int]):
        batch = batch_on_the_fly(self.examples, index, self.tok, self.core.cfg)  # bytes, scaffolds, answer: now
        return batch.to(self.device)  # blocking copies (non_blocking=False, the default)

    def step(self) -> float:
        synchronize(self.device)  # origin: torch.cuda.synchronize() before the step
        total = 0.0
        for _ in range(self.accum_steps):
            index = self.order.next()
            self.note(index)
            batch = self._batch(index)
            parts = self.model(batch, single_pass=False)  # 1 + 1 + K LM forwards
            total = total + parts.total  # the report's "total_loss += loss": all graphs stay alive
        (total / self.accum_steps).backward()
        self.opt.step()
        self.opt.zero_grad()
        self.barrier()  # origin: a DDP barrier every step
        synchronize(self.device)  # origin: torch.cuda.synchronize() after the step
        loss = total.item() / self.accum_steps  # origin: loss.item() for the log, every step ...
        self.history.append([loss, parts.tf.item(), parts.first.item(), parts.k.item()])  # ... and more .item()s
        self.steps += 1
        return loss


def make_trainer(model, examples, *, device="cpu", lr: float = 1e-3, accum_steps: int = 1,
                 seed: int = 0) -> BaselineTrainer:
    """The baseline version: a trainer whose `.step()` runs one optimizer step of the report's loop."""
    return BaselineTrainer(model, examples, device=device, lr=lr, accum_steps=accum_steps, seed=seed)
