"""Notebook 02's study: the versions, one LM iteration as a timed callable, the floor, the paired rounds that decide
the timed claims, the findings the notebook fills in, and the claims' evidence. In the notebook's order
(`checks`: the correctness cells; `benchmarks`: the sweeps and fits of the tables; `figures`: the figures):

    found = study.Findings(source=study.inputs(run))          the data (generated or yours), cut to each size
    found.compiled = checks.compile_first(run)                the first compiled fit, its compile timed apart
    found.checks = report_checks(run, checks.slab_checks(run, found.compiled))
    found.floor = study.the_floor(run, found)                 the floor of one LM iteration at the default size
    found.decisions = study.decide_claims(run, found)         the timed claims, in paired rounds
    found.sweep = benchmarks.size_sweep(run, found)           seconds per LM iteration as sizes grow
    found.fits = benchmarks.whole_fits(run, found)            whole fits: freezing, float32 against float64 sums
    rows = card.judge(study.evidence(run, found))             every claim, from `found` alone

"One LM iteration" means: every (latent, class) coordinate advanced by one LM iteration, i.e. for the baseline one
iteration of every class slab, for the optimized solver one iteration of every class pass, from a fresh start (all
coordinates active: the most work an iteration ever does).

A claim's verdict comes from paired rounds (`decide_iteration_speedup`, `decide_floor`: the kit's `decide_speedup`,
the ratio of mean times, a 99% interval, sequential stopping within a time budget); the tables' and figures' timings
are `torch.utils.benchmark` Measurements taken side by side (`benchmarks`), shown as context ("indicative") beside
the judged number where they compare the same thing.

IMPLS names the versions (each `Sparse1DProbe`, same arguments; `perflab.kit.versions.Versions`): the one place that
does. Where a parameter names a version ("baseline", "optimized"), `IMPLS[name]` looks it up (an unknown name is
refused with the names there are).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings

import torch

from ..kit.bench import measure
from ..kit.claims import Evidence, verdict_text
from ..kit.env import pick_device
from ..kit.formatting import fmt_seconds, num, value_text
from ..kit.verdicts import Decision, Measured
from ..kit.versions import GridResult, Part, Variant, Versions
from . import baseline, optimized
from .claims import FLOOR_CLAIM, QX_CHECK, SEED_JOB, SLAB_CLAIMS, SPEED_CLAIMS, slab_headline
from .data import DataSource
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


# ---- the findings, and what the notebook's cells call ----------------------------------------------------------

@dataclasses.dataclass
class Findings:
    """What notebook 02 measures, one field per measuring function, filled in as it runs: `evidence` reads it, so a
    claim is judged on the very numbers the cells above it showed."""
    source: DataSource | None = None    # the data, cut to each size (inputs)
    compiled: dict | None = None        # the first compiled fit: seconds, graphs, the probe (checks.compile_first)
    checks: list | None = None          # the correctness checks as reported (checks.slab_checks)
    floor: dict | None = None           # the floor of one LM iteration at the default size (the_floor)
    decisions: dict | None = None       # {claim key: Decision}: the timed claims (decide_claims)
    sweep: list | None = None           # one row per size: both versions' Measurements (benchmarks.size_sweep)
    fits: dict | None = None            # {name: fit_summary} of the whole fits (benchmarks.whole_fits)
    modes: dict | None = None           # eager and compiled side by side, with their tile sums (benchmarks.modes)
    slabs: GridResult | None = None     # classes per slab or pass (benchmarks.slabs)

    def data(self, cfg) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) at the default size (the first rows and classes of your files, where smaller)."""
        return self.source.get(cfg.n_rows, cfg.n_classes)


def optimized_knobs(cfg) -> dict:
    """The optimized solver's keywords in this run: the memory budget and the compile setting."""
    return dict(memory_budget_mb=cfg.memory_budget_mb, compile=cfg.compile, backend=cfg.backend)


def pair(cfg) -> dict[str, Variant]:
    """The two versions every comparison of 02 times: the baseline (on its first `baseline_slabs` slabs where set)
    and the optimized solver as this run compiles it."""
    return {"baseline": IMPLS.variant("baseline", baseline_slabs=cfg.baseline_slabs),
            "optimized": IMPLS.variant("optimized", **optimized_knobs(cfg))}


def inputs(run) -> DataSource:
    """The notebook's data (generated, or your files cut to each size), printed with the optimized solver's mode."""
    cfg = run.cfg
    source = DataSource(run.device, cfg.n_latents, cfg.l0, cfg.seed, cfg.activations, cfg.labels)
    print(f"{source.kind} data; optimized solver {compile_label(cfg.compile, cfg.backend)}")
    return source


def size_text(x, y) -> str:
    return f"{x.shape[0]} rows x {y.shape[1]} classes"


def the_floor(run, found: Findings) -> dict:
    """The floor of one LM iteration at the default size (`measure_floor`: this device's copy bandwidth and sigmoid
    throughput, measured), logged and printed. -> measure_floor's dict"""
    cfg = run.cfg
    x, y = found.data(cfg)
    floor = measure_floor(x._nnz(), x.shape[1], y.shape[1], device=run.device, min_run_time=cfg.min_run_time,
                          max_run_time=cfg.max_run_time)
    run.log.value("copy bandwidth", floor["bandwidth"] / 1e9, unit="GB/s")
    run.log.value("sigmoid throughput", floor["sigmoid_rate"] / 1e9, unit="G/s")
    run.log.value("LM iteration floor", floor["floor_s"], unit="s", bound=floor["bound"], low=floor["low"],
                  high=floor["high"])
    print(floor_sentence(floor, x, y))
    return floor


def floor_sentence(floor: dict, x, y) -> str:
    """'the floor of one LM iteration at 4096 rows x 32 classes: 4.21 M sigmoids at 2.43 G/s = 1.73 ms ...'"""
    return (f"the floor of one LM iteration at {size_text(x, y)}: {floor['sigmoids'] / 1e6:.3g} M sigmoids at "
            f"{floor['sigmoid_rate'] / 1e9:.3g} G/s = {fmt_seconds(floor['t_sigmoid'])}; {floor['bytes'] / 1e6:.3g} MB "
            f"at {floor['bandwidth'] / 1e9:.3g} GB/s = {fmt_seconds(floor['t_bytes'])}: bound by {floor['bound']}, "
            f"{fmt_seconds(floor['floor_s'])} (p20-p80 of the two rates: {fmt_seconds(floor['low'])} to "
            f"{fmt_seconds(floor['high'])})")


def decide_claims(run, found: Findings) -> dict[str, Decision]:
    """The timed claims at the default size (`decide_slab_claims`: paired rounds of at most `verdict_time` seconds
    each), each printed as the card will show it. -> {claim key: Decision}"""
    x, y = found.data(run.cfg)
    decisions = decide_slab_claims(x, y, pair(run.cfg), found.floor, cfg=run.cfg, device=run.device)
    for key, d in decisions.items():
        what = "the floor" if key == FLOOR_CLAIM.key else "baseline / optimized"
        print(f"{key}: {value_text(d.value, d.low, d.high, SLAB_CLAIMS[key].unit)} {what}, per LM iteration at "
              f"{size_text(x, y)} ({d.how}; {d.seconds:.3g} s)")
    return decisions


def judged_speedup(found: Findings) -> tuple[str, Decision] | None:
    """The speed claim decided in this run, as (key, Decision): the one its figure and tables show at the default
    size; None where none was (another setup than either target's)."""
    return next(((c.key, found.decisions[c.key]) for c in SPEED_CLAIMS[:2] if c.key in (found.decisions or {})), None)


def default_row(found: Findings, cfg) -> dict:
    """The size sweep's row at the default size (`benchmarks.size_sweep` measures it whether or not a sweep holds it)."""
    x, y = found.data(cfg)
    return next(r for r in found.sweep if (r["n_rows"], r["n_classes"]) == (x.shape[0], y.shape[1]))


def job_hours(found: Findings, cfg) -> dict[str, float]:
    """The seed's job (nnz x classes x iterations) in hours at each version's cost per (event, class) pair at the
    default size (the size sweep's medians: indicative, not judged)."""
    row = default_row(found, cfg)
    return {impl: extrapolate_job(row[impl].median / row["pair_events"]) for impl in ("baseline", "optimized")}


def extrapolate_job(seconds_per_pair_event: float, job: dict = SEED_JOB) -> float:
    """Hours for the seed's whole job (nnz x classes x iterations) at a measured cost per (event, class)."""
    return seconds_per_pair_event * job["nnz"] * job["n_classes"] * job["max_iter"] / 3600.0


# ---- one LM iteration, timed ---------------------------------------------------------------------------------

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


def syncs_per_iteration(impl: str, x, y, **config):
    """Host syncs (perflab.kit.syncs counter) of one LM iteration over every class, after setup."""
    from ..kit.syncs import count_host_syncs

    _, one_iteration, _ = iteration_callable(IMPLS.variant(impl, **config), x, y)
    with count_host_syncs(pick_device(config.get("device") or "auto")) as syncs:
        one_iteration()
    return syncs


# ---- the floor ------------------------------------------------------------------------------------------------

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


# ---- the timed claims, decided in paired rounds ----------------------------------------------------------------

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


# ---- the claims' evidence (`SLAB_CLAIMS`, judged by `card.judge`) ------------------------------------------------

def what_was_timed(cfg, x, y) -> str:
    """The iteration a speed verdict timed, in words: whole, or the first slabs' classes on both sides."""
    mode = compile_label(cfg.compile, cfg.backend)
    part = part_classes(dict(baseline_slabs=cfg.baseline_slabs), y.shape[1])
    if part == y.shape[1]:
        return f"one whole LM iteration at {size_text(x, y)}, optimized {mode}"
    return (f"one LM iteration of the first {cfg.baseline_slabs} slab(s) of 8 classes, {x.shape[0]} rows x {part} "
            f"classes on both sides, optimized {mode}")


def fallbacks_float64(fits: dict) -> tuple[int, int]:
    """Fallbacks not at a zero gradient with float32 sums (baseline and optimized) and with float64 sums."""
    f32, f64, fb = fits["optimized float32"], fits["optimized float64"], fits["baseline"]
    num32 = (fb["fallbacks"] - fb["zero_grad_fallbacks"]) + (f32["fallbacks"] - f32["zero_grad_fallbacks"])
    return num32, f64["fallbacks"] - f64["zero_grad_fallbacks"]


def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Every claim of SLAB_CLAIMS from `found` alone (what `card.judge` takes): the speed claims and the floor as
    decided in paired rounds (`found.decisions`; None for a claim about another setup: "not tested here"), the job's
    hours extrapolated from the size sweep's medians, the float64 question from the whole fits' fallback counts, the
    qx question from its correctness check. Each sentence starts with the value the card shows."""
    cfg, device_type = run.cfg, run.device.type
    x, y = found.data(cfg)
    how, got = what_was_timed(cfg, x, y), found.decisions
    out = {}
    for c in SPEED_CLAIMS[:2]:
        d = got.get(c.key)
        out[c.key] = (Evidence(d, f"{_value(d, c.unit)} baseline / optimized seconds per LM iteration, {how} "
                                  f"({d.how})") if d is not None else
                      Evidence(None, f"not timed: this run is {device_type} at {size_text(x, y)}, {cfg.n_latents} "
                                     f"latents, L0 {cfg.l0}"))
    hours = job_hours(found, cfg)
    extrapolated = (f"the job extrapolated from the size sweep's medians (indicative): baseline {num(hours['baseline'])} "
                    f"h, optimized {num(hours['optimized'])} h on {device_type}")
    job = got.get("job_18h")
    out["job_18h"] = Evidence(job, (f"{_value(job, 'x')} per LM iteration ({how}; {job.how}): 18 h -> "
                                    f"{num(SEED_JOB['hours'] / job.value, True)} h; " if job is not None else "")
                              + extrapolated)
    d = got[FLOOR_CLAIM.key]
    out[FLOOR_CLAIM.key] = Evidence(d, f"{_value(d, FLOOR_CLAIM.unit)} the floor: optimized seconds per LM iteration "
                                       f"({compile_label(cfg.compile, cfg.backend)}) over the floor's "
                                       f"({found.floor['bound']}, its kernel scaled to the floor's work; {d.how})")
    fb, f32, f64 = (found.fits[k] for k in ("baseline", "optimized float32", "optimized float64"))
    num32, num64 = fallbacks_float64(found.fits)
    out["float64"] = Evidence(Measured.exact(max(0, num32 - num64)),
                              f"{max(0, num32 - num64)} fallbacks removed: not at a zero gradient {num32} with float32 "
                              f"sums (baseline and optimized), {num64} with float64; all {fb['fallbacks']} baseline "
                              f"fallbacks: {fb['zero_grad_fallbacks']} at an exactly zero gradient; coordinates "
                              f"converged float32 {100 * f32['frozen_share']:.3g}%, float64 "
                              f"{100 * f64['frozen_share']:.3g}%")
    qx = next(c for c in found.checks if c.name == QX_CHECK)
    got_qx = 1.0 if qx.passed else 0.0
    out["qx"] = Evidence(Measured.exact(got_qx), f"{value_text(got_qx, got_qx, got_qx, 'bool')}: qx comes out of the "
                         "plan's one sparse product (with the label sums); " + ("equal to the separate pass (1e-6)"
                                                                                 if qx.passed else "NOT equal to the "
                                                                                 "separate pass"))
    return out


def _value(d: Decision, unit: str) -> str:
    return value_text(d.value, d.low, d.high, unit)


def lead_the_report(run, rows) -> None:
    """On a GPU the 100x target leads `perflab report` (`claims.slab_headline`), not the CPU's 10x: logged as the
    run's headline after the card's (which is CLAIMS' own)."""
    key = slab_headline(run.device.type)
    if key != SLAB_CLAIMS.headline:
        row = next(r for r in rows if r.key == key)
        run.log.headline(f"{row.claim}: {row.measured} [{verdict_text(row)}]", key=key)
