"""Timing whole optimizer steps: blocks of steps, CUDA events on a GPU, one DataLoader worker pool at a time.

    timings = time_rounds({"baseline": (tr_a, n_a), "all_together": (tr_b, n_b)}, device=device, rounds=3,
                          min_time=0.3, max_time=1.0)
    timings["baseline"].measurement("latentwire step", "baseline"), timings["baseline"].foreign_workers

A block is `n` consecutive optimizer steps (`steps_per_block`: as many as fill `block_s` seconds); one block
gives one sample of the time per step (block time / n), and a timing is the spread over its blocks. On CUDA the
blocks are delimited by CUDA events recorded on the stream between steps, with no synchronize inside a run of
blocks: a step that never syncs is timed as it runs in training (the host queues ahead, the events see the
device's timeline, gaps where the device waited for the host included), and n steps per block average out the
step-to-step jitter of the host. On other devices the clock is `time.perf_counter`.

A timed variant is a `VariantResult`: what `ablation.prepare_variant` counted over its first steps, and its
`StepTiming` once timed (samples/s = samples per step / median time per step).

Rounds: every trainer is timed in turn, `rounds` times, merged per trainer, so a machine whose speed drifts
slows all of them alike. Only the trainer being timed may own DataLoader workers: each turn ends with its
`pause()` (workers joined), the next turn's first, untimed step starts that trainer's fresh pool, and every turn
counts the live DataLoader workers that are not the timed trainer's (`foreign_workers`, the rule says 0).
"""
from __future__ import annotations

import dataclasses
import math
import multiprocessing
import time

import numpy as np
import torch
from torch.utils.benchmark.utils.common import Measurement

from ..kit.bench import from_times, summary
from ..kit.env import synchronize
from ..kit.versions import Variant


def dataloader_workers() -> set[int]:
    """Process ids of this process's live multiprocessing children: the DataLoader workers of every loader
    (nothing else here starts any; inductor's compile workers are plain subprocesses, not counted)."""
    return {p.pid for p in multiprocessing.active_children()}


def iqr_ratio(times) -> float:
    """IQR / median of a list of per-step times (nan for fewer than 2: no spread to speak of)."""
    t = np.asarray(times, dtype=float)
    if t.size < 2:
        return math.nan
    return float(np.subtract(*np.percentile(t, [75, 25])) / np.median(t))


def steps_per_block(step, device, block_s: float) -> tuple[int, float]:
    """(n, seconds of one step): one step timed synchronized, n = the steps that fill `block_s` (at least 1)."""
    synchronize(device)
    t0 = time.perf_counter()
    step()
    synchronize(device)
    t1 = time.perf_counter() - t0
    return max(1, math.ceil(block_s / t1)), t1


def time_blocks(step, n: int, blocks: int, device) -> list[float]:
    """Seconds per step of `blocks` consecutive blocks of `n` steps (module doc: events on CUDA)."""
    device = torch.device(device)
    if device.type == "cuda":
        stream = torch.cuda.current_stream(device)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(blocks + 1)]
        events[0].record(stream)
        for e in events[1:]:
            for _ in range(n):
                step()
            e.record(stream)  # no synchronize between blocks: the queue keeps running
        torch.cuda.synchronize(device)
        return [a.elapsed_time(b) / 1e3 / n for a, b in zip(events, events[1:])]  # ms -> s
    marks = [time.perf_counter()]
    for _ in range(blocks):
        for _ in range(n):
            step()
        synchronize(device)  # a no-op on the CPU
        marks.append(time.perf_counter())
    return [(b - a) / n for a, b in zip(marks, marks[1:])]


@dataclasses.dataclass
class StepTiming:
    """One trainer's timing over all its turns."""
    steps_per_block: int
    step_times: list = dataclasses.field(default_factory=list)  # seconds per step, one per block
    foreign_workers: int = 0   # most DataLoader workers not its own alive while it was timed (the rule: 0)
    own_workers: int = 0       # most of its own workers alive while it was timed
    turns: int = 0
    clock: str = "perf_counter"  # or "cuda events"

    @property
    def iqr_ratio(self) -> float:
        return iqr_ratio(self.step_times)

    def measurement(self, label: str, sub_label: str = "", description: str = "") -> Measurement:
        """A torch.utils.benchmark Measurement: one raw time per block of `steps_per_block` steps."""
        n = self.steps_per_block
        return from_times([t * n for t in self.step_times], label=label, sub_label=sub_label, description=description,
                          calls=n, stmt="trainer.step()", env=self.clock)


@dataclasses.dataclass
class VariantResult:
    """One variant of the optimized or the baseline version, prepared (`ablation.prepare_variant`) and timed."""
    variant: Variant
    samples_per_step: int
    peak_bytes: int                   # perflab.kit.memory.peak_memory over the first step (CUDA allocator / CPU RSS)
    memory_method: str
    activation_bytes: int | None      # peak bytes held for backward in the first step (None under compile)
    lm_forwards_per_micro_batch: float | None  # None under compile (the counter sees eager calls only)
    first_step_s: float               # the untimed first step: worker start-up and compilation included
    launches: dict                    # perflab.kit.launches.count_launches over one step (.as_dict())
    steps_per_block: int              # optimizer steps per timed block
    timing: StepTiming | None = None  # None until timed
    measurement: Measurement | None = None

    @property
    def samples_per_s(self) -> float:
        return self.samples_per_step / self.measurement.median

    def samples_per_s_range(self) -> tuple[float, float]:
        """samples/s at the step time's p80 and p20."""
        s = summary(self.measurement)
        return self.samples_per_step / s["p80_s"], self.samples_per_step / s["p20_s"]

    @property
    def iqr_ratio(self) -> float:
        return iqr_ratio(self.timing.step_times)


def _turn(trainer, timing: StepTiming, device, *, min_time: float, max_time: float, min_blocks: int,
          threshold: float) -> None:
    """One trainer's turn: a first untimed step if its DataLoader workers must start again, then blocks until at least
    `min_blocks` blocks and `min_time` s, and until the IQR/median of all its blocks so far is under
    `threshold` or `max_time` s have passed."""
    if trainer.loader_paused():
        trainer.step()  # untimed: the paused DataLoader starts its workers and fills its prefetch queue here
    synchronize(device)
    t0, new = time.perf_counter(), 0
    while True:
        before = dataloader_workers()
        blocks = max(1, min_blocks - new) if new < min_blocks else 2
        times = time_blocks(trainer.step, timing.steps_per_block, blocks, device)
        own = set(trainer.worker_pids())
        timing.foreign_workers = max(timing.foreign_workers, len((before | dataloader_workers()) - own))
        timing.own_workers = max(timing.own_workers, len(own))
        timing.step_times += times
        new += len(times)
        elapsed = time.perf_counter() - t0
        if new >= min_blocks and elapsed >= min_time and (not iqr_ratio(timing.step_times) > threshold
                                                          or elapsed >= max_time):
            break
    timing.turns += 1


def time_rounds(entries: dict, *, device, rounds: int = 3, min_time: float = 0.3, max_time: float = 1.0,
                min_blocks: int = 6, threshold: float = 0.1) -> dict[str, StepTiming]:
    """Time trainers side by side (module doc). `entries` maps a name to (trainer, steps per block);
    `min_time`/`max_time` are seconds per trainer over all rounds, `min_blocks` blocks per trainer at least.
    -> {name: StepTiming}"""
    if rounds < 1:
        raise ValueError(f"time_rounds: rounds must be >= 1, got {rounds}")
    for trainer, _ in entries.values():
        trainer.pause()  # nobody's workers run while another trainer is timed, from the first turn on
    clock = "cuda events" if torch.device(device).type == "cuda" else "perf_counter"
    timings = {name: StepTiming(n, clock=clock) for name, (_, n) in entries.items()}
    per_turn = math.ceil(min_blocks / rounds)
    for _ in range(rounds):
        for name, (trainer, _) in entries.items():
            try:
                _turn(trainer, timings[name], device, min_time=min_time / rounds, max_time=max_time / rounds,
                      min_blocks=per_turn, threshold=threshold)
            finally:
                trainer.pause()  # its workers exit before the next trainer's turn
    return timings
