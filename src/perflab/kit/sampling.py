"""Where a step's time goes, line by line: a second thread samples the step's thread's user stack at a fixed interval.

    with LineSampler(interval=0.0005) as s:
        for _ in range(5):
            step()
            s.mark()                      # a call ends here
    s.share(lambda stack, tag: site in stack)   # (mean share over groups of calls, its 99% interval's low, high)

pyinstrument says which *function* the time is in; a diagnosis needs the *line* (the `.item()` at line 63, the loop at
line 92) and whether the time is inside torch's DataLoader. The sampler keeps, per sample, the user's stack
(`perflab.kit.frames.user_stack`: the user's frames, innermost first, each with the line it is at), the innermost
frame's file and line (library or not), and a tag: "compile" where dynamo is compiling (a frame of
`torch/_dynamo/convert_frame.py` on the stack: compiled code itself runs in the user's frame), "loader" inside
`torch.utils.data`, else None. A torch op releases the GIL while it runs, so the sampler sees a thread inside one at
once; while the thread runs Python the sampler waits for its turn, which `sys.setswitchinterval` (lowered for the
block) bounds by a fraction of the interval.

Shares come with an interval: the calls are cut into groups of at least `MIN_SAMPLES` samples (one call where a call
is long), the share is taken in each group, and the mean of the groups' shares gets the kit's 99% interval
(`perflab.kit.intervals.mean_interval`). What the sampler costs is measured by its caller: the same step timed with
and without it.
"""
from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable

from .frames import Site, user_stack
from .intervals import mean_interval

MIN_SAMPLES = 20     # samples per group: fewer and one group's share is too coarse to average
_LOADER = os.sep + os.path.join("torch", "utils", "data") + os.sep
_COMPILE = os.sep + os.path.join("torch", "_dynamo", "convert_frame.py")


class LineSampler:
    """Context manager sampling the calling thread's user stack every `interval` seconds (module doc)."""

    def __init__(self, interval: float = 0.0005, thread_id: int | None = None):
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.interval = interval
        self.thread_id = thread_id if thread_id is not None else threading.get_ident()
        self.stacks: list[tuple[Site, ...]] = []
        self.tags: list[str | None] = []   # "compile", "loader" or None, per sample
        self.inner: list[tuple[str, int]] = []   # (file, line) of the innermost frame, library or not, per sample
        self.marks: list[int] = []          # sample index at the end of each call
        self._stop = threading.Event()
        self._thread = None
        self._switch = None

    def __enter__(self) -> LineSampler:
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, self.interval / 4))
        self._thread = threading.Thread(target=self._run, name="perflab-line-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._switch)

    def mark(self) -> None:
        """A call of the step ends here (samples before it belong to it)."""
        self.marks.append(len(self.stacks))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            frame = sys._current_frames().get(self.thread_id)
            if frame is None:
                continue
            self.stacks.append(user_stack(frame))
            self.inner.append((frame.f_code.co_filename, frame.f_lineno))
            tag, f = None, frame
            while f is not None:
                name = f.f_code.co_filename
                if name.endswith(_COMPILE):
                    tag = "compile"
                    break
                if tag is None and _LOADER in name:
                    tag = "loader"
                f = f.f_back
            self.tags.append(tag)
            del frame, f

    # ---- shares --------------------------------------------------------------------------------------------------
    def groups(self) -> list[range]:
        """Sample indices in groups of whole calls, each of at least MIN_SAMPLES samples (the last one may be merged)."""
        out, start = [], 0
        for end in self.marks:
            if end - start >= MIN_SAMPLES:
                out.append(range(start, end))
                start = end
        if out and start < (self.marks[-1] if self.marks else 0):
            out[-1] = range(out[-1].start, self.marks[-1])   # a short tail joins the last group
        elif not out and self.marks and self.marks[-1] > 0:
            out.append(range(0, self.marks[-1]))
        return out

    @property
    def samples(self) -> int:
        return self.marks[-1] if self.marks else 0

    def share(self, hit: Callable[[tuple[Site, ...], str | None], bool] | None = None, alpha: float = 0.01, *,
              inner: set | None = None) -> tuple[float, float, float]:
        """(mean share, low, high) of the samples for which `hit(stack, tag)` holds (or, with `inner`, whose innermost
        frame's (file, line) is in it), over the groups (module doc); the interval is (-inf, inf) with fewer than two
        groups, (nan, nan, nan) without samples."""
        groups = self.groups()
        if inner is not None:
            hits = [self.inner[i] in inner for i in range(self.samples)]
        else:
            hits = [hit(self.stacks[i], self.tags[i]) for i in range(self.samples)]
        shares = [sum(hits[i] for i in g) / len(g) for g in groups if len(g)]
        if not shares:
            return math.nan, math.nan, math.nan
        mean = sum(shares) / len(shares)
        low, high = mean_interval(shares, alpha) if len(shares) > 1 else (-math.inf, math.inf)
        return mean, max(0.0, low), min(1.0, high)
