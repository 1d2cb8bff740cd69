"""Claims of known truth, to measure how often a verdict rule is right, wrong or undecided on this machine.

    with background_load(2):                       # two busy processes, started and stopped here
        rows = run_battery(CASES, reps=10, budget=2.0)
    print(summary_table(rows))

Each case is a speed claim whose truth is fixed by construction: the baseline and the optimized version are the
same loop of one small matmul (64 x 64, one thread), and their loop counts set the true speedup (150 against 100
calls: 1.5x). The claim is a threshold on it (`>= 1.2`), so the right verdict is known ("holds" here) and every
verdict a rule gives is right, wrong (the opposite conclusion) or undecided ("within noise").

Three rules are run side by side on every case, in turn, with the same seconds of timing each (`budget`):
- "paired": `perflab.kit.verdicts.decide_speedup` (paired rounds, the median's interval, sequential stopping);
- "criterion": each side timed on its own for half the budget in ~10 ms blocks, the 95% bootstrap interval of the
  ratio of the two medians (Criterion.rs's comparison, at its default 95%: the paired rule states 99%), judged by
  `judge`;
- "old": perflab's rule before the paired one: `measure_interleaved` (two rounds), the ratio of medians and the
  p20/p80 cross-ratio (`speedup_range`) as its interval, judged by `judge`.

The load: `background_load(n)` starts n processes that keep a core busy (alternately a Python spin loop and a
memory copy of 64 MiB, which also evicts the caches) and stops them on exit, whatever happens inside.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from ..kit.bench import measure_interleaved, speedup, speedup_range
from ..kit.verdicts import Measured, decide_speedup, judge

RULES = ("paired", "criterion", "old")
UNIT = 100   # matmuls per call of the reference side: ~0.3-0.6 ms on a CPU core


@dataclasses.dataclass(frozen=True)
class Case:
    """A speed claim of known truth: `baseline` and `optimized` matmuls per call; the claim `speedup >= at_least`
    (or `<= at_most`)."""
    baseline: int
    optimized: int
    at_least: float | None = None
    at_most: float | None = None

    @property
    def true_speedup(self) -> float:
        return self.baseline / self.optimized

    @property
    def truth(self) -> str:
        """The right verdict."""
        t = self.true_speedup
        ok = t >= self.at_least if self.at_least is not None else t <= self.at_most
        return "holds" if ok else "does not hold"

    @property
    def distance(self) -> float:
        """How far the truth is from the threshold, as a fraction: max(true/threshold, threshold/true) - 1."""
        thr = self.at_least if self.at_least is not None else self.at_most
        return max(self.true_speedup / thr, thr / self.true_speedup) - 1

    @property
    def name(self) -> str:
        rule = f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}"
        return f"{self.true_speedup:.3g}x against {rule}"


CASES = (
    Case(100, 100, at_least=1.1),    # A/A: never "holds"
    Case(100, 100, at_most=0.9),     # A/A against a claimed slowdown
    Case(150, 100, at_least=1.2),
    Case(150, 100, at_least=2.0),
    Case(89, 100, at_least=1.0),
    Case(120, 100, at_least=1.05),
    Case(115, 100, at_least=1.0),
    Case(200, 100, at_least=1.5),
    Case(75, 100, at_most=0.9),
    Case(130, 100, at_most=1.1),
)
SHORT = (CASES[0], CASES[2], CASES[3], CASES[4])  # make test's: the A/A pair and effects 11-25% from the threshold

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


def _work(calls: int, a: torch.Tensor, b: torch.Tensor) -> Callable[[], None]:
    def f():
        for _ in range(calls):
            torch.mm(a, b)
    return f


def _criterion(base, opt, case: Case, budget: float, rng: np.random.Generator) -> tuple[str, Measured]:
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
    return judge(m, at_least=case.at_least, at_most=case.at_most), m


def _old(base, opt, case: Case, budget: float) -> tuple[str, Measured]:
    """The studies' rule before this one: two interleaved rounds of `measure`, p20/p80 cross-ratio."""
    ms = measure_interleaved({"b": base, "o": opt}, label="battery", rounds=2, min_run_time=0.2,
                             max_run_time=budget / 2)
    v = speedup(ms["b"], ms["o"])
    lo, hi = speedup_range(ms["b"], ms["o"])
    m = Measured(v, min(lo, v), max(hi, v))
    return judge(m, at_least=case.at_least, at_most=case.at_most), m


def judge_case(case: Case, rule: str, *, budget: float = 2.0, seed: int = 0) -> dict:
    """One verdict of `rule` on `case` with `budget` seconds of timing: a row with the verdict, whether it is right,
    wrong or undecided, the interval and the seconds it took."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; rules: {', '.join(RULES)}")
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    base, opt = _work(case.baseline, a, b), _work(case.optimized, a, b)
    t0 = time.perf_counter()
    if rule == "paired":
        d = decide_speedup(base, opt, at_least=case.at_least, at_most=case.at_most, max_run_time=budget)
        verdict, m, rounds = d.verdict, d.measured, d.rounds
    elif rule == "criterion":
        (verdict, m), rounds = _criterion(base, opt, case, budget, np.random.default_rng(seed)), 0
    else:
        (verdict, m), rounds = _old(base, opt, case, budget), 0
    seconds = time.perf_counter() - t0
    outcome = "right" if verdict == case.truth else ("undecided" if verdict == "within noise" else "wrong")
    return {"case": case.name, "rule": rule, "truth": case.truth, "distance": case.distance, "verdict": verdict,
            "outcome": outcome, "value": m.value, "low": m.low, "high": m.high, "rounds": rounds, "seconds": seconds}


def run_battery(cases=CASES, *, reps: int = 6, budget: float = 2.0, rules=RULES, seed: int = 0,
                progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Every case `reps` times under every rule, the rules in turn within each repetition (so a change of load hits
    them alike). One thread, as the studies' CPU defaults. -> rows of `judge_case`."""
    if reps < 1:
        raise ValueError(f"run_battery: reps must be >= 1, got {reps}")
    if not budget > 0:
        raise ValueError(f"run_battery: budget must be > 0 seconds, got {budget}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    try:
        for r in range(reps):
            for i, case in enumerate(cases):
                for rule in rules:
                    row = judge_case(case, rule, budget=budget, seed=seed + 1000 * r + i)
                    rows.append(row)
                    if progress:
                        progress(row)
    finally:
        torch.set_num_threads(threads)
    return rows


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a rate seen k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(confidence, k + 1, n - k))


def summary_table(rows: list[dict], far: float = 0.15, early: float = 0.25) -> list[dict]:
    """Per rule: verdicts, right / wrong / undecided shares (wrong with its 95% upper bound), right among the cases
    at least `far` from their threshold, and the median seconds per verdict of the cases at least `early` away."""
    out = []
    for rule in dict.fromkeys(r["rule"] for r in rows):
        rs = [r for r in rows if r["rule"] == rule]
        n = len(rs)
        count = {o: sum(r["outcome"] == o for r in rs) for o in ("right", "wrong", "undecided")}
        far_rs = [r for r in rs if r["distance"] >= far - 1e-9]
        early_s = sorted(r["seconds"] for r in rs if r["distance"] >= early - 1e-9)
        out.append({"rule": rule, "verdicts": n, "right": count["right"] / n, "wrong": count["wrong"] / n,
                    "wrong_95_upper": upper_bound(count["wrong"], n), "undecided": count["undecided"] / n,
                    f"right_at_{far:.0%}_away": (sum(r["outcome"] == "right" for r in far_rs) / len(far_rs)
                                                 if far_rs else math.nan),
                    f"median_s_at_{early:.0%}_away": float(np.median(early_s)) if early_s else math.nan})
    return out


def markdown(table: list[dict]) -> str:
    """The summary as a markdown table."""
    if not table:
        return ""
    keys = list(table[0])

    def cell(k, v):
        if isinstance(v, float):
            return f"{v:.2f} s" if k.startswith("median_s") else f"{v:.1%}"
        return str(v)
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(k, r[k]) for k in keys) + " |" for r in table]
    return "\n".join(lines)
