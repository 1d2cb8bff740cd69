"""Profile a callable with pyinstrument; keep the HTML and text beside the results; return the top
frames with their share of the time as a table (to set beside a seed's own profile breakdown).

    prof = profile(lambda: probe.fit(x, y), out_dir=run.dir, name="fit_baseline")
    prof.table.head(10)          # function, file, seconds, share (inclusive time / total)
    prof.share("repeat_interleave")

Shares are inclusive (a function's time counts its callees), each function counted once per call
stack even when it recurses, so they read like the seed's "X accounts for 64.2% of fit".

`quiet_profiler()` keeps torch.profiler's C++ start/stop lines out of a notebook cell's output.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pyinstrument


def _pretty(function: str) -> str:
    # pyinstrument names torch's C functions "_VariableFunctionsClass.arange": call them torch.arange
    return function.replace("_VariableFunctionsClass.", "torch.")


@dataclasses.dataclass
class Profile:
    seconds: float        # wall time of the profiled call
    table: object       # pandas DataFrame: function, file, seconds, share, self_seconds
    html_path: Path | None
    text_path: Path | None
    result: object        # what the callable returned

    def share(self, name: str) -> float:
        """The largest inclusive share among the functions whose name contains `name` (0.0 when absent).
        Not a sum: inclusive shares of a function and of its callees that also match would count twice."""
        t = self.table
        hit = t[t["function"].str.contains(name, regex=False)]
        return float(hit["share"].max()) if len(hit) else 0.0


def _aggregate(root) -> tuple[dict, dict]:
    """Inclusive and self seconds per (function, file), counting a function once per stack."""
    incl: dict = collections.defaultdict(float)
    self_t: dict = collections.defaultdict(float)

    def walk(frame, on_stack: frozenset):
        key = (_pretty(frame.function), frame.file_path_short or "")
        if frame.is_synthetic:  # "[self]" leaves: time spent in the parent's own code
            return
        if key not in on_stack:
            incl[key] += frame.time
        self_t[key] += frame.time - sum(c.time for c in frame.children if not c.is_synthetic)
        for child in frame.children:
            walk(child, on_stack | {key})

    walk(root, frozenset())
    return incl, self_t


def profile(fn: Callable[[], object], *, out_dir: str | os.PathLike | None = None, name: str = "profile",
            interval: float = 0.001, top: int = 25) -> Profile:
    """Run `fn()` under pyinstrument; write `<out_dir>/<name>.html` and `.txt` when `out_dir` is given."""
    import pandas as pd

    prof = pyinstrument.Profiler(interval=interval)
    prof.start()
    try:
        result = fn()
    finally:
        prof.stop()
    session = prof.last_session
    root = session.root_frame()
    html_path = text_path = None
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        html_path, text_path = out / f"{name}.html", out / f"{name}.txt"
        html_path.write_text(prof.output_html())
        text_path.write_text(prof.output_text(unicode=True, color=False, show_all=False))
    total = session.duration or 1e-12
    if root is None:
        table = pd.DataFrame(columns=["function", "file", "seconds", "share", "self_seconds"])
    else:
        incl, self_t = _aggregate(root)
        table = pd.DataFrame([{"function": f, "file": p, "seconds": s, "share": s / total,
                               "self_seconds": self_t[(f, p)]} for (f, p), s in incl.items()])
        table = table.sort_values("seconds", ascending=False).head(top).reset_index(drop=True)
    return Profile(seconds=session.duration, table=table, html_path=html_path, text_path=text_path,
                   result=result)


@contextlib.contextmanager
def quiet_profiler():
    """torch.profiler's C++ start/stop lines ("USDT ... profiler_start") go to file descriptor 2, which a notebook
    kernel copies into the cell's output: silence that descriptor for the block (Python warnings do not use it)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
