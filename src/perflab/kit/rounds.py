"""Timing in rounds: a side's own time, a warm-up that lasts until the side is steady, blocks of equal length.

    sw = Stopwatch(device)                          # the calls' own seconds: another process's turns taken out
    sides = [Side("baseline", f_base), Side("optimized", f_opt)]
    warm_up(sides, sw, block=0.005, until=clock() + 0.5)   # tens of calls, until each side's time per call is steady
    length = size_blocks(sides, 0.005)              # calls per block: each side's blocks about `length` seconds
    pt = PairedTimer(f_base, f_opt)                 # the same, in one object: pt.round() -> (a's, b's) s per call

What a block's time holds (`Stopwatch`): on a CPU, only the calls. The clock is read right around them (its own cost,
measured once, taken off), nothing is synchronized inside, and the time the thread spent waiting for a core while
another process had it (Linux's run-queue delay, /proc/thread-self/schedstat) is taken out: a block then costs what
the side itself spent, whether it computed, waited for memory or slept, and a preemption is not read as the side's own
slow call. It is never less than the thread's CPU time. On a GPU the device is synchronized before the clock starts
and before it stops (the queued work is the block's), and no wait is taken out (the GPU runs on while the host
waits). Without schedstat (not Linux, or `clock=` replaced) the block's time is the clock's; `waited=` hands one in.

Blocks of equal length: each side's calls per block are sized from the warm-up's last window (tens of calls, never
one), so both blocks of a round last about the same time and whatever else the machine does hits either side alike.
"""
from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Callable

import torch

WARM_CALLS = 30       # a warm-up lasts at least this many calls of each side (a lazy init, a cache, a JIT's tiers)
WINDOW_CALLS = 10     # ... and ends when the last two windows of at least this many calls (and two blocks' time;
#                       fewer calls where a call is a whole run: `Side.window_calls`)
TOLERANCE = 0.10      # ... agree on the time per call within this fraction
DRIFT = 2.0           # a side whose blocks stray this factor from the target length is re-sized (`Side.drifted`)


def _run_queue_wait() -> Callable[[], float] | None:
    """Seconds this thread has waited, runnable, for a core since it started (Linux schedstat's second field), or
    None where the kernel does not tell."""
    path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
    try:
        fd = os.open(path, os.O_RDONLY)
        int(os.pread(fd, 128, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None

    def waited() -> float:
        return int(os.pread(fd, 128, 0).split()[1]) * 1e-9
    waited.fd = fd  # kept open for the stopwatch's life (one read: ~1 us)
    return waited


class Stopwatch:
    """Times `n` calls of a callable and returns their own seconds (module doc). `clock` replaces time.perf_counter
    (tests and the battery's simulation drive one), `waited` the run-queue reader (cumulative seconds waited for a
    core; None: read schedstat on a CPU device with the real clock, nothing otherwise)."""

    def __init__(self, device: torch.device | str | None = None, *, clock: Callable[[], float] | None = None,
                 waited: Callable[[], float] | None = None):
        from .env import pick_device

        self.device = torch.device(device) if device is not None else pick_device("auto")
        self.clock = clock or time.perf_counter
        self.cpu_device = self.device.type == "cpu"
        if waited is None and clock is None and self.cpu_device:
            waited = _run_queue_wait()
        self.waited = waited
        self.thread_cpu = time.thread_time if clock is None and waited is not None else None
        self.overhead = 0.0
        if clock is None:
            self.overhead = sorted(self.time(_nothing, 1) for _ in range(21))[10]  # the clock's own cost

    @property
    def corrects(self) -> bool:
        """Whether another process's turns on the core are taken out of the blocks' times."""
        return self.waited is not None

    def time(self, fn: Callable[[], object], n: int) -> float:
        """Own seconds of `n` calls of `fn` (module doc)."""
        from .env import synchronize

        if not self.cpu_device:
            synchronize(self.device)  # earlier work finished before the clock starts
        clock, waited, cpu = self.clock, self.waited, self.thread_cpu
        w0 = waited() if waited else 0.0
        c0 = cpu() if cpu else 0.0
        t0 = clock()
        for _ in range(n):
            fn()
        if not self.cpu_device:
            synchronize(self.device)  # the block's queued work is the block's
        t1 = clock()
        c1 = cpu() if cpu else 0.0
        w1 = waited() if waited else 0.0
        own = t1 - t0 - self.overhead - (w1 - w0)
        return max(own, c1 - c0 - self.overhead, 0.0)


def _nothing() -> None:
    return None


class Side:
    """One callable timed in blocks: `calls` per block (set by `size_blocks`), the warm-up's log of (seconds, calls)
    and `per_call`, its steady time per call."""

    def __init__(self, name: str, fn: Callable[[], object]):
        if not callable(fn):
            raise TypeError(f"{name} must be a callable taking no arguments (e.g. lambda: f(x)), "
                            f"got {type(fn).__name__}")
        self.name, self.fn = name, fn
        self.calls = 1
        self.per_call = 0.0
        self.log: list[tuple[float, int]] = []

    def block(self, sw: Stopwatch, calls: int | None = None) -> tuple[float, int]:
        n = calls or self.calls
        return sw.time(self.fn, n), n

    def window(self, skip: int = 0, min_seconds: float = 0.0, calls: int = WINDOW_CALLS) -> tuple[float, int, int]:
        """The last entries of the log (before the last `skip`) holding >= `calls` calls and `min_seconds`:
        (seconds, calls, entries), or None-like (0, 0, 0) when the log is too short."""
        s = c = k = 0
        for t, n in reversed(self.log[: len(self.log) - skip]):
            s, c, k = s + t, c + n, k + 1
            if c >= calls and s >= min_seconds:
                return s, c, k
        return 0.0, 0, 0

    def window_calls(self, span: float, sides: int) -> int:
        """Calls per window of the steadiness test: WINDOW_CALLS, fewer (down to one) where that many calls of each
        side would not fit in an eighth of the warm-up's `span` (a whole run per call: a few calls are its warm-up)."""
        per_call = self.log[-1][0] / self.log[-1][1] if self.log else 0.0
        fit = int(span / (8 * sides * per_call)) if per_call > 0 else WINDOW_CALLS
        return max(1, min(WINDOW_CALLS, fit))

    def steady(self, block: float, calls: int = WINDOW_CALLS) -> bool:
        """At least 3 windows' calls made (WARM_CALLS for windows of WINDOW_CALLS), and the last two windows of
        `calls` calls agree on the time per call within TOLERANCE (wider for fewer calls: x sqrt(WINDOW_CALLS /
        calls))."""
        if sum(n for _, n in self.log) < WARM_CALLS * calls // WINDOW_CALLS:
            return False
        s2, c2, k2 = self.window(0, 2 * block, calls)
        if not c2:
            return False
        s1, c1, _ = self.window(k2, 2 * block, calls)
        if not c1 or s1 <= 0 or s2 <= 0:
            return False
        return abs((s2 / c2) / (s1 / c1) - 1) <= TOLERANCE * math.sqrt(WINDOW_CALLS / calls)

    def drifted(self, recent: list[float], length: float, shrinks: bool = False) -> bool:
        """Whether blocks of `recent` seconds stray more than DRIFT from `length`: longer, in three blocks of four
        (their lower quartile: a side's own slow calls, drawn at random, lengthen some blocks, not the typical one, and
        do not re-size it, issue 50), or shorter, in half of them (their median), where the block holds more than one
        call or `shrinks` (its length was one call's, sized from a warm-up that may have held a slow one)."""
        return typical_block(recent) > DRIFT * length or ((self.calls > 1 or shrinks) and
                                                           median_of(recent) < length / DRIFT)


def typical_block(recent: list[float]) -> float:
    """The lower quartile of blocks' seconds: what a block of a side lasts without its own slow calls."""
    return sorted(recent)[len(recent) // 4]


def median_of(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def warm_up(sides: list[Side], sw: Stopwatch, *, block: float, until: float, not_before: float = -math.inf) -> str:
    """Call each side, in chunks that double until one is about a block long, the sides in turn, until every side is
    steady (`Side.steady`) and the clock has passed `not_before`, or the clock reaches `until` (every side called at
    least once). Sets each side's
    `per_call` from its last window. -> '' or a note naming the sides that were not steady by `until`."""
    chunk = {s.name: 1 for s in sides}
    span = until - sw.clock()
    while True:
        for s in sides:
            t, n = s.block(sw, chunk[s.name])
            s.log.append((t, n))
            if t < block / 2:
                chunk[s.name] = min(2 * n, 1_000_000)
        now = sw.clock()
        if now >= until or (now >= not_before and
                            all(s.steady(block, s.window_calls(span, len(sides))) for s in sides)):
            break
    restless = []
    for s in sides:
        k = s.window_calls(span, len(sides))
        sec, calls, _ = s.window(0, 2 * block, k)
        if not calls:  # too few calls for a window: the last half of what was made
            half = s.log[len(s.log) // 2:]
            sec, calls = sum(t for t, _ in half), sum(n for _, n in half)
        s.per_call = sec / calls
        if not s.steady(block, k):
            restless.append(f"{s.name} ({sum(n for _, n in s.log)} calls)")
    return f"warm-up not steady within its share of the budget: {', '.join(restless)}" if restless else ""


def size_blocks(sides: list[Side], block: float) -> float:
    """Each side's calls per block from its `per_call`, so that every side's block lasts about the same: `block`
    seconds, or one call of the slowest side when that is longer. -> that length in seconds."""
    length = max([block] + [s.per_call for s in sides])
    for s in sides:
        s.calls = max(1, min(1_000_000, round(length / max(s.per_call, 1e-9))))
    return length


class PairedTimer:
    """Two callables timed in paired rounds: each `round()` times one block of `a` and one of `b`, in an order drawn
    for each round (a process that takes the core every few blocks would hit the same side under a fixed pattern;
    drawn, it hits either alike), and returns the two own times per call in seconds. It warms both up (at most
    `warmup` seconds) and sizes their blocks to about `block` seconds each (module doc).

        pt = PairedTimer(f_base, f_opt, block=0.005, device=device)
        t_a, t_b = pt.round()
    """

    def __init__(self, a: Callable[[], object], b: Callable[[], object], *, block: float = 0.005,
                 warmup: float = 0.5, device: torch.device | str | None = None,
                 clock: Callable[[], float] | None = None, waited: Callable[[], float] | None = None, seed: int = 0):
        for name, f in (("a", a), ("b", b)):
            if not callable(f):
                raise TypeError(f"PairedTimer: {name} must be a callable taking no arguments, got {type(f).__name__}")
        self.order = random.Random(seed)  # which side goes first, drawn per round (seeded: a run can be repeated)
        self.sw = Stopwatch(device, clock=clock, waited=waited)
        self.sides = [Side("a", a), Side("b", b)]
        self.note = warm_up(self.sides, self.sw, block=block, until=self.sw.clock() + warmup)
        self.length = size_blocks(self.sides, block)
        self.rounds = 0

    @property
    def calls(self) -> tuple[int, int]:
        return self.sides[0].calls, self.sides[1].calls

    def round(self) -> tuple[float, float]:
        """One block of each side, in an order drawn for this round: (a's, b's) own seconds per call."""
        self.rounds += 1
        (ta, na), (tb, nb) = paired_round(self.sides, self.sw, self.order)
        return ta / na, tb / nb


def paired_round(sides: list[Side], sw: Stopwatch, order: random.Random, calls: list[int] | None = None
                 ) -> list[tuple[float, int]]:
    """One block of each side in an order drawn from `order`: [(seconds, calls)] in the sides' order. `calls`
    overrides the sides' calls per block (the longer blocks of a check)."""
    idx = list(range(len(sides)))
    order.shuffle(idx)
    out: list = [None] * len(sides)
    for i in idx:
        out[i] = sides[i].block(sw, calls[i] if calls else None)
    return out


class BlockTimer:
    """One callable timed in blocks of about `block` seconds, after a warm-up of at most `warmup` seconds: each call
    of the timer times one block and returns its own seconds per call."""

    def __init__(self, fn: Callable[[], object], *, block: float = 0.005, warmup: float = 0.5,
                 device: torch.device | str | None = None, clock: Callable[[], float] | None = None,
                 waited: Callable[[], float] | None = None, name: str = "fn"):
        if isinstance(block, bool) or not isinstance(block, (int, float)) or not block > 0:
            raise ValueError(f"block must be > 0 seconds, got {block!r}")
        self.side = Side(name, fn)
        self.sw = Stopwatch(device, clock=clock, waited=waited)
        self.note = warm_up([self.side], self.sw, block=block, until=self.sw.clock() + warmup)
        size_blocks([self.side], block)

    @property
    def calls(self) -> int:
        return self.side.calls

    def __call__(self) -> float:
        t, n = self.side.block(self.sw)
        return t / n
