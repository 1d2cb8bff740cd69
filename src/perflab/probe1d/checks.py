"""The notebooks' correctness checks: each returns (name, passed, detail), with a detail that holds on every
device and every run (sizes, tolerances, counts; never a timing), so nbval can compare the printout.

    fits, checks = profile_checks(x, y, max_iter=8, class_slab_size=8, device=device)   # notebook 01
    checks = solver_checks(compile="default", backend="inductor", compiled3=probe)        # notebook 02
    report(run, checks)          # logs, prints PASS/FAIL lines, raises AssertionError if any failed

Every optimized path is checked against the dense float64 oracle (`Reference1DProbe`); tolerances are
explained where they are set.
"""
from __future__ import annotations

import numpy as np
import torch

from .data import make_activations
from .probe import Sparse1DProbe
from .reference import Reference1DProbe
from .study import quiet_fit

Check = tuple[str, bool, str]
IMPLS = ("baseline", "optimized")


def agreement(a, b, x, y, tol: float = 1e-4) -> dict:
    """Do two fitted probes (or a probe and a Reference1DProbe) give the same losses (mean BCE, within
    `tol`) and the same confusion counts at threshold 0.5? Counts are compared exactly."""
    la, *ca = [np.asarray(t.cpu() if hasattr(t, "cpu") else t, dtype=np.float64) for t in a.loss_matrix_with_aux(x, y)]
    lb, *cb = [np.asarray(t.cpu() if hasattr(t, "cpu") else t, dtype=np.float64) for t in b.loss_matrix_with_aux(x, y)]
    loss_diff = float(np.abs(la - lb).max())
    count_diff = int(max(np.abs(p - q).max() for p, q in zip(ca, cb)))
    return dict(loss_ok=loss_diff <= tol, counts_equal=count_diff == 0, loss_max_diff=loss_diff,
                count_max_diff=count_diff, n=int(la.size))


def report(run, checks: list[Check]) -> None:
    """Log every check, print one PASS/FAIL line each, and raise if any failed (correctness fails loudly)."""
    for name, ok, detail in checks:
        run.log.check(name, passed=ok, detail=detail)
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  [{detail}]" if detail else ""))
    failed = [name for name, ok, _ in checks if not ok]
    if failed:
        raise AssertionError(f"correctness checks failed: {failed}")


# ---- notebook 01: the profiled fits ---------------------------------------------------------------------

def profile_checks(x, y, *, max_iter: int, class_slab_size: int, **solver_kw) -> tuple[dict, list[Check]]:
    """Fit baseline (slabs of `class_slab_size`) and optimized (all classes per pass) for `max_iter`
    iterations; check both against the float64 oracle, and the zero-gradient fallbacks: the baseline's all
    on latents that never fire, the optimized solver's none. -> ({impl: fitted probe}, checks)"""
    ref = Reference1DProbe(max_iter=max_iter).fit(x.cpu(), y.cpu())
    slab_kw = {"baseline": dict(class_slab_size=class_slab_size), "optimized": {}}
    fits = {impl: quiet_fit(Sparse1DProbe(impl, max_iter=max_iter, **slab_kw[impl], **solver_kw), x, y)
            for impl in IMPLS}
    size = f"{x.shape[1]} latents x {y.shape[1]} classes"
    checks = []
    for impl, probe in fits.items():
        # float32 sums over a few hundred rows per coordinate: 1e-4 on the mean BCE
        a = agreement(probe, ref, x.cpu(), y.cpu(), tol=1e-4)
        checks += [(f"{impl} loss matrix within 1e-4 of the float64 reference", a["loss_ok"], size),
                   (f"{impl} confusion counts equal to the reference", a["counts_equal"], "threshold 0.5")]
    cb, co = fits["baseline"].counters_, fits["optimized"].counters_
    zero_b = cb["zero_grad_fallback_coords"]
    checks += [
        ("baseline: zero-gradient coordinates enter the LM fallback", zero_b > 0, ""),
        ("baseline: all of them on latents that never fire", cb["zero_grad_fallback_on_empty_latents"] == zero_b, ""),
        ("optimized: zero-gradient coordinates entering the fallback == 0", co["zero_grad_fallback_coords"] == 0,
         f"{co['zero_grad_fallback_coords']} coordinates"),
        ("optimized: no LM fallback at all", co["fallback_coord_iters"] == 0, ""),
    ]
    return fits, checks


def sync_checks(sync_counts: dict, n_rows: int, n_slabs: int) -> list[Check]:
    """Host syncs per LM iteration (perflab.syncs counters): one for the optimized solver, at least one
    `.item()` per row per slab for the baseline (its row walk)."""
    return [
        ("optimized: exactly one host sync per LM iteration", sync_counts["optimized"].total == 1, ""),
        ("baseline: at least one .item() per row per slab",
         sync_counts["baseline"].by_op.get("item", 0) >= n_rows * n_slabs, f"{n_rows} rows x {n_slabs} slabs"),
    ]


# ---- notebook 02: the solvers on a small awkward problem ------------------------------------------------

def small_problem() -> tuple[torch.Tensor, torch.Tensor]:
    """157 rows x 13 latents x 6 classes: awkward sizes, latents that never fire, a class with no positives."""
    xs, ys = make_activations(157, 13, 5, l0=5, seed=3, frac_empty=0.15)
    return xs, torch.cat([ys, torch.zeros(157, 1, dtype=ys.dtype)], 1)


def fit_small(impl: str, **kw) -> Sparse1DProbe:
    xs, ys = small_problem()
    return quiet_fit(Sparse1DProbe(impl, device="cpu", **kw), xs, ys)


def _close(a, b, tol: float, cols=slice(None)) -> bool:
    return bool(np.allclose(np.asarray(a)[:, cols], np.asarray(b)[:, cols], rtol=tol, atol=tol))


def solver_checks(compile: str = "off", backend: str = "inductor", compiled3: Sparse1DProbe | None = None,
                  label: str = "compiled") -> list[Check]:
    """Baseline, optimized (float32 and float64 sums, and compiled unless `compile` is "off") against the
    float64 oracle after 3 iterations ((b, w) within 1e-4: float32 weights and sums) and after 40 (loss
    matrix within 1e-4, confusion counts exact), against each other, and qx from the plan's product.

    The baseline's (b, w) are compared without the class that has no positives: there its
    `binary_cross_entropy_with_logits` rounds each ~1e-7 loss term to multiples of 1.2e-7 and its damping
    drifts from the oracle's (tests/test_probe1d.py). `compiled3`: the compiled 3-iteration fit if it was
    already run (its compile timed apart)."""
    xs, ys = small_problem()
    ref3, ref40 = Reference1DProbe(max_iter=3, tol=0.0).fit(xs, ys), Reference1DProbe(max_iter=40).fit(xs, ys)
    variants = {"baseline": ("baseline", {}), "optimized": ("optimized", {}),
                "optimized float64": ("optimized", dict(accum_dtype="float64"))}
    if compile != "off":
        variants[f"optimized {label}"] = ("optimized", dict(compile=compile, backend=backend))
    runs3 = {name: compiled3 if compiled3 is not None and "compile" in kw else fit_small(impl, max_iter=3, tol=0.0, **kw)
             for name, (impl, kw) in variants.items()}
    checks = []
    for name, p in runs3.items():
        cols = slice(0, -1) if name == "baseline" else slice(None)
        checks.append((f"{name}: (b, w) after 3 iterations within 1e-4 of the reference",
                       _close(p.coef_, ref3.coef_, 1e-4, cols) and _close(p.intercept_, ref3.intercept_, 1e-4, cols), ""))
    for name, (impl, kw) in variants.items():
        if name == "optimized float64":
            continue
        a = agreement(fit_small(impl, max_iter=40, **kw), ref40, xs, ys, tol=1e-4)
        checks += [(f"{name}: loss matrix after 40 iterations within 1e-4 of the reference", a["loss_ok"], ""),
                   (f"{name}: confusion counts equal to the reference", a["counts_equal"], "")]
    b3, o3 = runs3["baseline"], runs3["optimized"]
    checks.append(("baseline and optimized: (b, w) after 3 iterations within 1e-4 of each other",
                   _close(o3.coef_, b3.coef_, 1e-4, slice(0, -1)) and _close(o3.intercept_, b3.intercept_, 1e-4, slice(0, -1)), ""))
    qs = Sparse1DProbe("optimized", device="cpu").solver.plan(xs, ys).qx
    qb = Sparse1DProbe("baseline", device="cpu").solver._latent_scale(xs, xs.shape[1])[1][:, 0]
    checks.append(("qx from the plan's product equals the baseline's separate pass (1e-6)",
                   bool(torch.allclose(qs, qb, rtol=1e-6, atol=1e-6)), ""))
    return checks
