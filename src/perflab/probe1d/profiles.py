"""Notebook 01's study: the seed's profiling plan re-run (pyinstrument over a whole fit of the reduced data set, plain
and with the iteration hook and debug logging on), the zero-gradient fallbacks counted, host syncs per LM iteration,
the findings the notebook fills in, and the claims' evidence. In the notebook's order:

    found = profiles.Findings(data=profiles.inputs(run))     the reduced data set (printed)
    found.fits, checks = profiles.correctness(run, found.data)   both solvers fitted and checked (checks.py)
    found.fallbacks = profiles.fallback_counts(run, found.fits)  zero-gradient coordinates in the LM fallback
    found.syncs = profiles.sync_counts(run, found.data)      host syncs per LM iteration, per version
    found.profiles = profiles.profile_fits(run, found.data)  the profiles: `profile_repeats` plain baseline ones, ...
    rows = card.judge(profiles.evidence(run, found))         every claim, from `found` alone
    found.hook = profiles.hook_costs(run, found.data)        the seed's second profile's cost (appendix)

A share is inclusive (a frame's time counts its callees'), the mean over the plain baseline profiles with the t
interval of that mean at SHARE_CONFIDENCE, clipped to [0, 100%] (`share_of_fit`); the table, the figure and the card
print that one number for it.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

from ..kit.claims import Evidence
from ..kit.formatting import fmt_seconds, num, value_text
from ..kit.verdicts import Measured
from . import checks
from .claims import GPU_MECHANISM, SEED_BREAKDOWN, SEED_SHARES, SHARE_CONFIDENCE
from .data import DataSource
from .study import IMPLS, debug_logging, quiet_fit, syncs_per_iteration


class Profiles(NamedTuple):
    """The profiles of one notebook run: the plain baseline's, `profile_repeats` of them (the shares' samples), the
    baseline and the optimized solver with the iteration hook and debug logging on, the plain optimized solver; and
    how often each one's hook was called."""
    baseline: list
    baseline_hooked: object
    optimized: object
    optimized_hooked: object
    hook_calls: dict


@dataclasses.dataclass
class Findings:
    """What notebook 01 measures, one field per measuring function, filled in as it runs: `evidence` reads it."""
    data: tuple | None = None            # (x, y): the reduced data set (inputs)
    fits: dict | None = None             # {version: fitted probe}: the checked fits (correctness)
    fallbacks: dict | None = None        # {version: counts} of zero-gradient coordinates (fallback_counts)
    syncs: dict | None = None            # {version: host syncs of one LM iteration} (sync_counts)
    profiles: Profiles | None = None     # the profiles (profile_fits)
    hook: dict | None = None             # {version: hooked / plain fit time} (hook_costs)


def solver_kw(run) -> dict:
    cfg = run.cfg
    return dict(device=run.device, max_iter=cfg.max_iter, row_batch_size=cfg.row_batch_size)


def slab_kw(run, impl: str) -> dict:
    """The baseline's classes per slab (the seed's 8); the optimized solver takes all classes per pass."""
    return dict(class_slab_size=run.cfg.class_slab_size) if impl == "baseline" else {}


def inputs(run) -> tuple:
    """The reduced data set (generated, or your files cut to `n_rows` x `n_classes`), printed. -> (x, y)"""
    import torch

    cfg = run.cfg
    source = DataSource(run.device, cfg.n_latents, cfg.l0, cfg.seed, cfg.activations, cfg.labels)
    x, y = source.get(cfg.n_rows, cfg.n_classes)
    nnz = torch.bincount(x.col_indices(), minlength=x.shape[1]).cpu()
    print(f"{source.kind} data: {x.shape[0]} rows x {x.shape[1]} latents x {y.shape[1]} classes, {x._nnz()} nonzeros, "
          f"{int((nnz == 0).sum())} latents that never fire")
    return x, y


def correctness(run, data) -> tuple[dict, list]:
    """Both solvers fitted for `max_iter` iterations and checked against the float64 oracle, and their zero-gradient
    fallbacks (`checks.profile_checks`). -> ({version: fitted probe}, checks)"""
    x, y = data
    return checks.profile_checks(x, y, class_slab_size=run.cfg.class_slab_size, **solver_kw(run))


def fallback_counts(run, fits: dict) -> dict:
    """The zero-gradient coordinates of the checked fits: the baseline's that took the LM fallback (distinct, and
    times over the fit), the optimized solver's that entered it and that it skipped before the LM tries; logged and
    printed. -> {"baseline": {...}, "optimized": {...}}"""
    cb, co = fits["baseline"].counters_, fits["optimized"].counters_
    n_lat, n_cls = fits["baseline"].coef_.shape
    out = {"baseline": dict(coords=cb["zero_grad_fallback_coords"], times=cb["zero_grad_fallback_coord_iters"],
                            fallbacks=cb["fallback_coord_iters"], latents=n_lat, classes=n_cls),
           "optimized": dict(coords=co["zero_grad_fallback_coords"], skipped=co["zero_grad_skipped_coords"],
                             fallbacks=co["fallback_coord_iters"])}
    for impl, c in out.items():
        run.log.value("zero-gradient coordinates entering the LM fallback", c["coords"], unit="coordinates", impl=impl)
    b, o = out["baseline"], out["optimized"]
    print(f"baseline : {b['coords']} distinct zero-gradient coordinates took the fallback, {b['times']} times over "
          f"{run.cfg.max_iter} iterations ({b['fallbacks']} fallbacks in all)")
    print(f"optimized: {o['coords']} zero-gradient coordinates entered the fallback, {o['skipped']} skipped before the "
          f"LM tries, {o['fallbacks']} fallbacks")
    return out


def sync_counts(run, data) -> dict:
    """Host syncs of one LM iteration of every class, per version (`study.syncs_per_iteration`), logged and printed.
    -> {version: SyncCount (.total, .by_op)}"""
    x, y = data
    out = {impl: syncs_per_iteration(impl, x, y, **slab_kw(run, impl), **solver_kw(run)) for impl in IMPLS}
    for impl, s in out.items():
        print(f"{impl:9s}: {s.total:6d} host syncs per LM iteration  {dict(s.by_op)}")
        run.log.value("host syncs per LM iteration", s.total, unit="syncs", impl=impl)
    return out


def sync_checks(run, found: Findings) -> list:
    """`checks.sync_checks` on this run's counts: one sync per optimized iteration, a `.item()` per row per slab."""
    x, y = found.data
    return checks.sync_checks(found.syncs, x.shape[0], n_slabs=-(-y.shape[1] // run.cfg.class_slab_size))


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


def profile_fits(run, data) -> Profiles:
    """The profiles, on the same data and iterations: the plain baseline `profile_repeats` times, then each solver
    with the iteration hook and debug logging on (the seed's second profile) and the plain optimized solver; HTML
    and text saved in the run's folder, the fits' seconds logged and printed. -> Profiles"""
    x, y = data
    kw = dict(out_dir=run.dir, interval=run.cfg.interval, **solver_kw(run))
    base = [profile_fit("baseline", x, y, name=f"fit_baseline_{i}", **slab_kw(run, "baseline"), **kw)[0]
            for i in range(run.cfg.profile_repeats)]
    got, calls = {}, {"baseline": 0}
    for impl, hooked in (("baseline", True), ("optimized", False), ("optimized", True)):
        label = impl + (" + hook + debug" if hooked else "")
        got[label], calls[label] = profile_fit(impl, x, y, hook_and_debug=hooked, **slab_kw(run, impl),
                                               name="fit_" + label.replace(" + ", "_"), **kw)
    for label, p in {"baseline": base[0], **got}.items():
        run.log.value("fit seconds under pyinstrument", p.seconds, unit="s", impl=label.split()[0],
                      hook_and_debug="hook" in label)
    print(f"baseline, {len(base)} plain profiles: " + ", ".join(f"{p.seconds:.3g} s" for p in base) + " per fit")
    for label, p in got.items():
        print(f"{label}: {p.seconds:.3g} s (hook calls: {calls[label]})")
    return Profiles(base, got["baseline + hook + debug"], got["optimized"], got["optimized + hook + debug"], calls)


# ---- the shares and the claims' evidence -------------------------------------------------------------------------

def share_of_fit(profiles: list, needle: str) -> Measured:
    """The mean inclusive share of `needle` over repeated profiles of the same fit, with the t interval of that mean at
    SHARE_CONFIDENCE, clipped to [0, 1]: a share cannot leave it, so the clipped interval covers whatever the t
    interval covers (a t interval on 5 samples near 0 reaches below it). One profile: [0, 1]."""
    m = Measured.from_samples([p.share(needle) for p in profiles], confidence=SHARE_CONFIDENCE)
    return Measured(m.value, max(0.0, m.low), min(1.0, m.high))


def share_text(m: Measured) -> str:
    """'81.3% [80.4, 82.2]', '0%' (the card's formatter, in percent)."""
    return value_text(m.value, m.low, m.high, "%")


def _pct(x: float) -> str:
    return value_text(x, x, x, "%")


def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Every claim of PROFILE_CLAIMS from `found` alone (what `card.judge` takes): each seed share as the plain
    baseline profiles' mean share (`share_of_fit`) on this run's device; the zero-gradient coordinates counted
    (`found.fallbacks`: exact). Each sentence starts with the value the card shows."""
    device_type, n = run.device.type, len(found.profiles.baseline)
    out = {}
    for key, (_, needle, _) in SEED_SHARES.items():
        m = share_of_fit(found.profiles.baseline, needle)
        out[key] = Evidence(m, f"{share_text(m)} of fit: the baseline's inclusive share on {device_type}, mean of {n} "
                               f"pyinstrument profiles ({SHARE_CONFIDENCE:.0%} t interval, clipped to [0, 100%]); "
                               f"optimized {_pct(found.profiles.optimized.share(needle))}")
    b, o = found.fallbacks["baseline"], found.fallbacks["optimized"]
    out["zero_grad_fallback"] = Evidence(Measured.exact(b["coords"]), f"{b['coords']} coordinates (distinct, the baseline's), "
                                         f"{b['times']} fallbacks over the fit ({b['latents']} latents x "
                                         f"{b['classes']} classes)")
    out["zero_grad_exit"] = Evidence(Measured.exact(o["coords"]), f"{o['coords']} coordinates (the optimized solver's) in "
                                     f"the fallback, {o['skipped']} skipped before the LM tries")
    return out


def breakdown(profs: Profiles):
    """The seed's frames and shares beside this run's: the plain baseline's mean share with its interval (the one
    the card judges), the hooked baseline's and the optimized solver's single profiles. -> pandas Styler"""
    import pandas as pd

    rows = []
    for frame, needle, seed in SEED_BREAKDOWN:
        key = next(k for k, v in SEED_SHARES.items() if v[1] == needle)
        rows.append({"frame": frame, "the seed (A100, real data)": f"{100 * seed:.1f}%",
                     f"baseline: mean of {len(profs.baseline)} profiles [{SHARE_CONFIDENCE:.0%} interval]":
                     share_text(share_of_fit(profs.baseline, needle)),
                     "judged here": "no: a GPU mechanism" if key in GPU_MECHANISM else "yes",
                     "baseline + hook + debug (1 profile)": _pct(profs.baseline_hooked.share(needle)),
                     "optimized (1 profile)": _pct(profs.optimized.share(needle))})
    return pd.DataFrame(rows).style.hide(axis="index").set_caption(
        "share of Sparse1DProbe.fit, inclusive: the seed's A100 profile against this run's")


def top_frames(profs: Profiles, n: int = 14) -> dict:
    """The first `n` frames of the plain baseline's first profile and of the optimized one, by inclusive time.
    -> {version: pandas Styler}"""
    out = {}
    for impl, p in (("baseline", profs.baseline[0]), ("optimized", profs.optimized)):
        t = p.table[["function", "seconds", "share", "self_seconds"]].head(n).copy()
        t["seconds"], t["self_seconds"] = t["seconds"].map(fmt_seconds), t["self_seconds"].map(fmt_seconds)
        t["share"] = t["share"].map(lambda s: f"{100 * s:.3g}%")
        out[impl] = t.rename(columns={"seconds": "inclusive", "self_seconds": "self"}).style.hide(axis="index") \
            .format(escape="html").set_caption(f"{impl}: the top {n} frames of one profile ({p.seconds:.3g} s)")
    return out


def hook_cost(impl: str, x, y, **solver_kw) -> dict:
    """A fit with an iteration hook and debug logging on, timed against the plain fit side by side.
    -> {"ratio": hooked / plain (medians), "low", "high": its p20/p80 range, "plain", "hooked": Measurements}"""
    from ..kit.bench import measure_interleaved, speedup, speedup_range

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


def hook_costs(run, data) -> dict:
    """The seed's second profile (iteration hook + debug logging on), its cost timed side by side with the plain fit,
    per version; logged and printed (a table's number, median and p20-p80: no claim judges it). -> {version: ...}"""
    x, y = data
    costs = {impl: hook_cost(impl, x, y, **slab_kw(run, impl), **solver_kw(run)) for impl in IMPLS}
    for impl, c in costs.items():
        run.log.value("fit time with hook + debug logging / without", c["ratio"], unit="x", impl=impl,
                      low=c["low"], high=c["high"])
    print(hook_sentence(costs))
    return costs


def hook_sentence(costs: dict) -> str:
    """The seed's second profile (iteration hook + debug logging on), timed: {impl: hook_cost(...)}."""
    parts = [f"{impl} {num(c['ratio'], True)}x (p20-p80 {num(c['low'], True)}-{num(c['high'], True)}x) of the plain "
             f"fit's time" for impl, c in costs.items()]
    within = all(c["low"] <= 1.0 <= c["high"] for c in costs.values())
    return ("iteration hook + debug logging: " + "; ".join(parts)
            + ("; every p20-p80 range includes 1" if within else ""))

