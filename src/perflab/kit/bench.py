"""Timing: torch.utils.benchmark underneath, medians with spread on top.

    base = measure(lambda: f_base(x), label="slab stats", sub_label="n=4096", description="baseline")
    opt = measure(lambda: f_opt(x), label="slab stats", sub_label="n=4096", description="optimized")
    print(fmt(opt), speedup(base, opt))
    compare([base, opt]).print()

`measure` warms up, then times with `Timer.adaptive_autorange`, which synchronizes the device around
each block and keeps going until the IQR is under `threshold` of the median (at least 4 blocks)
or `max_run_time` runs out. It uses all of torch's intra-op threads by default (Timer alone would
use one): `m.task_spec.num_threads` records the count.

The floor helpers measure this device's copy bandwidth and matmul throughput, so a study can say
how close an implementation gets to bytes/bandwidth or FLOPs/peak without hard-coding a spec sheet.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch.utils import benchmark
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from .env import synchronize
from .formatting import fmt_seconds
from .rounds import BlockTimer, PairedTimer  # the verdicts' timers: perflab.kit.rounds

__all__ = ["measure", "measure_interleaved", "from_times", "BlockTimer", "PairedTimer", "summary", "fmt", "fmt_seconds",
           "speedup", "compare", "memory_bandwidth", "matmul_peak", "Measurement", "Part", "scaled"]


def measure(fn: Callable[[], object], *, label: str, sub_label: str = "", description: str = "",
            min_run_time: float = 0.2, max_run_time: float = 10.0, threshold: float = 0.1,
            warmup: int = 1, num_threads: int | None = None,
            device: torch.device | str | None = None,
            timer: Callable[[], float] | None = None) -> Measurement:
    """Time `fn()` and return a `torch.utils.benchmark.Measurement`.

    `warmup` untimed calls first (compiles, allocator growth, caches), then blocks of calls until
    the IQR/median is below `threshold` (with >= 4 blocks and >= `min_run_time` s) or `max_run_time` s.
    Compile time is not in the result: time it separately (see `perflab.kit.compiles`).
    `timer` replaces Timer's clock (wall time, CUDA-synchronized when CUDA is present), e.g.
    `time.process_time` to count only this process's CPU time on a shared CPU host (with one thread
    it equals an idle host's wall time). CPU only: it neither synchronizes nor counts the host's waits.
    """
    if warmup < 0 or min_run_time <= 0 or max_run_time < min_run_time:
        raise ValueError("measure: need warmup >= 0 and 0 < min_run_time <= max_run_time")
    for _ in range(warmup):
        fn()
    if device is not None:
        synchronize(device)
    extra = {"timer": timer} if timer is not None else {}
    t = benchmark.Timer(stmt="fn()", globals={"fn": fn}, label=label, sub_label=sub_label,
                        description=description, num_threads=num_threads or torch.get_num_threads(), **extra)
    return t.adaptive_autorange(threshold=threshold, min_run_time=min_run_time, max_run_time=max_run_time)


@dataclasses.dataclass(frozen=True)
class Part:
    """A callable timed on a part of its work: `fn` does 1/`scale` of one call (a baseline timed on some of its slabs,
    all of which cost the same); `measure_interleaved` (and so a `perflab.kit.versions.Grid`) multiplies its times by
    `scale`, so tables, figures and logs read one whole call. A study says why the part stands for the whole."""
    fn: Callable[[], object]
    scale: float

    def __post_init__(self):
        if not callable(self.fn) or not (self.scale > 0 and math.isfinite(self.scale)):
            raise ValueError(f"Part: need a callable and a finite scale > 0, got {self.fn!r} and {self.scale!r}")

    def __call__(self):
        return self.fn()


def measure_interleaved(fns: dict, *, label: str, rounds: int = 3, sub_labels: dict | None = None,
                        descriptions: dict | None = None, min_run_time: float = 0.2, max_run_time: float = 10.0,
                        warmup: int = 1, **kw) -> dict:
    """Time several callables side by side: `rounds` rounds, each timing every callable in turn with
    `measure` (1/rounds of the time budget each), merged per callable into one Measurement.

    A machine whose speed drifts during the run (a shared CPU, a GPU warming up) then slows every
    callable alike instead of whichever ran last. `fns` maps a key to a callable (a `Part`: its times scaled to the
    whole call); its sub_label is
    `sub_labels[key]` (default: the key) and its description `descriptions[key]` (default ""). Only the
    first round warms up. Other keywords go to `measure` (threshold, device, timer, num_threads).
    -> {key: Measurement}"""
    if rounds < 1:
        raise ValueError(f"measure_interleaved: rounds must be >= 1, got {rounds}")
    parts: dict = {k: [] for k in fns}
    for r in range(rounds):
        for k, fn in fns.items():
            parts[k].append(measure(fn, label=label, sub_label=(sub_labels or {}).get(k, str(k)),
                                    description=(descriptions or {}).get(k, ""), warmup=warmup if r == 0 else 0,
                                    min_run_time=min_run_time / rounds, max_run_time=max_run_time / rounds, **kw))
    merged = {k: Measurement.merge(ms)[0] for k, ms in parts.items()}
    return {k: scaled(m, fns[k].scale) if isinstance(fns[k], Part) else m for k, m in merged.items()}


def summary(m: Measurement) -> dict:
    """Median and spread of a measurement, in seconds: median, iqr, p20, p80, mean, n (blocks)."""
    t = np.asarray(m.times, dtype=float)
    return {
        "median_s": float(np.median(t)),
        "iqr_s": float(np.subtract(*np.percentile(t, [75, 25]))),
        "p20_s": float(np.percentile(t, 20)),
        "p80_s": float(np.percentile(t, 80)),
        "mean_s": float(t.mean()),
        "n": int(t.size),
        "calls_per_block": int(m.number_per_run),
        "num_threads": int(m.task_spec.num_threads),
    }


def from_times(times: Iterable[float], *, label: str, sub_label: str = "", description: str = "", calls: int = 1,
               stmt: str = "fn()", env: str = "") -> Measurement:
    """A Measurement of times taken by hand (a whole run, a training step): each of `times` is one block of `calls`
    calls, in seconds; its median, spread and table line then read as `measure`'s do."""
    times = [float(t) for t in times]
    if not times or calls < 1 or not all(t >= 0 and math.isfinite(t) for t in times):
        raise ValueError(f"from_times: need at least one finite time >= 0 and calls >= 1, got {times} and {calls}")
    spec = TaskSpec(stmt=stmt, setup="", global_setup="", label=label, sub_label=sub_label, description=description,
                    env=env, num_threads=torch.get_num_threads())
    return Measurement(number_per_run=calls, raw_times=times, task_spec=spec)


def scaled(m: Measurement, factor: float) -> Measurement:
    """`m` with every time multiplied by `factor` (a call that did a known part of the work, e.g. a baseline timed on
    some of its slabs, scaled to all of it): the same blocks, calls per block, labels and environment."""
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"scaled: factor must be a finite number > 0, got {factor}")
    if factor == 1.0:
        return m
    spec = m.task_spec
    return from_times([t * factor for t in m.raw_times], label=spec.label, sub_label=spec.sub_label,
                      description=spec.description, calls=m.number_per_run, stmt=spec.stmt, env=spec.env)


def fmt(m: Measurement) -> str:
    """'12.3 ms (IQR 0.4 ms, n=7)': median with spread and the number of timed blocks."""
    s = summary(m)
    return f"{fmt_seconds(s['median_s'])} (IQR {fmt_seconds(s['iqr_s'])}, n={s['n']})"


def speedup(baseline: Measurement, optimized: Measurement) -> float:
    """Ratio of medians, baseline / optimized (> 1 means optimized is faster)."""
    return baseline.median / optimized.median


def speedup_range(baseline: Measurement, optimized: Measurement) -> tuple[float, float]:
    """A conservative spread for the ratio: (baseline p20 / optimized p80, baseline p80 / optimized p20)."""
    b, o = summary(baseline), summary(optimized)
    return b["p20_s"] / o["p80_s"], b["p80_s"] / o["p20_s"]


class Table:
    """Timings side by side, one line each: benchmark, case, implementation, median (three significant figures),
    IQR, p20-p80, timed blocks, and the speedup against the case's reference (`perflab.kit.formatting.reference_rows`).

    It replaces torch's `Compare` for reports: `Compare.trim_significant_figures` rounds by the noise, so 14.0,
    13.3 and 13.7 ms print as "14, 10, 10"; here the median is printed as measured, beside its spread."""

    HEADER = ("benchmark", "case", "impl", "median", "IQR", "p20-p80", "n", "speedup")

    def __init__(self, measurements: Iterable[Measurement], title: str | None = None):
        from .formatting import reference_rows, speedup_text

        self.title = title
        self.measurements = list(measurements)
        ms = [(m.task_spec, summary(m)) for m in self.measurements]
        refs = reference_rows([(t.label, t.sub_label or "", t.description or "") for t, _ in ms])
        self.rows = [
            [t.label, t.sub_label or "", t.description or "", fmt_seconds(s["median_s"]), fmt_seconds(s["iqr_s"]),
             f"{fmt_seconds(s['p20_s'])} - {fmt_seconds(s['p80_s'])}", str(s["n"]),
             "" if ref is None else speedup_text(ms[ref][1]["median_s"], s["median_s"], ref == i)]
            for i, ((t, s), ref) in enumerate(zip(ms, refs))]

    def __str__(self) -> str:
        cols = [list(c) for c in zip(self.HEADER, *self.rows)]
        widths = [max(len(v) for v in c) for c in cols]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in [self.HEADER, *self.rows]]
        head = [f"[ {self.title} ]"] if self.title else []
        return "\n".join(head + lines[:1] + ["  ".join("-" * w for w in widths)] + lines[1:])

    def print(self) -> None:
        print(self)

    def frame(self):
        """The table as a pandas DataFrame (one row per timing, the header's columns)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(self.HEADER))

    def _repr_html_(self) -> str:
        frame = self.frame()
        caption = f"<caption style='text-align:left; font-weight:600'>{self.title}</caption>" if self.title else ""
        return frame.to_html(index=False, border=0).replace("<thead>", caption + "<thead>", 1)

    def show(self) -> None:
        """Display the table: as HTML in a notebook (no wrapped text lines), as text elsewhere."""
        show(self)

    def torch_compare(self) -> benchmark.Compare:
        """The same measurements as torch's `Compare` table (its columns: descriptions; rounded by the noise)."""
        c = benchmark.Compare(self.measurements)
        if self.title:
            c.title = self.title
        return c


def show(obj) -> None:
    """`obj` displayed as a notebook displays it (HTML where it has one: a DataFrame, a Table) inside a kernel, and
    printed elsewhere (a script, a test)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    import pandas as pd

    with pd.option_context("display.max_colwidth", None):   # every sentence whole (pandas cuts at 50 characters)
        if get_ipython is not None and get_ipython() is not None:
            display(obj)
        else:
            print(obj.to_string() if hasattr(obj, "to_string") else obj)


def compare(measurements: Iterable[Measurement], *, title: str | None = None) -> Table:
    """The measurements as a `Table` (one line per timing, precise medians, spread, speedup); `.print()` it."""
    return Table(measurements, title=title)


# ---- floors: what this device can do at best ---------------------------------------------------

def memory_bandwidth(device: torch.device | str, nbytes: int = 256 * 2**20, **kw) -> tuple[float, Measurement]:
    """Measured copy bandwidth in bytes/s (bytes read + bytes written per copy) and its Measurement.

    Use >= 4x the last-level cache for `nbytes` so the copy streams from memory."""
    dev = torch.device(device)
    n = nbytes // 4
    src = torch.rand(n, device=dev)
    dst = torch.empty_like(src)
    m = measure(lambda: dst.copy_(src), label="floor", sub_label=f"copy {nbytes / 2**20:.0f} MiB",
                description=str(dev), device=dev, **kw)
    return 2 * n * 4 / m.median, m


def matmul_peak(device: torch.device | str, dtype: torch.dtype = torch.float32, n: int | None = None,
                **kw) -> tuple[float, Measurement]:
    """Measured dense matmul throughput in FLOP/s for an n x n x n product, and its Measurement."""
    dev = torch.device(device)
    n = n or (8192 if dev.type != "cpu" else 1024)  # an accelerator needs a big product to reach its peak
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    m = measure(lambda: a @ b, label="floor", sub_label=f"matmul {n}^3 {dtype}".replace("torch.", ""),
                description=str(dev), device=dev, **kw)
    return 2 * n**3 / m.median, m
