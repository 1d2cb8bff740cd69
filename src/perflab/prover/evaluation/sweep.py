"""The batch sweep of notebooks/03_eval: one chunk of B candidates per batch size, timed in paired rounds, and the
ratios the claims judge (batch_1024, l2, cap_512, flat, flat_step: `sweep_claims`), drawn as the notebook's main
figure (`figure`) with the judged numbers on it.

    points = batch_sweep(step, candidates, [16, 64, 256, 512, 1024], rounds_time=2.0)   # 20 rounds at least
    sweep_claims(points, l2, step_bytes_fn)     # {claim key: Evidence}: ratios of mean costs, round by round

Each round times one chunk at every size (the order reversed every other round), so a drift of the machine hits
every size of a round alike and the ratio of two sizes is taken round by round (`Measured.paired_ratio`); the
largest of k ratios takes each at alpha / k (`largest`).
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ...kit.bench import from_times
from ...kit.claims import Evidence
from ...kit.env import synchronize
from ...kit.formatting import fmt_interval as interval
from ...kit.formatting import value_text
from ...kit.memory import peak_memory
from ...kit.verdicts import CONFIDENCE, Measured
from ..core.rollout import fill, rollout_full
from ..core.step import GreedyStep


@dataclasses.dataclass
class SweepPoint:
    batch: int
    measurement: object        # perflab.kit.bench Measurement of one chunk's rollout (warm): the sweep's rounds at this size
    steps: int                 # steps the chunk ran (its slowest candidate)
    first_call_s: float        # the first rollout at this size (compiles included when compiled)
    peak_bytes: int            # peak memory over entry during one rollout (of the eager step under CUDA graphs)
    peak_method: str
    rounds: tuple = ()         # seconds of the chunk in each of the sweep's rounds, in order (paired across sizes)

    @property
    def ms_per_candidate(self) -> float:
        """The mean cost per candidate over the rounds, in ms (what the claims' ratios divide)."""
        return self.per_candidate().value

    @property
    def us_per_candidate_step(self) -> float:
        return self.per_candidate(per_step=True).value

    def per_candidate(self, per_step: bool = False, confidence: float = CONFIDENCE) -> Measured:
        """The mean cost per candidate (ms) or per candidate-step (us) over the rounds, with its interval."""
        scale = 1e6 / (self.batch * self.steps) if per_step else 1e3 / self.batch
        return Measured.from_samples([t * scale for t in self.rounds or self.measurement.times], confidence)


SWEEP_ROUNDS = 20   # at least: 99% intervals of the worst of up to ~1,000 size pairs stay bounded (`largest`)


def batch_sweep(step: GreedyStep, candidates: torch.Tensor, batch_sizes, *, rounds_time: float,
                min_rounds: int = SWEEP_ROUNDS) -> list[SweepPoint]:
    """One chunk of B candidates (the evaluation's, repeated to fill B) per batch size: the first call (compiles
    included when compiled), steps run and peak memory; then warm calls in interleaved rounds, each round one chunk
    at every size (the order reversed every other round), until `min_rounds` rounds and `rounds_time` seconds are
    done (module doc); each size's rounds are also its Measurement (tables)."""
    sizes = list(dict.fromkeys(batch_sizes))
    dev = step.engine.device
    # a CUDA-graph replay allocates nothing (its memory is the pool recorded with the graph): the peak of a chunk is
    # measured on the eager step of the same engine and policy, which allocates what one step needs (T4)
    probe = GreedyStep(step.engine, step.policy, step.max_depth, compile="off") if step.cudagraphs else step
    chunks, first, runs, mems = {}, {}, {}, {}
    with torch.inference_mode():
        for b in sizes:
            chunks[b] = fill(candidates, b)
            t0 = time.perf_counter()
            runs[b] = rollout_full(step, chunks[b])
            first[b] = time.perf_counter() - t0
            with peak_memory(dev) as mems[b]:
                rollout_full(probe, chunks[b])
        times: dict[int, list] = {b: [] for b in sizes}
        started = time.perf_counter()
        while len(times[sizes[0]]) < min_rounds or time.perf_counter() - started < rounds_time:
            for b in sizes if len(times[sizes[0]]) % 2 == 0 else sizes[::-1]:
                synchronize(dev)
                t0 = time.perf_counter()
                rollout_full(step, chunks[b])
                synchronize(dev)
                times[b].append(time.perf_counter() - t0)
    return [SweepPoint(b, from_times(times[b], label="rollout of one chunk", sub_label=f"B={b}",
                                       description=f"{step.mode}/{step.backend}", stmt="rollout_full(...)", env=str(dev)),
                       runs[b].steps_executed, first[b], mems[b].delta_bytes,
                       mems[b].method + (" (eager step)" if probe is not step else ""), tuple(times[b]))
            for b in sizes]


def round_ratios(a, b, per_step: bool = False) -> list[float]:
    """b's cost over a's (two `SweepPoint`s) per candidate, or per candidate-step, in each of the sweep's rounds."""
    na, nb = a.batch * (a.steps if per_step else 1), b.batch * (b.steps if per_step else 1)
    return [(tb / nb) / (ta / na) for ta, tb in zip(a.rounds, b.rounds)]


def rise(a, b, per_step: bool = False, of: int = 1) -> Measured:
    """b's cost over a's (per candidate, or per candidate-step) over the sweep's rounds: the ratio of their mean costs
    (the total's, `Measured.paired_ratio`), at confidence 1 - alpha / `of` when it is one of `of` ratios judged
    together (`largest`)."""
    na, nb = a.batch * (a.steps if per_step else 1), b.batch * (b.steps if per_step else 1)
    return Measured.paired_ratio([t / nb for t in b.rounds], [t / na for t in a.rounds], 1 - (1 - CONFIDENCE) / of)


def largest(ratios: list[Measured]) -> Measured:
    """The largest of k ratios. Each interval was made at 1 - alpha / k (`rise(of=k)`), so all k hold together with
    probability at least 1 - alpha (Bonferroni), and then the largest ratio lies in [max of lows, max of highs]."""
    return Measured(max(r.value for r in ratios), max(r.low for r in ratios), max(r.high for r in ratios))


def steepest(points, per_step: bool = False) -> tuple[Measured, SweepPoint, SweepPoint] | None:
    """The largest rise from one swept size to the next (`largest` of the k rises, each at alpha / k) and the pair
    it is between (the pair whose ratio is largest); None with one size."""
    pts = sorted(points, key=lambda p: p.batch)
    pairs = list(zip(pts, pts[1:]))
    if not pairs:
        return None
    rs = [rise(a, b, per_step=per_step, of=len(pairs)) for a, b in pairs]
    i = max(range(len(rs)), key=lambda j: rs[j].value)
    return largest(rs), *pairs[i]


def sweep_claims(points, l2: int, step_bytes_fn) -> dict[str, Evidence]:
    """{claim key: Evidence} for the sweep's claims (batch_1024, l2, cap_512, flat, flat_step) from `batch_sweep`'s
    points; `step_bytes_fn(b)`: a step's bytes at batch b, `l2`: the L2 size in bytes."""
    pts = sorted(points, key=lambda p: p.batch)
    by = {p.batch: p for p in pts}
    how = f"{len(pts[0].rounds)} paired rounds of the sweep"
    out = {}
    if 512 in by and 1024 in by:
        r, hi = rise(by[512], by[1024]), by[1024]
        out["batch_1024"] = Evidence(r, f"B=1024 over B=512: {interval(r)} per candidate ({how}); the first call at "
                                        f"B=1024 took {hi.first_call_s / hi.measurement.median:.1f}x a warm one")
    else:
        out["batch_1024"] = Evidence(None, f"512 and 1024 are not both in the sweep ({[p.batch for p in pts]})")
    cross = next(((a, b) for a, b in zip(pts, pts[1:]) if step_bytes_fn(a.batch) <= l2 < step_bytes_fn(b.batch)), None)
    if cross:
        a, b = cross
        j = rise(a, b, per_step=True)
        out["l2"] = Evidence(j, f"the step's bytes pass L2 ({l2 / 2**20:g} MiB) between B={a.batch} and {b.batch}: cost "
                                f"per candidate-step {interval(j)} there ({how})")
    else:
        out["l2"] = Evidence(None, f"no swept batch size crosses L2 ({l2 / 2**20:g} MiB)")
    others = [p for p in pts if p.batch != 512]
    if 512 in by and others:
        rs = [rise(p, by[512], of=len(others)) for p in others]       # 512's cost over each other's; Bonferroni
        c = largest(rs)
        worst = others[max(range(len(rs)), key=lambda i: rs[i].value)]
        out["cap_512"] = Evidence(c, f"B=512 costs {interval(c)} of B={worst.batch}'s per candidate, the most against "
                                     f"any other swept size ({how}; each of the {len(rs)} ratios at "
                                     f"{1 - (1 - CONFIDENCE) / len(rs):.2%})")
    else:
        out["cap_512"] = Evidence(None, f"512 is not in the sweep, or alone ({[p.batch for p in pts]})")
    flat, step = steepest(pts), steepest(pts, per_step=True)
    if flat is None:
        return {**out, "flat": Evidence(None, "one batch size: nothing to compare"),
                "flat_step": Evidence(None, "one batch size: nothing to compare")}
    k = len(pts) - 1   # the largest of k rises: each interval at alpha / k (Bonferroni), so all k hold at 1 - alpha
    each = f"each of the {k} rises at {1 - (1 - CONFIDENCE) / k:.2%}, so all hold at {CONFIDENCE:.0%}"
    (f, fa, fb), (s, sa, sb) = flat, step
    out["flat"] = Evidence(f, f"largest rise of ms per candidate {interval(f)}, B={fa.batch} -> {fb.batch} ({fa.steps} "
                              f"-> {fb.steps} steps per chunk; {how}; {each})")
    out["flat_step"] = Evidence(s, f"largest rise of us per candidate-step {interval(s)}, B={sa.batch} -> {sb.batch} "
                                   f"({how}; {each})")
    return out


def table(points, step_bytes_fn):
    """The sweep as a DataFrame: per batch size the steps its chunk ran, the mean cost per candidate and per
    candidate-step with their 99% intervals (what the figure draws), the first call over a warm one, peak memory and
    the predicted step bytes."""
    import pandas as pd

    rows = []
    for p in sorted(points, key=lambda p: p.batch):
        c, s = p.per_candidate(), p.per_candidate(per_step=True)
        rows.append({"batch": p.batch, "steps": p.steps, "ms per candidate": value_text(c.value, c.low, c.high),
                     "us per candidate-step": value_text(s.value, s.low, s.high),
                     "first call / warm": round(p.first_call_s / p.measurement.median, 1),
                     "peak MiB": round(p.peak_bytes / 2**20, 1),
                     "predicted MiB": round(step_bytes_fn(p.batch) / 2**20, 1)})
    return pd.DataFrame(rows).set_index("batch")


def figure(points, notes: dict, *, color: str, label: str, title: str = ""):
    """The sweep's two costs against the batch size, each size's mean over the rounds with its 99% interval: ms per
    candidate (top) and us per candidate-step (below, the same batch axis), the steps each chunk ran written at its point; the pair with
    the largest rise marked and labelled with the judged ratio (`steepest`, the number the claim is judged on) and
    `notes[key]` (flat, flat_step: the claim's rule and verdict). -> matplotlib Figure"""
    import matplotlib.pyplot as plt

    from ...kit.claims import log_ticks

    pts = sorted(points, key=lambda p: p.batch)
    # stacked, one batch axis: narrow enough (~700 px) to sit beside the verdict card's table
    fig, axes = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True, layout="constrained")
    for ax, per_step, key, unit in ((axes[0], False, "flat", "ms per candidate"),
                                    (axes[1], True, "flat_step", "us per candidate-step")):
        ms = [p.per_candidate(per_step) for p in pts]
        xs = [p.batch for p in pts]
        ax.errorbar(xs, [m.value for m in ms], yerr=[[m.value - m.low for m in ms], [m.high - m.value for m in ms]],
                    fmt="o-", color=color, capsize=3, label=f"{label}: each size's mean over the rounds, 99% interval")
        for p in pts:   # the steps each chunk ran (its slowest candidate's), along the bottom
            ax.annotate(f"{p.steps} steps", (p.batch, 0.02), xycoords=("data", "axes fraction"), ha="center",
                        fontsize=7, color="#616161")
        hit = steepest(pts, per_step)
        if hit is not None:
            r, a, b = hit
            ya, yb = a.per_candidate(per_step).value, b.per_candidate(per_step).value
            ax.plot([a.batch, b.batch], [ya, yb], color="black", lw=2.2, zorder=3,
                    label="the largest rise, paired round by round" if not per_step else None)
            what = "largest rise" if r.value >= 0.995 else "no rise; the largest ratio"   # 0.90x is a fall
            ax.annotate(f"{what} {value_text(r.value, r.low, r.high, 'x')}\n(B={a.batch} -> {b.batch}; "
                        f"{notes.get(key, '')})", (b.batch, max(ya, yb)), xytext=(-4, 26), textcoords="offset points",
                        ha="right", fontsize=8, arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6))
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_ticks(ax.xaxis)
        log_ticks(ax.yaxis)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set(ylabel=unit)
        ax.margins(y=0.35)
    axes[1].set_xlabel("batch size (candidates per chunk)")
    axes[0].legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=9)
    return fig
