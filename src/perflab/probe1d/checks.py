"""The notebooks' correctness checks: each a `perflab.kit.claims.Check` (name, passed, detail), whose detail says what
was measured beside the rule ("largest difference 3.1e-7, allowed 1e-4"), so a failed check's row says what went
wrong. The measured numbers vary with the machine's float rounding: print them in cells nbval does not compare.

    fits, checks = profile_checks(x, y, max_iter=8, class_slab_size=8, device=device)   # notebook 01
    found.compiled = compile_first(run)                                                   # notebook 02: then
    found.checks = report_checks(run, slab_checks(run, found.compiled))                   # solver_checks, logged
    small_fit_counters()                                                                  # 02's checked counters

`report_checks` (perflab.kit.claims) logs each check with its gap (`Check.value`), prints the PASS/FAIL lines and
raises AssertionError if any failed.

Every optimized path is checked against the dense float64 oracle (`Reference1DProbe`); tolerances are
explained where they are set.
"""
from __future__ import annotations

import numpy as np
import torch

from ..kit.claims import Check
from .claims import QX_CHECK  # notebook 02's qx claim reads this check
from .data import make_activations
from .probe import Sparse1DProbeBase
from .reference import Reference1DProbe
from .study import IMPLS, compile_label, quiet_fit


def agreement(a, b, x, y, tol: float = 1e-4) -> dict:
    """Do two fitted probes (or a probe and a Reference1DProbe) give the same losses (mean BCE, within
    `tol`) and the same confusion counts at threshold 0.5? Counts are compared exactly."""
    la, *ca = [np.asarray(t.cpu() if hasattr(t, "cpu") else t, dtype=np.float64) for t in a.loss_matrix_with_aux(x, y)]
    lb, *cb = [np.asarray(t.cpu() if hasattr(t, "cpu") else t, dtype=np.float64) for t in b.loss_matrix_with_aux(x, y)]
    loss_diff = float(np.abs(la - lb).max())
    count_diff = int(max(np.abs(p - q).max() for p, q in zip(ca, cb)))
    return dict(loss_ok=loss_diff <= tol, counts_equal=count_diff == 0, loss_max_diff=loss_diff,
                count_max_diff=count_diff, n=int(la.size))


def _g(x: float) -> str:
    """2 significant figures with a short exponent: 3.1e-7, not 3.1e-07."""
    return f"{x:.2g}".replace("e-0", "e-")


def _agreement_checks(loss_name: str, counts_name: str, a: dict, tol: float) -> list[Check]:
    return [Check(loss_name, a["loss_ok"], f"largest difference {_g(a['loss_max_diff'])}, allowed {tol:.0e}, over "
                  f"{a['n']} (latent, class) pairs".replace("e-0", "e-"), a["loss_max_diff"]),
            Check(counts_name, a["counts_equal"], f"largest count difference {a['count_max_diff']} at threshold 0.5, "
                  f"allowed 0")]


# ---- notebook 01: the profiled fits ---------------------------------------------------------------------

def profile_checks(x, y, *, max_iter: int, class_slab_size: int, **solver_kw) -> tuple[dict, list[Check]]:
    """Fit baseline (slabs of `class_slab_size`) and optimized (all classes per pass) for `max_iter`
    iterations; check both against the float64 oracle, and the zero-gradient fallbacks: the baseline's all
    on latents that never fire, the optimized solver's none. -> ({impl: fitted probe}, checks)"""
    ref = Reference1DProbe(max_iter=max_iter).fit(x.cpu(), y.cpu())
    slab_kw = {"baseline": dict(class_slab_size=class_slab_size), "optimized": {}}
    fits = {impl: quiet_fit(probe(max_iter=max_iter, **slab_kw[impl], **solver_kw), x, y)
            for impl, probe in IMPLS.items()}
    checks = []
    for impl, probe in fits.items():
        # float32 sums over a few hundred rows per coordinate: 1e-4 on the mean BCE
        a = agreement(probe, ref, x.cpu(), y.cpu(), tol=1e-4)
        checks += _agreement_checks(f"{impl} loss matrix within 1e-4 of the float64 reference",
                                    f"{impl} confusion counts equal to the reference", a, 1e-4)
    cb, co = fits["baseline"].counters_, fits["optimized"].counters_
    zero_b, on_empty = cb["zero_grad_fallback_coords"], cb["zero_grad_fallback_on_empty_latents"]
    zero_o, fb_o = co["zero_grad_fallback_coords"], co["fallback_coord_iters"]
    checks += [
        Check("baseline: zero-gradient coordinates enter the LM fallback", zero_b > 0, f"{zero_b} coordinates, need > 0"),
        Check("baseline: all of them on latents that never fire", on_empty == zero_b,
              f"{on_empty} of the {zero_b} on latents that never fire"),
        Check("optimized: zero-gradient coordinates entering the fallback == 0", zero_o == 0, f"{zero_o} coordinates"),
        Check("optimized: no LM fallback at all", fb_o == 0, f"{fb_o} fallbacks over the fit"),
    ]
    return fits, checks


def sync_checks(sync_counts: dict, n_rows: int, n_slabs: int) -> list[Check]:
    """Host syncs per LM iteration (perflab.kit.syncs counters): one for the optimized solver, at least one
    `.item()` per row per slab for the baseline (its row walk)."""
    opt, items = sync_counts["optimized"], sync_counts["baseline"].by_op.get("item", 0)
    by_op = ", ".join(f"{k} {v}" for k, v in sorted(opt.by_op.items())) or "none"
    return [
        Check("optimized: exactly one host sync per LM iteration", opt.total == 1,
              f"{opt.total} host sync{'s' if opt.total != 1 else ''}: {by_op}"),
        Check("baseline: at least one .item() per row per slab", items >= n_rows * n_slabs,
              f"{items} .item() calls, need >= {n_rows * n_slabs} = {n_rows} rows x {n_slabs} slabs"),
    ]


# ---- notebook 02: the solvers on a small awkward problem ------------------------------------------------



def small_problem() -> tuple[torch.Tensor, torch.Tensor]:
    """157 rows x 13 latents x 6 classes: awkward sizes, latents that never fire, a class with no positives."""
    xs, ys = make_activations(157, 13, 5, l0=5, seed=3, frac_empty=0.15)
    return xs, torch.cat([ys, torch.zeros(157, 1, dtype=ys.dtype)], 1)


def fit_small(impl: str, **kw) -> Sparse1DProbeBase:
    """Version `impl` (a name in study.IMPLS) fitted on `small_problem()` on the CPU."""
    xs, ys = small_problem()
    return quiet_fit(IMPLS[impl](device="cpu", **kw), xs, ys)


def _gap(p, ref, cols=slice(None)) -> tuple[bool, float]:
    """Do (b, w) of fitted probe `p` agree with `ref`'s within 1e-4 + 1e-4 |ref| (float32 weights and sums), on the
    classes `cols`? -> (passed, largest |difference|)"""
    pairs = [(np.asarray(a)[:, cols], np.asarray(b)[:, cols]) for a, b in ((p.coef_, ref.coef_),
                                                                        (p.intercept_, ref.intercept_))]
    ok = all(np.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in pairs)
    return ok, float(max(np.abs(a - b).max() for a, b in pairs))


def _bw_check(name: str, p, ref, cols=slice(None)) -> Check:
    ok, gap = _gap(p, ref, cols)
    left_out = "; the class with no positives left out" if cols != slice(None) else ""
    return Check(name, ok, f"largest difference {_g(gap)}, allowed 1e-4 + 1e-4 x |reference|{left_out}", gap)


def solver_checks(compile: str = "off", backend: str = "inductor", compiled3: Sparse1DProbeBase | None = None,
                  label: str = "compiled") -> list[Check]:
    """Baseline, optimized (float32 and float64 sums, and compiled unless `compile` is "off") against the
    float64 oracle after 3 iterations ((b, w) within 1e-4: float32 weights and sums) and after 40 (loss
    matrix within 1e-4, confusion counts exact), against each other, and qx from the plan's product.

    The baseline's (b, w) are compared without the class that has no positives: there its
    `binary_cross_entropy_with_logits` rounds each ~1e-7 loss term to multiples of 1.2e-7 and its damping
    drifts from the oracle's (tests/probe1d/test_probe1d_fits_vs_reference.py). `compiled3`: the compiled
    3-iteration fit if it was already run (its compile timed apart)."""
    xs, ys = small_problem()
    ref3, ref40 = Reference1DProbe(max_iter=3, tol=0.0).fit(xs, ys), Reference1DProbe(max_iter=40).fit(xs, ys)
    variants = {"baseline": IMPLS.variant("baseline"), "optimized": IMPLS.variant("optimized"),
                "optimized float64": IMPLS.variant("optimized", accum_dtype="float64")}
    if compile != "off":
        variants[f"optimized {label}"] = IMPLS.variant("optimized", compile=compile, backend=backend)
    runs3 = {name: compiled3 if compiled3 is not None and "compile" in v.knobs else
             fit_small(v.version, max_iter=3, tol=0.0, **v.knobs) for name, v in variants.items()}
    no_empty_class = slice(0, -1)
    checks = [_bw_check(f"{name}: (b, w) after 3 iterations within 1e-4 of the reference", p, ref3,
                        no_empty_class if name == "baseline" else slice(None)) for name, p in runs3.items()]
    for name, v in variants.items():
        if name == "optimized float64":
            continue
        a = agreement(fit_small(v.version, max_iter=40, **v.knobs), ref40, xs, ys, tol=1e-4)
        checks += _agreement_checks(f"{name}: loss matrix after 40 iterations within 1e-4 of the reference",
                                    f"{name}: confusion counts equal to the reference", a, 1e-4)
    checks.append(_bw_check("baseline and optimized: (b, w) after 3 iterations within 1e-4 of each other",
                            runs3["optimized"], runs3["baseline"], no_empty_class))
    qs = IMPLS["optimized"](device="cpu").solver.plan(xs, ys).qx
    qb = IMPLS["baseline"](device="cpu").solver._latent_scale(xs, xs.shape[1])[1][:, 0]
    gap = float((qs - qb).abs().max())
    checks.append(Check(QX_CHECK, bool(torch.allclose(qs, qb, rtol=1e-6, atol=1e-6)),
                        f"largest difference {_g(gap)}, allowed 1e-6 + 1e-6 x |qx|", gap))
    return checks


def compile_first(run) -> dict | None:
    """Notebook 02's first compiled fit (3 LM iterations of the small problem), its compile timed apart: it builds
    every graph, so no measurement after it pays a compile (each one warms up first too). Logged and printed.
    -> {"seconds", "graphs", "probe"}, or None for an eager run"""
    import time

    from ..kit.compiles import count_compiles

    cfg = run.cfg
    if cfg.compile == "off":
        return None
    with count_compiles() as cc:
        t0 = time.perf_counter()
        probe = fit_small("optimized", max_iter=3, tol=0.0, compile=cfg.compile, backend=cfg.backend)
    seconds = time.perf_counter() - t0
    run.log.value("first compiled fit", seconds, unit="s", graphs=cc.graphs, compile=cfg.compile, backend=cfg.backend)
    print(f"first compiled fit ({cfg.compile}, {cfg.backend}; 3 LM iterations of the 157-row problem): {seconds:.3g} s, "
          f"{cc.graphs} graphs compiled; sizes are dynamic, so every size below reuses them (a fit that reaches "
          f"one-column pair lists compiles one more)")
    return dict(seconds=seconds, graphs=cc.graphs, probe=probe)


def slab_checks(run, compiled: dict | None) -> list[Check]:
    """Notebook 02's checks (`solver_checks`) as this run compiles the optimized solver; `compiled`: compile_first's."""
    cfg = run.cfg
    return solver_checks(cfg.compile, cfg.backend, compiled["probe"] if compiled else None,
                         label=compile_label(cfg.compile, cfg.backend))


def small_fit_counters() -> None:
    """The counters of the whole-fit table on the small seeded problem (eager, 40 iterations, a class with no
    positives), printed for nbval to pin (counts, the same under other CPU kernels: `make nbval-kernels`): a
    fallback, a skipped or a frozen coordinate miscounted, or a class run past its convergence, changes them."""
    for impl, kw in (("baseline", {}), ("optimized", dict(accum_dtype="float64"))):
        p = fit_small(impl, max_iter=40, **kw)
        c = p.counters_
        print(f"{impl:9s}: iterations per class {p.n_iter_.tolist()}; fallbacks {c['fallback_coord_iters']} "
              f"({c['zero_grad_fallback_coord_iters']} at zero gradient); zero-gradient coordinates skipped "
              f"{c.get('zero_grad_skipped_coords', 0)}; frozen {c.get('frozen_coords', 0)} of {p.coef_.numel()} "
              f"coordinates")
