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
from pathlib import Path

import torch

from ...kit.memory import device_memory, peak_memory
from .rollout import check_batch, pad_to
from .step import GreedyStep


@dataclasses.dataclass
class MemoryModel:
    bytes_per_row: float      # slope of the step's peak memory over batch size
    fixed_bytes: float        # intercept
    free_bytes: int           # free device memory when measured
    budget_fraction: float    # share of the free memory a step may use
    probes: list              # [(batch, peak bytes over entry)]
    method: str               # cuda_allocator, rss_hwm or rss_sampled (perflab.kit.memory)

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


def resolve_batch(batch: int, engine, policy, candidates: torch.Tensor, max_depth: int = 20) -> int:
    """The batch an evaluation runs with: `batch` itself when >= 1; 0 means the memory model picks
    (`measure_memory_model` on the engine's device, then `choose_batch` for these candidates). The one
    place where 0 is read, and the one check of the range."""
    if isinstance(batch, int) and not isinstance(batch, bool) and batch == 0:
        return choose_batch(measure_memory_model(engine, policy, candidates, max_depth=max_depth), len(candidates))
    try:
        return check_batch(batch)
    except ValueError:
        raise ValueError(f"batch must be >= 1 (or 0: the memory model picks), got {batch!r}") from None


def step_bytes(engine, policy, batch: int, max_derived: int | None = None) -> int:
    """Bytes the step's largest intermediates occupy at `batch` rows (the prediction, before measuring):
    derive's candidate atoms [B, N, M, 3] int64 (about 6 live versions: bodies, rest, two substitutions,
    keys, compaction), its output [B, S, A, 3] int64 (x2: scatter and gather), and the policy's bag
    indices [B, S, 3A] int64 + weights float32 and successor embeddings [B, S, E] float32.
    `max_derived` replaces the engine's S (to predict another configuration)."""
    N, M, S, A = engine.K + engine.R, engine.A + 1, max_derived or engine.S, engine.A
    E = policy.cfg.embed_dim
    return batch * (6 * N * M * 3 * 8 + 2 * S * A * 3 * 8 + S * 3 * A * (8 + 4) + S * E * 4)


def cache_bytes(device: torch.device) -> dict:
    """L2 (and, on CPU, last-level) cache sizes in bytes: the GPU's properties or Linux sysfs."""
    if device.type == "cuda":
        return {"L2": int(torch.cuda.get_device_properties(device).L2_cache_size)}
    sizes = {}
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind = (d / "level").read_text().strip(), (d / "type").read_text().strip()
            text = (d / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction":
            sizes[f"L{level}"] = int(text.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
    return sizes
