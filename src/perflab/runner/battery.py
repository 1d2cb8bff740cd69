"""Claims of known truth that behave as real code does, to measure how often a verdict rule is right, wrong or undecided.

    with background_load(2):                       # two busy processes, started and stopped here
        truths = measure_truths(CASES)             # each case's true value: a long run under the same load
        rows = run_battery(CASES, truths, reps=10, budget=2.0, truth_seconds=10.0)   # scored against it again
    print(markdown(summary_table(rows)))

Each case is a claim about two sides (or one) made of real work: a unit of work is a loop of 64 x 64 matmuls on one
thread (~0.3-0.6 ms), and a side is `Work`: units per call, and how real code departs from a clean loop (every n-th
call slower, a lazy init on the 2nd call, tens of slow calls before it is steady, a wait (sleep) inside the call, a
memory-bound copy instead of matmuls). The claim is a threshold on the speedup (baseline / optimized, `decide_speedup`),
on the optimized side's milliseconds per call (`decide_time`) or on its calls per second (`decide_rate`).

The truth: the ratio of total times (or the mean time, the rate) over a long run at steady state (`Truth`: after a
warm-up, `TRUTH_S` seconds of rounds with blocks of ~50 ms, each side's own time: another process's turns taken out,
as the verdict does), under the same load as the verdicts. It is measured twice: at the start (`measure_truths`: a
relative case's threshold is set from it) and across the battery, in slices between its repetitions
(`run_battery(truth_seconds=)`); a verdict's right answer is its threshold against the second (a case whose sides
respond to the load differently, a memory-bound copy against compute, moves with it: 2.69 at the start, ~2.0 in the
verdicts' windows in one run). The units a case is built of give its truth by construction too (`Case.nominal`); both are reported.

Rules, side by side on every case, in turn, with the same seconds each (`budget`):
- "mean": `perflab.kit.verdicts` (total time at steady state: warm-up until steady, equal blocks, the ratio of means
  and its batch-means interval, the check against longer blocks);
- "median": the kit's rule before it (`median_rule`: one warm-up call, blocks of ~1 ms sized from one call, the median
  round's ratio and the sign test's interval, the same looks);
- "criterion" (speedups only): each side on its own for half the budget in ~10 ms blocks, the 95% bootstrap interval
  of the ratio of medians (Criterion.rs's comparison).

The load: `background_load(n)` starts n processes that keep a core busy (alternately a Python spin loop and a memory
copy of 64 MiB, which also evicts the caches) and stops them on exit, whatever happens inside. The rare errors at the
threshold are counted on a simulated machine instead (`perflab.runner.simulate`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from ..kit.deciding import GROWTH, _alpha
from ..kit.intervals import median, median_interval, prepare
from ..kit.rounds import Stopwatch
from ..kit.verdicts import Measured, decide_rate, decide_speedup, decide_time, judge

RULES = ("mean", "median", "criterion")
UNIT = 100        # matmuls (64 x 64, one thread) in a unit of work: ~0.3-0.6 ms on a CPU core
TRUTH_S = 10.0    # seconds of long rounds that measure a case's truth
RATE_CALLS = 4    # calls per sample of a rate


@dataclasses.dataclass(frozen=True)
class Work:
    """A side made of real work: `units` per call (matmul loops); every `slow_every`-th call does `slow_factor`x;
    the first `warm_calls` calls `warm_factor`x; call 2 does `lazy` units more (0: none); `sleep` seconds of waiting
    per call; `copy_mib` MiB copied per call instead of matmuls (memory-bound)."""
    units: float = 1.0
    slow_every: int = 0
    slow_factor: float = 1.0
    warm_calls: int = 0
    warm_factor: float = 1.0
    lazy: float = 0.0
    sleep: float = 0.0
    copy_mib: float = 0.0

    @property
    def nominal(self) -> float:
        """Units per call at steady state (matmul work only; a sleep or a copy has no nominal)."""
        return self.units * (1 + (self.slow_factor - 1) / self.slow_every if self.slow_every else 1.0)

    def build(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], None]:
        count = [0]
        src = torch.ones(int(self.copy_mib * 2**18)) if self.copy_mib else None
        dst = torch.empty_like(src) if src is not None else None

        def call():
            count[0] += 1
            n = self.units
            if self.slow_every and count[0] % self.slow_every == 0:
                n *= self.slow_factor
            if count[0] <= self.warm_calls:
                n *= self.warm_factor
            if count[0] == 2:
                n += self.lazy
            if src is not None:
                dst.copy_(src)
            else:
                for _ in range(round(n * UNIT)):
                    torch.mm(a, b)
            if self.sleep:
                time.sleep(self.sleep)
        return call


@dataclasses.dataclass(frozen=True)
class Case:
    """A claim of known truth: `kind` "speedup" (baseline / optimized), "time" (the optimized side's ms per call) or
    "rate" (its calls per second); the claim `>= at_least` (or `<= at_most`); `group` names what real code it is
    like."""
    name: str
    group: str
    optimized: Work
    baseline: Work = Work()
    kind: str = "speedup"
    at_least: float | None = None
    at_most: float | None = None
    relative: bool = False   # the threshold is this factor of the measured truth (`with_truth`)

    @property
    def rule(self) -> dict:
        return {"at_least": self.at_least} if self.at_least is not None else {"at_most": self.at_most}

    @property
    def threshold(self) -> float:
        return self.at_least if self.at_least is not None else self.at_most

    @property
    def nominal(self) -> float:
        """The speedup the units give (nan for a time, a rate, a sleep or a copy)."""
        if self.kind != "speedup" or any(w.sleep or w.copy_mib for w in (self.baseline, self.optimized)):
            return math.nan
        return self.baseline.nominal / self.optimized.nominal

    def truth(self, value: float) -> str:
        """The right verdict when the true value is `value`."""
        ok = value >= self.at_least if self.at_least is not None else value <= self.at_most
        return "holds" if ok else "does not hold"

    def distance(self, value: float) -> float:
        """How far `value` is from the threshold, as a fraction: max(value/threshold, threshold/value) - 1."""
        return max(value / self.threshold, self.threshold / value) - 1


W = Work
CASES = (
    Case("A/A against >= 1.1", "clean", W(1), W(1), at_least=1.1),
    Case("A/A against <= 0.9", "clean", W(1), W(1), at_most=0.9),
    Case("1.5x against >= 1.2", "clean", W(1), W(1.5), at_least=1.2),
    Case("1.5x against >= 2", "clean", W(1), W(1.5), at_least=2.0),
    Case("0.89x against >= 1", "clean", W(1), W(0.89), at_least=1.0),
    Case("2x against >= 1.5", "clean", W(1), W(2), at_least=1.5),
    Case("0.75x against <= 0.9", "clean", W(1), W(0.75), at_most=0.9),
    Case("1.26x against >= 1.2 (5% away)", "5% from the threshold", W(1), W(1.26), at_least=1.2),
    Case("1.14x against >= 1.2 (5% away)", "5% from the threshold", W(1), W(1.14), at_least=1.2),
    Case("baseline's every 10th call 10x: 4.75x against >= 3", "periodic slow calls", W(0.4),
         W(1, slow_every=10, slow_factor=10), at_least=3.0),
    Case("optimized's every 10th call 6x: 2.67x against >= 3.5", "periodic slow calls",
         W(1, slow_every=10, slow_factor=6), W(4), at_least=3.5),
    Case("optimized's every 5th call 5x, the baseline one call a block: 1.8x against >= 2.5", "periodic slow calls",
         W(4, slow_every=5, slow_factor=5), W(13), at_least=2.5),
    Case("lazy init on the optimized side's 2nd call: A/A against >= 1.05", "lazy init", W(0.1, lazy=20),
         W(0.1), at_least=1.05),
    Case("40 calls 3x slower first: 3.33x against >= 2.5", "warm-up of tens of calls",
         W(0.3, warm_calls=40, warm_factor=3), W(1), at_least=2.5),
    Case("a side that waits (1 unit + 1 ms sleep) against 3 units: >= 0.8x its truth", "a side that waits",
         W(3), W(1, sleep=0.001), at_least=0.8, relative=True),
    Case("memory-bound (8 MiB copy) against compute (1 unit): <= 0.8x its truth", "memory- against compute-bound",
         W(copy_mib=8), W(1), at_most=0.8, relative=True),
    Case("ms per call of 1 unit: <= 2x its truth", "unpaired: time", W(1), kind="time", at_most=2.0, relative=True),
    Case("ms per call of 1 unit: <= 1.05x its truth (5% away)", "unpaired: time", W(1), kind="time", at_most=1.05,
         relative=True),
    Case("calls per second of 1 unit: >= 0.5x its truth", "unpaired: rate", W(1), kind="rate", at_least=0.5,
         relative=True),
)
SHORT = (CASES[0], CASES[2], CASES[9], CASES[12])   # make test's: A/A, a clean 1.5x, slow calls, a lazy init

_LOADS = (
    "while True:\n    pass",
    "import numpy as np\na = np.ones(2**23)\nb = np.empty_like(a)\nwhile True:\n    np.copyto(b, a)",
)


@contextlib.contextmanager
def background_load(n: int) -> Iterator[list[subprocess.Popen]]:
    """`n` busy processes for the duration of the block (kinds alternate: a spin loop, a 64 MiB copy loop); they are
    killed on exit, also when the block raises."""
    if n < 0:
        raise ValueError(f"background_load: n must be >= 0, got {n}")
    procs = [subprocess.Popen([sys.executable, "-c", _LOADS[i % len(_LOADS)]]) for i in range(n)]
    try:
        time.sleep(0.2 if n else 0)  # let them start before anything is timed
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _tensors(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)


def _rate(fn: Callable[[], None]) -> Callable[[], tuple[float, float]]:
    def once():
        t0 = time.perf_counter()
        for _ in range(RATE_CALLS):
            fn()
        return RATE_CALLS, time.perf_counter() - t0
    return once


class Truth:
    """A case's true value (module doc), measured in slices: built, warmed up for 1 s and sized once (a lazy init or
    a warm-up is behind it before the first slice), then each `measure(seconds)` adds that many seconds of rounds
    with blocks of ~50 ms of each side (own time) to its totals. `value`: the ratio of the total times per call (a
    speedup) or the mean ms per call (a time); a rate: its sampler's total calls over total seconds (wall time, as
    the sampler reads it)."""

    def __init__(self, case: Case, seed: int = 10**6):
        from ..kit.rounds import Side, size_blocks, warm_up

        self.case, self.order = case, random.Random(seed)
        a, b = _tensors(seed)
        if case.kind == "rate":    # a rate is what its sampler reads (wall time, as a user's measure_once would)
            self.once = _rate(case.optimized.build(a, b))
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                self.once()
            self.totals = [[0.0, 0]]
            return
        sides = [Side("baseline", case.baseline.build(a, b)), Side("optimized", case.optimized.build(a, b))]
        self.sides = sides if case.kind == "speedup" else sides[1:]
        self.sw = Stopwatch("cpu")
        warm_up(self.sides, self.sw, block=0.05, until=time.perf_counter() + 1.0, not_before=time.perf_counter() + 1.0)
        size_blocks(self.sides, 0.05)
        self.totals = [[0.0, 0] for _ in self.sides]

    def measure(self, seconds: float) -> Truth:
        from ..kit.rounds import paired_round

        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            got = [self.once()[::-1]] if self.case.kind == "rate" else paired_round(self.sides, self.sw, self.order)
            for tot, (s, n) in zip(self.totals, got):
                tot[0] += s
                tot[1] += n
        return self

    @property
    def value(self) -> float:
        if any(n == 0 for _, n in self.totals):
            return math.nan
        per_call = [s / n for s, n in self.totals]
        if self.case.kind == "speedup":
            return per_call[0] / per_call[1]
        return 1e3 * per_call[0] if self.case.kind == "time" else 1 / per_call[0]


def measure_truth(case: Case, seconds: float = TRUTH_S, seed: int = 10**6) -> float:
    """The case's true value now (`Truth`: 1 s of warm-up, then `seconds` of rounds). A `relative` case's threshold
    is set from it (`with_truth`)."""
    return Truth(case, seed).measure(seconds).value


def with_truth(case: Case, truth: float) -> Case:
    """A `relative` case's threshold set from its truth (its factor times the truth); other cases as they are."""
    if not case.relative:
        return case
    return dataclasses.replace(case, relative=False, **{k: v * truth for k, v in case.rule.items()})


def measure_truths(cases=CASES, seconds: float = TRUTH_S, progress: Callable[[str, float], None] | None = None
                   ) -> dict[str, float]:
    """{case name: true value} measured now (under whatever load runs), one thread."""
    out = {}
    with _one_thread():
        for c in cases:
            out[c.name] = measure_truth(c, seconds)
            if progress:
                progress(c.name, out[c.name])
    return out


@contextlib.contextmanager
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ---- the rules ----------------------------------------------------------------------------------------------------

def median_rule(fns: list[Callable[[], None]], *, rule: dict, budget: float, block: float = 0.001,
                confidence: float = 0.99) -> tuple[str, Measured, int]:
    """The kit's rule before the mean's (kept to be measured beside it): one untimed call of each side, calls per
    block from one timed call (the median of three when it is shorter than the block), the device not synchronized
    (a CPU), paired rounds in a drawn order (or blocks of one side), the median round's value (a ratio of times per
    call, or ms per call) and the sign test's interval, looked at from 9 rounds on at levels alpha_k.
    -> (verdict, measured, rounds)"""
    order, clock = random.Random(0), time.perf_counter
    for f in fns:
        f()
    started = clock()

    def timed(f, n):
        t0 = clock()
        for _ in range(n):
            f()
        return (clock() - t0) / n
    calls = []
    for f in fns:
        t = timed(f, 1)
        if t < block:
            t = sorted([t, timed(f, 1), timed(f, 1)])[1]
        calls.append(max(1, min(1_000_000, round(block / max(t, 1e-9)))))
    xs, k, look = [], 1, 9
    m = None
    while True:
        idx = list(range(len(fns)))
        order.shuffle(idx)
        t = {i: timed(fns[i], calls[i]) for i in idx}
        xs.append(t[0] / t[1] if len(fns) == 2 else 1e3 * t[0])
        elapsed = clock() - started
        out = elapsed + elapsed / len(xs) > budget
        if len(xs) >= look or out:
            s = sorted(xs)
            lo, hi = median_interval(s, _alpha(k, 1 - confidence))
            v = median(s)
            m = Measured(v, min(lo, v), max(hi, v))
            k += 1
            look = max(len(xs) + 1, math.ceil(len(xs) * GROWTH))
            if judge(m, **rule) != "within noise" or out:
                break
    return judge(m, **rule), m, len(xs)


def _criterion(base, opt, rule: dict, budget: float, rng: np.random.Generator) -> tuple[str, Measured]:
    """Each side on its own for budget/2 s in ~10 ms blocks, then the 95% bootstrap interval of the ratio of medians."""
    def blocks(f) -> np.ndarray:
        f()
        t0 = time.perf_counter()
        f()
        n = max(1, round(0.01 / max(time.perf_counter() - t0, 1e-9)))
        out, start = [], time.perf_counter()
        while time.perf_counter() - start < budget / 2 or len(out) < 2:
            t = time.perf_counter()
            for _ in range(n):
                f()
            out.append((time.perf_counter() - t) / n)
        return np.asarray(out)

    tb, to = blocks(base), blocks(opt)
    boot = (np.median(rng.choice(tb, (2000, tb.size)), axis=1) / np.median(rng.choice(to, (2000, to.size)), axis=1))
    v = float(np.median(tb) / np.median(to))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    m = Measured(v, min(float(lo), v), max(float(hi), v))
    return judge(m, **rule), m


def judge_case(case: Case, rule: str, truth: float, *, budget: float = 2.0, seed: int = 0) -> dict:
    """One verdict of `rule` on `case` (true value `truth`) with `budget` seconds: a row with the verdict, whether it
    is right, wrong or undecided, the interval, the rounds and the wall seconds it took."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; rules: {', '.join(RULES)}")
    case = with_truth(case, truth)
    a, b = _tensors(seed)
    base, opt = case.baseline.build(a, b), case.optimized.build(a, b)
    prepare()
    t0 = time.perf_counter()
    note, typical = "", math.nan
    if rule == "mean":
        if case.kind == "speedup":
            d = decide_speedup(base, opt, **case.rule, max_run_time=budget, seed=seed)
        elif case.kind == "time":
            d = decide_time(opt, **case.rule, scale=1e3, max_run_time=budget)
        else:
            d = decide_rate(_rate(opt), **case.rule, max_run_time=budget)
        verdict, m, rounds, note, typical = d.verdict, d.measured, d.rounds, d.note, d.typical
    elif rule == "median":
        if case.kind == "rate":
            return {}
        verdict, m, rounds = median_rule([base, opt] if case.kind == "speedup" else [opt], rule=case.rule,
                                         budget=budget)
    else:
        if case.kind != "speedup":
            return {}
        (verdict, m), rounds = _criterion(base, opt, case.rule, budget, np.random.default_rng(seed)), 0
    seconds = time.perf_counter() - t0
    row = {"case": case.name, "group": case.group, "kind": case.kind, "rule": rule, "threshold": case.threshold,
           "nominal": case.nominal, "verdict": verdict, "value": m.value, "low": m.low, "high": m.high,
           "typical": typical, "rounds": rounds, "seconds": seconds, "budget": budget, "note": note}
    return rejudge(row, case, truth)


def rejudge(row: dict, case: Case, truth: float) -> dict:
    """`row` (a verdict of `judge_case`, its threshold as it was judged at) scored against the true value `truth`:
    the right verdict, the outcome (right, wrong or undecided) and the distance from the threshold."""
    case = dataclasses.replace(case, relative=False, **{k: row["threshold"] for k in case.rule})
    right = case.truth(truth)
    outcome = "right" if row["verdict"] == right else ("undecided" if row["verdict"] == "within noise" else "wrong")
    return {**row, "truth": truth, "right": right, "distance": case.distance(truth), "outcome": outcome}


def run_battery(cases, truths: dict[str, float], *, reps: int = 6, budget: float = 2.0, rules=RULES, seed: int = 0,
                truth_seconds: float = 0.0, progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Every case `reps` times under every rule that applies to it, the rules in turn within each repetition (so a
    change of load hits them alike). One thread, as the studies' CPU defaults. `truths`: each case's true value
    measured before (a relative case's threshold is set from it). With `truth_seconds` > 0 each case's truth is
    measured again across the battery, in slices of truth_seconds / reps between the repetitions (`Truth`), and every
    verdict is scored against that one (the load of the whole battery, not of its first seconds: a case whose sides
    respond to the load differently has the truth of the time its verdicts ran); each row keeps `truth_start`.
    `progress` gets each row as it is made, scored against `truths`. -> rows of `judge_case`."""
    if reps < 1:
        raise ValueError(f"run_battery: reps must be >= 1, got {reps}")
    if not budget > 0:
        raise ValueError(f"run_battery: budget must be > 0 seconds, got {budget}")
    if not truth_seconds >= 0:
        raise ValueError(f"run_battery: truth_seconds must be >= 0, got {truth_seconds}")
    missing = [c.name for c in cases if c.name not in truths]
    if missing:
        raise ValueError(f"run_battery: no truth measured for {missing}")
    rows = []
    with _one_thread():
        meters = {c.name: Truth(c) for c in cases} if truth_seconds else {}
        for r in range(reps):
            for i, case in enumerate(cases):
                for rule in rules:
                    row = judge_case(case, rule, truths[case.name], budget=budget, seed=seed + 1000 * r + i)
                    if row:
                        rows.append(row)
                        if progress:
                            progress(row)
            for m in meters.values():
                m.measure(truth_seconds / reps)
    if not meters:
        return rows
    by_name = {c.name: c for c in cases}
    return [{**rejudge(r, by_name[r["case"]], meters[r["case"]].value), "truth_start": r["truth"]} for r in rows]


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a rate seen k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(confidence, k + 1, n - k))


def summary_table(rows: list[dict], far: float = 0.15, early: float = 0.25, by: str = "rule") -> list[dict]:
    """Per rule (or per `by`: "group", "case"): verdicts, right / wrong / undecided shares (wrong with its 95% upper
    bound), right among the cases at least `far` from their threshold, and the median seconds per verdict of the
    cases at least `early` away."""
    out = []
    keys = dict.fromkeys((r["rule"], r[by]) if by != "rule" else (r["rule"],) for r in rows)
    for key in keys:
        rs = [r for r in rows if ((r["rule"], r[by]) if by != "rule" else (r["rule"],)) == key]
        n = len(rs)
        count = {o: sum(r["outcome"] == o for r in rs) for o in ("right", "wrong", "undecided")}
        far_rs = [r for r in rs if r["distance"] >= far - 1e-9]
        early_s = sorted(r["seconds"] for r in rs if r["distance"] >= early - 1e-9)
        row = {"rule": key[0]} if by == "rule" else {by: key[1], "rule": key[0]}
        row.update({"verdicts": n, "right": count["right"] / n, "wrong": count["wrong"] / n,
                    "wrong_95_upper": upper_bound(count["wrong"], n), "undecided": count["undecided"] / n,
                    f"right_at_{far:.0%}_away": (sum(r["outcome"] == "right" for r in far_rs) / len(far_rs)
                                                 if far_rs else math.nan),
                    f"median_s_at_{early:.0%}_away": float(np.median(early_s)) if early_s else math.nan})
        out.append(row)
    return out


def markdown(table: list[dict]) -> str:
    """The summary as a markdown table."""
    if not table:
        return ""
    keys = list(table[0])

    def cell(k, v):
        if isinstance(v, float):
            if math.isnan(v):
                return "-"
            return f"{v:.2f} s" if k.startswith("median_s") else f"{v:.1%}"
        return str(v)
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(k, r[k]) for k in keys) + " |" for r in table]
    return "\n".join(lines)
