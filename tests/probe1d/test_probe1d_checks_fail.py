"""01's and 02's correctness checks (`probe1d.checks`), the ones the notebooks print PASS/FAIL for: what agreement
counts, the text of their details, and that each fails, naming what differs, when what it checks is broken: losses or
confusion counts off the float64 oracle, weights off it, fallbacks where there should be none (or none where the
baseline must make them), a sync too many, qx off the baseline's. A check that cannot fail would let every such bug
through."""
import types

import numpy as np
import pytest
import torch

from perflab.probe1d import checks
from perflab.probe1d.data import make_activations
from perflab.probe1d.reference import Reference1DProbe


class Fixed:
    """A fitted probe's loss_matrix_with_aux, given: (loss, tp, fp, tn, fn)."""

    def __init__(self, loss, *counts):
        self.out = (loss, *counts)

    def loss_matrix_with_aux(self, x, y):
        return self.out


def test_agreement_is_the_largest_loss_gap_within_tol_and_counts_exactly_equal():
    """Tensors and arrays alike; a loss gap of exactly tol passes, one above fails; any count that differs fails,
    reported by the largest difference; n is the (latent, class) pairs."""
    loss = np.array([[0.5, 0.25], [0.125, 1.0], [0.0, 0.75]])
    counts = [np.full((3, 2), k) for k in (3, 1, 4, 1)]
    a = Fixed(torch.tensor(loss), *(torch.tensor(c) for c in counts))
    same = checks.agreement(a, Fixed(loss, *counts), None, None)
    assert same == dict(loss_ok=True, counts_equal=True, loss_max_diff=0.0, count_max_diff=0, n=6)
    off = loss.copy()
    off[1, 0] += 0.25
    at = checks.agreement(a, Fixed(off, *counts), None, None, tol=0.25)
    assert at["loss_ok"] and at["loss_max_diff"] == 0.25
    assert not checks.agreement(a, Fixed(off, *counts), None, None, tol=0.24)["loss_ok"]
    other = [c.copy() for c in counts]
    other[2][2, 1] += 2
    other[0][0, 0] -= 1
    got = checks.agreement(a, Fixed(loss, *other), None, None)
    assert (got["counts_equal"], got["count_max_diff"], got["loss_ok"]) == (False, 2, True)


def test_numbers_print_with_two_figures_and_a_short_exponent():
    """3.1e-7, not 3.1e-07; a tolerance as 1e-4, with the pairs compared."""
    assert [checks._g(x) for x in (3.14e-7, 0.5, 0.0, 1234.0, 4.2e-11)] == ["3.1e-7", "0.5", "0", "1.2e+03", "4.2e-11"]
    a = dict(loss_ok=False, counts_equal=True, loss_max_diff=2.5e-4, count_max_diff=0, n=78)
    loss, counts = checks._agreement_checks("loss", "counts", a, 1e-4)
    assert (loss.name, loss.passed, loss.detail) == ("loss", False, "largest difference 0.00025, allowed 1e-4, over 78 "
                                                                    "(latent, class) pairs")
    assert (counts.name, counts.passed, counts.detail) == ("counts", True, "largest count difference 0 at threshold "
                                                                           "0.5, allowed 0")


def test_sync_checks_pass_at_one_sync_and_at_exactly_one_item_per_row_per_slab():
    """One host sync is the optimized solver's (singular, named by op); none is a failure as well; the baseline passes
    at exactly rows x slabs .item() calls."""
    counts = {"optimized": types.SimpleNamespace(total=1, by_op={"item": 1}),
              "baseline": types.SimpleNamespace(total=3072, by_op={"item": 3072, "tolist": 5})}
    opt, base = checks.sync_checks(counts, n_rows=1024, n_slabs=3)
    assert (opt.passed, opt.detail) == (True, "1 host sync: item 1")
    assert (base.name, base.passed, base.detail) == ("baseline: at least one .item() per row per slab", True,
                                                     "3072 .item() calls, need >= 3072 = 1024 rows x 3 slabs")
    counts["optimized"] = types.SimpleNamespace(total=0, by_op={})
    counts["baseline"] = types.SimpleNamespace(total=5, by_op={"tolist": 5})
    opt, base = checks.sync_checks(counts, n_rows=2, n_slabs=1)
    assert (opt.passed, opt.detail) == (False, "0 host syncs: none")
    assert (base.passed, base.detail) == (False, "0 .item() calls, need >= 2 = 2 rows x 1 slabs")


@pytest.fixture(scope="module")
def data():
    return make_activations(200, 12, 5, l0=4, seed=1, frac_empty=0.2)


def test_profile_checks_pass_and_name_each_version(data):
    """Both versions against the oracle (loss within 1e-4, counts exact), the baseline's fallbacks all on latents that
    never fire, the optimized solver's none: eight checks, all passing, each fit returned by its version's name."""
    x, y = data
    fits, got = checks.profile_checks(x, y, max_iter=4, class_slab_size=2)
    assert set(fits) == {"baseline", "optimized"} and all(f.config.max_iter == 4 for f in fits.values())
    assert fits["baseline"].config.class_slab_size == 2
    assert [(c.name, c.passed) for c in got] == [
        ("baseline loss matrix within 1e-4 of the float64 reference", True),
        ("baseline confusion counts equal to the reference", True),
        ("optimized loss matrix within 1e-4 of the float64 reference", True),
        ("optimized confusion counts equal to the reference", True),
        ("baseline: zero-gradient coordinates enter the LM fallback", True),
        ("baseline: all of them on latents that never fire", True),
        ("optimized: zero-gradient coordinates entering the fallback == 0", True),
        ("optimized: no LM fallback at all", True)]
    zero = fits["baseline"].counters_["zero_grad_fallback_coords"]
    assert [c.detail for c in got[4:]] == [f"{zero} coordinates, need > 0", f"{zero} of the {zero} on latents that "
                                           "never fire", "0 coordinates", "0 fallbacks over the fit"]
    assert got[0].detail.endswith(", allowed 1e-4, over 60 (latent, class) pairs")


def _fit_counting(fit, n: int):
    """`fit`, its fits reporting `n` zero-gradient fallback coordinates, all `n` on latents that never fire."""
    def counted(probe, x, y):
        p = fit(probe, x, y)
        p.counters_.update(zero_grad_fallback_coords=n, zero_grad_fallback_on_empty_latents=n)
        return p
    return counted


def test_profile_checks_fail_on_fallbacks_and_on_losses_off_the_oracle(data, monkeypatch):
    """The optimized fit reporting zero-gradient fallbacks, the baseline none or some on latents that fire, and an
    oracle whose losses are 1e-3 off: each of those checks fails with the count or gap."""
    x, y = data
    fit = checks.quiet_fit

    def counted(probe, x, y):
        p = fit(probe, x, y)
        if type(probe).__module__.endswith("optimized"):
            p.counters_.update(zero_grad_fallback_coords=3, fallback_coord_iters=2)
        else:
            p.counters_.update(zero_grad_fallback_coords=6, zero_grad_fallback_on_empty_latents=5)
        return p

    monkeypatch.setattr(checks, "quiet_fit", counted)
    _, got = checks.profile_checks(x, y, max_iter=4, class_slab_size=2)
    assert [(c.passed, c.detail) for c in got[4:]] == [
        (True, "6 coordinates, need > 0"), (False, "5 of the 6 on latents that never fire"),
        (False, "3 coordinates"), (False, "2 fallbacks over the fit")]

    monkeypatch.setattr(checks, "quiet_fit", _fit_counting(fit, 0))
    _, got = checks.profile_checks(x, y, max_iter=4, class_slab_size=2)
    assert (got[4].passed, got[4].detail) == (False, "0 coordinates, need > 0") and got[5].passed

    class Off(Reference1DProbe):
        def loss_matrix_with_aux(self, x, y, threshold=0.5):
            loss, *counts = super().loss_matrix_with_aux(x, y, threshold)
            return (loss + 1e-3, *counts)

    monkeypatch.setattr(checks, "quiet_fit", fit)
    monkeypatch.setattr(checks, "Reference1DProbe", Off)
    _, got = checks.profile_checks(x, y, max_iter=4, class_slab_size=2)
    assert [c.passed for c in got[:4]] == [False, True, False, True]
    assert got[0].detail.startswith("largest difference 0.001, allowed 1e-4")


def test_the_small_problem_has_awkward_sizes_empty_latents_and_a_class_with_no_positives():
    """157 rows x 13 latents x 6 classes, its last class with no positives, some latents that never fire; fit_small
    fits the version named on the CPU with the keywords given."""
    xs, ys = checks.small_problem()
    dense = xs.to_dense() if xs.layout != torch.strided else xs
    assert tuple(dense.shape) == (157, 13) and tuple(ys.shape) == (157, 6)
    assert int(ys[:, -1].sum()) == 0 and int(ys[:, :-1].sum(0).min()) > 0
    assert int(((dense != 0).sum(0) == 0).sum()) >= 1
    p = checks.fit_small("optimized", max_iter=2, tol=0.0)
    assert p.config.max_iter == 2 and p.config.tol == 0.0 and tuple(np.asarray(p.coef_).shape) == (13, 6)
    assert p.device.type == "cpu"


def test_weights_are_compared_within_1e4_relative_and_absolute_on_the_classes_asked():
    """(b, w) within 1e-4 + 1e-4 |reference|; a class left out is not compared, and the detail says so."""
    ref = types.SimpleNamespace(coef_=np.array([[1.0, 2.0], [3.0, 50.0]]), intercept_=np.array([[0.0, 0.0], [0.0, 0.0]]))
    near = types.SimpleNamespace(coef_=ref.coef_ + [[1e-4, 2e-4], [3e-4, 1e-2]], intercept_=ref.intercept_)
    assert checks._gap(near, ref) == (False, pytest.approx(1e-2))              # 50 x 1e-4 + 1e-4 < 1e-2
    far = types.SimpleNamespace(coef_=ref.coef_ + [[0.0, 0.0], [0.0, 1.0]], intercept_=ref.intercept_)
    assert checks._gap(far, ref, slice(0, 1)) == (True, 0.0)
    c = checks._bw_check("w", far, ref, slice(0, 1))
    assert (c.passed, c.detail) == (True, "largest difference 0, allowed 1e-4 + 1e-4 x |reference|; the class with "
                                          "no positives left out")
    c = checks._bw_check("w", far, ref)
    assert (c.passed, c.detail) == (False, "largest difference 1, allowed 1e-4 + 1e-4 x |reference|")


def test_solver_checks_name_every_version_and_fail_on_weights_off_the_oracle(monkeypatch):
    """Eager: (b, w) after 3 iterations for three versions, losses and counts after 40 for two, the two against each
    other and qx: nine checks, all passing; an oracle whose 3-iteration weights are 1e-3 off fails the four (b, w)
    checks against it and no other."""
    got = checks.solver_checks()
    assert [c.name for c in got] == [
        "baseline: (b, w) after 3 iterations within 1e-4 of the reference",
        "optimized: (b, w) after 3 iterations within 1e-4 of the reference",
        "optimized float64: (b, w) after 3 iterations within 1e-4 of the reference",
        "baseline: loss matrix after 40 iterations within 1e-4 of the reference",
        "baseline: confusion counts equal to the reference",
        "optimized: loss matrix after 40 iterations within 1e-4 of the reference",
        "optimized: confusion counts equal to the reference",
        "baseline and optimized: (b, w) after 3 iterations within 1e-4 of each other", checks.QX_CHECK]
    assert all(c.passed for c in got)
    assert got[0].detail.endswith("; the class with no positives left out") and not got[1].detail.endswith("left out")
    assert got[-1].detail == "largest difference 0, allowed 1e-6 + 1e-6 x |qx|"
    real = checks.Reference1DProbe

    class Off(real):
        def fit(self, x, y):
            out = super().fit(x, y)
            if self.max_iter == 3:
                self.coef_ = self.coef_ + 1e-3
            return out

    monkeypatch.setattr(checks, "Reference1DProbe", Off)
    got = checks.solver_checks()
    assert [c.passed for c in got] == [False, False, False, True, True, True, True, True, True]


def test_solver_checks_run_the_compiled_version_with_its_settings_and_reuse_a_compiled_fit(monkeypatch):
    """Compile on: a fourth version, named by the label, fitted with the compile mode and backend asked for (after 40
    iterations) and, given compiled3, its 3-iteration fit not refitted; here the fits are recorded and run eager."""
    fit, seen = checks.fit_small, []

    def recorded(impl, **kw):
        seen.append((impl, kw))
        return fit(impl, **{k: v for k, v in kw.items() if k not in ("compile", "backend")})

    monkeypatch.setattr(checks, "fit_small", recorded)
    compiled3 = fit("optimized", max_iter=3, tol=0.0)
    got = checks.solver_checks("default", "eager", compiled3=compiled3, label="compiled (x)")
    names = [c.name for c in got]
    assert "optimized compiled (x): (b, w) after 3 iterations within 1e-4 of the reference" in names
    assert "optimized compiled (x): confusion counts equal to the reference" in names and all(c.passed for c in got)
    compiled = [kw for impl, kw in seen if kw.get("compile")]
    assert compiled == [dict(max_iter=40, compile="default", backend="eager")]       # the 3-iteration fit reused
    assert ("optimized", dict(max_iter=3, tol=0.0, accum_dtype="float64")) in seen
    seen.clear()
    checks.solver_checks("default", "eager", label="compiled (x)")
    assert [kw for _, kw in seen if kw.get("compile")] == [dict(max_iter=3, tol=0.0, compile="default", backend="eager"),
                                                           dict(max_iter=40, compile="default", backend="eager")]


def test_profile_checks_fit_with_the_solver_settings_given_and_take_one_fallback_as_some(data, monkeypatch):
    """The notebook's solver settings (here tol) reach both fits; a baseline with a single zero-gradient coordinate,
    on a latent that never fires, passes both of its fallback checks."""
    x, y = data
    fits, _ = checks.profile_checks(x, y, max_iter=4, class_slab_size=2, tol=0.0)
    assert [f.config.tol for f in fits.values()] == [0.0, 0.0]
    monkeypatch.setattr(checks, "quiet_fit", _fit_counting(checks.quiet_fit, 1))
    _, got = checks.profile_checks(x, y, max_iter=4, class_slab_size=2)
    assert [(c.passed, c.detail) for c in got[4:6]] == [(True, "1 coordinates, need > 0"),
                                                        (True, "1 of the 1 on latents that never fire")]


def test_solver_checks_default_to_inductor_and_their_label_and_hold_the_reference_to_the_same_iterations(monkeypatch):
    """Compile on without a backend: inductor, named 'optimized compiled'; the oracle runs exactly 3 iterations
    (tol 0, as the versions' 3-iteration fits) and 40 for the losses."""
    fit, seen, refs = checks.fit_small, [], []

    def recorded(impl, **kw):
        seen.append(kw)
        return fit(impl, **{k: v for k, v in kw.items() if k not in ("compile", "backend")})

    real = checks.Reference1DProbe

    class Ref(real):
        def __init__(self, **kw):
            refs.append(kw)
            super().__init__(**kw)

    monkeypatch.setattr(checks, "fit_small", recorded)
    monkeypatch.setattr(checks, "Reference1DProbe", Ref)
    got = checks.solver_checks("default")
    assert "optimized compiled: (b, w) after 3 iterations within 1e-4 of the reference" in [c.name for c in got]
    assert [kw["backend"] for kw in seen if "compile" in kw] == ["inductor", "inductor"]
    assert refs == [dict(max_iter=3, tol=0.0), dict(max_iter=40)]


@pytest.mark.parametrize("column, failing", [(0, 2), (4, 2), (5, 0)])
def test_the_baselines_weights_are_compared_on_every_class_but_the_empty_last(monkeypatch, column, failing):
    """The baseline's (b, w) 1e-2 off on class 0, or on class 4 (the last with positives), fails its check against
    the oracle and against the optimized fit; off on class 5, the one with no positives, fails neither."""
    fit = checks.fit_small

    def off(impl, **kw):
        p = fit(impl, **kw)
        if impl == "baseline" and kw.get("max_iter") == 3:
            p.coef_ = np.asarray(p.coef_).copy()
            p.coef_[:, column] += 1e-2
        return p

    monkeypatch.setattr(checks, "fit_small", off)
    got = {c.name: c.passed for c in checks.solver_checks()}
    assert [got["baseline: (b, w) after 3 iterations within 1e-4 of the reference"],
            got["baseline and optimized: (b, w) after 3 iterations within 1e-4 of each other"]].count(False) == failing
    assert sum(not ok for ok in got.values()) == failing


def test_solver_checks_fail_on_losses_1e3_off_after_40_iterations(monkeypatch):
    """An oracle whose 40-iteration losses are 1e-3 off: both loss checks fail (1e-4 allowed), the counts pass."""
    class Off(Reference1DProbe):
        def loss_matrix_with_aux(self, x, y, threshold=0.5):
            loss, *counts = super().loss_matrix_with_aux(x, y, threshold)
            return (loss + 1e-3, *counts)

    monkeypatch.setattr(checks, "Reference1DProbe", Off)
    got = {c.name: c.passed for c in checks.solver_checks()}
    assert [n for n, ok in got.items() if not ok] == [
        "baseline: loss matrix after 40 iterations within 1e-4 of the reference",
        "optimized: loss matrix after 40 iterations within 1e-4 of the reference"]


def test_the_small_problem_is_the_seeded_one_with_two_empty_latents_in_the_datas_dtype():
    """The data of seed 3: 683 nonzeros, 2 of the 13 latents never fire, the classes' positives 37, 79, 17, 10, 14
    and none in the sixth, its labels in the data's own dtype (uint8), the empty class's column too."""
    xs, ys = checks.small_problem()
    dense = xs.to_dense()
    assert int((dense != 0).sum()) == 683 and int(((dense != 0).sum(0) == 0).sum()) == 2
    assert ys.sum(0).tolist() == [37, 79, 17, 10, 14, 0] and ys.dtype == torch.uint8


def test_the_weights_rule_is_relative_to_1e4_of_the_reference():
    """A weight of 50 off by 3e-3 is within 1e-4 + 1e-4 x 50 (a float32 solver's rounding on a large weight)."""
    ref = types.SimpleNamespace(coef_=np.array([[50.0]]), intercept_=np.array([[0.0]]))
    assert checks._gap(types.SimpleNamespace(coef_=np.array([[50.003]]), intercept_=np.array([[0.0]])), ref)[0]


@pytest.mark.parametrize("how, passed", [("relative", False), ("absolute", True)])
def test_the_qx_check_allows_1e6_absolute_plus_1e6_relative(monkeypatch, how, passed):
    """qx from the plan 5e-6 relative off the baseline's (qx ~0.6-4.6: beyond 1e-6 + 1e-6 x |qx|) fails the check;
    9e-7 absolute off passes it. The loss checks print their tolerance as 1e-4."""
    from perflab.probe1d.optimized import OptimizedSolver

    plan = OptimizedSolver.plan

    def moved(self, xs, ys, *a, **k):
        p = plan(self, xs, ys, *a, **k)
        p.qx = p.qx * (1 + 5e-6) if how == "relative" else p.qx + 9e-7
        return p

    monkeypatch.setattr(OptimizedSolver, "plan", moved)
    got = {c.name: c for c in checks.solver_checks()}
    assert got[checks.QX_CHECK].passed is passed
    assert got["optimized: loss matrix after 40 iterations within 1e-4 of the reference"].detail.endswith(
        ", allowed 1e-4, over 78 (latent, class) pairs")


def test_agreement_takes_arrays_or_tensors_either_side_compares_counts_as_numbers_and_allows_1e4():
    """An oracle's arrays first or second; unsigned counts (3 against 4) differ by 1, not by a wrapped 255; the
    loss tolerance is 1e-4 unless given (2e-4 apart fails)."""
    loss = np.array([[0.5, 0.25]])
    counts = [np.array([[3, 1]], dtype=np.uint8)] * 4
    arrays, tensors = Fixed(loss, *counts), Fixed(torch.tensor(loss), *(torch.tensor(c) for c in counts))
    assert checks.agreement(arrays, tensors, None, None)["counts_equal"]
    fewer = Fixed(loss, *([np.array([[4, 1]], dtype=np.uint8)] + counts[1:]))
    assert checks.agreement(tensors, fewer, None, None)["count_max_diff"] == 1
    assert checks.agreement(fewer, tensors, None, None)["count_max_diff"] == 1
    assert not checks.agreement(arrays, Fixed(loss + 2e-4, *counts), None, None)["loss_ok"]
