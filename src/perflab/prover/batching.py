"""How many candidates fit in one step: a memory model measured on the device, instead of a hard-coded cap.

The peak memory of one step is measured at two batch sizes (plain eager step: inductor fuses and
reuses buffers, so eager is an upper bound for compiled code, and a CUDA graph's pool is allocated at
recording where a replay would not show it). A line through the two points gives bytes per row and a
fixed part; the largest batch whose predicted peak fits in `budget_fraction` of the free memory is the
answer. `choose_batch` then balances the chunks so the padding of the last one is small.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ..memory import device_memory, peak_memory
from .rollout import pad_to
from .step import GreedyStep


@dataclasses.dataclass
class MemoryModel:
    bytes_per_row: float      # slope of the step's peak memory over batch size
    fixed_bytes: float        # intercept
    free_bytes: int           # free device memory when measured
    budget_fraction: float    # share of the free memory a step may use
    probes: list              # [(batch, peak bytes over entry)]
    method: str               # cuda_allocator, rss_hwm or rss_sampled (perflab.memory)

    def predict(self, batch: int) -> float:
        """Predicted peak bytes of one step at `batch` rows."""
        return self.fixed_bytes + self.bytes_per_row * batch

    def max_batch(self, multiple: int = 8) -> int:
        """Largest multiple of `multiple` whose predicted peak fits in the budget (at least `multiple`)."""
        room = self.free_bytes * self.budget_fraction - max(self.fixed_bytes, 0.0)
        rows = int(room // max(self.bytes_per_row, 1.0))
        return max(multiple, rows // multiple * multiple)


def step_peak_bytes(step: GreedyStep, queries: torch.Tensor, batch: int) -> tuple[int, str]:
    """Peak memory over entry of one step at `batch` rows (a warm-up step first), and the method."""
    slots = step.init(pad_to(queries[:batch], batch) if len(queries) >= batch else
                      queries.repeat(math.ceil(batch / len(queries)), 1)[:batch])
    step(*slots)                                                      # allocator and caches warm
    with peak_memory(step.engine.device) as mem:
        out = step(*slots)
        del out
    return mem.delta_bytes, mem.method


def measure_memory_model(engine, policy, queries: torch.Tensor, probes=(64, 256), budget_fraction: float = 0.5,
                         max_depth: int = 20) -> MemoryModel:
    """Measure a step's peak at the `probes` batch sizes on the engine's device and fit a line."""
    if len(probes) != 2 or probes[0] >= probes[1]:
        raise ValueError(f"probes must be two increasing batch sizes, got {probes}")
    step = GreedyStep(engine, policy, max_depth, compile="off")
    with torch.inference_mode():
        pts = [(b, *step_peak_bytes(step, queries.to(engine.device), b)) for b in probes]
    (b1, p1, method), (b2, p2, _) = pts
    slope = max((p2 - p1) / (b2 - b1), p2 / b2 / 2, 1.0)  # noise on CPU RSS can flatten the line: keep a floor
    return MemoryModel(slope, p2 - slope * b2, device_memory(engine.device)["free_bytes"], budget_fraction,
                       [(b, p) for b, p, _ in pts], method)


def choose_batch(model: MemoryModel, n_candidates: int, multiple: int = 8) -> int:
    """The largest batch that fits, then the smallest one that needs as few chunks (less tail padding)."""
    fit = model.max_batch(multiple)
    chunks = max(1, math.ceil(n_candidates / fit))
    per_chunk = math.ceil(n_candidates / chunks)
    return min(fit, math.ceil(per_chunk / multiple) * multiple)
