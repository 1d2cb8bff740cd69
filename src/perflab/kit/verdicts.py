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

from collections.abc import Callable

from . import rounds as _rounds  # noqa: F401  torch's import paid here, not inside a process's first decision (issue 50)
from .deciding import BLOCK, DRIFT, _positive, paired, samples, timed
from .intervals import prepare
from .judge import CONFIDENCE, VERDICTS, Decision, Measured, judge

prepare()   # scipy.special's tables too: a decision's budget is its rounds' (what it still sets up is counted in it)

__all__ = ["VERDICTS", "CONFIDENCE", "BLOCK", "DRIFT", "Measured", "Decision", "judge", "decide_speedup",
           "decide_saving", "decide_time", "decide_value", "decide_rate"]


def decide_speedup(baseline: Callable[[], object], optimized: Callable[[], object], *, at_least: float | None = None,
                   at_most: float | None = None, partly: float | None = None, scale: float = 1.0,
                   max_run_time: float | str = 2.0, confidence: float = CONFIDENCE, block: float = BLOCK,
                   min_rounds: int = 1, device=None, clock: Callable[[], float] | None = None,
                   waited: Callable[[], float] | None = None, seed: int = 0, quantity: str = "speedup") -> Decision:
    """Time `baseline()` and `optimized()` in paired rounds until the speedup (baseline's mean time per call /
    optimized's, times `scale`: e.g. the ratio of work per call when the two calls do different amounts) is settled
    against the claim `>= at_least` (or `<= at_most`), or `max_run_time` seconds of wall time are spent, the warm-up
    included; `max_run_time="auto"`: 2 s, then up to 8 s in all where the spread says more rounds would decide (a
    verdict left within noise says how much more would, or that none would: `Decision.more`). -> Decision
    (`perflab.kit.deciding`).

    `block`: seconds of each side's block; `device`: synchronized around each block where it is a GPU (default: the
    one in use); `clock` replaces time.perf_counter and `waited` the run-queue reader (simulations); `quantity` names
    the ratio (e.g. "times the floor"). Refused: a non-callable, both or neither threshold, a budget <= 0."""
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
    return samples("decide_rate", measure_once, rule=dict(at_least=at_least, at_most=at_most, partly=partly),
                    quantity=quantity, max_run_time=max_run_time, confidence=confidence, warmup=warmup,
                    min_rounds=min_rounds, clock=clock, rate=True, drift=drift)
