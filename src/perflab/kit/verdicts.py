"""Verdicts: a claim's threshold against a measured interval, and measurements that go on until they decide.

    d = decide_speedup(lambda: f_base(x), lambda: f_opt(x), at_least=2.0, max_run_time=2.0)
    d.verdict, d.value, d.low, d.high, d.rounds, d.seconds    # 'holds', 2.41, 2.30, 2.55, 40, 0.61
    d.typical, d.calls, d.note                                # 2.45 (the median round's), (3, 8), ''
    judge(Measured(4.1, 3.8, 4.5), at_least=4.0)             # 'within noise': the interval straddles 4

The rule (`judge`, one for every study): the whole interval on the claim's side of its threshold: "holds"; the
whole interval on the other side: "does not hold", or "partly holds" when the whole interval still passes
`partly` (a smaller threshold on the claim's side: a real but smaller effect); the interval straddles the
threshold: "within noise". A claim about a setup this run does not have is "not tested here" (`perflab.kit.claims`).

What a speed claim is judged on: the job's total time at steady state. `decide_speedup`'s value is the ratio of the
two sides' mean times per call (total time over total calls, slow calls included: what a job's wall time sees); the
typical call's ratio (the median round's) is reported beside it, and where the two intervals do not overlap the
verdict's note says which side's slow calls part them.

How a decision is made (`perflab.kit.deciding`, whose doc says it whole): warm-up until steady inside the budget,
paired rounds of equal blocks of each side's own time, the interval over batch means (Fieller's for a ratio), the
looks paid for by a union bound (a verdict on the wrong side at most 0.5% of the time where the batch means are near
normal: measured on claims of known truth that behave as real code does, `perflab battery`), a trend check, a check
against longer blocks, and a wall-time budget that holds the warm-up too. Compile before deciding.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from .intervals import mean_interval, ratio_interval

VERDICTS = ("holds", "partly holds", "does not hold", "within noise", "fixed", "not tested here")
CONFIDENCE = 0.99  # of every interval a decision gives: a wrong verdict at most (1 - CONFIDENCE) / 2 per side
BLOCK = 0.005      # seconds of each side's block in a round (tools/block-size.py)
DRIFT = 0.05       # relative sd of the machine's speed between windows of a decision's length, which its rounds cannot
# see: added to the interval of a quantity the load moves (measured on this project's 2-core VM: 2-s windows of a fixed
# matmul loop, 40 in a row: 3.7% beside two busy processes, 5.9% quiet; decide_*(drift=0) on a dedicated machine)


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


def _g(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else ("-inf" if x < 0 else "inf")


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
        return (f"{_g(self.value)} [{_g(self.low)}, {_g(self.high)}] ({self.confidence:.0%} interval, {self.rounds} "
                f"rounds, {self.seconds:.2f} s)")

    @property
    def how(self) -> str:
        """What was measured, in words: 'mean of 40 paired rounds of 3 and 8 calls (blocks of 5 ms), typical 2.45'."""
        what = "paired rounds" if len(self.calls) == 2 else "rounds"
        per = f" of {' and '.join(map(str, self.calls))} calls" if self.calls else ""
        blk = f" (blocks of {self.block * 1e3:.3g} ms)" if self.block else ""
        typ = f", typical {_g(self.typical)}" if math.isfinite(self.typical) else ""
        return f"mean of {self.rounds} {what}{per}{blk}{typ}"

    def __str__(self) -> str:
        rule = f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}"
        return (f"{self.quantity} {self.interval}, claim {rule}: {self.verdict}"
                + (f" ({self.note})" if self.note else ""))


def decide_speedup(baseline: Callable[[], object], optimized: Callable[[], object], *, at_least: float | None = None,
                   at_most: float | None = None, partly: float | None = None, scale: float = 1.0,
                   max_run_time: float = 2.0, confidence: float = CONFIDENCE, block: float = BLOCK,
                   min_rounds: int = 1, device=None, clock: Callable[[], float] | None = None,
                   waited: Callable[[], float] | None = None, seed: int = 0, quantity: str = "speedup") -> Decision:
    """Time `baseline()` and `optimized()` in paired rounds until the speedup (baseline's mean time per call /
    optimized's, times `scale`: e.g. the ratio of work per call when the two calls do different amounts) is settled
    against the claim `>= at_least` (or `<= at_most`), or `max_run_time` seconds of wall time are spent, the warm-up
    included. -> Decision (`perflab.kit.deciding`).

    `block`: seconds of each side's block; `device`: synchronized around each block where it is a GPU (default: the
    one in use); `clock` replaces time.perf_counter and `waited` the run-queue reader (simulations); `quantity` names
    the ratio (e.g. "times the floor"). Refused: a non-callable, both or neither threshold, a budget <= 0."""
    from .deciding import _positive, paired

    _positive("decide_speedup", "scale", scale)
    return paired("decide_speedup", quantity, baseline, optimized, of="ratio", scale=scale, at_least=at_least,
                   at_most=at_most, partly=partly, max_run_time=max_run_time, confidence=confidence, block=block,
                   min_rounds=min_rounds, device=device, clock=clock, waited=waited, seed=seed)


def decide_saving(baseline: Callable[[], object], optimized: Callable[[], object], *, per: float = 1.0,
                  at_least: float | None = None, at_most: float | None = None, partly: float | None = None,
                  max_run_time: float = 2.0, confidence: float = CONFIDENCE, block: float = BLOCK,
                  min_rounds: int = 1, device=None, clock: Callable[[], float] | None = None,
                  waited: Callable[[], float] | None = None, seed: int = 0) -> Decision:
    """Seconds saved by `optimized` over `baseline` per call, times `per` (e.g. the steps of an epoch), in paired
    rounds as `decide_speedup`: the difference of the two mean times per call, its interval over batch means."""
    from .deciding import _positive, paired

    _positive("decide_saving", "per", per)
    return paired("decide_saving", "saving", baseline, optimized, of="saving", scale=per, at_least=at_least,
                   at_most=at_most, partly=partly, max_run_time=max_run_time, confidence=confidence, block=block,
                   min_rounds=min_rounds, device=device, clock=clock, waited=waited, seed=seed)


def decide_time(fn: Callable[[], object], *, at_least: float | None = None, at_most: float | None = None,
                partly: float | None = None, scale: float = 1.0, quantity: str = "seconds per call",
                max_run_time: float = 2.0, confidence: float = CONFIDENCE, block: float = BLOCK,
                drift: float = DRIFT, device=None, clock: Callable[[], float] | None = None,
                waited: Callable[[], float] | None = None) -> Decision:
    """The mean time per call of `fn()`, times `scale` (1e3: milliseconds), warmed up until steady and timed in
    blocks of about `block` seconds (a side's own time: `perflab.kit.rounds.Stopwatch`), until the interval of the
    mean over batch means settles the claim or the budget is spent; `drift`: the machine's speed drift between windows
    as long as the decision, added to the interval (module doc; 0 on a dedicated machine). A cost against a number, not
    against another version (that is `decide_speedup`, whose paired rounds cancel the machine's drift)."""
    from .deciding import timed

    return timed(fn, rule=dict(at_least=at_least, at_most=at_most, partly=partly), scale=scale, quantity=quantity,
                 max_run_time=max_run_time, confidence=confidence, block=block, drift=drift, device=device,
                 clock=clock, waited=waited)


def decide_value(measure_once: Callable[[], float], *, at_least: float | None = None, at_most: float | None = None,
                 partly: float | None = None, quantity: str = "value", max_run_time: float = 2.0,
                 confidence: float = CONFIDENCE, warmup: int = 1, min_rounds: int = 1, drift: float = 0.0,
                 clock: Callable[[], float] | None = None) -> Decision:
    """A noisy quantity (bytes, an op count, a share of a profile) measured again and again by `measure_once()`
    (which returns one value) until the interval of its mean (batch means: `perflab.kit.intervals.mean_interval`)
    settles the claim or `max_run_time` seconds are spent, the `warmup` calls included: the same looks as
    `decide_speedup`; `drift`: the machine's speed drift to add where the value follows it (`DRIFT`, module doc). A
    throughput is `decide_rate`; a count that cannot vary needs none of this: `Measured.exact(n)`."""
    from .deciding import samples

    return samples("decide_value", measure_once, rule=dict(at_least=at_least, at_most=at_most, partly=partly),
                    quantity=quantity, max_run_time=max_run_time, confidence=confidence, warmup=warmup,
                    min_rounds=min_rounds, clock=clock, rate=False, drift=drift)


def decide_rate(measure_once: Callable[[], tuple[float, float]], *, at_least: float | None = None,
                at_most: float | None = None, partly: float | None = None, quantity: str = "per second",
                max_run_time: float = 2.0, confidence: float = CONFIDENCE, warmup: int = 1, min_rounds: int = 1,
                drift: float = DRIFT, clock: Callable[[], float] | None = None) -> Decision:
    """A throughput: `measure_once()` does some work and returns (amount, seconds), e.g. (candidates scored, seconds
    it took); the rate judged is the total amount over the total seconds (what a job sees, not the mean of the
    samples' rates), with Fieller's interval over batch means, until it settles the claim or `max_run_time` seconds
    are spent, the `warmup` calls included; the machine's `drift` added to the interval (`perflab.kit.deciding`)."""
    from .deciding import samples

    return samples("decide_rate", measure_once, rule=dict(at_least=at_least, at_most=at_most, partly=partly),
                    quantity=quantity, max_run_time=max_run_time, confidence=confidence, warmup=warmup,
                    min_rounds=min_rounds, clock=clock, rate=True, drift=drift)
