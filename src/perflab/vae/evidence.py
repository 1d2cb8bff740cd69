"""Each claim's Evidence for `card.judge`, read from the notebook's `Findings` only, and this run's sentences.

    rows = card.judge(evidence(run, found))     # {claim key: Evidence(Measured or Decision or None, sentence)}
    conclude(run, found, rows)                  # the reading's sentences, printed and logged; the device's headline

A timed claim is judged on its Decision (paired rounds, `study.decide_*`) where this run is its setup; elsewhere it
reads "not tested here" and its sentence gives what this run measured instead, marked "indicative": the timing
table's ratio or difference of medians (its blocks are too few for an interval of a ratio), and whether the two
spreads are apart. Counts and pass/fail facts are exact."""
from __future__ import annotations

import math

from torch.utils.benchmark.utils.common import Measurement

from ..kit.bench import summary
from ..kit.claims import ClaimRow, Evidence
from ..kit.formatting import num, value_text
from ..kit.verdicts import Decision, Measured
from .checks import SEP_GRAD_STEERS
from .claims import CLAIMS, REMAPS, SAVINGS, SPEEDUPS, headline
from .config import CHECKED_STEPS
from .findings import Findings
from .measuring import DRAWS, GRAPH_CALLS, MATMULS, crossover_text


def _fewer(per_step: dict) -> float:
    """Baseline's launches over the captured step's (inf when the profiler saw none for the captured step)."""
    return per_step["baseline"] / per_step["captured"] if per_step["captured"] else math.inf


def spreads_apart(a: Measurement, b: Measurement) -> bool:
    """Whether two timings' p20-p80 ranges do not overlap."""
    sa, sb = summary(a), summary(b)
    return sa["p80_s"] < sb["p20_s"] or sb["p80_s"] < sa["p20_s"]


def median_ratio(found: Findings, name: str) -> tuple[float, bool]:
    """baseline / `name` time per step from the timing table: the ratio of the medians of its blocks (indicative: no
    claim is judged on it), and whether the two spreads are apart."""
    t = found.times
    return t["baseline"].median / t[name].median, spreads_apart(t["baseline"], t[name])


def median_saving(run, found: Findings, before: str, after: str) -> tuple[float, bool]:
    """Seconds saved per `epoch_batches`-step epoch by `after` over `before` from the timing table: the difference of
    the medians of its blocks (indicative), and whether the two spreads are apart."""
    t = found.times
    return (t[before].median - t[after].median) * run.cfg.epoch_batches, spreads_apart(t[before], t[after])


def noise_words(apart: bool) -> str:
    return ("the two spreads (p20-p80 of the blocks) are apart" if apart else
            "inside the blocks' spread (their p20-p80 overlap): not told apart on this run")


def _how(d: Decision) -> str:
    return f"{d.how}, {d.seconds:.1f} s"


def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Each claim's Evidence on this run's device, read from `found` only (what `card.judge` takes): the timed claims
    their Decisions (None where not this run's setup: the sentence then gives the timing table's indicative number; the
    remap costs' the mean of `remap_costs`' blocks), the counts and pass/fail facts exact."""
    out, dk, cfg = {}, found.inputs.device_kind, run.cfg
    n, times = cfg.epoch_batches, found.times
    base_epoch = times["baseline"].median * n
    for key, (before, after) in SAVINGS.items():
        d = found.savings[key]
        if d is None:  # not this run's setup: the timing table's medians, not judged
            saved, apart = median_saving(run, found, before, after)
            out[key] = Evidence(None, f"indicative, not judged: {saved:+.2f} s per {n}-batch epoch on {dk}, {after} vs "
                                      f"{before}, the difference of the timing table's medians; {noise_words(apart)}")
            continue
        out[key] = Evidence(d, f"{value_text(d.value, d.low, d.high, CLAIMS[key].unit)} per {n}-batch epoch on {dk}, "
                               f"{after} vs {before} ({_how(d)}; {100 * d.value / base_epoch:+.1f}% of the baseline's "
                               f"{base_epoch:.0f} s epoch)")
    for key, impl in REMAPS.items():
        d = found.remaps.decisions[key]
        if d is None:
            m = Measured.from_samples([1e3 * t for t in found.remaps.times[impl].times])
            out[key] = Evidence(None, f"indicative: {value_text(m.value, m.low, m.high, 'ms')} per call of {impl} on "
                                      f"{dk} (blocks of calls, mean and 99% interval)")
            continue
        out[key] = Evidence(d, f"{value_text(d.value, d.low, d.high, 'ms')} per call of {impl} on {dk} ({_how(d)})")
    u = sum(found.remaps.unique_syncs.values())
    ops = ", ".join(f"{op} {k}" for op, k in found.remaps.unique_syncs.items())
    out["unique_syncs"] = Evidence(Measured.exact(u), f"{u} syncs per call ({ops}) against 2 for the CPU round trip; "
                                                      f"the presence table: 0")
    c = found.curves
    out["integrity"] = Evidence(Measured.exact(int(c.baseline_optimized)),
                                f"baseline vs optimized equal to rounding over {c.steps} steps: {c.baseline_optimized}")
    steers = next(ch.passed for ch in found.checks if ch.name == SEP_GRAD_STEERS)
    out["sep_grad"] = Evidence(Measured.exact(int(steers)),
                               f"with sep_grad=True its gradient reaches the encoder (weights differ: {steers})")
    for impl in ("optimized", "captured"):
        k = found.syncs.step_syncs[impl]
        out[f"{impl}_syncs"] = Evidence(Measured.exact(k), f"{k} in the step; {found.syncs.per_step[impl]:.2f} per "
                                                           f"step with the metric reads (one per log_every steps)")
    for key, impl in SPEEDUPS.items():
        d, what = found.speedups[key], f"baseline / {impl}, per step, batch {cfg.batch}"
        if d is None:
            r, apart = median_ratio(found, impl)
            out[key] = Evidence(None, f"indicative, not judged: {num(r, True)}x ({what}) on {dk}, the ratio of the "
                                      f"timing table's medians; {noise_words(apart)}")
            continue
        out[key] = Evidence(d, f"{value_text(d.value, d.low, d.high, 'x')} ({what}) on {dk} ({_how(d)})")
    out["captured_math"] = Evidence(Measured.exact(int(c.optimized_captured)),
                                    f"optimized vs captured equal to rounding (checked over the first "
                                    f"{min(c.steps, CHECKED_STEPS)} steps): {c.optimized_captured}; largest relative "
                                    f"gap over {c.steps} steps {c.gap:.1e}")
    la = found.launches
    h = la.host["captured"]
    out["captured_launches"] = Evidence(
        Measured.exact(h["graph"] + h["kernel"]) if run.device.type == "cuda" else None,
        f"{h['graph']:.2f} graph launch + {h['kernel']:.2f} kernel launches (the RNG prologue of a replay) per step; "
        f"{h['copy']:.2f} copies apart (2 inputs, the metric ring's read)" if run.device.type == "cuda"
        else f"no CUDA runtime on {dk}; {la.per_step['captured']:.1f} aten ops per step")
    r = _fewer(la.per_step)
    unit = "kernels" if run.device.type == "cuda" else "aten ops"
    ops = f"{la.per_step['baseline']:.0f} -> {la.per_step['captured']:.0f} {unit} per step: {r:.1f}x fewer on {dk}"
    off = CLAIMS["cpu_ops_10x"].off_setup(cfg, run.device.type)   # kernels on a GPU: another count, said, not judged
    out["cpu_ops_10x"] = Evidence(None, f"not judged ({off}): {ops}") if off else Evidence(Measured.exact(r), ops)
    return out


# ---- this run's sentences ------------------------------------------------------------------------------------

def reading(run, found: Findings, rows: list[ClaimRow]) -> list[str]:
    """Sentences for the notebook's reading of this run: time and launches per step; each version's speed against the
    baseline as its paired rounds decided it where its claim is judged here, else the timing table's indicative ratio
    and whether the blocks tell the two apart; for a missed CPU op target, by how much and what the captured step's
    remaining ops are; the sweep's crossover."""
    v = {r.key: r.verdict for r in rows}
    dk, cfg, la, times = found.inputs.device_kind, run.cfg, found.launches, found.times
    unit = "kernels" if run.device.type == "cuda" else "aten ops"
    out = [f"Per step at batch {cfg.batch} on {dk} (median of the timing table's blocks): " + "; ".join(
        f"{impl} {times[impl].median * 1e3:.2f} ms, {la.per_step[impl]:.0f} {unit}"
        for impl in ("baseline", "optimized", "captured")) + "."]
    for key, impl in SPEEDUPS.items():
        d, claim = found.speedups[key], CLAIMS[key]
        if d is not None:
            out.append(f"{impl.capitalize()} against the baseline: {value_text(d.value, d.low, d.high, 'x')} in paired "
                       f"rounds ({d.how}): {v[key]} against {claim.rule_text}.")
            continue
        r, apart = median_ratio(found, impl)
        moved = f": {'faster' if r > 1 else 'slower'} in these blocks, not a verdict" if apart else ""
        out.append(f"{impl.capitalize()} against the baseline: {num(r, True)}x, indicative (the ratio of the timing "
                   f"table's medians): {noise_words(apart)}{moved}. Its claim ({claim.rule_text}, at batch 64 on "
                   f"CUDA) is not judged on this run.")
    ratio = _fewer(la.per_step)
    if run.device.type != "cuda" and v["cpu_ops_10x"] != "holds":
        kinds = la.kinds["captured"]
        top = sorted(kinds.items(), key=lambda kv: -kv[1])
        floor = kinds.get(MATMULS, 0) + kinds.get(DRAWS, 0) + kinds.get(GRAPH_CALLS, 0)
        out.append(f"CPU op target: {ratio:.1f}x fewer ops, short of 10x by {10 / ratio:.1f}x. The captured step's "
                   f"{la.per_step['captured']:.0f} ops per step are: " +
                   ", ".join(f"{k} {n:.0f}" for k, n in top if n >= 0.5) + ". " +
                   (f"The matmuls and the random draws, with the graph calls, are {floor:.0f} ops per step: while "
                    f"they stay aten calls the step cannot dispatch fewer, {la.per_step['baseline'] / floor:.1f}x "
                    f"fewer than the baseline at most." if floor else ""))
    if run.device.type == "cuda":
        out.append("Host calls into the CUDA runtime per step (all kinds): " + "; ".join(
            f"{impl} {sum(la.host[impl].values()):.1f}" for impl in ("baseline", "optimized", "captured")) + ".")
    if found.sweep is not None:
        out += [f"Sweep fit ({name}, {cfg.sweep_steps}-step calls, medians): {crossover_text(f)} on {dk}."
                for name, f in found.sweep.fits.items()]
    return out


def conclude(run, found: Findings, rows: list[ClaimRow]) -> None:
    """This run's sentences (`reading`), printed and logged as notes; and the headline this device can measure
    (claims.headline: the CPU's op count on a CPU, the captured step's speed elsewhere) marked for `perflab report`."""
    lines = reading(run, found, rows)
    for line in lines:
        print(line)
        run.log.note(line)
    key = headline(run.device.type)
    r = next(r for r in rows if r.key == key)
    run.log.headline(f"{r.claim}: {r.measured} [{r.verdict}{f' ({r.why})' if r.why else ''}]", key=key)
