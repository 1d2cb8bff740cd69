"""How a decision is made: the rounds, the interval, the looks and the budget behind `perflab.kit.verdicts.decide_*`.

How the rounds are taken (`perflab.kit.rounds`):
- Warm-up inside the budget: each side is called, in growing chunks, until its time per call is steady (at least
  tens of calls and a tenth of the budget; at most a quarter of it); a side not steady by then is named in the note.
- Blocks of equal length: each side's calls per block are sized from its last tens of calls so that both blocks of a
  round last about `block` seconds (or one call of the slower side); a side whose typical block (the lower quartile
  of its last 16) drifts more than 2x from that length is re-sized to it, and the note says so: a side's own slow
  calls, drawn at random (a collection, an allocator trim, a page fault), lengthen some of its blocks, not the
  typical one, and re-size nothing (issue 50).
- Paired rounds: one block of each side, in an order drawn per round. Only the calls are inside a block's window
  on a CPU, and another process's turns on the core are taken out of it (`rounds.Stopwatch`).

How they are judged (`perflab.kit.intervals`):
- The interval of the ratio of means is Fieller's over batch means: the rounds are cut into consecutive batches, as
  short as the rounds' dependence allows, and what dependence is left widens it, so rounds that move together under
  a drifting load count as one. `decide_saving` judges the difference of the means the same way.
- A ratio that moves with the load (the sides respond to it differently: memory- against compute-bound, a side that
  waits) is judged as a quantity the load moves, as `decide_time`, `decide_rate` and (with `drift=`) `decide_value`
  are: over batches of LOAD_BATCH seconds (at least FEW: more as the window grows, so more budget narrows it down
  toward the drift), first looked at after a quarter of the budget (once the load test sees it, kept). The
  load test reads each round's ratio against the next rounds' total time (`intervals.follows_load`): the load has a
  memory of tens to hundreds of ms, a side's own slow call moves only its own round, so it is noise around the side's
  mean (its total time), not the load (issue 50: the same-round test read it as the load and judged it over long
  batches with the machine's drift added, an interval that widened with more budget).
- The machine's drift between windows (`DRIFT`, which no window of rounds can see; more for a shorter window,
  `drift_over`) is added to the interval of every quantity the load moves: all of it for a time or a rate, and for a
  paired ratio as far as the ratio follows the load (`intervals.load_slope`, measured on the rounds: nothing where
  the sides respond to it alike; over a window shorter than DRIFT_WINDOW, its upper bound, since the load may not have
  moved in it), whether or not the load test saw it (a short window's rarely does).
- Sequential: the interval is first looked at after 16 paired rounds (8 of one side), MIN_CALLS (200) calls of each
  side (or half the budget, where calls are longer: a slow call of one in fifty is seen ~4 times first) and a
  tenth of the budget, then each time the rounds have grown by a quarter (a time, a rate or a value: doubled, as its
  drift allowance does not shrink with more rounds), until it lies on one side of the threshold
  (the verdict) or the next round would not fit in `max_run_time`. Look k is made at level alpha_k = alpha x (0.2 x
  6 / (pi^2 k^2) + 0.8 x the share of the horizon it adds) (`_level`: the horizon the ceiling under "auto", else the
  budget), alpha = 1 - confidence; these sum to alpha over any number of looks (a union bound), so a verdict on
  the wrong side happens at most alpha / 2 of the time (0.5%) where the batch means are close to normal: measured on
  claims of known truth that behave as real code does, under load and in simulation (`perflab battery`; the tables
  of docs/verdicts.md).
- Before a verdict the rounds are checked for a trend (a line through the batches, told apart from flat at 1% and
  larger than 3%): a look that sees one does not decide, and a verdict reached with one says so.
- Then, where the budget allows, four rounds with blocks 4x longer: a side not yet steady, or fine interleaving that
  changes a side's own cost (its caches, the allocator), shows there. Where their value lies apart from the
  decision's interval (or on the other side of the threshold), the note says so and the rounds begin again with the
  longer blocks (a job's loop is the longer blocks'), once.
- The budget is wall time: warm-up, calibration, rounds and the check stay within `max_run_time`, or one call of
  each side when that is longer (a round that would not fit is not started); `Decision.seconds` is that wall time,
  from the call's entry (torch's and scipy.special's imports are paid when `perflab.kit.verdicts` is imported). Compile
  before deciding: a first call that compiles is a call.
- What would decide it: a verdict left within noise says about how many seconds more of rounds would decide it at
  this spread (`more_needed`: the rounds' own half-width shrinks as 1 / sqrt(seconds), the drift's down to DRIFT), or
  that none would (the value lies within the machine's drift of the threshold), in its note and `Decision.more`.
  `max_run_time="auto"`: AUTO seconds, then on past them, up to AUTO_CEILING x AUTO in all, by what that estimate
  says (x 1.25) while undecided; the note says what it spent. For a time, a rate or a value (a quantity the load
  moves itself, first looked at after a quarter of its budget), "auto" is the ceiling from the start. The looks'
  levels are paid for over any number of looks, so going on where the spread asks for it keeps the error rate.
"""
from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable

from .formatting import num, num_interval
from .intervals import (
    FEW,
    drift_z,
    follows_load,
    load_slope,
    mean_interval,
    median,
    median_interval,
    prepare,
    ratio_interval,
    slope,
    trend,
    with_drift,
)
from .judge import Decision, Measured, _check_rule, _settled, judge

BLOCK = 0.005      # seconds of each side's block in a round (tools/block-size.py)
DRIFT = 0.05       # relative sd of the machine's speed between windows of DRIFT_WINDOW seconds, which a window's rounds
# cannot see: added to the interval of a quantity the load moves (measured on this project's 2-core VM: 2-s windows of a
# fixed matmul loop, 40 in a row: 3.7% beside two busy processes, 5.9% quiet; decide_*(drift=0) on a dedicated machine)
LOAD_FLOOR = 0.02  # a load whose log moves less than this (sd) between batches of rounds tells no side's response to it
DRIFT_WINDOW = 2.0  # ... a window of rounds shorter than this drifts more, as 1 / sqrt(its seconds) (`drift_over`)
DRIFT_SHORT = DRIFT_WINDOW / 16   # ... down to windows this short (the load's memory: ~60 ms on this VM, simulate.THIS_VM)

SENSITIVITY_UPPER = 0.05   # how far a paired ratio follows the load: over a window shorter than DRIFT_WINDOW, at the
#                            upper bound of this level (the load may not have moved in it), else as measured
AUTO = 2.0         # max_run_time="auto": the first budget (the default's), then more where the spread says it decides
AUTO_CEILING = 4   # ... up to this many times AUTO in all (issue 50: a claim >= 25% from its threshold decides by then)
GROWTH = 1.25      # the interval is looked at again when the rounds have grown by this factor
GROWTH_UNPAIRED = 2.0   # ... for a quantity the load moves itself (a time, a rate, a value): its drift allowance does
#                         not shrink with more rounds, so each further look would only cost the others' level (issue
#                         50: looks at 2, 4 and 8 s, not seven between 2 and 8 s)
FIRST = 8          # rounds before the first look
MIN_CALLS = 200    # ... and calls of each side in them (or half the budget, where calls are longer): a slow call of one
#                    in fifty, drawn at random, is then seen ~4 times before a verdict (issue 50: at 30, a window
#                    without any of them decided on the typical call's ratio; 500 cost a clean 1.5x claim 1.6 s, not 0.6)
WARM_SHARE = 0.25  # the most of the budget a warm-up takes
WARM_MIN = 0.1     # ... and the least (up to WARM_MIN_S seconds): a plateau of slow first calls is not steady
WARM_MIN_S = 0.5
LONG = 4           # the check's blocks are this many times longer
# (the check's disagreement is a flag and a restart with longer blocks, not a verdict: a false alarm costs time)
TREND = 0.03       # a trend smaller than this over the rounds is not one
PAIRED_SPAN = 0.1  # paired rounds are first looked at after this share of the budget (the load has moved by then)
LOAD_BATCH = 0.25  # a quantity the load moves is judged over batches of at least this many seconds (FEW at least):
# longer than the load's fast memory (~60 ms here), so their means are near independent, and more of them as the window
# grows (issue 50: over a fixed FEW, each later look's t quantile grew faster than the batches' spread shrank, and an
# absolute time's interval at 8 s was wider than at 2 s)
UNPAIRED_SPAN = 0.25  # a quantity the load moves itself (not a paired ratio) is first looked at after this share of
# the budget in rounds (LOAD_BATCH batches): the machine's speed drifts for tens to hundreds of ms (outputs/battery)


def drift_over(drift: float, seconds: float) -> float:
    """The machine's drift (`DRIFT`, relative sd over DRIFT_WINDOW-second windows) over a window of rounds of `seconds`:
    the mean of a load whose memory is short against the window varies as 1 / sqrt(its length), so a shorter window
    drifts more, down to DRIFT_SHORT (below it, shorter than the load's memory, no more: at most 4x); a longer one is
    taken at DRIFT (the load's slow part does not average out)."""
    return drift * math.sqrt(DRIFT_WINDOW / max(seconds, DRIFT_SHORT)) if 0 < seconds < DRIFT_WINDOW else drift


def load_batches(rounds: int, seconds: float) -> int:
    """How many batches a quantity the load moves is judged over: one per LOAD_BATCH seconds of rounds, at least FEW,
    and at most a quarter of the rounds (a batch of four rounds at least)."""
    return max(FEW, min(rounds // 4, int(seconds / LOAD_BATCH)))


def _alpha(k: int, alpha: float) -> float:
    return alpha * 6 / (math.pi ** 2 * k ** 2)


SPEND_BY_TIME = 0.8   # the share of alpha spent by the time a look has used of the decision's horizon (issue 50: by
# look count alone, the 17th look of an 8-s "auto" decision was made at 2e-5 (z 4.3); spent by time, ~2e-3 (z 3.1):
# simulated, 25% from the threshold, the baseline's 1-in-30 slow calls 65% -> 90% right, times 72.5 -> 85%, rates
# 65 -> 75%, 0 wrong; the rest of alpha by look count keeps the first looks' level near what it was)


def _level(k: int, alpha: float, share: float, before: float) -> float:
    """Look k's level, made at `share` of the decision's horizon (seconds from its start over the ceiling's, else the
    budget's) after the last look at `before`: (1 - SPEND_BY_TIME) of alpha spent as 6 / (pi^2 k^2) by look count,
    SPEND_BY_TIME of it in proportion to the horizon's share the look adds. Both parts sum to at most their share of
    alpha over any number of looks, at any times: a union bound, as before."""
    grow = max(min(share, 1.0) - min(before, 1.0), 0.0)
    return (1 - SPEND_BY_TIME) * _alpha(k, alpha) + SPEND_BY_TIME * alpha * grow


def _positive(who: str, name: str, x, what: str = "a number") -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
        raise ValueError(f"{who}: {name} must be {what} > 0, got {x!r}")


def _check_args(who: str, fns: dict, *, rule: dict, max_run_time, confidence, block=None) -> None:
    """Refuse bad arguments, naming them."""
    for name, f in fns.items():
        if not callable(f):
            raise TypeError(f"{who}: {name} must be a callable taking no arguments (e.g. lambda: f(x)), "
                            f"got {type(f).__name__}")
    _check_rule(who, **rule)
    if max_run_time != "auto":
        _positive(who, "max_run_time", max_run_time, "a number of seconds")   # or "auto" (AUTO, up to AUTO_CEILING x)
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0.5 <= confidence < 1:
        raise ValueError(f"{who}: confidence must be a float in [0.5, 1), got {confidence!r}")
    if block is not None:
        _positive(who, "block", block, "a number of seconds")


class _Looks:
    """The sequential loop shared by every decide_*: rounds until a look's interval settles the claim (and the rounds
    show no trend) or the next round would not fit before `deadline` (module doc); `spend` goes on past it, up to a
    ceiling, where the last look's spread says more rounds would decide (max_run_time="auto")."""

    def __init__(self, *, rule: dict, confidence: float, clock, deadline: float, min_rounds: int = 1,
                 min_span: float = 0.0, growth: float = GROWTH):
        self.rule, self.alpha, self.clock, self.deadline = rule, 1 - confidence, clock, deadline
        self.growth = growth
        self.min_span = min_span
        self.min_rounds = min_rounds
        self.look = max(FIRST, min_rounds)
        self.k = 0
        self.looked = 0
        self.share = 0.0     # the share of the horizon at the last look (its level is spent up to it)
        self.horizon = 0.0   # the seconds over which the looks' level is spread (the ceiling's, else the budget's)
        self.last_level = 0.0
        self.started = 0.0   # the clock when the decision's budget began (a ceiling counts from it)
        self.durations: list[float] = []
        self.m: Measured | None = None
        self.spread: Spread | None = None
        self.drift = 0.0

    def run(self, one_round: Callable[[], None], interval: Callable[[float], Measured],
            drift: Callable[[], float], first_round: float) -> None:
        """Rounds (on from those already taken) until a look settles the claim or the next would pass `deadline`."""
        while True:
            nxt = max(self.durations) if self.durations else first_round
            if self.clock() + nxt > self.deadline:
                break
            t0 = self.clock()
            one_round()
            self.durations.append(self.clock() - t0)
            n = len(self.durations)
            if n >= self.look and sum(self.durations) >= self.min_span:
                self._at(interval, drift)
                self.look = max(n + 1, math.ceil(n * self.growth))
                if self.settled:
                    return
        if self.durations and self.looked != len(self.durations):  # the budget's end: one more look, paid as the next
            self._at(interval, drift)

    def spend(self, go: Callable[[], None], more: Callable[[], float], ceiling: float | None) -> None:
        """`go()` (a `run`), then, while undecided and `ceiling` (a clock time) is not reached, the deadline moved on
        by what `more()` says would decide (x 1.25; where it cannot tell yet, by what was spent; where it says none
        would, to the ceiling: the value it reads is noisy too) and `go()` again, on the same looks. The looks'
        levels are paid for over any number of looks, so going on where the spread asks for it keeps the error rate
        (module doc)."""
        go()
        while ceiling is not None and not self.settled and self.deadline < ceiling:
            extra = more()
            now = self.clock()
            step = (1.25 * extra if math.isfinite(extra) else ceiling - now if extra == math.inf
                    else max(now - self.started, 0.1))
            self.deadline = min(ceiling, now + max(step, 0.05 * (ceiling - self.started)))
            go()

    @property
    def settled(self) -> bool:
        return self.m is not None and not self.drift and _settled(self.m, **self.rule)

    def restart(self, min_rounds: int = 1) -> None:
        """Rounds begin again (the looks made so far stay counted: their levels are spent)."""
        self.durations.clear()
        self.look = max(FIRST, min_rounds)
        self.looked = 0
        self.m = None
        self.spread = None
        self.drift = 0.0

    def _at(self, interval, drift) -> None:
        self.k += 1
        self.looked = len(self.durations)
        horizon = self.horizon or max(self.deadline - self.started, 1e-9)
        share = (self.clock() - self.started) / horizon
        self.last_level = _level(self.k, self.alpha, share, self.share)
        self.share = max(self.share, share)
        self.m = interval(self.last_level)
        self.drift = drift()

    @property
    def level(self) -> float:
        """The level of the last look (for the typical interval beside it)."""
        return self.last_level or _alpha(1, self.alpha)

    @property
    def rounds(self) -> int:
        return len(self.durations)


@dataclasses.dataclass(frozen=True)
class Spread:
    """A look's interval in its two parts: the rounds' own [low, high] of `value` (after `seconds` of rounds) and
    the machine's drift added to it (`drift_at(seconds)`: a relative sd for a window of rounds that long, 0 for a
    quantity the load does not move), both at the look's level `drift_alpha` (`intervals.with_drift`). What
    `more_needed` reads."""
    value: float
    low: float
    high: float
    seconds: float
    drift_at: Callable[[float], float]
    drift_alpha: float

    def measured(self) -> Measured:
        return _measured(self.value, *with_drift(self.value, self.low, self.high, self.drift_at(self.seconds),
                                                 self.drift_alpha))


def more_needed(sp: Spread | None, rule: dict) -> float:
    """About how many seconds more of rounds would decide the claim at this spread, if the value stays where it is:
    the rounds' own half-width toward the threshold shrinks as 1 / sqrt(seconds), the drift's as the window grows
    (`drift_over`, down to the machine's drift between windows, which no window takes away). -> seconds; 0.0 where it
    is decided; inf where no budget would (the value lies within that drift's reach of the threshold, or would need
    over 10,000x the rounds); nan where this look cannot tell (no finite interval yet)."""
    if sp is None or not (math.isfinite(sp.low) and math.isfinite(sp.high)) or sp.seconds <= 0:
        return math.nan
    t = rule["at_least"] if rule["at_least"] is not None else rule["at_most"]
    v = sp.value
    z = drift_z(sp.drift_alpha)
    toward = sp.high if t > v else sp.low
    if sp.low > 0 and t > 0 and v > 0:     # a positive quantity: on the log scale, the drift relative
        margin, half, unit = abs(math.log(v / t)), abs(math.log(toward / v)), 1.0
    else:
        margin, half, unit = abs(v - t), abs(toward - v), abs(v)

    def width(seconds: float) -> float:
        return math.hypot(half * math.sqrt(sp.seconds / seconds), z * sp.drift_at(seconds) * unit)

    if margin <= z * sp.drift_at(math.inf) * unit or margin == 0:
        return math.inf
    if width(sp.seconds) < margin:
        return 0.0
    lo, hi = sp.seconds, sp.seconds * 1e4
    if width(hi) >= margin:
        return math.inf
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if width(mid) >= margin else (lo, mid)
    return hi - sp.seconds


def more_note(sp: Spread | None, rule: dict, verdict: str) -> str:
    """What would decide a claim left within noise: 'about 9.2 s more of rounds would decide it at this spread (the
    value 20% from the threshold)', or that none would."""
    if verdict != "within noise" or sp is None:
        return ""
    extra = more_needed(sp, rule)
    if math.isnan(extra) or extra == 0:
        return ""
    t = rule["at_least"] if rule["at_least"] is not None else rule["at_most"]
    away = (f"{float(f'{100 * abs(sp.value / t - 1):.2g}'):g}% from the threshold" if t and sp.value > 0 and t > 0
            else f"{num(abs(sp.value - t), True)} from the threshold")
    if extra == math.inf:
        floor = sp.drift_at(math.inf)
        return (f"no budget would decide it: the value is {away}, within the machine's drift between windows "
                f"({floor:.1%} sd) at this confidence" if floor > 0 else
                f"no budget would decide it: the value is {away}")
    return f"about {num(extra)} s more of rounds would decide it at this spread (the value {away})"


def _measured(v: float, lo: float, hi: float) -> Measured:
    return Measured(v, min(lo, v), max(hi, v))


def _typical(values: list[float], level: float) -> tuple[float, float, float]:
    if not values:
        return math.nan, -math.inf, math.inf
    lo, hi = median_interval(sorted(values), level)
    return median(values), lo, hi


def _budget(max_run_time, paired: bool = True) -> tuple[float, float | None]:
    """(the first budget, the ceiling or None): "auto" is AUTO seconds, then up to AUTO_CEILING x that; for a quantity
    the load moves itself (a time, a rate, a value: not `paired`), the ceiling at once: its first look waits for a
    quarter of its budget, and looks in a short window, where the drift allowance is largest, rarely decide it and
    would cost every later look a smaller level (simulated: 22% right 25% from the threshold against 52% with 8 s)."""
    if max_run_time != "auto":
        return float(max_run_time), None
    return (AUTO, AUTO * AUTO_CEILING) if paired else (AUTO * AUTO_CEILING, None)


def _budget_note(looks: _Looks, max_run_time, seconds: float, confidence: float) -> str:
    """Why the rounds ended undecided, when the budget is the cause; with "auto", what it spent of its ceiling."""
    auto = max_run_time == "auto"
    label = f"auto: {seconds:.2f} s of up to {AUTO * AUTO_CEILING:g} s" if auto else f"{max_run_time:g} s"
    if looks.rounds == 0:
        return (f"no round fit in the budget ({label}; {seconds:.2f} s went to the warm-up): a call is "
                f"longer than the budget allows; compile or warm up before deciding, or give more time")
    if looks.m is None or not (math.isfinite(looks.m.low) and math.isfinite(looks.m.high)):
        return (f"the budget ({label}) ended after {looks.rounds} rounds, too few for a {confidence:.0%} "
                f"interval: give more time or smaller rounds")
    if not _settled(looks.m, **looks.rule):
        return f"the budget ({label}) ended after {looks.rounds} rounds"
    return f"decided in {seconds:.2f} s (auto: up to {AUTO * AUTO_CEILING:g} s)" if auto and seconds > AUTO else ""


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


class _Paired:
    """One paired decision's state: the two sides, the rounds so far (each side's own seconds per call), the notes."""

    def __init__(self, sides, sw, *, of: str, scale: float, block: float, seed: int):
        from .rounds import size_blocks

        self.sides, self.sw, self.of, self.scale, self.block = sides, sw, of, scale, block
        self.order = random.Random(seed)
        self.length = size_blocks(sides, block)
        self.tb: list[float] = []
        self.to: list[float] = []
        self.notes: list[str] = []
        self.durations: list[float] = []   # the rounds' wall seconds (the looks' list, shared)
        self.budget = math.inf
        self.load_noted = False
        self.drift_sd = DRIFT
        self.spread: Spread | None = None
        self.sized_at = 0   # the round the blocks were last sized at: the load test reads the rounds since

    def rounds_for_calls(self, budget: float) -> int:
        """Rounds before the first look: enough for MIN_CALLS calls of each side (a side's own slow calls, one in
        tens or hundreds, are seen before anything is decided), or as many as half the `budget` holds where a call is a whole run."""
        want = max(2 * FEW, math.ceil(MIN_CALLS / min(s.calls for s in self.sides)))
        return min(want, max(FIRST, int(budget / 2 / (2 * self.length))))

    def value_of(self, b: float, o: float) -> float:
        if self.of == "ratio":
            return self.scale * b / o if o > 0 else math.inf
        return (b - o) * self.scale

    @property
    def per_round(self) -> list[float]:
        return [self.value_of(b, o) for b, o in zip(self.tb, self.to)]

    def round(self) -> None:
        """One paired round; every FIRST rounds, a side whose blocks drifted from the length is re-sized (both kept
        equal)."""
        from .rounds import paired_round, size_blocks, typical_block

        (sb, nb), (so, no) = paired_round(self.sides, self.sw, self.order)
        self.tb.append(sb / nb)
        self.to.append(so / no)
        if len(self.tb) % FIRST:
            return
        k = 2 * FIRST if len(self.tb) >= 2 * FIRST else FIRST   # the last 16 blocks: a quartile a few slow calls
        recent = [(b * self.sides[0].calls, o * self.sides[1].calls) for b, o in zip(self.tb[-k:], self.to[-k:])]
        shrinks = self.length > self.block * 1.01   # one call a block: its length is a call's, which may shrink
        moved = [s.name for i, s in enumerate(self.sides) if s.drifted([r[i] for r in recent], self.length, shrinks)]
        if moved:
            before = [s.calls for s in self.sides]
            for i, s in enumerate(self.sides):   # the typical block's: a slow call of its own does not size it
                s.per_call = typical_block([r[i] for r in recent]) / s.calls
            self.length = size_blocks(self.sides, self.block)
            self.sized_at = len(self.tb)
            self.notes.append(f"re-sized at round {len(self.tb)}: {', '.join(moved)} drifted from its calibration "
                              f"(calls per block {before[0]}/{before[1]} -> {self.sides[0].calls}/{self.sides[1].calls})")

    def interval(self, level: float) -> Measured:
        """The interval at `level`; where the value moves with the machine's load (`load_bound`), as a quantity the
        load moves (FEW batches, after UNPAIRED_SPAN of the budget), and the note says so once."""
        v = self.value_of(sum(self.tb) / len(self.tb), sum(self.to) / len(self.to))
        fixed = 0
        if self.load_noted or self.load_bound():   # once seen, kept: the test is noisy from look to look
            if not self.load_noted:
                self.notes.append(f"the {'ratio' if self.of == 'ratio' else 'saving'} moves with the machine's load "
                                  f"(the sides respond to it differently): judged as a quantity the load moves")
                self.load_noted = True
            if sum(self.durations) < UNPAIRED_SPAN * self.budget:
                self.spread = None
                return Measured(v, -math.inf, math.inf)
            fixed = load_batches(len(self.tb), sum(self.durations))
        if self.of == "ratio":
            lo, hi = ratio_interval(self.tb, self.to, level, fixed=fixed)
            lo, hi = self.scale * lo, self.scale * hi
        else:
            lo, hi = mean_interval(self.per_round, level, fixed=fixed)
        # the machine's drift beyond this window, as far as the value follows the load (0 where the sides respond to
        # it alike): added whether or not the load test above saw it, which a short window rarely can
        sens, seconds = self.sensitivity(), sum(self.durations)
        self.spread = Spread(v, lo, hi, seconds, lambda span: drift_over(self.drift_sd, span) * sens, level)
        return self.spread.measured()

    def sensitivity(self) -> float:
        """How much the value's log moves per unit of the load's log, from the rounds, the sides' own noise taken out
        (`intervals.load_slope`), at most 1."""
        if self.of == "ratio":
            short = sum(self.durations) < DRIFT_WINDOW   # a window whose load may not have moved: its upper bound
            return min(1.0, load_slope(self.tb, self.to, floor=LOAD_FLOOR, upper=SENSITIVITY_UPPER if short else 0.0)
                       if short else abs(load_slope(self.tb, self.to, floor=LOAD_FLOOR)))
        xs = [math.log(b * o) / 2 for b, o in zip(self.tb, self.to)]
        ds = [b - o for b, o in zip(self.tb, self.to)]
        return min(1.0, abs(slope(ds, xs, floor=LOAD_FLOOR)) / max(abs(sum(ds) / len(ds)), 1e-300))

    def load_bound(self) -> bool:
        """Whether the rounds' ratio follows the load beyond chance: each round's log ratio against the next round's
        log total (`intervals.follows_load`: a side's own random slow calls move only their own round's)."""
        tb, to = self.tb[self.sized_at:], self.to[self.sized_at:]   # blocks of another size: another mean log
        if not all(b > 0 and o > 0 for b, o in zip(tb, to)):
            return False
        return follows_load([math.log(b / o) for b, o in zip(tb, to)], [math.log(b * o) for b, o in zip(tb, to)])

    def drift(self) -> float:
        if self.of == "ratio":
            return _drift(trend([b / o for b, o in zip(self.tb, self.to) if o > 0]))
        return _drift(trend(self.tb)) or _drift(trend(self.to))

    def check(self, m: Measured, deadline: float, rule: dict) -> tuple[float, bool, str]:
        """A few rounds with blocks LONG x longer, within what is left of the budget -> (their value, whether it
        disagrees with `m`: outside its interval by more than twice its standard error, or that far on the other side of
        the claim's threshold than `m`'s verdict; its standard error at least what the rounds' own spread gives blocks
        that long, where four rounds are too few to show a side's rare slow calls; a note)."""
        from .rounds import paired_round

        calls = [s.calls * LONG for s in self.sides]
        one = sum(s.per_call * c for s, c in zip(self.sides, calls))
        left = deadline - self.sw.clock()
        if left < 4 * one:
            return math.nan, False, f"not checked against {LONG}x longer blocks: {max(left, 0):.2f} s of budget left"
        vs = []
        for _ in range(4):
            (sb, nb), (so, no) = paired_round(self.sides, self.sw, self.order, calls)
            vs.append((sb / nb, so / no))
            if self.sw.clock() + one > deadline:
                break
        v = self.value_of(sum(b for b, _ in vs) / len(vs), sum(o for _, o in vs) / len(vs))
        values = [self.value_of(b, o) for b, o in vs]
        se = math.sqrt(sum((x - v) ** 2 for x in values) / (len(values) - 1) / len(values)) if len(vs) > 1 else 0.0
        # a side's own rare slow calls: four rounds rarely hold one, and their spread does not show it; the rounds'
        # own spread, over blocks LONG x longer, does (issue 50: a false alarm restarted such decisions)
        rs = self.per_round
        if len(rs) > 1:
            mr = sum(rs) / len(rs)
            se = max(se, math.sqrt(sum((x - mr) ** 2 for x in rs) / (len(rs) - 1) / (LONG * len(vs))))
        check = judge(Measured(v, v - 2 * se, v + 2 * se), **{**rule, "partly": None})   # its side, if clear
        held = judge(m, **rule) == "holds"
        crossed = (check == "holds" and not held) or (check == "does not hold" and held)
        if m.low - 2 * se <= v <= m.high + 2 * se and not crossed:
            return v, False, ""
        return v, True, (f"with {LONG}x longer blocks the value is {num(v, True)} (standard error {num(se, True)}), "
                         f"apart from this interval ({num_interval(m.value, m.low, m.high)} over {len(self.tb)} rounds): a side "
                         f"not yet steady, or interleaving that changes a side's own cost (its caches, the allocator)")

    def restart(self) -> None:
        """The rounds so far dropped, blocks LONG x longer from here (a job's loop is the longer blocks')."""
        from .rounds import size_blocks

        self.block *= LONG
        self.length = size_blocks(self.sides, self.block)
        self.tb.clear()
        self.to.clear()
        self.spread = None
        self.sized_at = 0


def _started(sw, clock, entered: float) -> float:
    """When the decision's budget began on `sw`'s clock: on the real clock, when the call entered (a process's first
    decision imports torch and scipy.special and builds its stopwatch, 1-2 s: inside the budget and `seconds`, issue
    50); on an injected clock (tests, the battery's simulation) when its stopwatch was built, no real second charged."""
    now = sw.clock()
    return now - (time.perf_counter() - entered) if clock is None else now


def paired(who: str, quantity: str, baseline, optimized, *, of: str, scale: float, at_least, at_most, partly,
            max_run_time, confidence, block, min_rounds, device, clock, waited, seed) -> Decision:
    """Paired rounds of two sides (module doc); `of`: "ratio" (scale x mean time per call of baseline / of optimized)
    or "saving" ((baseline - optimized) mean time per call x scale)."""
    entered = time.perf_counter()
    from .rounds import Side, Stopwatch, warm_up  # torch's import, the first time: counted below

    rule = dict(at_least=at_least, at_most=at_most, partly=partly)
    _check_args(who, {"baseline": baseline, "optimized": optimized}, rule=rule, max_run_time=max_run_time,
                confidence=confidence, block=block)
    prepare()  # the intervals' tables (scipy.special), once per process: counted below
    sw = Stopwatch(device, clock=clock, waited=waited)
    started = _started(sw, clock, entered)
    budget, ceiling = _budget(max_run_time)
    sides = [Side("baseline", baseline), Side("optimized", optimized)]
    warm = warm_up(sides, sw, block=block, until=started + WARM_SHARE * budget,
                   not_before=started + min(WARM_MIN * budget, WARM_MIN_S))
    run = _Paired(sides, sw, of=of, scale=scale, block=block, seed=seed)
    run.notes.append(warm)
    looks = _Looks(rule=rule, confidence=confidence, clock=sw.clock, deadline=started + budget,
                   min_rounds=max(min_rounds, run.rounds_for_calls(budget)), min_span=PAIRED_SPAN * budget)
    looks.started, looks.horizon = started, ceiling or budget
    run.durations, run.budget = looks.durations, budget
    longer = math.nan
    for attempt in range(2):
        looks.spend(lambda: looks.run(run.round, run.interval, run.drift, first_round=2 * run.length),
                    lambda: more_needed(run.spread, rule), ceiling and started + ceiling)
        if looks.m is None or not _settled(looks.m, **rule):
            break
        longer, disagrees, note = run.check(looks.m, looks.deadline, rule)
        if disagrees and attempt == 0:
            run.notes.append(note + f"; the rounds begin again with blocks {LONG}x longer")
            run.restart()
            looks.restart(max(min_rounds, run.rounds_for_calls(budget)))
            continue
        run.notes.append(note)
        break
    m = looks.m or Measured(run.value_of(sides[0].per_call, sides[1].per_call), 0.0 if of == "ratio" else -math.inf,
                            math.inf)
    typ = _typical(run.per_round, looks.level)
    if looks.drift:
        run.notes.append(f"the rounds drift: the {'ratio' if of == 'ratio' else 'times'} moved {looks.drift:+.0%} "
                         f"from the first batch of rounds to the last")
    run.notes.append(_apart(m, typ, run.tb, run.to, quantity))
    seconds = sw.clock() - started
    verdict = judge(m, **rule)
    run.notes.append(_budget_note(looks, max_run_time, seconds, confidence))
    run.notes.append(more_note(run.spread, rule, verdict))
    return Decision(verdict, m.value, m.low, m.high, looks.rounds, seconds, confidence, quantity,
                    at_least, at_most, partly, tuple(run.per_round), tuple(s.calls for s in sides), _join(*run.notes),
                    typ[0], typ[1], typ[2], run.length, tuple(sum(n for _, n in s.log) for s in sides), longer,
                    sw.corrects, more_needed(run.spread, rule) if verdict == "within noise" else math.nan)


def _drift(change: float) -> float:
    return change if abs(change) >= TREND else 0.0


def _apart(m: Measured, typ: tuple, tb: list[float], to: list[float], quantity: str) -> str:
    """Where the typical round and the mean disagree beyond both intervals: which side's slow calls part them."""
    v, lo, hi = typ
    if not math.isfinite(v) or not tb or (lo <= m.high and m.low <= hi):
        return ""
    skew = [sum(x) / len(x) / max(median(x), 1e-300) for x in (tb, to)]
    side = "baseline" if skew[0] > skew[1] else "optimized"
    return f"the {side} side's slow calls: typical {num(v, True)}, mean (total time) {num(m.value, True)} ({quantity})"


def timed(fn, *, rule: dict, scale: float, quantity: str, max_run_time: float, confidence: float, block: float,
          drift: float, device, clock, waited) -> Decision:
    """`decide_time`'s decision (`perflab.kit.verdicts`): one side in blocks, its mean time per call."""
    entered = time.perf_counter()
    at_least, at_most, partly = rule["at_least"], rule["at_most"], rule["partly"]
    from .rounds import Side, Stopwatch, size_blocks, typical_block, warm_up

    _positive("decide_time", "scale", scale)
    _check_args("decide_time", {"fn": fn}, rule=rule, max_run_time=max_run_time, confidence=confidence, block=block)
    prepare()
    sw = Stopwatch(device, clock=clock, waited=waited)
    started = _started(sw, clock, entered)
    budget, ceiling = _budget(max_run_time, paired=False)
    side = Side("fn", fn)
    notes = [warm_up([side], sw, block=block, until=started + WARM_SHARE * budget,
                     not_before=started + min(WARM_MIN * budget, WARM_MIN_S))]
    warm_calls = (sum(n for _, n in side.log),)
    length = size_blocks([side], block)
    ts: list[float] = []

    def one_round():
        nonlocal length
        t, n = side.block(sw)
        ts.append(t / n)
        if len(ts) % FIRST == 0 and side.drifted([x * side.calls for x in ts[-FIRST:]], length):
            before = side.calls
            side.per_call = typical_block(ts[-FIRST:])
            length = size_blocks([side], block)
            notes.append(f"re-sized at block {len(ts)}: {before} -> {side.calls} calls (the time per call drifted)")

    def interval(level: float) -> Measured:
        v = sum(ts) / len(ts)
        lo, hi = mean_interval(ts, level, fixed=load_batches(len(ts), sum(looks.durations)))
        looks.spread = Spread(scale * v, scale * lo, scale * hi, sum(looks.durations),
                              lambda span: drift_over(drift, span), level)
        return looks.spread.measured()

    looks = _Looks(rule=rule, confidence=confidence, clock=sw.clock, deadline=started + budget,
                   min_span=UNPAIRED_SPAN * budget, growth=GROWTH_UNPAIRED)
    looks.started, looks.horizon = started, ceiling or budget
    looks.spend(lambda: looks.run(one_round, interval, lambda: _drift(trend(ts)), first_round=length),
                lambda: more_needed(looks.spread, rule), ceiling and started + ceiling)
    m = looks.m or Measured(scale * side.per_call, -math.inf, math.inf)
    typ = _typical([scale * t for t in ts], looks.level)
    if looks.drift:
        notes.append(f"the blocks drift: the time per call moved {looks.drift:+.0%} from the first batch to the last")
    seconds = sw.clock() - started
    verdict = judge(m, **rule)
    notes += [_budget_note(looks, max_run_time, seconds, confidence), more_note(looks.spread, rule, verdict)]
    return Decision(verdict, m.value, m.low, m.high, looks.rounds, seconds, confidence, quantity,
                    at_least, at_most, partly, tuple(scale * t for t in ts), (side.calls,), _join(*notes),
                    typ[0], typ[1], typ[2], length, warm_calls, math.nan, sw.corrects,
                    more_needed(looks.spread, rule) if verdict == "within noise" else math.nan)


def samples(who: str, measure_once, *, rule, quantity, max_run_time, confidence, warmup, min_rounds, clock,
             rate: bool, drift: float) -> Decision:
    entered = time.perf_counter()
    _check_args(who, {"measure_once": measure_once}, rule=rule, max_run_time=max_run_time, confidence=confidence)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"{who}: warmup must be a number of calls >= 0, got {warmup!r}")
    prepare()
    started = clock() if clock else entered   # the real clock: from the call's entry, the first import counted
    clock = clock or time.perf_counter
    budget, ceiling = _budget(max_run_time, paired=False)
    for _ in range(warmup):
        measure_once()
    xs: list = []

    def one_round():
        x = measure_once()
        if rate:
            if not (isinstance(x, tuple) and len(x) == 2):
                raise TypeError(f"{who}: measure_once must return (amount, seconds), got {x!r}")
            a, s = float(x[0]), float(x[1])
            if not s > 0:
                raise ValueError(f"{who}: measure_once returned {s!r} seconds; a rate needs seconds > 0")
            xs.append((a, s))
        else:
            xs.append(float(x))

    def interval(level: float) -> Measured:
        window = sum(x[1] for x in xs) if rate else sum(looks.durations)   # a rate's: the seconds it was measured over
        k = load_batches(len(xs), window)
        if rate:
            a, s = [x[0] for x in xs], [x[1] for x in xs]
            v, (lo, hi) = sum(a) / sum(s), ratio_interval(a, s, level, fixed=k)
        else:
            v, (lo, hi) = sum(xs) / len(xs), mean_interval(xs, level, fixed=k)
        looks.spread = Spread(v, lo, hi, window, lambda span: drift_over(drift, span), level)
        return looks.spread.measured()

    def trend_of() -> float:
        vs = [a / s for a, s in xs] if rate else xs
        return _drift(trend(vs)) if all(v > 0 for v in vs) else 0.0

    looks = _Looks(rule=rule, confidence=confidence, clock=clock, deadline=started + budget,
                   min_rounds=min_rounds, min_span=UNPAIRED_SPAN * budget, growth=GROWTH_UNPAIRED)
    looks.started, looks.horizon = started, ceiling or budget
    looks.spend(lambda: looks.run(one_round, interval, trend_of, first_round=0.0),
                lambda: more_needed(looks.spread, rule), ceiling and started + ceiling)
    vals = [a / s for a, s in xs] if rate else list(xs)
    typ = _typical(vals, looks.level)
    m = looks.m or Measured(typ[0] if vals else 0.0, -math.inf, math.inf)
    seconds = clock() - started
    verdict = judge(m, **rule)
    notes = [f"the samples drift: {looks.drift:+.0%} from the first batch to the last" if looks.drift else "",
             _budget_note(looks, max_run_time, seconds, confidence), more_note(looks.spread, rule, verdict)]
    return Decision(verdict, m.value, m.low, m.high, looks.rounds, seconds, confidence, quantity,
                    rule["at_least"], rule["at_most"], rule["partly"], tuple(vals), (), _join(*notes),
                    typ[0], typ[1], typ[2], 0.0, (warmup,), math.nan, False,
                    more_needed(looks.spread, rule) if verdict == "within noise" else math.nan)
