"""Verdicts: a claim's threshold against a measured interval, and measurements that go on until they decide.

    d = decide_speedup(lambda: f_base(x), lambda: f_opt(x), at_least=2.0, max_run_time=2.0)
    d.verdict, d.value, d.low, d.high, d.rounds, d.seconds    # 'holds', 2.41, 2.30, 2.55, 12, 0.31
    judge(Measured(4.1, 3.8, 4.5), at_least=4.0)             # 'within noise': the interval straddles 4

The rule (`judge`, one for every study): the whole interval on the claim's side of its threshold: "holds"; the
whole interval on the other side: "does not hold", or "partly holds" when the whole interval still passes
`partly` (a smaller threshold on the claim's side: a real but smaller effect); the interval straddles the
threshold: "within noise". A claim about a setup this run does not have is "not tested here" (`perflab.kit.claims`).

How `decide_speedup` measures (paired rounds, a distribution-free interval, sequential stopping):
- Each round times one block of the baseline and one of the optimized version, in a random order, each block
  ~`block` seconds long (1 ms) (`perflab.kit.bench.PairedTimer`); the round's value is the ratio of the two times per call.
  A machine that drifts or is shared slows both blocks of a round alike; a preemption spoils one round, not a side.
  The speedup is then the typical call's: where one call fills a block (a whole step or run), a cost that recurs
  only every few calls on one side (an allocator growth, a worker refill, a sync every N steps) is an outlier to the
  median; a block of several calls folds it into every round (`block=`).
- The speedup is the median of the rounds' ratios. Its interval is the order-statistic confidence interval of a
  median (the sign test's: the number of rounds below the true median is Binomial(n, 1/2)), which assumes only that
  rounds are independent draws with one median: no normality, and outliers (a round hit by another process) move
  it by one rank, not by their size.
- Sequential: the interval is looked at after the first rounds that can give one, then each time the rounds have
  grown by a quarter, until it lies on one side of the threshold (the verdict) or `max_run_time` is spent
  ("within noise"). Looking often would inflate the error rate; look k is made at level alpha_k = alpha * 6 /
  (pi^2 k^2), with alpha = 1 - confidence, and these sum to alpha over any number of looks (a union bound, whatever
  the dependence between looks). So the chance that any interval of the sequence misses the true median is at most
  alpha, and a verdict on the wrong side (which needs a miss on that side) at most alpha / 2.
Measured on claims of known truth (`perflab.runner.battery`, `perflab battery`), under a background load that the battery
starts: the README's table.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

VERDICTS = ("holds", "partly holds", "does not hold", "within noise", "fixed", "not tested here")
CONFIDENCE = 0.99  # of every interval a decision gives: a wrong verdict at most (1 - CONFIDENCE) / 2 per side
GROWTH = 1.25      # the interval is looked at again when the rounds have grown by this factor


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
        """The median of independent `samples` and its distribution-free `confidence` interval (one look); with too
        few samples for that confidence the interval is unbounded (a verdict on it is "within noise")."""
        xs = sorted(float(x) for x in samples)
        if not xs:
            raise ValueError("Measured.from_samples: no samples")
        low, high = median_interval(xs, 1 - confidence)
        return cls(_median(xs), low, high)

    @classmethod
    def ratio(cls, a, b, confidence: float = CONFIDENCE, scale: float = 1.0) -> Measured:
        """median(a) / median(b) x `scale` for two independent sets of samples (e.g. the block times of two
        `Measurement`s, which are used as is): each median's interval at 1 - alpha/2, so the ratio's bounds hold
        together with `confidence`. Paired rounds (`decide_speedup`) give a narrower interval for the same time."""
        xa, xb = (sorted(float(t) for t in getattr(x, "times", x)) for x in (a, b))
        alpha = 1 - confidence
        (la, ha), (lb, hb) = median_interval(xa, alpha / 2), median_interval(xb, alpha / 2)
        v = _median(xa) / _median(xb) * scale
        low = la / hb * scale if hb < math.inf else 0.0
        high = ha / lb * scale if lb > 0 and ha < math.inf else math.inf
        return cls(v, min(low, v), max(high, v))

    def __post_init__(self):
        if not self.low <= self.value <= self.high:
            raise ValueError(f"Measured needs low <= value <= high, got {self.low}, {self.value}, {self.high}")


def _median(xs: list[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _binom():
    from scipy.stats import binom  # imported on first use (~0.4 s): `perflab` commands that judge nothing skip it

    return binom


def median_interval(xs: Sequence[float], alpha: float) -> tuple[float, float]:
    """The order-statistic interval [x_(l), x_(n+1-l)] of sorted `xs` that holds their true median with probability
    at least 1 - alpha (l the largest with P(Binomial(n, 1/2) <= l - 1) <= alpha / 2); (-inf, inf) when n is too
    small for any."""
    binom = _binom()
    n = len(xs)
    if n == 0 or 2 * 0.5 ** n > alpha:
        return -math.inf, math.inf
    j = int(binom.ppf(alpha / 2, n, 0.5))  # smallest j with P(B <= j) >= alpha/2
    if binom.cdf(j, n, 0.5) > alpha / 2:
        j -= 1
    j = min(j, (n - 1) // 2)
    return xs[j], xs[n - 1 - j]


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
    """What a `decide_*` call measured and concluded: the verdict, the median and its interval, how many rounds over
    how many seconds, and the rule it was judged by. `.measured` is the same numbers as a `Measured`."""
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
    calls: tuple = ()                   # calls per block (paired rounds)
    note: str = ""                      # why an undecided verdict could not be decided, when the budget is the cause

    @property
    def measured(self) -> Measured:
        return Measured(self.value, self.low, self.high)

    def rejudge(self, *, at_least: float | None = None, at_most: float | None = None,
                partly: float | None = None) -> Decision:
        """The same measurement judged against another threshold (another claim about the same ratio). Valid: every
        interval of the sequence holds at once with the stated confidence (module doc), so the one the rounds
        stopped at covers the true median whatever rule stopped them; it may just be wider than that rule needs."""
        _check_rule("rejudge", at_least, at_most, partly)
        return dataclasses.replace(self, verdict=judge(self.measured, at_least=at_least, at_most=at_most,
                                                       partly=partly), at_least=at_least, at_most=at_most,
                                   partly=partly)

    @property
    def interval(self) -> str:
        """'2.41 [2.30, 2.55] (99% interval, 12 rounds, 0.31 s)'"""
        def g(x):
            return f"{x:.3g}" if math.isfinite(x) else ("-inf" if x < 0 else "inf")
        return (f"{g(self.value)} [{g(self.low)}, {g(self.high)}] ({self.confidence:.0%} interval, {self.rounds} "
                f"rounds, {self.seconds:.2f} s)")

    def __str__(self) -> str:
        rule = f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}"
        return f"{self.quantity} {self.interval}, claim {rule}: {self.verdict}"


def _positive(who: str, name: str, x, what: str = "a number") -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
        raise ValueError(f"{who}: {name} must be {what} > 0, got {x!r}")


def _start(who: str, fns: dict, *, rule: dict, max_run_time, confidence, warmup: int, clock, device=None,
           block=None):
    """What every decide_* does first, in one place: refuse bad arguments (naming them), import the binomial table,
    call each of `fns` `warmup` times (compiles and first calls stay out of the budget) and resolve the device
    before the clock starts (a first CUDA query costs ~0.1-0.3 s). -> (device, clock)"""
    import time

    from .env import pick_device

    for name, f in fns.items():
        if not callable(f):
            raise TypeError(f"{who}: {name} must be a callable taking no arguments (e.g. lambda: f(x)), "
                            f"got {type(f).__name__}")
    _check_rule(who, **rule)
    _positive(who, "max_run_time", max_run_time, "a number of seconds")
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0.5 <= confidence < 1:
        raise ValueError(f"{who}: confidence must be a float in [0.5, 1), got {confidence!r}")
    if block is not None and (isinstance(block, bool) or not isinstance(block, (int, float)) or not block > 0):
        raise ValueError(f"{who}: block must be > 0 seconds, got {block!r}")
    _binom()
    for _ in range(warmup):
        for f in fns.values():
            f()
    if block is not None:  # timed in blocks: synchronized around each
        device = pick_device(device if device is not None else "auto")
    return device, clock or time.perf_counter


def _alpha(k: int, alpha: float) -> float:
    return alpha * 6 / (math.pi ** 2 * k ** 2)


def _sequential(next_sample: Callable[[], float], *, quantity: str, at_least, at_most, partly, max_run_time: float,
                confidence: float, clock: Callable[[], float], started: float, min_rounds: int = 1,
                calls: tuple = ()) -> Decision:
    """Draw samples until the interval of their median settles the claim or the budget is spent (module doc)."""
    alpha = 1 - confidence
    xs: list[float] = []
    k, look = 1, 1
    while 2 * 0.5 ** look > _alpha(1, alpha):  # the first look: the fewest samples that can give an interval
        look += 1
    first = look = max(look, min_rounds)
    while True:
        xs.append(float(next_sample()))
        elapsed = clock() - started
        out_of_time = elapsed + elapsed / len(xs) > max_run_time
        if len(xs) >= look or out_of_time:
            s = sorted(xs)
            low, high = median_interval(s, _alpha(k, alpha))
            m = Measured(_median(s), min(low, _median(s)), max(high, _median(s)))
            k += 1
            look = max(len(xs) + 1, math.ceil(len(xs) * GROWTH))
            if _settled(m, at_least, at_most, partly) or out_of_time:
                break
    note = ""
    if not math.isfinite(m.low) and not math.isfinite(m.high):
        note = (f"the budget ({max_run_time:g} s) ended after {len(xs)} rounds; the first {confidence:.0%} interval "
                f"needs {first}: give more time")
    return Decision(judge(m, at_least=at_least, at_most=at_most, partly=partly), m.value, m.low, m.high, len(xs),
                    clock() - started, confidence, quantity, at_least, at_most, partly, tuple(xs), calls, note)


def _paired(who: str, quantity: str, baseline, optimized, of: Callable[[float, float], float], *, at_least, at_most,
            partly, max_run_time, confidence, block, warmup, min_rounds, device, clock) -> Decision:
    from .bench import PairedTimer

    device, clock = _start(who, {"baseline": baseline, "optimized": optimized},
                           rule=dict(at_least=at_least, at_most=at_most, partly=partly), max_run_time=max_run_time,
                           confidence=confidence, warmup=warmup, clock=clock, device=device, block=block)
    started = clock()
    pt = PairedTimer(baseline, optimized, block=block, warmup=0, device=device, clock=clock)

    def one() -> float:
        tb, to = pt.round()
        return of(tb, to)
    return _sequential(one, quantity=quantity, at_least=at_least, at_most=at_most, partly=partly,
                       max_run_time=max_run_time, confidence=confidence, clock=clock, started=started,
                       min_rounds=min_rounds, calls=pt.calls)


def decide_speedup(baseline: Callable[[], object], optimized: Callable[[], object], *, at_least: float | None = None,
                   at_most: float | None = None, partly: float | None = None, scale: float = 1.0,
                   max_run_time: float = 2.0, confidence: float = CONFIDENCE, block: float = 0.001, warmup: int = 1,
                   min_rounds: int = 1, device=None, clock: Callable[[], float] | None = None) -> Decision:
    """Time `baseline()` and `optimized()` in paired rounds until the speedup (baseline time / optimized time per
    call, times `scale`: e.g. the ratio of work per call when the two calls do different amounts) is settled against
    the claim `>= at_least` (or `<= at_most`), or `max_run_time` seconds are spent. -> Decision (module doc).

    `warmup` untimed calls of each come first (compile time is not in the budget); `block`: seconds per timed
    block; `device`: synchronized around each block (default: CUDA when it is in use); `clock` replaces
    time.perf_counter. Refused: a non-callable, both or neither threshold, a budget <= 0."""
    _positive("decide_speedup", "scale", scale)
    return _paired("decide_speedup", "speedup", baseline, optimized, lambda tb, to: scale * tb / to,
                   at_least=at_least, at_most=at_most, partly=partly, max_run_time=max_run_time,
                   confidence=confidence, block=block, warmup=warmup, min_rounds=min_rounds, device=device, clock=clock)


def decide_saving(baseline: Callable[[], object], optimized: Callable[[], object], *, per: float = 1.0,
                  at_least: float | None = None, at_most: float | None = None, partly: float | None = None,
                  max_run_time: float = 2.0, confidence: float = CONFIDENCE, block: float = 0.001, warmup: int = 1,
                  min_rounds: int = 1, device=None, clock: Callable[[], float] | None = None) -> Decision:
    """Seconds saved by `optimized` over `baseline` per call, times `per` (e.g. the steps of an epoch), in paired
    rounds as `decide_speedup` (the round's value: (baseline - optimized time per call) x per)."""
    _positive("decide_saving", "per", per)
    return _paired("decide_saving", "saving", baseline, optimized, lambda tb, to: (tb - to) * per,
                   at_least=at_least, at_most=at_most, partly=partly, max_run_time=max_run_time,
                   confidence=confidence, block=block, warmup=warmup, min_rounds=min_rounds, device=device, clock=clock)


def decide_time(fn: Callable[[], object], *, at_least: float | None = None, at_most: float | None = None,
                partly: float | None = None, scale: float = 1.0, quantity: str = "seconds per call",
                max_run_time: float = 2.0, confidence: float = CONFIDENCE, block: float = 0.001, warmup: int = 1,
                device=None, clock: Callable[[], float] | None = None) -> Decision:
    """The time per call of `fn()`, times `scale` (1e3: milliseconds), in blocks of ~`block` seconds of calls
    (`perflab.kit.bench.BlockTimer`, one block a sample) until its median's interval settles the claim or the budget is
    spent: `decide_value` over blocks. A cost against a number, not against another version (that is
    `decide_speedup`, whose paired rounds cancel the machine's drift)."""
    from .bench import BlockTimer

    _positive("decide_time", "scale", scale)
    device, clock = _start("decide_time", {"fn": fn}, rule=dict(at_least=at_least, at_most=at_most, partly=partly),
                           max_run_time=max_run_time, confidence=confidence, warmup=warmup, clock=clock,
                           device=device, block=block)
    started = clock()
    timer = BlockTimer(fn, block=block, warmup=0, device=device, clock=clock)
    return _sequential(lambda: scale * timer(), quantity=quantity, at_least=at_least, at_most=at_most, partly=partly,
                       max_run_time=max_run_time, confidence=confidence, clock=clock, started=started,
                       calls=(timer.calls,))


def decide_value(measure_once: Callable[[], float], *, at_least: float | None = None, at_most: float | None = None,
                 partly: float | None = None, quantity: str = "value", max_run_time: float = 2.0,
                 confidence: float = CONFIDENCE, warmup: int = 1, min_rounds: int = 1,
                 clock: Callable[[], float] | None = None) -> Decision:
    """A noisy quantity (a throughput, bytes, an op count, a share of a profile) measured again and again by
    `measure_once()` (which returns one value) until the interval of its median settles the claim or
    `max_run_time` is spent: the same interval and stopping rule as `decide_speedup`. A count that cannot vary
    needs none of this: `Measured.exact(n)`."""
    _, clock = _start("decide_value", {"measure_once": measure_once},
                      rule=dict(at_least=at_least, at_most=at_most, partly=partly), max_run_time=max_run_time,
                      confidence=confidence, warmup=warmup, clock=clock)
    return _sequential(measure_once, quantity=quantity, at_least=at_least, at_most=at_most, partly=partly,
                       max_run_time=max_run_time, confidence=confidence, clock=clock, started=clock(),
                       min_rounds=min_rounds)
