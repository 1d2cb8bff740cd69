"""The tables the 05_vae_sync notebook shows, as DataFrames (HTML in a notebook, `perflab.kit.bench.show`), each
read from the findings. Times are the median of their blocks with the p20-p80 spread; a ratio or a saving that a claim
judges is the one its paired rounds decided where this run is the claim's setup (`study.decide_*`), else the timing
table's ratio or difference of medians, marked indicative, with whether the blocks tell the two apart."""
from __future__ import annotations

import pandas as pd

from ..kit.bench import summary
from ..kit.formatting import fmt_seconds, num, value_text
from ..kit.verdicts import Measured
from .claims import CLAIMS, REMAPS, SAVINGS, SPEEDUPS
from .evidence import median_ratio, median_saving
from .findings import Findings, Launches, Sweep, Syncs


def spread_text(m) -> str:
    """A Measurement's median time per call and the p20-p80 of its blocks, in ms: '7.82 ms (6.64-9.42)'."""
    s = summary(m)
    return f"{num(1e3 * s['median_s'], True)} ms ({num(1e3 * s['p20_s'], True)}-{num(1e3 * s['p80_s'], True)})"


DECIDED = "decided in paired rounds (the claim's)"


def indicative(apart: bool) -> str:
    return f"indicative (medians): {'spreads apart' if apart else 'inside the spread, not told apart'}"


def syncs_table(s: Syncs) -> pd.DataFrame:
    """Host syncs of each configuration: per step, in all the counted steps, and by op (one column each, in the order
    the ops first appear); CUDA's sync-debug warnings where it ran."""
    ops = list(dict.fromkeys(op for by in s.by_op.values() for op in by))
    rows = []
    for name, per in s.per_step.items():
        row = {"per step": round(per, 2), f"in {s.steps} steps": sum(s.by_op[name].values())}
        row |= {op: s.by_op[name].get(op, 0) for op in ops}
        if s.cuda_debug is not None:
            row["CUDA sync-debug warnings"] = s.cuda_debug[name]
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index(list(s.per_step), name="host syncs"))


def launches_table(la: Launches) -> pd.DataFrame:
    """Launches per step of each version, split by what the ops are (measuring.LAUNCH_KINDS), their total, and the
    host's calls into the GPU runtime where there were any (a CPU makes none)."""
    frame = pd.DataFrame(la.kinds).round(1)
    frame.loc[f"total: {la.what} per step"] = [round(la.per_step[n], 1) for n in frame.columns]
    if any(v for h in la.host.values() for v in h.values()):
        for k in next(iter(la.host.values())):
            frame.loc[f"host calls into the GPU runtime: {k}"] = [round(la.host[n][k], 2) for n in frame.columns]
    frame.index.name = "per step"
    return frame


def kernels_table(la: Launches, steps: int) -> pd.DataFrame:
    """The captured step's most frequent device kernels (a GPU run), in all the counted steps."""
    return pd.DataFrame({f"launches in {steps} steps": la.top}).rename_axis("captured step: kernel")


def times_table(run, found: Findings) -> pd.DataFrame:
    """Time per step of every configuration at `batch` (the median of the timing table's blocks, p20-p80), its speed
    against the baseline (decided in paired rounds where a claim is judged on it here, else the ratio of medians,
    indicative), and its syncs and launches per step."""
    decided = {name: found.speedups[key] for key, name in SPEEDUPS.items()}
    rows = []
    for name, m in found.times.items():
        d = decided.get(name)
        r, apart = median_ratio(found, name)
        rows.append({f"time per step, median (p20-p80), {found.inputs.clock_name}": spread_text(m),
                     "blocks": len(m.times),
                     "baseline / this": "1 (the reference)" if name == "baseline" else
                     value_text(d.value, d.low, d.high, "x") if d is not None else f"{num(r, True)}x",
                     "how": "" if name == "baseline" else f"{DECIDED}, {d.rounds} rounds" if d is not None else
                     indicative(apart),
                     "syncs per step": round(found.syncs.per_step[name], 2),
                     "launches per step": round(found.launches.per_step[name]) if name in found.launches.per_step
                     else ""})
    return pd.DataFrame(rows, index=pd.Index(list(found.times), name=f"batch {run.cfg.batch}, "
                                                                      f"{found.inputs.device_kind}"))


def seed_table(run, found: Findings) -> pd.DataFrame:
    """The seed's table with this run's numbers: each change's saving per `epoch_batches`-step epoch (decided in paired
    rounds where this run is the claim's setup, else the difference of the timing table's medians, indicative), the
    syncs it removes per step and the claim's verdict (the card's); then the two remaps per call (the seed's 13-25 ms
    and ~1-2 ms: decided on their setup, else the mean of `remap_costs`' blocks and its 99% interval)."""
    cfg, dt, n = run.cfg, run.device.type, run.cfg.epoch_batches
    per = found.syncs.per_step
    rows = []
    for key, (before, after) in SAVINGS.items():
        d = found.savings[key]
        saved, apart = median_saving(run, found, before, after)
        rows.append({"change": CLAIMS[key].text.split(" save")[0], "the seed said": CLAIMS[key].claimed,
                     "measured here": (value_text(d.value, d.low, d.high, "s") + f" per {n}-batch epoch"
                                       if d is not None else _undecided_saving(saved, apart, n)),
                     "how": f"{DECIDED}, {d.rounds} rounds" if d is not None else indicative(apart),
                     SYNCS_REMOVED: round(per[before] - per[after], 2),
                     "verdict": _verdict(key, d, cfg, dt)})
    for key, impl in REMAPS.items():
        d = found.remaps.decisions.get(key)
        m = d.measured if d is not None else Measured.from_samples([1e3 * t for t in found.remaps.times[impl].times])
        rows.append({"change": f"{impl}, one call (batch {cfg.batch})", "the seed said": CLAIMS[key].claimed,
                     "measured here": value_text(m.value, m.low, m.high, "ms"),
                     "how": f"decided in rounds of calls, {d.rounds} rounds" if d is not None else
                     "blocks of calls (mean, 99%), not judged",
                     SYNCS_REMOVED: "", "verdict": _verdict(key, d, cfg, dt)})
    return pd.DataFrame(rows).set_index("change")


SYNCS_REMOVED = "syncs removed per step (< 0: added)"


def _undecided_saving(saved: float, apart: bool, n: int) -> str:
    """An undecided saving from the timing table's medians: its size where the spreads are apart; where they overlap,
    said to be noise first, so a reader does not add up signs that chance gave (-2.8, -7.1, -0.1 s, "+5.1 together")."""
    if apart:
        return f"{saved:+.2f} s per {n}-batch epoch"
    return f"not told apart (median difference {saved:+.2g} s per {n}-batch epoch)"


def _verdict(key: str, d, cfg, device_type: str) -> str:
    """The claim's verdict as the card gives it (`Claim.verdict`), with what was measured instead when not tested."""
    c = CLAIMS[key]
    v = c.verdict(d, cfg, device_type)
    off = c.off_setup(cfg, device_type)
    return f"{v} (measured {off})" if v == "not tested here" and off else v


def sweep_table(run, sw: Sweep) -> pd.DataFrame:
    """Time per step at each batch size (the median of its blocks, p20-p80), one column per version."""
    names = list(dict.fromkeys(name for name, _ in sw.times))
    sizes = sorted({b for _, b in sw.times})
    return pd.DataFrame({name: [spread_text(sw.times[name, b]) if (name, b) in sw.times else "" for b in sizes]
                         for name in names}, index=pd.Index(sizes, name=f"batch ({run.cfg.sweep_steps}-step calls)"))


def floors_table(run, found: Findings, floors: dict[str, dict]) -> pd.DataFrame:
    """Each version's floor (the larger of FLOPs over the measured peak and parameter traffic over the measured
    bandwidth) against its median time per step."""
    return pd.DataFrame([{"floor": fmt_seconds(f["floor_s"]), "bound by": f["bound"], "MFLOP": round(f["flops"] / 1e6),
                          "MB of parameter traffic": round(f["bytes"] / 1e6, 1),
                          "measured (median)": fmt_seconds(found.times[name].median),
                          "share of the floor's speed": f"{100 * f['fraction']:.1f}%"}
                         for name, f in floors.items()],
                        index=pd.Index(list(floors), name=f"batch {run.cfg.batch}, {found.inputs.device_kind}"))
