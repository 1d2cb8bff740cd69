"""A measured interval against a claim's threshold: `Measured`, `judge` (the one rule), and `Decision` (what a
`perflab.kit.verdicts.decide_*` call measured and concluded).

    judge(Measured(4.1, 3.8, 4.5), at_least=4.0)             # 'within noise': the interval straddles 4
    judge(Measured(5.2, 4.9, 5.6), at_least=4.0)             # 'holds'

The rule and how a decision is made: `perflab.kit.verdicts`' doc.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .formatting import num, num_interval
from .intervals import mean_interval, ratio_interval

VERDICTS = ("holds", "partly holds", "does not hold", "within noise", "fixed", "not tested here")
CONFIDENCE = 0.99  # of every interval a decision gives: a wrong verdict at most (1 - CONFIDENCE) / 2 per side


@dataclasses.dataclass(frozen=True)
class Measured:
    """A measured value and the interval it is known to (low <= value <= high)."""
    value: float
    low: float
    high: float

    @classmethod
    def exact(cls, value: float) -> Measured:
        """A count or another number without noise."""
        return cls(value, value, value)

    @classmethod
    def from_samples(cls, samples: Sequence[float], confidence: float = CONFIDENCE) -> Measured:
        """The mean of `samples` (in the order they were taken) and its `confidence` interval over batch means
        (one look: `perflab.kit.intervals.mean_interval`); unbounded with fewer than two."""
        xs = [float(x) for x in samples]
        if not xs:
            raise ValueError("Measured.from_samples: no samples")
        v = sum(xs) / len(xs)
        low, high = mean_interval(xs, 1 - confidence)
        return cls(v, min(low, v), max(high, v))

    @classmethod
    def ratio(cls, a, b, confidence: float = CONFIDENCE, scale: float = 1.0) -> Measured:
        """mean(a) / mean(b) x `scale` for two independent sets of samples (e.g. the block times of two
        `Measurement`s, in order): each mean's interval at 1 - alpha/2, so the ratio's bounds hold together with
        `confidence`. Paired rounds (`decide_speedup`) give a narrower interval for the same time."""
        xa, xb = ([float(t) for t in getattr(x, "times", x)] for x in (a, b))
        alpha = 1 - confidence
        (la, ha), (lb, hb) = mean_interval(xa, alpha / 2), mean_interval(xb, alpha / 2)
        v = sum(xa) / len(xa) / (sum(xb) / len(xb)) * scale
        low = max(la, 0.0) / hb * scale if hb < math.inf else 0.0
        high = ha / lb * scale if lb > 0 and ha < math.inf else math.inf
        return cls(v, min(low, v), max(high, v))

    @classmethod
    def paired_ratio(cls, num: Sequence[float], den: Sequence[float], confidence: float = CONFIDENCE) -> Measured:
        """mean(num) / mean(den) for two series taken in the same rounds (e.g. two batch sizes' seconds per candidate,
        round by round), with Fieller's interval over batch means (`perflab.kit.intervals.ratio_interval`): the
        total's ratio, not the typical round's."""
        num, den = [float(x) for x in num], [float(x) for x in den]
        if not num or len(num) != len(den):
            raise ValueError(f"Measured.paired_ratio: {len(num)} numerators against {len(den)} denominators")
        v = sum(num) / sum(den)
        lo, hi = ratio_interval(num, den, 1 - confidence)
        return cls(v, min(lo, v), max(hi, v))

    def __post_init__(self):
        if not self.low <= self.value <= self.high:
            raise ValueError(f"Measured needs low <= value <= high, got {self.low}, {self.value}, {self.high}")


def _check_rule(who: str, at_least, at_most, partly) -> None:
    if (at_least is None) == (at_most is None):
        raise ValueError(f"{who}: give exactly one of at_least and at_most (the claim's threshold), "
                         f"got at_least={at_least!r}, at_most={at_most!r}")
    for name, v in (("at_least", at_least), ("at_most", at_most), ("partly", partly)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v)):
            raise TypeError(f"{who}: {name} must be a number, got {v!r}")
    if partly is not None:
        if at_least is not None and not partly <= at_least:
            raise ValueError(f"{who}: partly={partly!r} must lie on the claim's side below at_least={at_least!r}")
        if at_most is not None and not partly >= at_most:
            raise ValueError(f"{who}: partly={partly!r} must lie on the claim's side above at_most={at_most!r}")


def judge(m: Measured | None, *, at_least: float | None = None, at_most: float | None = None,
          partly: float | None = None, needs: str = "", device_type: str = "") -> str:
    """The verdict of measurement `m` against a claim `value >= at_least` (or `value <= at_most`) (module doc).

    Nothing measured, or `needs` names a device type other than `device_type`: "not tested here". "partly holds"
    needs the whole interval past `partly`: the same numbers give the same verdict in every study."""
    _check_rule("judge", at_least, at_most, partly)
    if m is None or (needs and device_type != needs):
        return "not tested here"
    if at_least is not None:
        if m.low >= at_least:
            return "holds"
        if m.high < at_least:
            return "partly holds" if partly is not None and m.low >= partly else "does not hold"
        return "within noise"
    if m.high <= at_most:
        return "holds"
    if m.low > at_most:
        return "partly holds" if partly is not None and m.high <= partly else "does not hold"
    return "within noise"


def _settled(m: Measured, at_least, at_most, partly) -> bool:
    """Whether more rounds could still change the verdict of `m`: not when it holds, or when it misses and the
    smaller effect (`partly`) is settled too."""
    v = judge(m, at_least=at_least, at_most=at_most, partly=partly)
    if v in ("holds", "partly holds"):
        return True
    if v != "does not hold":
        return False
    return partly is None or (m.high < partly if at_least is not None else m.low > partly)


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a `decide_*` call measured and concluded: the verdict, the value judged (a mean: for a speedup the ratio
    of mean times per call) and its interval, the typical round's value beside it, how many rounds of how many calls
    over how many seconds of wall time, and the rule it was judged by. `.measured` is the judged numbers as a
    `Measured`, `.typical_measured` the typical ones."""
    verdict: str
    value: float
    low: float
    high: float
    rounds: int
    seconds: float
    confidence: float
    quantity: str                       # "speedup", "saving", or what `decide_value` measured
    at_least: float | None = None
    at_most: float | None = None
    partly: float | None = None
    samples: tuple = ()                 # each round's value, in order
    calls: tuple = ()                   # calls per block of each side (paired rounds: baseline, optimized)
    note: str = ""                      # what the reader should know: budget, warm-up, drift, trend, slow calls
    typical: float = math.nan           # the median round's value
    typical_low: float = -math.inf
    typical_high: float = math.inf
    block: float = 0.0                  # seconds of a block (each side's, paired)
    warmup_calls: tuple = ()            # calls each side made before the rounds
    longer: float = math.nan            # the value over blocks LONG x longer (the check), nan when not run
    waits_removed: bool = False         # whether another process's turns on the core were taken out of the blocks
    more: float = math.nan              # within noise: about how many seconds more of rounds would decide it at this
    #                                     spread (inf: none would; nan: decided, or too few rounds to tell)

    @property
    def measured(self) -> Measured:
        return Measured(self.value, self.low, self.high)

    @property
    def typical_measured(self) -> Measured:
        return Measured(self.typical, min(self.typical_low, self.typical), max(self.typical_high, self.typical))

    def rejudge(self, *, at_least: float | None = None, at_most: float | None = None,
                partly: float | None = None) -> Decision:
        """The same measurement judged against another threshold (another claim about the same value). Valid: every
        interval of the sequence holds at once with the stated confidence (module doc), so the one the rounds
        stopped at covers the true value whatever rule stopped them; it may just be wider than that rule needs."""
        _check_rule("rejudge", at_least, at_most, partly)
        return dataclasses.replace(self, verdict=judge(self.measured, at_least=at_least, at_most=at_most,
                                                       partly=partly), at_least=at_least, at_most=at_most,
                                   partly=partly)

    @property
    def interval(self) -> str:
        """'2.41 [2.30, 2.55] (99% interval, 40 rounds, 0.61 s)'"""
        return (f"{num_interval(self.value, self.low, self.high)} ({self.confidence:.0%} interval, {self.rounds} rounds, "
                f"{self.seconds:.2f} s)")

    @property
    def how(self) -> str:
        """What was measured, in words: 'mean of 40 paired rounds of 3 and 8 calls (blocks of 5 ms), typical 2.45'."""
        what = "paired rounds" if len(self.calls) == 2 else "rounds"
        per = f" of {' and '.join(map(str, self.calls))} calls" if self.calls else ""
        blk = (f" (blocks of {self.block:.3g} s)" if self.block >= 1 else f" (blocks of {self.block * 1e3:.3g} ms)"
               if self.block else "")   # '2.38 s', not '2.38e+03 ms'
        typ = f", typical {num(self.typical, True)}" if math.isfinite(self.typical) else ""
        return f"mean of {self.rounds} {what}{per}{blk}{typ}"

    def __str__(self) -> str:
        rule = f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}"
        return (f"{self.quantity} {self.interval}, claim {rule}: {self.verdict}"
                + (f" ({self.note})" if self.note else ""))
