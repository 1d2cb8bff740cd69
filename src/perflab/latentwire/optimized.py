"""The report's recommendations, one toggle each (config.Toggles), plus the single-pass losses: `make_trainer`,
the optimized version (study.IMPLS["optimized"]), whose keyword arguments beyond the baseline's are the toggles.

With every toggle off this runs the baseline's computation (same order of samples, same losses: tested);
each toggle changes one thing:
    pin_memory     pinned host batches and .to(device, non_blocking=True) (marked pinned on a CPU host: syncs.pin_memory)
    dataloader     a DataLoader + DistributedSampler (shuffled, drop_last) instead of manual indexing;
                   num_workers worker processes, persistent across epochs when persistent_workers
    pretokenize    PretokenizedCache: every example tokenized once; a batch is a gather
    grad_accum     backward per micro-batch (its graph freed at once), zero_grad(set_to_none=True),
                   and DDP's no_sync() on all but the last micro-batch
    batch_size     samples per micro-batch
    amp            bf16 autocast over encoder, adapter and the LM (no GradScaler: bf16 keeps fp32's range)
    fused_adamw    AdamW(fused=True): one kernel for all parameters
    sdpa           scaled_dot_product_attention in the LM and the pooler
    compile        the compiled step: torch.compile(model, mode=compile, backend=compile_backend) over the loss
                   (forward, and AOTAutograd's backward), fullgraph, with every batch padded to the data's
                   longest prompt and answer and the batch size symbolic, so one graph serves every step and
                   every batch size above 1 (no recompiles)
    checkpointing  activation checkpointing of encoder layers and LM blocks
    single_pass    first-token and K-token CE read from the teacher-forced logits (1 LM forward, not K+2)
    no_step_sync   losses stay on the device; read once at the end (no .item()/synchronize per step)

`pause()` stops the DataLoader's worker processes (the next step starts a fresh pool at the next epoch), so a
timing harness can keep many trainers but let only the one being timed own workers (`worker_pids()`).
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from ..kit.compiles import compile_kwargs
from ..kit.cudagraphs import tracked, uses_cudagraphs
from ..kit.env import synchronize
from .batches import IndexStream, PretokenizedCache, batch_on_the_fly
from .config import Toggles
from .trainer_base import TrainerBase


class _ExamplesDataset(torch.utils.data.Dataset):
    """Batches for a DataLoader: `__getitems__` builds a whole batch (from the cache, or by tokenizing)."""

    def __init__(self, examples, tok, cfg, cache: PretokenizedCache | None, widths: tuple[int, int] | None = None):
        self.examples, self.tok, self.cfg, self.cache, self.widths = examples, tok, cfg, cache, widths

    def __len__(self) -> int:
        return len(self.examples)

    def __getitems__(self, index: list[int]):
        return host_batch(self.examples, index, self.tok, self.cfg, self.cache, self.widths)


def host_batch(examples, index: list[int], tok, cfg, cache: PretokenizedCache | None,
               widths: tuple[int, int] | None = None):
    """Batch `index` on the host: gathered from the cache or tokenized now; padded to fixed `widths` if given."""
    if cache is not None:
        return cache.batch(index, full_width=widths is not None)  # the cache's widths are the data's widths
    batch = batch_on_the_fly(examples, index, tok, cfg)
    return batch if widths is None else batch.pad_to(widths, tok.pad_id)


def _whole_batch(batch):
    return batch  # __getitems__ already returns a collated Batch


def make_loader(examples, tok, cfg, cache: PretokenizedCache | None, *, batch_size: int, num_workers: int,
                persistent_workers: bool, pin_memory: bool, seed: int, rank: int = 0, world: int = 1,
                widths: tuple[int, int] | None = None) -> tuple[DataLoader, DistributedSampler]:
    """A DataLoader over whole batches, shuffled by a DistributedSampler (one rank: the whole set), drop_last."""
    ds = _ExamplesDataset(examples, tok, cfg, cache, widths)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True)
    if len(sampler) < batch_size:
        raise ValueError(f"{len(ds)} examples cannot fill one batch of {batch_size} on {world} rank(s)")
    loader = DataLoader(ds, batch_sampler=BatchSampler(sampler, batch_size, drop_last=True), collate_fn=_whole_batch,
                        num_workers=num_workers, pin_memory=pin_memory,
                        # workers fork once and live across epochs: their start-up is paid once, not per epoch
                        persistent_workers=num_workers > 0 and persistent_workers)
    return loader, sampler


def _mark_batch_dynamic(batch) -> None:
    """Compile the batch dimension as a symbol (sizes 2 and up share one graph; dynamo keeps 1 apart)."""
    for t in batch.tensors().values():
        torch._dynamo.maybe_mark_dynamic(t, 0)


class OptimizedTrainer(TrainerBase):
    def __init__(self, model, examples, *, device, lr: float = 1e-3, accum_steps: int = 1, seed: int = 0,
                 toggles: Toggles = Toggles()):
        super().__init__(model, examples, device=device, accum_steps=accum_steps, batch_size=toggles.batch_size)
        t = self.t = toggles
        cfg = self.core.cfg
        self.core.set_options(attention="sdpa" if t.sdpa else "manual", checkpointing=t.checkpointing)
        # pinned host batches and non-blocking copies: on a host without an accelerator the batches are only
        # marked pinned (perflab.kit.syncs.pin_memory), so the sync counter sees the copies a GPU run would make
        self.pin = self.non_blocking = t.pin_memory
        self.cache = None
        if t.pretokenize:  # once, before training: every later batch is a gather of ready tensors
            self.cache = PretokenizedCache.for_model(examples, self.tok, cfg,
                                                     pin=self.pin and not t.dataloader)  # a DataLoader pins its own output
        self.widths = None  # fixed (prompt bytes, answer columns) of every batch under compile
        if t.compile != "off":
            cache = self.cache if self.cache is not None else PretokenizedCache.for_model(examples, self.tok, cfg)
            self.widths = cache.widths
        self.loader, self.epoch, self._it = None, 0, None  # _it: the DataLoader iterator that owns the workers
        self.loader_pins = self.pin and torch.accelerator.is_available()  # its pin thread needs an accelerator
        if t.dataloader:
            self.loader, self.sampler = make_loader(examples, self.tok, cfg, self.cache, batch_size=self.batch_size,
                                                    num_workers=t.num_workers, persistent_workers=t.persistent_workers,
                                                    pin_memory=self.loader_pins, seed=seed, rank=self.rank, world=self.world,
                                                    widths=self.widths)
            self.batches = self._loader_batches()
        else:
            self.order = IndexStream(len(examples), self.batch_size, seed, rank=self.rank, world=self.world)
            self.batches = self._manual_batches()
        self.opt = torch.optim.AdamW(self.core.trainable_parameters(), lr=lr,
                                     **({"fused": True} if t.fused_adamw else {}))
        self.loss_fn = self.model
        self.cudagraphs = uses_cudagraphs(t.compile, t.compile_backend, self.device)  # a step is one generation
        if t.compile != "off":
            # one graph for encoder + adapter + frozen LM + losses (AOTAutograd compiles its backward too):
            # fixed widths (self.widths) and a symbolic batch size (_mark_batch_dynamic), so one compile serves
            # every step and every batch size > 1; fullgraph, so a graph break fails loudly (DDP splits the
            # graph at its gradient buckets itself, which fullgraph would forbid)
            compiled = torch.compile(self.model, fullgraph=self.world == 1, **compile_kwargs(t.compile, t.compile_backend))
            self.loss_fn = tracked(compiled) if self.cudagraphs else compiled

    # ---- where batches come from -----------------------------------------------------------------
    def _manual_batches(self):
        while True:
            batch = host_batch(self.examples, self.order.next(), self.tok, self.core.cfg, self.cache, self.widths)
            yield batch.pin_memory() if self.pin and self.cache is None else batch  # the cache pins its own

    def _loader_batches(self):
        while True:
            self.sampler.set_epoch(self.epoch)  # a new shuffle per epoch, the same on every rank
            self.epoch += 1
            self._it = iter(self.loader)  # persistent workers: the loader's own iterator, reused across epochs
            for batch in self._it:
                yield batch.pin_memory() if self.pin and not self.loader_pins else batch  # marked, on a CPU host

    def worker_pids(self) -> list[int]:
        """Process ids of this trainer's live DataLoader workers (none without dataloader/num_workers)."""
        return [w.pid for w in getattr(self._it, "_workers", ()) if w.is_alive()]

    def loader_paused(self) -> bool:
        return self.loader is not None and self.t.num_workers > 0 and self._it is None

    def pause(self) -> None:
        """Stop the DataLoader's workers (joined before this returns); the next step starts a new pool at
        the next epoch. Without a DataLoader: nothing to do."""
        if self.loader is None:
            return
        self.batches.close()
        it, self._it = self._it, None
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()  # what the iterator's __del__ does: workers told to exit, then joined
        self.loader._iterator = None  # a persistent loader would hand the dead iterator out again
        self.batches = self._loader_batches()

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
        if self.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs: the previous step's outputs are not read again
        total = 0.0
        for i in range(self.accum_steps):
            host = next(self.batches)
            self.note(host.index)
            batch = host.to(self.device, non_blocking=self.non_blocking)
            if self.widths is not None:
                _mark_batch_dynamic(batch)
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
        """Stop the batch stream and the DataLoader's workers."""
        self.pause()
        self.batches.close()
        self.loader = None


def make_trainer(model, examples, *, device="cpu", lr: float = 1e-3, accum_steps: int = 1, seed: int = 0,
                 **toggles) -> OptimizedTrainer:
    """The optimized version: the baseline's signature plus the toggles (config.Toggles' fields, all off by
    default); unknown names and wrong types are refused by name (ParameterError)."""
    return OptimizedTrainer(model, examples, device=device, lr=lr, accum_steps=accum_steps, seed=seed,
                            toggles=Toggles.from_kwargs(**toggles))
