"""A study's versions as data: which callables it compares, which of them is the baseline, and the grid it times them on.

    VERSIONS = Versions({"baseline": baseline.kmeans, "optimized": optimized.kmeans})   # the first is the baseline
    VERSIONS["optimized"]                       # the callable; an unknown name: VersionError naming those there are
    v = VERSIONS.variant("optimized", tol=0.0)  # a variant: a version with its knobs; v(points, c) passes tol=0.0
    v.name, v.version, v.knobs                  # "optimized (tol=0.0)", "optimized", {"tol": 0.0}
    times = Grid(VERSIONS.variants(), sizes=[8, 32], size_name="k", inputs=make_data, call=one_call).measure(...)
    times.table().print(); times.figure(ylabel="ms per call")
    Part(fn, scale=8)                           # what `call` may return: fn does 1/8 of one call; its times x 8

`Versions` is the one place a study names its versions: a parameter that names one is looked up there (one lookup,
one error). A `Variant` is what a notebook or a claim times: one version and the knobs it runs with (a compile mode,
a bucket bound, toggles), with a name that says both. A `Grid` is the usual benchmark, variants x sizes timed side
by side (`perflab.kit.bench.measure_interleaved`: a drifting machine slows them alike); its result is a table and a
figure, and each timing logs with the variant and the size it was measured at."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .bench import Measurement, Part, compare, measure_interleaved, summary

__all__ = ["Grid", "GridResult", "Part", "Variant", "VersionError", "Versions"]


class VersionError(KeyError, ValueError):
    """A name that is not one of the study's versions (a KeyError for lookups, a ValueError for parameters)."""

    def __str__(self) -> str:  # KeyError's own quotes the message
        return str(self.args[0])


def _knobs_text(knobs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in knobs.items())


@dataclasses.dataclass(frozen=True)
class Variant:
    """One version with its knobs: `variant(*args, **kw)` calls the version with the knobs (a keyword given here wins).
    `name` names it in tables and figures: the version's name, then its knobs ("bucketed (min_bucket=8)") unless a
    name is given."""
    version: str
    fn: Callable
    knobs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "knobs", dict(self.knobs))
        if not self.name:
            text = _knobs_text(self.knobs)
            object.__setattr__(self, "name", f"{self.version} ({text})" if text else self.version)

    def __call__(self, *args, **kw):
        return self.fn(*args, **{**self.knobs, **kw})

    def __hash__(self) -> int:
        return hash((self.version, self.name))

    def with_knobs(self, name: str = "", **knobs) -> Variant:
        """The same version with more (or other) knobs."""
        return Variant(self.version, self.fn, {**self.knobs, **knobs}, name)


class Versions(dict):
    """A study's versions by name, the baseline flagged (default: the first). A dict: `VERSIONS[name]` is the
    callable, iteration gives the names in order with the baseline first; an unknown name raises `VersionError`,
    which names the versions there are. (A test may swap a version for a planted bug: `monkeypatch.setitem`.)"""

    def __init__(self, versions: Mapping[str, Callable], *, baseline: str | None = None, what: str = "version"):
        if not versions:
            raise ValueError("Versions: give at least one version")
        for name, fn in versions.items():
            if not isinstance(name, str) or not name or not callable(fn):
                raise ValueError(f"Versions: {name!r} must be a non-empty name of a callable, got {fn!r}")
        baseline = next(iter(versions)) if baseline is None else baseline
        if baseline not in versions:
            raise VersionError(f"Versions: the baseline {baseline!r} is not one of {', '.join(versions)}")
        super().__init__({baseline: versions[baseline], **versions})  # the baseline first
        self.what = what  # how an error calls one ("version", "search")
        self.baseline = baseline

    def __missing__(self, name: str):
        raise VersionError(f"no {self.what} {name!r}: expected one of {', '.join(self)}")

    def __repr__(self) -> str:
        return f"Versions({', '.join(self)}; baseline {self.baseline})"

    def check(self, names: Iterable[str], what: str = "") -> list[str]:
        """`names` as a list, each a version (what a parameter listing versions is checked with)."""
        names = list(names)
        unknown = [n for n in names if n not in self]
        if unknown:
            raise VersionError(f"{what or 'versions'}: {', '.join(map(repr, unknown))} "
                               f"{'is' if len(unknown) == 1 else 'are'} not one of {', '.join(self)}")
        return names

    @property
    def others(self) -> list[str]:
        """The versions compared with the baseline, in order."""
        return [n for n in self if n != self.baseline]

    def variant(self, version: str, name: str = "", **knobs) -> Variant:
        """The version `version` with `knobs`, named `name` (default: the version and its knobs); an unknown version
        is refused with the names there are."""
        return Variant(version, self[version], knobs, name)

    def variants(self, names: Iterable[str] | None = None, **knobs) -> list[Variant]:
        """Each version (or those of `names`) as a variant, the same knobs for all."""
        return [self.variant(n, **knobs) for n in (self if names is None else self.check(names))]


@dataclasses.dataclass
class GridResult:
    """A grid's timings: `times[(variant name, size)]` a Measurement of one call; `table()`, `figure()`, `log()`."""
    variants: list[Variant]
    sizes: list
    size_name: str
    label: str
    times: dict[tuple[str, Any], Measurement]

    def __getitem__(self, key: tuple[str, Any]) -> Measurement:
        return self.times[key]

    def table(self, title: str | None = None):
        """One line per timing, the first variant the reference of each size (`perflab.kit.bench.compare`)."""
        return compare(self.times.values(), title=title)

    def log(self, log, *, metric: str, **fields) -> None:
        """Each timing to the results log, with its version, its knobs and the size it was measured at."""
        for v in self.variants:
            for size in self.sizes:
                log.measurement(self.times[v.name, size], metric=metric, impl=v.version, variant=v.name,
                                **{self.size_name: size}, **fields)

    def figure(self, *, ylabel: str = "ms per call (median, p20-p80)", title: str = "", scale: float = 1e3,
               xlabel: str = "", versions: Iterable[str] = ()):
        """Time per call against the size, one line per variant: the median with p20-p80 bars (seconds times
        `scale`: ms by default); log axes where the values span a factor of 4 or more; the x axis is labelled
        `xlabel` (default: the size's name); each variant in its version's colour (`perflab.kit.figures.color`
        among `versions`, the study's IMPLS: the same colour in every figure of the study). -> matplotlib Figure"""
        import matplotlib.pyplot as plt

        from .figures import colors

        names = list(versions) or list(dict.fromkeys(v.version for v in self.variants))
        keys = [v.name for v in self.variants]  # a variant named as its version takes the version's colour
        palette = colors(keys, names)
        fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
        for v, c in zip(self.variants, (palette[k] for k in keys)):
            s = [summary(self.times[v.name, size]) for size in self.sizes]
            med = [scale * x["median_s"] for x in s]
            ax.errorbar(self.sizes, med, marker="o", label=v.name, capsize=3, color=c,
                        yerr=[[m - scale * x["p20_s"] for m, x in zip(med, s)],
                              [scale * x["p80_s"] - m for m, x in zip(med, s)]])
        if _spans(self.sizes):
            ax.set_xscale("log", base=2)
            ax.set_xticks(self.sizes, [str(x) for x in self.sizes])  # the sizes as given, not powers of 2
            ax.minorticks_off()
        if _spans([scale * summary(m)["median_s"] for m in self.times.values()]):
            ax.set_yscale("log")
        ax.set_xlabel(xlabel or self.size_name)
        ax.set_ylabel(ylabel)
        ax.set_title(title or self.label)
        ax.legend()
        return fig


# what a timing's log row holds already (`ResultsLog.measurement`): a size may not be logged under these names
TIMING_FIELDS = ("kind", "metric", "unit", "label", "sub_label", "description", "median_s", "iqr_s", "p20_s", "p80_s",
                 "mean_s", "n", "calls_per_block", "num_threads", "impl", "variant", "study", "run_id", "params", "env",
                 "params_set")


def _spans(xs: Sequence) -> bool:
    nums = [x for x in xs if isinstance(x, (int, float)) and x > 0 and math.isfinite(x)]
    return len(nums) == len(xs) and len(nums) > 1 and max(nums) >= 4 * min(nums)


@dataclasses.dataclass
class Grid:
    """Variants x sizes, timed side by side: for each size, `inputs(size)` makes the data once and
    `call(variant, data)` returns the callable timed for that variant (one call of the work, or a `Part` of it:
    its times are scaled to the whole call)."""
    variants: Sequence[Variant]
    sizes: Sequence
    inputs: Callable[[Any], Any]
    call: Callable[[Variant, Any], Callable[[], object]]
    size_name: str = "size"
    label: str = "one call"

    def __post_init__(self):
        names = [v.name for v in self.variants]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"Grid: give variants with different names, got {names}")
        if not self.sizes:
            raise ValueError(f"Grid: give at least one {self.size_name}")
        if self.size_name in TIMING_FIELDS:
            raise ValueError(f"Grid: size_name {self.size_name!r} is a field of every timing's log row "
                             f"({', '.join(TIMING_FIELDS)}): name the size otherwise (e.g. {self.size_name + '_size'!r})")
        self.variants, self.sizes = list(self.variants), list(dict.fromkeys(self.sizes))

    def measure(self, *, rounds: int = 2, **timing) -> GridResult:
        """Each size's variants in `rounds` interleaved rounds (`timing`: min_run_time, max_run_time, device...).
        -> GridResult"""
        times = {}
        for size in self.sizes:
            data = self.inputs(size)
            fns = {(v.name, size): self.call(v, data) for v in self.variants}
            times.update(measure_interleaved(fns, label=self.label, rounds=rounds,
                                             sub_labels={key: f"{self.size_name}={size}" for key in fns},
                                             descriptions={key: key[0] for key in fns}, **timing))
        return GridResult(self.variants, self.sizes, self.size_name, self.label, times)
