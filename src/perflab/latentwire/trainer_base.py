"""What the baseline and optimized trainers share: the model (plain or DDP-wrapped), the device, the
rank layout, the per-step log and the LM-forward count."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

HISTORY_COLUMNS = ("loss", "tf", "first", "k")  # per optimizer step: mean total loss, last micro-batch's parts


def unwrap(model):
    return model.module if isinstance(model, DistributedDataParallel) else model


def dist_layout() -> tuple[int, int]:
    """(rank, world size): (0, 1) outside torch.distributed."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class TrainerBase:
    def __init__(self, model, examples, *, device, accum_steps: int, batch_size: int):
        if accum_steps < 1:
            raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
        if not examples:
            raise ValueError("no training examples")
        self.model = model
        self.core = unwrap(model)
        self.core.train()
        self.core.lm.eval()  # frozen: no dropout, no running statistics
        self.tok = self.core.tokenizer
        self.examples = examples
        self.device = torch.device(device)
        self.accum_steps = accum_steps
        self.batch_size = batch_size
        self.rank, self.world = dist_layout()
        self.history: list = []  # one row of HISTORY_COLUMNS per step (floats, or a tensor not yet read)
        self.steps = 0
        self.seen: list[int] | None = None  # set to [] to record the sample indices read (tests, DDP)

    def note(self, index) -> None:
        if self.seen is not None:
            self.seen.extend(index.tolist() if isinstance(index, torch.Tensor) else index)  # a host tensor

    @property
    def samples_per_step(self) -> int:
        """Samples one optimizer step consumes on this rank."""
        return self.accum_steps * self.batch_size

    @property
    def lm_forwards(self) -> int:
        """LM forwards so far (eager calls; a compiled graph's are not counted)."""
        return self.core.lm.forward_calls

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def losses(self) -> list[list[float]]:
        """Every step's [loss, tf, first, k] as floats (reads tensors kept on device once, here)."""
        rows = [r.tolist() if isinstance(r, torch.Tensor) else r for r in self.history]
        self.history = rows
        return rows

    def worker_pids(self) -> list[int]:
        """Process ids of this trainer's live DataLoader workers (none here)."""
        return []

    def pause(self) -> None:
        """Stop this trainer's DataLoader workers until the next step (none here)."""

    def loader_paused(self) -> bool:
        """Whether the next step starts DataLoader workers (after `pause`)."""
        return False

    def close(self) -> None:
        """Release what the trainer holds beyond the model (DataLoader workers)."""
