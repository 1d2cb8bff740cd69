"""Each claim's path on injected findings of known truth (issue 48, item 2): notebook 01's and 02's `Findings` filled
with fixed shares, counts, times and decisions, `evidence(run, found)` judged by the claims' tables, and every claim of
PROFILE_CLAIMS and SLAB_CLAIMS decided at the injected value, in its unit and on its scale, with the verdict that value
gives, on a CPU and on a GPU at the seed's shapes. The tests iterate the tables: a claim added without an expected
value here fails them. Nothing is timed."""
import math
import types

import pytest
import scipy.stats

from perflab.kit.bench import from_times
from perflab.kit.card import measured_cell
from perflab.kit.claims import Check
from perflab.kit.formatting import value_text
from perflab.kit.results import ResultsLog
from perflab.kit.verdicts import Decision
from perflab.probe1d import claims, profiles, study
from perflab.probe1d.params import ProfileParams, SlabStatsParams

T99 = scipy.stats.t.ppf(0.995, 4)  # the 99% t interval over 5 profiles (one batch each)


class Profile:
    def __init__(self, shares: dict):
        self.shares = shares

    def share(self, needle: str) -> float:
        return self.shares.get(needle, 0.0)


def _run(cfg, device_type, tmp_path):
    return types.SimpleNamespace(cfg=cfg, device=types.SimpleNamespace(type=device_type),
                                 log=ResultsLog(tmp_path / "results.jsonl", study="t"))


def _t_interval(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    half = T99 * sd / math.sqrt(len(xs))
    return m, max(0.0, m - half), min(1.0, m + half)


# ---- notebook 01 -------------------------------------------------------------------------------------------

# the plain baseline profiles' shares per needle, 5 profiles: known means and spreads (one reaches below 0 unclipped)
SHARES = {"compute_slab_stats": (0.80, 0.81, 0.82, 0.81, 0.81), "_iter_event_chunks": (0.20, 0.19, 0.21, 0.20, 0.20),
          "torch.repeat_interleave": (0.0, 0.02, 0.0, 0.0, 0.01), ".item": (0.03, 0.03, 0.035, 0.03, 0.03),
          ".to": (0.01, 0.01, 0.01, 0.01, 0.01), "torch.arange": (0.010, 0.015, 0.012, 0.013, 0.014)}
FALLBACKS = {"baseline": dict(coords=154, times=1232, fallbacks=1232, latents=256, classes=24),
             "optimized": dict(coords=0, skipped=154, fallbacks=0)}


def _profile_findings(fallbacks=FALLBACKS):
    base = [Profile({n: SHARES[n][i] for n in SHARES}) for i in range(5)]
    return profiles.Findings(fallbacks=fallbacks,
                             profiles=profiles.Profiles(base, Profile({}), Profile({".item": 0.001}), Profile({}), {}))


# the verdicts those shares give against 1/1.5 (holds) and 1/4 (partly) of the seed's share, worked out by hand
# from their 99% t intervals: compute_slab_stats [79.5, 82.5]% against >= 66.6%; _iter_event_chunks [18.5, 21.5]%
# against >= 42.8% and 16.1%; repeat_interleave [0, 2.44]% under 3.38%; Tensor.item [2.64, 3.56]% against 6.2% and
# 2.32%; Tensor.to exactly 1% against 1.73% and 0.65%; arange [0.89, 1.67]% across 1.27%
VERDICT = {"compute_slab_stats": "holds", "iter_event_chunks": "partly holds", "repeat_interleave": "does not hold",
           "tensor_item": "partly holds", "tensor_to": "partly holds", "arange": "within noise"}


def _share_expected(needle, device_type):
    """(value, low, high) in the claim's scale (a fraction) and its verdict on this device."""
    key = next(k for k, v in claims.SEED_SHARES.items() if v[1] == needle)
    m, lo, hi = _t_interval(SHARES[needle])
    on = not claims.PROFILE_CLAIMS[key].off_setup(None, device_type)
    return key, (m, lo, hi, VERDICT[key] if on else "not tested here")


def _profile_truth(device_type):
    truth = dict(_share_expected(needle, device_type) for needle in SHARES)
    truth["zero_grad_fallback"] = (154, 154, 154, "holds")     # >= 1 coordinate
    truth["zero_grad_exit"] = (0, 0, 0, "fixed")                # <= 0, a cost removed
    return truth


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_every_profile_claim_is_decided_at_its_injected_value_in_its_unit(device_type, tmp_path):
    truth = _profile_truth(device_type)
    assert set(truth) == set(claims.PROFILE_CLAIMS.keys), "a claim without an expected value: add it here"
    run = _run(ProfileParams(), device_type, tmp_path)
    rows = {r.key: r for r in claims.PROFILE_CLAIMS.judge(profiles.evidence(run, _profile_findings()),
                                                          cfg=run.cfg, device=device_type)}
    for c in claims.PROFILE_CLAIMS:
        v, lo, hi, verdict = truth[c.key]
        r = rows[c.key]
        assert (r.value, r.low, r.high) == pytest.approx((v, lo, hi), abs=1e-9), c.key
        assert (r.verdict, r.unit) == (verdict, c.unit), c.key
        assert r.measured.startswith(value_text(v, lo, hi, c.unit)), (c.key, r.measured)   # the card's number
        assert measured_cell(r) == value_text(v, lo, hi, c.unit)
    assert rows["compute_slab_stats"].unit == "%" and 0 <= rows["compute_slab_stats"].value <= 1   # a fraction
    assert measured_cell(rows["compute_slab_stats"]) == "81.0% [79.5, 82.5]"
    assert rows["repeat_interleave"].low == 0.0                 # a t interval below 0, clipped to what a share can be


def test_the_fallback_claims_read_the_right_versions_counts(tmp_path):
    swapped = {"baseline": dict(FALLBACKS["baseline"], coords=0), "optimized": dict(FALLBACKS["optimized"], coords=154)}
    run = _run(ProfileParams(), "cpu", tmp_path)
    rows = {r.key: r for r in claims.PROFILE_CLAIMS.judge(profiles.evidence(run, _profile_findings(swapped)),
                                                          cfg=run.cfg, device="cpu")}
    assert (rows["zero_grad_fallback"].verdict, rows["zero_grad_exit"].verdict) == ("does not hold", "does not hold")


# ---- notebook 02 -------------------------------------------------------------------------------------------

class Source:
    kind = "generated"

    def get(self, n_rows, n_classes, seed_offset=0):
        return types.SimpleNamespace(shape=(n_rows, 512)), types.SimpleNamespace(shape=(n_rows, n_classes))


def _decision(value, low, high, claim):
    return Decision("-", value, low, high, 12, 8.0, 0.99, "times the floor" if claim is claims.FLOOR_CLAIM else
                    "speedup", calls=(1, 13), **claim.rule)


def _sweep_row(n_rows, n_classes, base_s, opt_s):
    return dict(n_rows=n_rows, n_classes=n_classes, sweeps=("rows",), nnz=n_rows * 32,
                pair_events=n_rows * 32 * n_classes, ratio=base_s / opt_s, low=base_s / opt_s, high=base_s / opt_s,
                baseline=from_times([base_s] * 3, label="LM iteration"),
                optimized=from_times([opt_s] * 3, label="LM iteration"))


# (baseline fallbacks, at a zero gradient) and float32 / float64 optimized: 40 fallbacks not at a zero gradient with
# float32 sums, 10 with float64: 30 removed
FITS = {"baseline": dict(fallbacks=7000, zero_grad_fallbacks=6960, frozen_share=0.0),
        "optimized float32": dict(fallbacks=0, zero_grad_fallbacks=0, frozen_share=0.976),
        "optimized float64": dict(fallbacks=10, zero_grad_fallbacks=0, frozen_share=0.945)}
SEED_SHAPES = SlabStatsParams(n_latents=16384, n_classes=151, l0=200, n_rows=65536, baseline_slabs=1)


def _slab_findings(cfg, decisions, qx=True):
    return study.Findings(source=Source(), checks=[Check(claims.QX_CHECK, qx, "")], floor={"bound": "sigmoid throughput"},
                          decisions=decisions, fits=FITS, sweep=[_sweep_row(cfg.n_rows, cfg.n_classes, 0.130, 0.00943)])


def _slab_truth(device_type):
    """{claim key: (injected decision or measured value, expected verdict)} for a CPU-default run and a GPU run at
    the seed's shapes."""
    speed = {"cpu": ("cpu_10x", (13.6, 12.7, 14.6), "holds"), "cuda": ("gpu_100x", (94.0, 90.0, 98.0), "does not hold")}
    key, vals, verdict = speed[device_type]
    truth = {"cpu_10x": None, "gpu_100x": None, "job_18h": None, key: (vals, verdict),
             "floor_3x": ((5.47, 5.13, 5.80), "does not hold"), "float64": ((30, 30, 30), "holds"),
             "qx": ((1, 1, 1), "fixed")}
    if device_type == "cuda":
        truth["job_18h"] = ((vals), "fixed")                    # the job cut >= 10x: fixed
    return truth


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_every_slab_claim_is_decided_at_its_injected_value_in_its_unit(device_type, tmp_path):
    cfg = SlabStatsParams() if device_type == "cpu" else SEED_SHAPES
    truth = _slab_truth(device_type)
    assert set(truth) == set(claims.SLAB_CLAIMS.keys), "a claim without an expected value: add it here"
    decisions = {k: _decision(*t[0], claims.SLAB_CLAIMS[k]) for k, t in truth.items()
                 if t is not None and k in ("cpu_10x", "gpu_100x", "job_18h", "floor_3x")}
    run = _run(cfg, device_type, tmp_path)
    rows = {r.key: r for r in claims.SLAB_CLAIMS.judge(study.evidence(run, _slab_findings(cfg, decisions)), cfg=cfg,
                                                       device=device_type)}
    for c in claims.SLAB_CLAIMS:
        r = rows[c.key]
        if truth[c.key] is None:
            assert (r.verdict, r.value) == ("not tested here", None), c.key
            continue
        (v, lo, hi), verdict = truth[c.key]
        assert (r.value, r.low, r.high) == pytest.approx((v, lo, hi)), c.key
        assert (r.verdict, r.unit) == (verdict, c.unit), c.key
        assert r.measured.startswith(value_text(v, lo, hi, c.unit)), (c.key, r.measured)
    if device_type == "cuda":                                     # the slabs both sides ran, said
        assert "first 1 slab(s) of 8 classes, 65536 rows x 8 classes on both sides" in rows["gpu_100x"].measured
        assert "18 h -> 0.191 h" in rows["job_18h"].measured      # 18 h / 94x
    else:
        assert "one whole LM iteration at 4096 rows x 32 classes, optimized compiled (default, inductor)" in \
            rows["cpu_10x"].measured


def test_the_job_is_extrapolated_from_the_default_sizes_medians(tmp_path):
    """130 ms and 9.43 ms per iteration over 4096 x 32 x 32 pairs, times the seed's 2.25e9 x 151 x 100 pairs."""
    cfg = SlabStatsParams()
    found = _slab_findings(cfg, {"floor_3x": _decision(5.47, 5.13, 5.80, claims.FLOOR_CLAIM)})
    pairs = 4096 * 32 * 32
    want = {impl: s / pairs * 2.25e9 * 151 * 100 / 3600 for impl, s in (("baseline", 0.130), ("optimized", 0.00943))}
    assert study.job_hours(found, cfg) == pytest.approx(want)
    assert want["baseline"] == pytest.approx(293.0, abs=0.5)
    row = {r.key: r for r in claims.SLAB_CLAIMS.judge(study.evidence(_run(cfg, "cpu", tmp_path), found), cfg=cfg,
                                                      device="cpu")}["job_18h"]
    assert "baseline 293 h, optimized 21.2 h on cpu" in row.measured


def test_the_float64_claim_counts_only_fallbacks_not_at_a_zero_gradient(tmp_path):
    cfg = SlabStatsParams()
    found = _slab_findings(cfg, {"floor_3x": _decision(5.47, 5.13, 5.80, claims.FLOOR_CLAIM)}, qx=False)
    found.fits = dict(FITS, baseline=dict(FITS["baseline"], fallbacks=6960))          # every fallback at zero
    found.fits["optimized float64"] = dict(FITS["optimized float32"])
    rows = {r.key: r for r in claims.SLAB_CLAIMS.judge(study.evidence(_run(cfg, "cpu", tmp_path), found), cfg=cfg,
                                                       device="cpu")}
    assert (rows["float64"].value, rows["float64"].verdict) == (0, "does not hold")
    assert (rows["qx"].value, rows["qx"].verdict) == (0, "does not hold")        # the check failed: qx not shown


def test_a_claim_names_a_function_of_the_study_that_measures_it():
    for table in (claims.PROFILE_CLAIMS, claims.SLAB_CLAIMS):
        for c in table:
            assert c.unit in ("x", "%", "coordinates", "fallbacks", "fallbacks removed", "bool"), c.key   # a count names what it counts
            assert c.measured_by and callable(table.measurer(c.key)), c.key

