"""The notebooks' measurements: profiles of a fit (01), one LM iteration as a timed callable, sweeps and
side-by-side timings, whole fits, the floor of an iteration, and the paired rounds that decide the timed claims (02).

"One LM iteration" means: every (latent, class) coordinate advanced by one LM iteration, i.e. for the
baseline one iteration of every class slab, for the optimized solver one iteration of every class pass,
from a fresh start (all coordinates active: the most work an iteration ever does).

Every timing for the tables and plots is a `torch.utils.benchmark` Measurement (medians with spread); what is
compared is timed side by side in one run (`measure_iterations`, `time_fits`), so a machine whose speed drifts slows
both. A claim's verdict comes from paired rounds instead (`decide_iteration_speedup`, `decide_floor`: the kit's
`decide_speedup`: the ratio of mean times, a 99% interval and sequential stopping within a time budget).

IMPLS names the versions (each `Sparse1DProbe`, same arguments; `perflab.kit.versions.Versions`): the one place that
does. Where a parameter names a version ("baseline", "optimized"), `IMPLS[name]` looks it up (an unknown name is
refused with the names there are).
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings

import torch

from ..kit.bench import fmt, fmt_seconds, from_times, measure, measure_interleaved, speedup, speedup_range
from ..kit.env import pick_device
from ..kit.formatting import num, num_interval
from ..kit.verdicts import Decision, Measured
from ..kit.versions import Grid, GridResult, Part, Variant, Versions
from . import baseline, optimized
from .claims import (
    FLOOR_CLAIM,
    GPU_MECHANISM,
    PROFILE_CLAIMS,
    SEED_BREAKDOWN,
    SEED_JOB,
    SEED_SHARES,
    SHARE_CONFIDENCE,
    SPEED_CLAIMS,
)
from .probe import Sparse1DProbeBase

IMPLS = Versions({"baseline": baseline.Sparse1DProbe, "optimized": optimized.Sparse1DProbe})  # the baseline first


@contextlib.contextmanager
def debug_logging(enabled: bool):
    """Turn the solvers' debug logging on for the block (to a null handler: the cost is in formatting)."""
    log = logging.getLogger("perflab.probe1d")
    old_level, handler = log.level, logging.NullHandler()
    if enabled:
        log.setLevel(logging.DEBUG)
        log.addHandler(handler)
    try:
        yield
    finally:
        log.setLevel(old_level)
        log.removeHandler(handler)


def quiet_fit(probe: Sparse1DProbeBase, x, y) -> Sparse1DProbeBase:
    """fit() with the baseline's repeated "LM step fallback" warning silenced (it is counted instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return probe.fit(x, y)


def compile_label(compile: str, backend: str = "inductor") -> str:
    """How a compile setting reads in a table: 'eager', 'compiled (default, inductor)'."""
    return "eager" if compile == "off" else f"compiled ({compile}, {backend})"


# ---- notebook 01: profiles --------------------------------------------------------------------------------

def profile_fit(impl: str, x, y, *, hook_and_debug: bool = False, out_dir=None, name: str = "", interval: float,
                **solver_kw):
    """A whole fit under pyinstrument (perflab.kit.profiling.profile), optionally with an iteration hook and
    debug logging on (the seed's second profile). -> (Profile, hook calls)"""
    from ..kit.profiling import profile

    seen: list = []
    probe = IMPLS[impl](iteration_hook=seen.append if hook_and_debug else None, **solver_kw)
    with debug_logging(hook_and_debug):
        prof = profile(lambda: quiet_fit(probe, x, y), out_dir=out_dir, name=name or f"fit_{impl}", interval=interval)
    return prof, len(seen)


def hook_cost(impl: str, x, y, **solver_kw) -> dict:
    """A fit with an iteration hook and debug logging on, timed against the plain fit side by side.
    -> {"ratio": hooked / plain (medians), "low", "high": its p20/p80 range, "plain", "hooked": Measurements}"""
    fns = {}
    for hooked in (False, True):
        probe = IMPLS[impl](iteration_hook=(lambda info: None) if hooked else None, **solver_kw)

        def fit(probe=probe, hooked=hooked):
            with debug_logging(hooked):
                quiet_fit(probe, x, y)
        fns["hook + debug" if hooked else "plain"] = fit
    ms = measure_interleaved(fns, label="fit", sub_labels={k: impl for k in fns}, descriptions={k: k for k in fns},
                             min_run_time=0.5, max_run_time=1.5, device=solver_kw.get("device"))
    lo, hi = speedup_range(ms["plain"], ms["hook + debug"])
    return dict(ratio=1 / speedup(ms["plain"], ms["hook + debug"]), low=1 / hi, high=1 / lo,
                plain=ms["plain"], hooked=ms["hook + debug"])


def syncs_per_iteration(impl: str, x, y, **config):
    """Host syncs (perflab.kit.syncs counter) of one LM iteration over every class, after setup."""
    from ..kit.syncs import count_host_syncs

    _, one_iteration, _ = iteration_callable(IMPLS.variant(impl, **config), x, y)
    with count_host_syncs(pick_device(config.get("device") or "auto")) as syncs:
        one_iteration()
    return syncs


# ---- notebook 02: one LM iteration, timed ------------------------------------------------------------------

def iteration_callable(v: Variant, x, y, device=None):
    """(setup, one_iteration, scale) of variant `v` (a version of IMPLS with its solver's keywords as knobs; the
    solver's `timed_iteration`): `setup()` does what a fit does once (the optimized plan; nothing for the baseline);
    `one_iteration()` advances every coordinate by one LM iteration from a fresh start, or, for a baseline whose knobs
    set `baseline_slabs` > 0, only the first slabs (all slabs cost the same: same events, same rows); multiply its
    time by `scale` for a whole iteration. `device`: the solver's, unless the knobs name one."""
    config = {"device": device, **v.knobs} if device is not None else dict(v.knobs)
    slabs = config.pop("baseline_slabs", 0)   # the baseline's timing knob: not a solver keyword
    probe = v.fn(**config)
    return probe.solver.timed_iteration(x, y, **({"slabs": slabs} if slabs else {}))


def sums_callable(x, y, **config):
    """The optimized solver's tile sums alone (`event_stats`: the kernel calls and the index_add_ of their
    results) for every class pass from a fresh start: the kernel's part of `iteration_callable`'s iteration
    (the rest is the LM update and the per-pass setup)."""
    s = IMPLS["optimized"](**config).solver
    plan = s.plan(x.to(s.device), y.to(s.device))
    step = s.classes_per_pass(plan.n_lat, plan.n_cls)
    states = [s.init_pass(plan, c0, min(c0 + step, plan.n_cls)) for c0 in range(0, plan.n_cls, step)]
    return lambda: [s.event_stats(st) for st in states]


def iteration_part(v: Variant, x, y, device=None):
    """What a grid times for variant `v`: one LM iteration (`iteration_callable`), or for a baseline whose knobs set
    `baseline_slabs` a `Part` of it, the first slabs, scaled to all (every slab costs the same: same events, same
    rows)."""
    _, fn, scale = iteration_callable(v, x, y, device=device)
    return Part(fn, scale) if scale != 1.0 else fn


def measure_iterations(variants: dict[str, Variant], x, y, *, label: str, sub_label: str, min_run_time: float,
                       max_run_time: float, rounds: int = 3, device=None, extra: dict | None = None) -> dict:
    """One LM iteration of each variant ({key: Variant}, see iteration_part; a baseline's knobs may hold
    baseline_slabs) and any `extra` callables ({key: fn}), timed side by side in `rounds` rounds
    (perflab.kit.bench.measure_interleaved): a machine whose speed drifts slows them alike, so their ratios
    hold. The optimized plans are built before timing. -> {key: Measurement}, baselines scaled to all slabs (a
    `Part`)."""
    fns = {key: iteration_part(v, x, y, device=device) for key, v in variants.items()}
    fns.update(extra or {})
    ms = measure_interleaved(fns, label=label, rounds=rounds, sub_labels={k: sub_label for k in fns},
                             descriptions={k: k for k in fns}, min_run_time=min_run_time, max_run_time=max_run_time,
                             device=device)
    return ms


def slab_sweep(pair: dict[str, Variant], widths, x, y, *, device=None, rounds: int = 3, **timing) -> GridResult:
    """One LM iteration of each of `pair` ({version: Variant}) at each of `widths` classes per slab (the baseline) or
    per pass (the optimized solver), on the same (x, y): a `perflab.kit.versions.Grid` whose size is the
    `class_slab_size` knob; a baseline timed on some slabs is a `Part`, scaled to all. -> GridResult (a table, a
    figure, a log row per timing with its class_slab_size)"""
    variants = [v.with_knobs(name=key) for key, v in pair.items()]

    def call(v: Variant, width: int):
        return iteration_part(v.with_knobs(name=v.name, class_slab_size=width), x, y, device=device)
    grid = Grid(variants, sizes=list(widths), inputs=lambda width: width, call=call, size_name="class_slab_size",
                label=f"LM iteration, {x.shape[0]} rows x {y.shape[1]} cls")
    return grid.measure(rounds=rounds, device=device, **timing)


def ratio(base, opt) -> dict:
    """baseline / optimized: the ratio of medians and its conservative p20/p80 range."""
    lo, hi = speedup_range(base, opt)
    return dict(ratio=speedup(base, opt), low=lo, high=hi)


def sweep(cases: list[dict], pair: dict[str, Variant], data, *, device, log=None, **timing) -> list[dict]:
    """One LM iteration of `pair` ({"baseline": ..., "optimized": ...}, see measure_iterations) for every
    case (n_rows, n_classes; `data(n_rows, n_classes)` gives (x, y)). -> one row per case with both
    Measurements, the pair events per iteration and the ratio with its range; logged when `log` is given."""
    rows = []
    for case in cases:
        x, y = data(case["n_rows"], case["n_classes"])
        row = dict(case, n_rows=x.shape[0], n_classes=y.shape[1], nnz=x._nnz(), pair_events=x._nnz() * y.shape[1])
        row.update(measure_iterations(pair, x, y, label="LM iteration", device=device,
                                      sub_label=f"{x.shape[0]} rows x {y.shape[1]} cls", **timing))
        row.update(ratio(row["baseline"], row["optimized"]))
        if log is not None:
            ctx = {k: row[k] for k in ("sweep", "n_rows", "n_classes", "nnz", "pair_events")}
            for impl in pair:
                log.measurement(row[impl], metric="seconds per LM iteration", impl=impl, **ctx)
            log.value("speedup per LM iteration", row["ratio"], unit="x", low=row["low"], high=row["high"], **ctx)
        rows.append(row)
    return rows


def sweep_table(rows: list[dict], columns=("baseline", "optimized")) -> str:
    """Medians with IQR (3 significant figures) and the ratio with its p20/p80 range, one line per row."""
    head = f"{'size':24s} {'pairs':>7s} " + " ".join(f"{c:>28s}" for c in columns) + f" {'ratio':>7s} {'p20-p80':>12s}"
    lines = [head]
    for r in rows:
        label = f"{r.get('sweep', '')}: {r['n_rows']} x {r['n_classes']}" if "n_rows" in r else r["label"]
        pairs = f"{r['pair_events'] / 1e6:6.2f}M" if "pair_events" in r else ""
        lines.append(f"{label:24s} {pairs:>7s} " + " ".join(f"{fmt(r[c]):>28s}" for c in columns)
                     + f" {r['ratio']:6.3g}x {r['low']:5.3g}-{r['high']:.3g}x")
    return "\n".join(lines)


def side_by_side(x, y, pair: dict, modes: dict, *, device, **timing) -> dict:
    """The baseline's LM iteration against the optimized one in each of `modes` ({name: optimized config}),
    and each mode's tile sums alone, timed side by side. -> {key: Measurement}: "baseline", each mode's
    name, and "<name> sums"."""
    extra = {f"{name} sums": sums_callable(x, y, device=device, **kw) for name, kw in modes.items()}
    return measure_iterations({"baseline": pair["baseline"], **{n: IMPLS.variant("optimized", **kw)
                                                                for n, kw in modes.items()}},
                              x, y, label="side by side", sub_label=f"{x.shape[0]} rows x {y.shape[1]} cls",
                              device=device, extra=extra, **timing)


# ---- notebook 02: whole fits, the floor ------------------------------------------------------------------

def time_fits(variants: dict[str, Variant], x, y, *, device, max_iter: int, repeats: int = 3) -> tuple[dict, dict]:
    """Whole fits of each variant ({name: Variant of IMPLS}), `repeats` times in turn (side by side). Each
    optimized variant fits once untimed first (compiles, allocator growth). -> ({name: (last probe,
    Measurement)}, {name: seconds of the untimed first fit})"""
    from ..kit.env import synchronize

    def fit(v: Variant):
        return quiet_fit(v(device=device, max_iter=max_iter), x, y)

    first = {}
    for name, v in variants.items():
        if v.version == "optimized":
            t0 = time.perf_counter()
            fit(v)
            first[name] = time.perf_counter() - t0
    times, probes = {k: [] for k in variants}, {}
    for _ in range(repeats):
        for name, v in variants.items():
            t0 = time.perf_counter()
            probes[name] = fit(v)
            synchronize(device)
            times[name].append(time.perf_counter() - t0)
    sub = f"{x.shape[0]} rows x {y.shape[1]} cls, {max_iter} iterations"
    return {k: (probes[k], from_times(times[k], label="whole fit", sub_label=sub, description=k)) for k in variants}, first


def fit_summary(probe, m) -> dict:
    """What a whole fit did: its median time, iterations, time per iteration, fallbacks, frozen share."""
    n_iter = probe.n_iter_.double()
    c = probe.counters_
    # per iteration = fit time / mean iterations per class: a class that stopped early costs nothing after
    return dict(fit_s=m.median, max_iter_run=int(n_iter.max()), mean_class_iters=float(n_iter.mean()),
                s_per_iter=m.median / max(1.0, float(n_iter.mean())), fallbacks=c["fallback_coord_iters"],
                zero_grad_fallbacks=c["zero_grad_fallback_coord_iters"],
                frozen_share=c.get("frozen_coords", 0) / probe.coef_.numel())


def fit_line(name: str, f: dict, m) -> str:
    line = (f"{name:18s} fit {fmt(m):>28s}  {f['mean_class_iters']:5.1f} iterations per class (max {f['max_iter_run']})  "
            f"{fmt_seconds(f['s_per_iter']):>9s} per iteration  fallbacks {f['fallbacks']} "
            f"({f['zero_grad_fallbacks']} at zero gradient)")
    return line + (f"  frozen {100 * f['frozen_share']:.3g}% of coordinates" if "optimized" in name else "")


def _sigmoid_kernel(device, n: int = 2**24):
    """torch.sigmoid over n float32 values (2^22 at most on a CPU), out of place. -> (fn, n)"""
    dev = torch.device(device)
    n = n if dev.type != "cpu" else min(n, 2**22)
    z, out = torch.randn(n, device=dev), torch.empty(n, device=dev)
    return (lambda: torch.sigmoid(z, out=out)), n


def _copy_mib(device) -> int:
    return 256 if torch.device(device).type != "cpu" else 64   # >= 4x the last-level cache: streams from memory


def sigmoid_throughput(device, n: int = 2**24, **measure_kw) -> tuple[float, object]:
    """Measured sigmoid evaluations per second on `device` (float32, out of place, all torch threads)."""
    dev = torch.device(device)
    fn, n = _sigmoid_kernel(dev, n)
    m = measure(fn, label="floor", sub_label=f"sigmoid {n}", description=str(dev), device=dev, **measure_kw)
    return n / m.median, m


def iteration_floor(n_events: int, n_lat: int, n_cls: int, bandwidth: float, sigmoid_rate: float) -> dict:
    """Least time one LM iteration can take: read every value once (4 B) and read/write each
    coordinate's (b, w) and its six sums once (32 B per float32 coordinate), and evaluate one sigmoid
    per (event, class) pair. The iteration is bound by the larger of the two."""
    nbytes = 4 * n_events + 32 * n_lat * n_cls
    sigmoids = n_events * n_cls
    t_bytes, t_sig = nbytes / bandwidth, sigmoids / sigmoid_rate
    return dict(bytes=nbytes, sigmoids=sigmoids, t_bytes=t_bytes, t_sigmoid=t_sig, floor_s=max(t_bytes, t_sig),
                bound="sigmoid throughput" if t_sig >= t_bytes else "memory bandwidth")


def measure_floor(n_events: int, n_lat: int, n_cls: int, *, device, **timing) -> dict:
    """`iteration_floor` at this device's measured copy bandwidth and sigmoid throughput, with the range
    of the floor over the p20/p80 of both measurements ("low", "high", seconds)."""
    from ..kit.bench import memory_bandwidth, summary

    bw, m_bw = memory_bandwidth(device, nbytes=_copy_mib(device) * 2**20, **timing)
    rate, m_sig = sigmoid_throughput(device, **timing)
    floor = iteration_floor(n_events, n_lat, n_cls, bw, rate)
    ends = []
    for q in ("p20_s", "p80_s"):   # a slower block means a lower rate: a higher floor
        ends.append(iteration_floor(n_events, n_lat, n_cls, bw * m_bw.median / summary(m_bw)[q],
                                    rate * m_sig.median / summary(m_sig)[q])["floor_s"])
    return dict(floor, bandwidth=bw, sigmoid_rate=rate, m_bandwidth=m_bw, m_sigmoid=m_sig, low=ends[0], high=ends[1])


def above_floor(m, floor: dict) -> dict:
    """How many times the floor a Measurement is: median / floor, with the range p20 / high .. p80 / low."""
    from ..kit.bench import summary

    s = summary(m)
    return dict(ratio=m.median / floor["floor_s"], low=s["p20_s"] / floor["high"], high=s["p80_s"] / floor["low"])


# ---- notebook 02: the timed claims, decided in paired rounds ----------------------------------------------

def decide_iteration_speedup(x, y, pair: dict[str, Variant], *, device, max_run_time: float, **rule):
    """The baseline's LM iteration against the optimized one (`pair`: {"baseline": Variant, "optimized": Variant},
    as the sweep's) in paired rounds, `perflab.kit.verdicts.decide_speedup` against `rule` (a claim's thresholds:
    `claim.decide(decide_iteration_speedup, x, y, pair, cfg=cfg, device=device)` passes them).
    Like against like: the whole iteration on both sides, or, where the baseline's knobs set `baseline_slabs` k > 0
    (a GPU preset's seed shapes: a whole baseline iteration is minutes), the first k slabs' classes on both sides (a
    part timed and scaled up would be an estimate, not a measurement). Both warm (the optimized plan built, its graphs
    compiled by an earlier fit). -> Decision"""
    from ..kit.verdicts import decide_speedup

    b, o = pair["baseline"], pair["optimized"]
    _, base, _ = iteration_callable(b, x, y, device=device)
    _, opt, _ = iteration_callable(o, x, y[:, :part_classes(b.knobs, y.shape[1])], device=device)
    return decide_speedup(base, opt, **rule, max_run_time=max_run_time, device=device)


def part_classes(baseline_config: dict, n_classes: int) -> int:
    """The classes a verdict's pair runs on: all, or the first `baseline_slabs` slabs' (`decide_iteration_speedup`)."""
    k = baseline_config.get("baseline_slabs", 0)
    return min(n_classes, k * baseline_config.get("class_slab_size", 8)) if k else n_classes


def floor_kernel(floor: dict, device):
    """The kernel whose throughput sets `floor` (`iteration_floor`'s: its "bound"), at a fixed size, and the factor
    from its seconds per call to the floor's seconds. -> (fn, factor)"""
    if floor["bound"] == "sigmoid throughput":
        fn, n = _sigmoid_kernel(device)
        return fn, floor["sigmoids"] / n
    n = _copy_mib(device) * 2**20 // 4
    src = torch.rand(n, device=torch.device(device))
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), floor["bytes"] / (8 * n)      # a copy reads and writes 4 B per value


def decide_floor(x, y, config: dict, floor: dict, rule: dict, *, device, max_run_time: float):
    """How many times the floor the optimized LM iteration takes (`config`: the optimized solver's), decided against
    `rule` in paired rounds of the iteration and of the floor's kernel (`floor_kernel`): the ratio of their mean
    times, the kernel's scaled to the floor's work (`perflab.kit.verdicts.decide_speedup`, quantity "times the
    floor"). The floor's other part (bytes or sigmoids, whichever is smaller at the medians of `measure_floor`) is
    left out. -> Decision"""
    from ..kit.verdicts import decide_speedup

    _, opt, _ = iteration_callable(IMPLS.variant("optimized", **config), x, y, device=device)
    kernel, per_call = floor_kernel(floor, device)
    return decide_speedup(opt, kernel, **rule, scale=1 / per_call, quantity="times the floor",
                          max_run_time=max_run_time, device=device)


# ---- the claims' evidence (`PROFILE_CLAIMS.judge`, `SLAB_CLAIMS.judge`) -----------------------------------------

def share_measured(profiles: list, needle: str) -> Measured:
    """The mean share of `needle` over repeated profiles of the same fit, with its SHARE_CONFIDENCE interval."""
    return Measured.from_samples([p.share(needle) for p in profiles], confidence=SHARE_CONFIDENCE)


def _factor(share: float, seed: float) -> float:
    return math.inf if share <= 0 else max(share / seed, seed / share)


def factor_from_seed(m: Measured, seed: float) -> Measured:
    """A share's interval as the factor between it and the seed's share (module doc)."""
    ends = (_factor(m.low, seed), _factor(m.high, seed))
    low = 1.0 if m.low <= seed <= m.high else min(ends)
    v = _factor(m.value, seed)
    return Measured(v, min(low, v), max(max(ends), v))


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%" if math.isfinite(x) else ("-inf" if x < 0 else "inf")


def profile_evidence(run, profiles: list, optimized, fits: dict) -> dict:
    """Notebook 01's claims' measurements, keyed by claim (what `PROFILE_CLAIMS.judge` takes): the shares of the
    baseline's plain profiles (`profiles`; `optimized`: one profile of the optimized fit) on the run's device and the
    zero-gradient fallback counts of `fits`."""
    device_type = run.device.type
    found = {}
    for key, (_, needle, seed) in SEED_SHARES.items():
        m = share_measured(profiles, needle)
        text = (f"baseline {_pct(m.value)} on {device_type} (mean of {len(profiles)} profiles, "
                f"{SHARE_CONFIDENCE:.0%} interval {_pct(m.low)} to {_pct(m.high)}); optimized "
                f"{_pct(optimized.share(needle))}")
        if PROFILE_CLAIMS[key].off_setup(None, device_type):     # a GPU mechanism, on another device
            text += f"; a GPU mechanism: {GPU_MECHANISM[key]}"
        found[key] = (factor_from_seed(m, seed), text)
    cb, co = fits["baseline"].counters_, fits["optimized"].counters_
    zb, zo = cb["zero_grad_fallback_coords"], co["zero_grad_fallback_coords"]
    n_lat, n_cls = fits["baseline"].coef_.shape
    found["zero_grad_fallback"] = (Measured.exact(zb), f"baseline: {zb} distinct coordinates, "
                                   f"{cb['zero_grad_fallback_coord_iters']} fallbacks over the fit ({n_lat} latents "
                                   f"x {n_cls} classes)")
    found["zero_grad_exit"] = (Measured.exact(zo), f"optimized: {zo} coordinates in the fallback, "
                               f"{co['zero_grad_skipped_coords']} skipped before the LM tries")
    return found


def breakdown(columns: dict) -> object:
    """The seed's frames and shares beside ours: {label: a Profile, or a list of profiles of the same fit (median
    share, with its SHARE_CONFIDENCE interval)}. -> pandas DataFrame, shares in % to 3 significant figures."""
    import pandas as pd

    out = []
    for frame, needle, seed in SEED_BREAKDOWN:
        r = {"frame": frame, "claimed (seed, A100)": f"{100 * seed:.1f}%"}
        for label, profs in columns.items():
            m = share_measured(profs if isinstance(profs, list) else [profs], needle)
            r[label] = _pct(m.value) + (f" ({_pct(m.low)} to {_pct(m.high)})" if isinstance(profs, list) else "")
        out.append(r)
    return pd.DataFrame(out)


def rng(d: dict, unit: str = "x") -> str:
    """'15.1x (p20-p80 11.5-16.9x)' from {"ratio", "low", "high"}: a table's spread, not a verdict's interval."""
    return f"{num(d['ratio'], True)}{unit} (p20-p80 {num(d['low'], True)}-{num(d['high'], True)}{unit})"


def hook_sentence(costs: dict) -> str:
    """The seed's second profile (iteration hook + debug logging on), timed: {impl: hook_cost(...)}."""
    parts = [f"{impl} {rng(c)} of the plain fit's time" for impl, c in costs.items()]
    within = all(c["low"] <= 1.0 <= c["high"] for c in costs.values())
    return ("iteration hook + debug logging: " + "; ".join(parts)
            + ("; every p20-p80 range includes 1" if within else ""))


def extrapolate_job(seconds_per_pair_event: float, job: dict = SEED_JOB) -> float:
    """Hours for the seed's whole job (nnz x classes x iterations) at a measured cost per (event, class)."""
    return seconds_per_pair_event * job["nnz"] * job["n_classes"] * job["max_iter"] / 3600.0


def decide_slab_claims(x, y, pair: dict, floor: dict, *, cfg, device) -> dict[str, Decision]:
    """Notebook 02's timed claims, each decided in paired rounds of at most `cfg.verdict_time` seconds: the speed
    claims whose setup is this run's (`decide_speedup` of the whole LM iteration) and the distance from `floor`
    (`decide_floor`). `pair`: {"baseline": Variant, "optimized": Variant} as the sweep's.
    -> {key: Decision}"""
    out = {}
    for c in SPEED_CLAIMS:
        d = c.decide(decide_iteration_speedup, x, y, pair, cfg=cfg, device=device)
        if d is not None:
            out[c.key] = d
    out[FLOOR_CLAIM.key] = decide_floor(x, y, pair["optimized"].knobs, floor, FLOOR_CLAIM.rule, device=device,
                                              max_run_time=cfg.verdict_time)
    return out


def _x(d: Decision, unit: str = "x") -> str:
    return num_interval(d.value, d.low, d.high, unit)


def evidence(run, decisions: dict, *, default: dict, side: dict, fit: dict, fits: dict, qx_ok: bool, hours: dict,
             above: dict, floor: dict, mode: str) -> dict:
    """Notebook 02's claims' measurements, keyed by claim (what `SLAB_CLAIMS.judge` takes), on the run's device with
    its `baseline_slabs` (0: all). `decisions`: `decide_slab_claims`'s; `default`: the
    sweep's row at the default size; `side`: {mode: ratio dict} of the side-by-side cell; `fit`: the whole-fit ratio
    dict; `fits`: {name: summary dict} of the whole fits; `hours`: the job extrapolated per impl; `above`: the
    sweep's optimized iteration over the floor (ratio dict); `mode`: the compile setting's label. Tables' numbers
    (p20-p80) ride along in the sentences."""
    device_type, slabs = run.device.type, run.cfg.baseline_slabs
    size = f"{default['n_rows']} rows x {default['n_classes']} classes"
    part = part_classes(dict(baseline_slabs=slabs), default["n_classes"])
    how = (f"one whole LM iteration at {size} ({mode})" if part == default["n_classes"] else
           f"one LM iteration of the first {slabs} slab(s) of 8 classes, {default['n_rows']} rows x {part} classes on "
           f"both sides ({mode})")
    tables = f"the sweep {rng(default)}; side by side: " + "; ".join(f"{k} {rng(v)}" for k, v in side.items())
    found = {}
    for c in SPEED_CLAIMS[:2]:
        d = decisions.get(c.key)
        found[c.key] = ((d, f"{_x(d)} per LM iteration, {how}: {d.how}; {tables}") if d is not None else
                        (None, f"on {device_type} at {size}: {tables}" + (f"; {c.why_not}" if c.why_not else "")))
    job = decisions.get("job_18h")
    found["job_18h"] = (job, (f"{_x(job)} per LM iteration ({how}: {job.how}): 18 h -> "
                              f"{num(SEED_JOB['hours'] / job.value)} h; "
                              if job is not None else "") +
                        f"extrapolated on {device_type}: baseline {num(hours['baseline'])} h, optimized "
                        f"{num(hours['optimized'])} h at full activity; whole fit {rng(fit)}")
    d = decisions.get(FLOOR_CLAIM.key)
    found[FLOOR_CLAIM.key] = (d, (f"{_x(d, 'x the floor')} (the optimized iteration, {mode}, against the floor's "
                                  f"kernel: {floor['bound']}; {d.how}); " if d is not None else "")
                              + f"the sweep's median {rng(above, 'x the floor')}")
    f32, f64, fb = fits["optimized float32"], fits["optimized float64"], fits["baseline"]
    num32 = (fb["fallbacks"] - fb["zero_grad_fallbacks"]) + (f32["fallbacks"] - f32["zero_grad_fallbacks"])
    num64 = f64["fallbacks"] - f64["zero_grad_fallbacks"]
    found["float64"] = (Measured.exact(max(0, num32 - num64)),
                        f"fallbacks not at a zero gradient: {num32} with float32 sums (baseline and optimized), "
                        f"{num64} with float64; all {fb['fallbacks']} baseline fallbacks: {fb['zero_grad_fallbacks']} "
                        f"at an exactly zero gradient; coordinates converged float32 {100 * f32['frozen_share']:.3g}%, "
                        f"float64 {100 * f64['frozen_share']:.3g}%")
    found["qx"] = (Measured.exact(1.0 if qx_ok else 0.0), "qx comes out of the plan's one sparse product (with the "
                   "label sums); " + ("equal to the separate pass (1e-6)" if qx_ok else "NOT equal to the separate pass"))
    return found
