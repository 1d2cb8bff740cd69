"""probe1d's claims (the kit's Claims; shares with their stated confidence, GPU-only and CPU-default targets,
generated sentences), the paired decisions the notebook makes (on tiny inputs, a tiny budget: no timing or timed
verdict is asserted), and the notebooks' correctness checks."""
import re
import types

import pytest

from perflab.kit.claims import Check, Claims, report_checks
from perflab.kit.formatting import num_interval
from perflab.kit.results import ResultsLog
from perflab.kit.verdicts import VERDICTS, Decision, Measured
from perflab.kit.versions import Part
from perflab.probe1d import checks, claims, study
from perflab.probe1d.data import make_activations
from perflab.probe1d.params import ProfileParams, SlabStatsParams

LONG_FLOAT = re.compile(r"\d\.\d{4,}")      # a raw float (0.9916623814676818): sentences round to 3 figures
CPU = SlabStatsParams()


class FakeProfile:
    def __init__(self, shares: dict):
        self.shares = shares

    def share(self, needle: str) -> float:
        return self.shares.get(needle, 0.0)


def test_the_claims_are_the_kits_with_their_extra_data_in_plain_dicts():
    assert isinstance(claims.PROFILE_CLAIMS, Claims) and isinstance(claims.SLAB_CLAIMS, Claims)
    assert set(claims.SEED_SHARES) <= set(claims.PROFILE_CLAIMS.keys)
    assert set(claims.GPU_MECHANISM) <= set(claims.SEED_SHARES)
    assert claims.PROFILE_CLAIMS.headline == "compute_slab_stats" and claims.SLAB_CLAIMS.headline == "cpu_10x"
    for c in claims.PROFILE_CLAIMS:   # a GPU mechanism is a claim about a GPU
        assert dict(c.setup).get("device") == ("cuda" if c.key in claims.GPU_MECHANISM else None)


def test_cpu_target_is_about_the_cpu_defaults_and_the_gpu_target_about_the_seeds_shapes():
    setup = dict(claims.SLAB_CLAIMS["cpu_10x"].setup)
    assert setup.pop("device") == "cpu"
    assert setup == {k: getattr(CPU, k) for k in setup}                  # the dataclass's defaults
    gpu = dict(claims.SLAB_CLAIMS["gpu_100x"].setup)
    assert gpu == {"device": "cuda", "n_latents": 16384, "n_classes": 151, "l0": 200}
    assert claims.slab_headline("cpu") == "cpu_10x" and claims.slab_headline("cuda") == "gpu_100x"
    assert claims.slab_headline("mps") == "cpu_10x"


def test_speed_target_verdicts_carry_their_interval():
    c = claims.SLAB_CLAIMS["cpu_10x"]
    assert c.verdict(Measured(15.1, 11.5, 16.9), CPU, "cpu") == "holds"
    assert c.verdict(Measured(10.5, 8.9, 12.0), CPU, "cpu") == "within noise"     # the interval straddles 10x
    assert c.verdict(Measured(6.7, 6.0, 7.5), CPU, "cpu") == "does not hold"
    assert c.verdict(Measured(949.0, 924.0, 978.0), CPU, "cuda") == "not tested here"
    job = claims.SLAB_CLAIMS["job_18h"]
    assert job.verdict(Measured(25.0, 20.0, 30.0), CPU, "cuda") == "fixed"
    assert job.verdict(Measured(3.0, 2.5, 3.5), CPU, "cuda") == "partly holds"
    assert job.verdict(Measured(25.0, 20.0, 30.0), CPU, "cpu") == "not tested here"   # the seed's 18 h is a GPU job's
    floor = claims.SLAB_CLAIMS["floor_3x"]
    assert floor.verdict(Measured(5.8, 5.2, 6.4), CPU, "cpu") == "does not hold"
    assert floor.verdict(Measured(2.0, 1.8, 2.2), CPU, "cuda") == "holds"


def _judge_slab(cfg, device_type, decided=None):
    """SLAB_CLAIMS judged on hand-made measurements, with decisions for `decided` keys only."""
    m = Measured(15.0, 12.0, 18.0)
    found = {c.key: (None, "not measured") for c in claims.SLAB_CLAIMS}
    found.update({k: (m, "measured by hand") for k in decided or ()})
    return {r["key"]: r for r in claims.SLAB_CLAIMS.judge(found, cfg=cfg, device=device_type)}


def test_cpu_target_at_other_sizes_is_not_tested_here_and_says_what_was_measured():
    rows = _judge_slab(SlabStatsParams(n_rows=2048), "cpu", decided=["cpu_10x"])
    assert rows["cpu_10x"]["verdict"] == "not tested here"
    assert rows["cpu_10x"]["why"] == "measured at n_rows=2048"


def test_cpu_target_on_a_gpu_is_not_tested_here():
    rows = _judge_slab(CPU, "cuda", decided=["cpu_10x"])
    assert (rows["cpu_10x"]["verdict"], rows["cpu_10x"]["why"]) == ("not tested here", "measured on cuda")


def test_gpu_target_on_a_cpu_or_off_the_seeds_shapes_is_not_tested_here():
    rows = _judge_slab(CPU, "cpu", decided=["gpu_100x"])
    assert rows["gpu_100x"]["why"] == "measured on cpu at n_latents=512, n_classes=32, l0=32"
    smoke = SlabStatsParams(n_latents=256, n_classes=16, l0=16)             # params/gpu-smoke/02_slab_stats.yaml
    assert _judge_slab(smoke, "cuda", decided=["gpu_100x"])["gpu_100x"]["why"] == \
        "measured at n_latents=256, n_classes=16, l0=16"
    seed_shapes = SlabStatsParams(n_latents=16384, n_classes=151, l0=200)
    assert _judge_slab(seed_shapes, "cuda", decided=["gpu_100x"])["gpu_100x"]["verdict"] == "does not hold"


# ---- notebook 01: shares with a stated confidence ----------------------------------------------------------

def _profiles(needle, shares):
    return [FakeProfile({needle: s}) for s in shares]


def test_a_share_is_the_mean_of_the_profiles_with_its_t_interval():
    m = study.share_measured(_profiles("x", (0.80, 0.79, 0.83, 0.81, 0.82)), "x")
    sd = (sum((v - 0.81) ** 2 for v in (0.80, 0.79, 0.83, 0.81, 0.82)) / 4) ** 0.5
    assert m.value == pytest.approx(0.81) and m.high - m.value == pytest.approx(4.604 * sd / 5 ** 0.5, rel=1e-3)
    one = study.share_measured(_profiles("x", (0.80,)), "x")            # one profile: no interval
    assert one.low == -float("inf") and one.high == float("inf")


def test_a_share_is_judged_as_its_factor_from_the_seeds():
    slab = claims.PROFILE_CLAIMS["compute_slab_stats"]                    # claimed 99.9%, within 1.5x holds
    near = study.factor_from_seed(study.share_measured(_profiles("c", (0.80, 0.79, 0.83, 0.81, 0.82)), "c"), 0.999)
    assert slab.verdict(near, ProfileParams(), "cpu") == "holds"
    around = study.factor_from_seed(Measured(0.66, 0.62, 0.70), 0.999)  # 1.43x .. 1.61x off
    assert slab.verdict(around, ProfileParams(), "cpu") == "within noise"
    assert study.factor_from_seed(Measured(0.093, 0.05, 0.2), 0.093).low == 1.0   # holds the seed's share
    item = claims.PROFILE_CLAIMS["tensor_item"]                           # claimed 9.3%, a GPU mechanism
    low = study.factor_from_seed(Measured(0.033, 0.03, 0.036), 0.093)    # ~3x off
    assert item.verdict(low, ProfileParams(), "cpu") == "not tested here"
    assert item.verdict(low, ProfileParams(), "cuda") == "partly holds"
    gone = study.factor_from_seed(Measured.exact(0.0), 0.093)            # a share of 0: infinitely far
    assert item.verdict(gone, ProfileParams(), "cuda") == "does not hold"
    unbounded = study.factor_from_seed(Measured(0.09, -float("inf"), float("inf")), 0.093)
    assert item.verdict(unbounded, ProfileParams(), "cuda") == "within noise"


def _fitted(**counters):
    return types.SimpleNamespace(counters_=counters, coef_=types.SimpleNamespace(shape=(256, 24)))


FITS = {"baseline": _fitted(zero_grad_fallback_coords=154, zero_grad_fallback_coord_iters=1232),
        "optimized": _fitted(zero_grad_fallback_coords=0, zero_grad_skipped_coords=154)}


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_profile_evidence_is_what_profile_claims_judge(device_type):
    base = [FakeProfile({"compute_slab_stats": s, ".item": 0.0333333333}) for s in (0.8123456, 0.79, 0.83, 0.8, 0.81)]
    run = types.SimpleNamespace(cfg=ProfileParams(), device=types.SimpleNamespace(type=device_type))
    found = study.profile_evidence(run, base, FakeProfile({}), FITS)
    rows = {r["key"]: r for r in claims.PROFILE_CLAIMS.judge(found, cfg=ProfileParams(), device=device_type)}
    assert rows["compute_slab_stats"]["verdict"] == "holds"
    assert "80.8% on " + device_type + " (mean of 5 profiles, 99% interval 77.8% to 83.9%)" in \
        rows["compute_slab_stats"]["measured"]
    assert rows["zero_grad_fallback"]["verdict"] == "holds" and rows["zero_grad_exit"]["verdict"] == "fixed"
    item = rows["tensor_item"]
    if device_type == "cpu":
        assert (item["verdict"], item["why"]) == ("not tested here", "measured on cpu")
        assert "a GPU mechanism: on a GPU each .item()" in item["measured"]
    else:
        assert item["verdict"] == "partly holds" and "GPU mechanism" not in item["measured"]
    assert not any(LONG_FLOAT.search(r["measured"]) for r in rows.values())


def test_breakdown_table_is_rounded():
    table = study.breakdown({"baseline": [FakeProfile({"compute_slab_stats": 0.81549}) for _ in range(5)],
                              "optimized": FakeProfile({})})
    assert list(table["frame"]) == [f for f, _, _ in claims.SEED_BREAKDOWN]
    assert table.loc[0, "baseline"] == "81.5% (81.5% to 81.5%)" and table.loc[0, "optimized"] == "0%"
    assert table.loc[0, "claimed (seed, A100)"] == "99.9%"


# ---- notebook 02: the decisions the notebook makes, on tiny inputs ------------------------------------------

def _ratio(r, lo, hi):
    return dict(ratio=r, low=lo, high=hi)


def _found(decisions, device_type="cpu", fallbacks=(6960, 6960), floor=None):
    summary = dict(fallbacks=0, zero_grad_fallbacks=0, frozen_share=0.976)
    fits = {"baseline": dict(fallbacks=fallbacks[0], zero_grad_fallbacks=fallbacks[1], frozen_share=0.0),
            "optimized float32": summary, "optimized float64": dict(summary, frozen_share=0.945)}
    mode = "compiled (default, inductor)"
    run = types.SimpleNamespace(cfg=SlabStatsParams(baseline_slabs=0), device=types.SimpleNamespace(type=device_type))
    return study.evidence(run, decisions, default=dict(_ratio(15.1234567, 11.5, 16.9), n_rows=4096, n_classes=32),
                          side={"eager": _ratio(5.2, 4.7, 5.5), mode: _ratio(15.4, 14.5, 16.0)},
                          fit=_ratio(25.0, 23.0, 27.0), fits=fits, qx_ok=True,
                          hours={"baseline": 344.7, "optimized": 22.81}, above=_ratio(4.4, 4.0, 6.3),
                          floor=floor or {"bound": "sigmoid throughput"}, mode=mode)


@pytest.fixture(scope="module")
def tiny():
    x, y = make_activations(96, 8, 10, l0=3, seed=0)      # 10 classes: two baseline slabs, the second of 2
    pair = {"baseline": study.IMPLS.variant("baseline", baseline_slabs=0),
            "optimized": study.IMPLS.variant("optimized", compile="off")}
    floor = study.iteration_floor(x._nnz(), x.shape[1], y.shape[1], bandwidth=1e10, sigmoid_rate=1e9)
    return x, y, pair, floor


def test_slab_decisions_are_what_slab_claims_judge(tiny):
    x, y, pair, floor = tiny
    cfg = SlabStatsParams(verdict_time=0.5)                 # the CPU defaults' setup, a small budget, tiny data
    decisions = study.decide_slab_claims(x, y, pair, floor, cfg=cfg, device="cpu")
    assert set(decisions) == {"cpu_10x", "floor_3x"}          # gpu_100x, job_18h: GPU claims, not timed on a CPU
    assert all(isinstance(d, Decision) and d.rounds >= 1 for d in decisions.values())
    assert decisions["floor_3x"].quantity == "times the floor" and decisions["cpu_10x"].quantity == "speedup"
    rows = {r["key"]: r for r in claims.SLAB_CLAIMS.judge(_found(decisions), cfg=cfg, device="cpu")}
    assert set(rows) == set(claims.SLAB_CLAIMS.keys) and all(r["verdict"] in VERDICTS for r in rows.values())
    assert rows["gpu_100x"]["verdict"] == "not tested here"
    d = decisions["cpu_10x"]      # the study's text is the house's formatter (kit.formatting.num_interval): so is this
    assert rows["cpu_10x"]["measured"].startswith(num_interval(d.value, d.low, d.high, "x"))
    assert "one whole LM iteration at 4096 rows x 32 classes" in rows["cpu_10x"]["measured"]
    assert "mean of" in rows["cpu_10x"]["measured"] and "calls" in rows["cpu_10x"]["measured"]
    assert "rounds" in rows["floor_3x"] and rows["job_18h"]["why"] == "measured on cpu"
    assert (rows["float64"]["verdict"], rows["qx"]["verdict"]) == ("does not hold", "fixed")
    assert not any(LONG_FLOAT.search(r["measured"]) for r in rows.values())


def test_the_slab_sweep_is_a_grid_whose_baseline_part_is_scaled_to_all_slabs(tiny, tmp_path):
    x, y, pair, _ = tiny                                    # 10 classes
    one_slab = {"baseline": pair["baseline"].with_knobs(baseline_slabs=1), "optimized": pair["optimized"]}
    part = study.iteration_part(one_slab["baseline"].with_knobs(class_slab_size=2), x, y, device="cpu")
    assert isinstance(part, Part) and part.scale == 5        # 1 slab of 2 timed, of 5
    assert not isinstance(study.iteration_part(pair["optimized"], x, y, device="cpu"), Part)
    times = study.slab_sweep(one_slab, [2, 8], x, y, device="cpu", rounds=1, min_run_time=0.01, max_run_time=0.02)
    assert set(times.times) == {(k, w) for k in ("baseline", "optimized") for w in (2, 8)}
    assert times["baseline", 2].task_spec.sub_label == "class_slab_size=2"
    log = ResultsLog(tmp_path / "results.jsonl", study="t")
    times.log(log, metric="seconds per LM iteration", sweep="slab")
    rows = {(r["impl"], r["class_slab_size"]) for r in log.rows(kind="measurement") if r["sweep"] == "slab"}
    assert rows == set(times.times)


def test_the_floor_is_decided_against_the_bandwidth_too(tiny):
    x, y, pair, floor = tiny
    slow_memory = study.iteration_floor(x._nnz(), x.shape[1], y.shape[1], bandwidth=1e3, sigmoid_rate=1e9)
    assert slow_memory["bound"] == "memory bandwidth"
    fn, per_call = study.floor_kernel(slow_memory, "cpu")
    assert per_call == slow_memory["bytes"] / (64 * 2**20 * 2)          # a 64 MiB copy moves 128 MiB
    d = study.decide_floor(x, y, pair["optimized"].knobs, slow_memory, claims.FLOOR_CLAIM.rule, device="cpu",
                           max_run_time=0.05)
    assert d.quantity == "times the floor" and d.value > 0


def test_off_setup_speed_claims_say_what_the_sweep_measured():
    rows = {r["key"]: r for r in claims.SLAB_CLAIMS.judge(_found({"floor_3x": None}, "cuda"), cfg=CPU,
                                                           device="cuda")}
    assert rows["cpu_10x"]["measured"].startswith("on cuda at 4096 rows x 32 classes: the sweep 15.1x (p20-p80")
    assert "perflab run 02 --params gpu" not in rows["cpu_10x"]["measured"]
    assert rows["job_18h"]["verdict"] == "not tested here"                 # nothing decided: nothing judged
    # a fallback not explained by a zero gradient, gone with float64 sums: the open question holds
    assert claims.SLAB_CLAIMS["float64"].verdict(_found({"floor_3x": None}, fallbacks=(7000, 6960))["float64"][0]) \
        == "holds"


# ---- the notebooks' correctness checks -------------------------------------------------------------------

def test_sync_checks_say_what_was_counted():
    counts = {"optimized": types.SimpleNamespace(total=2, by_op={"tolist": 1, "item": 1}),
              "baseline": types.SimpleNamespace(total=3000, by_op={"item": 3000})}
    opt, base = checks.sync_checks(counts, n_rows=1024, n_slabs=3)
    assert opt == Check("optimized: exactly one host sync per LM iteration", False, "2 host syncs: item 1, tolist 1")
    assert not base.passed and base.detail == "3000 .item() calls, need >= 3072 = 1024 rows x 3 slabs"
    logged = []
    run = types.SimpleNamespace(log=types.SimpleNamespace(check=lambda n, p, d: logged.append(p)))
    with pytest.raises(AssertionError, match=r"2 host syncs: item 1, tolist 1"):
        report_checks(run, [opt, base])
    assert logged == [False, False]


@pytest.mark.slow
def test_solver_checks_pass_eager_and_compiled_with_the_eager_backend():
    # backend="eager": dynamo's graphs without inductor's codegen (the compiled path, cheaply)
    results = checks.solver_checks("default", "eager", label="compiled (default, eager)")
    assert [c.name for c in results if not c.passed] == []
    names = [c.name for c in results]
    assert "optimized compiled (default, eager): confusion counts equal to the reference" in names
    assert sum("compiled (default, eager)" in name for name in names) == 3  # (b, w), loss matrix, counts
    assert checks.QX_CHECK in names
    assert all(re.search(r"largest (count )?difference \S+.*, allowed", c.detail) for c in results), \
        [c.detail for c in results]
