"""The report's recommendations, one toggle each (config.Toggles), plus the single-pass losses.

With every toggle off this runs the baseline's computation (same order of samples, same losses: tested);
each toggle changes one thing:
    pin_memory     pinned host batches (on CUDA) and .to(device, non_blocking=True)
    dataloader     a DataLoader + DistributedSampler (shuffled, drop_last) instead of manual indexing;
                   num_workers worker processes, persistent across epochs when persistent_workers
    pretokenize    PretokenizedCache: every example tokenized once; a batch is a gather
    grad_accum     backward per micro-batch (its graph freed at once), zero_grad(set_to_none=True),
                   and DDP's no_sync() on all but the last micro-batch
    batch_size     samples per micro-batch
    amp            bf16 autocast over encoder, adapter and the LM (no GradScaler: bf16 keeps fp32's range)
    fused_adamw    AdamW(fused=True): one kernel for all parameters
    sdpa           scaled_dot_product_attention in the LM and the pooler
    compile        torch.compile(model, backend=...) unless "off"
    checkpointing  activation checkpointing of encoder layers and LM blocks
    single_pass    first-token and K-token CE read from the teacher-forced logits (1 LM forward, not K+2)
    no_step_sync   losses stay on the device; read once at the end (no .item()/synchronize per step)
"""
from __future__ import annotations

import contextlib
import itertools

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from ..env import synchronize
from .batches import IndexStream, PretokenizedCache, batch_on_the_fly
from .common import TrainerBase
from .config import Toggles


class _ExamplesDataset(torch.utils.data.Dataset):
    """Batches for a DataLoader: `__getitems__` builds a whole batch (from the cache, or by tokenizing)."""

    def __init__(self, examples, tok, cfg, cache: PretokenizedCache | None):
        self.examples, self.tok, self.cfg, self.cache = examples, tok, cfg, cache

    def __len__(self) -> int:
        return len(self.examples)

    def __getitems__(self, index: list[int]):
        if self.cache is not None:
            return self.cache.batch(index)
        return batch_on_the_fly(self.examples, index, self.tok, self.cfg)


def _whole_batch(batch):
    return batch  # __getitems__ already returns a collated Batch


def make_loader(examples, tok, cfg, cache: PretokenizedCache | None, *, batch_size: int, num_workers: int,
                persistent_workers: bool, pin_memory: bool, seed: int, rank: int = 0,
                world: int = 1) -> tuple[DataLoader, DistributedSampler]:
    """A DataLoader over whole batches, shuffled by a DistributedSampler (one rank: the whole set), drop_last."""
    ds = _ExamplesDataset(examples, tok, cfg, cache)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True)
    if len(sampler) < batch_size:
        raise ValueError(f"{len(ds)} examples cannot fill one batch of {batch_size} on {world} rank(s)")
    loader = DataLoader(ds, batch_sampler=BatchSampler(sampler, batch_size, drop_last=True), collate_fn=_whole_batch,
                        num_workers=num_workers, pin_memory=pin_memory,
                        # workers fork once and live across epochs: their start-up is paid once, not per epoch
                        persistent_workers=num_workers > 0 and persistent_workers)
    return loader, sampler


class OptimizedTrainer(TrainerBase):
    def __init__(self, model, examples, *, device, lr: float = 1e-3, accum_steps: int = 1, seed: int = 0,
                 toggles: Toggles = Toggles()):
        super().__init__(model, examples, device=device, accum_steps=accum_steps, batch_size=toggles.batch_size)
        t = self.t = toggles
        cfg = self.core.cfg
        self.core.set_options(attention="sdpa" if t.sdpa else "manual", checkpointing=t.checkpointing)
        # page-locked memory exists only with a CUDA host allocator; on CPU there is no copy to overlap
        self.pin = t.pin_memory and self.device.type == "cuda"
        self.non_blocking = t.pin_memory
        self.cache = None
        if t.pretokenize:  # once, before training: every later batch is a gather of ready tensors
            self.cache = PretokenizedCache.for_model(examples, self.tok, cfg,
                                                     pin=self.pin and not t.dataloader)  # a DataLoader pins its own output
        self.loader = None
        if t.dataloader:
            self.loader, sampler = make_loader(examples, self.tok, cfg, self.cache, batch_size=self.batch_size,
                                               num_workers=t.num_workers, persistent_workers=t.persistent_workers,
                                               pin_memory=self.pin, seed=seed, rank=self.rank, world=self.world)
            self.batches = self._loader_batches(sampler)
        else:
            self.order = IndexStream(len(examples), self.batch_size, seed, rank=self.rank, world=self.world)
            self.batches = self._manual_batches()
        self.opt = torch.optim.AdamW(self.core.trainable_parameters(), lr=lr,
                                     **({"fused": True} if t.fused_adamw else {}))
        self.loss_fn = self.model if t.compile == "off" else torch.compile(self.model, backend=t.compile)

    # ---- where batches come from -----------------------------------------------------------------
    def _manual_batches(self):
        while True:
            index = self.order.next()
            if self.cache is not None:
                yield self.cache.batch(index)
            else:
                batch = batch_on_the_fly(self.examples, index, self.tok, self.core.cfg)
                yield batch.pin_memory() if self.pin else batch

    def _loader_batches(self, sampler: DistributedSampler):
        for epoch in itertools.count():
            sampler.set_epoch(epoch)  # a new shuffle per epoch, the same on every rank
            yield from self.loader

    # ---- one optimizer step ------------------------------------------------------------------------
    def _micro(self, i: int):
        """Context of micro-batch i: autocast, and DDP's no_sync() on all but the last under grad_accum."""
        stack = contextlib.ExitStack()
        if self.t.amp:
            stack.enter_context(torch.autocast(self.device.type, dtype=torch.bfloat16))
        if self.t.grad_accum and self.world > 1 and i < self.accum_steps - 1:
            stack.enter_context(self.model.no_sync())  # all-reduce once per step, not per micro-batch
        return stack

    def step(self):
        """One optimizer step; returns the mean loss (a float, or a device tensor under no_step_sync)."""
        if not self.t.no_step_sync:
            synchronize(self.device)  # the baseline's step-start synchronize
        total = 0.0
        for i in range(self.accum_steps):
            host = next(self.batches)
            self.note(host.index)
            batch = host.to(self.device, non_blocking=self.non_blocking)
            with self._micro(i):
                parts = self.loss_fn(batch, single_pass=self.t.single_pass)
                if self.t.grad_accum:
                    (parts.total / self.accum_steps).backward()  # frees this micro-batch's graph now
            total = total + (parts.total.detach() if self.t.grad_accum else parts.total)
        if not self.t.grad_accum:
            (total / self.accum_steps).backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)  # torch >= 2.0's default too: grads freed, not zero-filled
        self.steps += 1
        if self.t.no_step_sync:
            loss = total.detach() / self.accum_steps
            self.history.append(torch.stack([loss, parts.tf.detach(), parts.first.detach(), parts.k.detach()]))
            return loss  # read later, once, by losses(): no host sync in the loop
        self.barrier()
        synchronize(self.device)
        loss = total.item() / self.accum_steps
        self.history.append([loss, parts.tf.item(), parts.first.item(), parts.k.item()])
        return loss

    def close(self) -> None:
        """Stop the batch stream; the DataLoader's workers exit when it is dropped."""
        self.batches.close()
        self.loader = None
