"""probe1d's claims (verdicts with their noise, GPU-only targets, generated sentences) and the notebooks'
correctness checks, without timing anything: measurements are built by hand."""
import re
import types

import pytest

from perflab.probe1d import checks, claims
from perflab.verdicts import Measured

LONG_FLOAT = re.compile(r"\d\.\d{4,}")      # a raw float (0.9916623814676818): sentences round to 3 figures


class FakeProfile:
    def __init__(self, shares: dict):
        self.shares = shares

    def share(self, needle: str) -> float:
        return self.shares.get(needle, 0.0)


def _claim(key, table=claims.SLAB_CLAIMS):
    return next(c for c in table if c.key == key)


def test_speed_target_carries_its_noise():
    c = _claim("cpu_10x")
    assert c.verdict(Measured(15.1, 11.5, 16.9), "cpu") == "holds"
    assert c.verdict(Measured(10.5, 8.9, 12.0), "cpu") == "within noise"     # the range straddles 10x
    assert c.verdict(Measured(6.7, 6.0, 7.5), "cpu") == "does not hold"
    # the 10x target is for the CPU defaults, the 100x target for a GPU at the seed's shapes
    assert c.verdict(Measured(949.0, 924.0, 978.0), "cuda") == "not tested here"
    g = _claim("gpu_100x")
    assert g.verdict(Measured(1000.0, 900.0, 1100.0), "cpu") == "not tested here"
    assert g.verdict(Measured(949.0, 924.0, 978.0), "cuda") == "holds"
    assert g.verdict(Measured(110.0, 90.0, 130.0), "cuda") == "within noise"


def test_floor_and_fix_claims():
    f = _claim("floor_3x")
    assert f.verdict(Measured(5.8, 5.2, 6.4), "cpu") == "does not hold"
    assert f.verdict(Measured(2.9, 2.5, 3.4), "cpu") == "within noise"
    assert f.verdict(Measured(2.0, 1.8, 2.2), "cuda") == "holds"
    job = _claim("job_18h")
    assert job.verdict(Measured(25.0, 20.0, 30.0), "cpu") == "fixed"
    assert job.verdict(Measured(3.0, 2.5, 3.5), "cpu") == "partly holds"
    assert _claim("qx").verdict(Measured.exact(1.0), "cpu") == "fixed"
    assert _claim("qx").verdict(Measured.exact(0.0), "cpu") == "does not hold"


def test_profile_share_is_judged_as_a_factor_from_the_seeds_with_its_range():
    slab = _claim("compute_slab_stats", claims.PROFILE_CLAIMS)          # seed 99.9%
    same = [FakeProfile({"compute_slab_stats": s}) for s in (0.80, 0.79, 0.83)]
    assert slab.verdict(claims.share_measured(same, slab), "cpu") == "holds"
    around = [FakeProfile({"compute_slab_stats": s}) for s in (0.62, 0.70, 0.66)]   # 1.43x .. 1.61x off
    assert slab.verdict(claims.share_measured(around, slab), "cpu") == "within noise"
    item = _claim("Tensor.item", claims.PROFILE_CLAIMS)                  # seed 9.3%, a GPU mechanism
    low = [FakeProfile({".item": s}) for s in (0.03, 0.033, 0.036)]
    assert item.verdict(claims.share_measured(low, item), "cpu") == "not tested here"
    assert item.verdict(claims.share_measured(low, item), "cuda") == "partly holds"   # ~3x off
    gone = [FakeProfile({}) for _ in range(3)]                           # a share of 0: infinitely far
    assert item.verdict(claims.share_measured(gone, item), "cuda") == "does not hold"
    m = claims.share_measured([FakeProfile({".item": s}) for s in (0.05, 0.093, 0.2)], item)
    assert m.low == 1.0                                                  # the range holds the seed's share


def _fitted(**counters):
    return types.SimpleNamespace(counters_=counters, coef_=types.SimpleNamespace(shape=(256, 24)))


def test_profile_rows_generate_rounded_sentences():
    base = [FakeProfile({"compute_slab_stats": s, ".item": 0.0333333333}) for s in (0.8123456, 0.79, 0.83)]
    opt = FakeProfile({})
    fits = {"baseline": _fitted(zero_grad_fallback_coords=154, zero_grad_fallback_coord_iters=1232),
            "optimized": _fitted(zero_grad_fallback_coords=0, zero_grad_skipped_coords=154)}
    rows = {r["claim"]: r for r in claims.profile_rows(base, opt, fits, "cpu")}
    assert rows["compute_slab_stats"]["verdict"] == "holds"
    assert "81.2% on cpu (range 79-83% over 3 profiles)" in rows["compute_slab_stats"]["measured"]
    assert rows["Tensor.item"]["verdict"] == "not tested here"
    assert "not judged on cpu" in rows["Tensor.item"]["measured"]
    assert rows["zero_grad_fallback"]["verdict"] == "holds" and rows["zero_grad_exit"]["verdict"] == "fixed"
    assert not any(LONG_FLOAT.search(r["measured"]) for r in rows.values())


def _ratio(r, lo, hi):
    return dict(ratio=r, low=lo, high=hi)


def _slab_rows(device_type="cpu", side=(15.4, 14.5, 16.0), fallbacks=(6960, 6960)):
    default = dict(_ratio(15.1234567, 11.5, 16.9), n_rows=4096, n_classes=32)
    summary = dict(fallbacks=0, zero_grad_fallbacks=0, frozen_share=0.976)
    fits = {"baseline": dict(fallbacks=fallbacks[0], zero_grad_fallbacks=fallbacks[1], frozen_share=0.0),
            "optimized float32": summary, "optimized float64": dict(summary, frozen_share=0.945)}
    mode = "compiled (default, inductor)"
    rows = claims.slab_rows(default, {"eager": _ratio(5.2, 4.7, 5.5), mode: _ratio(*side)},
                            dict(_ratio(5.8, 5.1, 6.6), bound="sigmoid throughput"), _ratio(25.0, 23.0, 27.0), fits,
                            True, {"baseline": 344.7, "optimized": 22.81}, device_type, mode)
    return {r["claim"]: r for r in rows}


def test_slab_rows_on_a_cpu():
    rows = _slab_rows()
    assert {k: r["verdict"] for k, r in rows.items()} == {
        "cpu_10x": "holds", "gpu_100x": "not tested here", "floor_3x": "does not hold", "job_18h": "fixed",
        "float64": "does not hold", "qx": "fixed"}
    # the lower median of the two measurements, the union of their ranges
    assert rows["cpu_10x"]["measured"].startswith("15.1x (p20-p80 11.5-16.9x) per LM iteration at 4096 rows x 32")
    assert "18 h -> 0.72 h at the better ratio" in rows["job_18h"]["measured"]
    assert not any(LONG_FLOAT.search(r["measured"]) for r in rows.values())
    noisy = _slab_rows(side=(9.8, 8.0, 12.0))
    assert noisy["cpu_10x"]["verdict"] == "within noise"
    # a fallback not explained by a zero gradient, gone with float64 sums: the open question holds
    assert _slab_rows(fallbacks=(7000, 6960))["float64"]["verdict"] == "holds"
    on_gpu = _slab_rows("cuda")
    assert on_gpu["cpu_10x"]["verdict"] == "not tested here" and on_gpu["gpu_100x"]["verdict"] == "does not hold"


def test_breakdown_table_is_rounded():
    table = claims.breakdown({"baseline": [FakeProfile({"compute_slab_stats": 0.81549}) for _ in range(3)],
                              "optimized": FakeProfile({})})
    assert list(table["frame"]) == [k for k, _, _ in claims.SEED_BREAKDOWN]
    assert table.loc[0, "baseline"] == "81.5% (81.5-81.5)" and table.loc[0, "optimized"] == "0%"


def test_report_logs_prints_and_fails_loudly(capsys):
    logged = []
    run = types.SimpleNamespace(log=types.SimpleNamespace(check=lambda name, passed, detail: logged.append(passed)))
    checks.report(run, [("a", True, "2 x 3"), ("b", True, "")])
    assert capsys.readouterr().out == "PASS  a  [2 x 3]\nPASS  b\n"
    with pytest.raises(AssertionError, match=r"\['c'\]"):
        checks.report(run, [("c", False, "")])
    assert logged == [True, True, False]


def test_solver_checks_pass_eager_and_compiled_with_the_eager_backend():
    # backend="eager": dynamo's graphs without inductor's codegen (the compiled path, cheaply)
    results = checks.solver_checks("default", "eager", label="compiled (default, eager)")
    assert [name for name, ok, _ in results if not ok] == []
    names = [name for name, _, _ in results]
    assert "optimized compiled (default, eager): confusion counts equal to the reference" in names
    assert sum("compiled (default, eager)" in name for name in names) == 3  # (b, w), loss matrix, counts
