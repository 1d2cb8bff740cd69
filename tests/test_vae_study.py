"""The notebook's helpers: per-step scaling, savings, the claims' verdicts and sentences, the sweep's fit, the
floor, the launch breakdown."""
import collections
import dataclasses

import pytest
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from perflab.vae import ModelConfig, build_model, count_parameters, single_changes
from perflab.vae.claims import CLAIMS, SAVINGS, Claim, Evidence, assess, reading, saving, seed_table, verdict
from perflab.vae.study import DRAWS, GRAPH_CALLS, MATMULS, fit_fixed_and_per_sample, launch_kinds, per_step, step_floor
from perflab.verdicts import Measured


def _m(times, name="x"):
    spec = TaskSpec(stmt="fn()", setup="", global_setup="", label="t", sub_label=name, description="", env="",
                    num_threads=1)
    return Measurement(number_per_run=1, raw_times=list(times), task_spec=spec)


def test_per_step_divides_by_the_steps_of_a_call():
    m = per_step(_m([0.10, 0.12, 0.11]), 10)
    assert m.median == pytest.approx(0.011)


def test_saving_and_verdicts():
    base, fast = _m([10e-3, 10.2e-3, 9.8e-3, 10.1e-3]), _m([2e-3, 2.1e-3, 1.9e-3, 2.05e-3])
    s = saving(base, fast, 5000)
    assert s["median_s"] == pytest.approx(40.0, rel=0.05) and 0 < s["lo_s"] < s["median_s"] < s["hi_s"]
    claim = Claim("c", "saves 5-8 s", "5-8 s", "seed", at_least=5.0, partly=1.0)
    assert verdict(claim, Measured(6.0, 5.5, 7.0), "cpu") == "holds"
    assert verdict(claim, Measured(5.2, 4.0, 6.0), "cpu") == "within noise"     # straddles the claim
    assert verdict(claim, Measured(2.2, 1.5, 4.1), "cpu") == "partly holds"     # real, but short of it
    assert verdict(claim, Measured(2.2, 0.5, 4.1), "cpu") == "within noise"     # the smaller effect itself is noise
    assert verdict(claim, Measured(0.2, -0.5, 0.8), "cpu") == "does not hold"
    gpu = Claim("g", "10x on the GPU", "10x", "issue", at_least=10.0, needs="cuda")
    assert verdict(gpu, Measured(50.0, 40.0, 60.0), "cpu") == "not tested here"
    assert verdict(gpu, Measured(12.0, 11.0, 13.0), "cuda") == "holds"
    fix = Claim("f", "a defect", "-", "note", at_least=1, fix=True)
    assert verdict(fix, Measured.exact(1), "cpu") == "fixed"
    assert verdict(Claim("z", "no syncs", "0", "issue", at_most=0), Measured.exact(3), "cpu") == "does not hold"


def test_fit_recovers_a_line():
    bs = [16, 64, 256, 1024]
    f = fit_fixed_and_per_sample(bs, [2e-3 + 1e-5 * b for b in bs])
    assert f["fixed_s"] == pytest.approx(2e-3) and f["per_sample_s"] == pytest.approx(1e-5)
    assert f["crossover_batch"] == pytest.approx(200)


def test_step_floor_counts_the_matmuls():
    model = build_model(ModelConfig())
    f = step_floor(model, 64, sep_grad=True, flops_per_s=1e12, bytes_per_s=1e30)
    dims = [(256, 384), (384, 192), (192, 72), (36, 192), (192, 384), (384, 256)]
    assert f["flops"] == 3 * sum(2 * 64 * a * b for a, b in dims) and f["bound"] == "FLOPs"
    g = step_floor(model, 64, sep_grad=False, flops_per_s=1e12, bytes_per_s=1e30)
    assert g["flops"] - f["flops"] == sum(2 * 64 * a * b for a, b in dims[:3])  # the no_grad encoder pass
    assert step_floor(model, 64, True, 1e30, 1e9)["bytes"] == 40 * count_parameters(model)


def _evidence(device_type="cpu", **over):
    names = list(single_changes()) + ["captured"]
    times = {n: _m([10e-3, 10.1e-3, 9.9e-3, 10e-3], n) for n in names}
    times["optimized"] = _m([5e-3, 5.1e-3, 4.9e-3, 5e-3])
    times["captured"] = _m([0.5e-3, 0.55e-3, 0.45e-3, 0.5e-3])
    syncs = {n: 13.0 for n in names} | {"optimized": 0.1, "captured": 0.1}
    ev = Evidence(times=times, syncs_per_step=syncs, step_syncs={"optimized": 0, "captured": 0},
                  launches={"baseline": 240.0, "optimized": 230.0, "captured": 31.0},
                  host_launches={n: dict(graph=0.0, kernel=0.0, copy=0.0, memset=0.0) for n in names},
                  remap_times={"remap_host": _m([1e-4] * 4), "remap_unique": _m([2e-4] * 4)},
                  unique_remap_syncs={"unique": 1, "__setitem__[bool mask]": 3},
                  curves={"baseline = optimized": True, "optimized = captured": True}, curve_steps=100,
                  captured_gap=2e-5, sep_grad_steers=True, epoch_batches=5000, batch=64, device_type=device_type, device_kind=device_type)
    return dataclasses.replace(ev, **over)


def test_claims_table_and_verdicts():
    rows = assess(_evidence())
    assert [r["key"] for r in rows] == [c.key for c in CLAIMS]
    v = {r["key"]: r["verdict"] for r in rows}
    assert [v[k] for k, *_ in SAVINGS] == ["does not hold"] * 4    # no saving between equal timings
    assert v["unique_syncs"] == "does not hold" and v["integrity"] == "holds" and v["sep_grad"] == "fixed"
    assert v["optimized_2x"] == v["captured_10x"] == v["captured_launches"] == "not tested here"  # GPU-only, on a CPU
    assert v["cpu_ops_10x"] == "partly holds"                         # 240 / 31 = 7.7x: real, short of 10x
    assert v["optimized_syncs"] == v["captured_syncs"] == v["captured_math"] == "holds"
    table = seed_table(_evidence(), rows)
    assert len(table) == len(SAVINGS) + 1 and table["syncs removed per step"].iloc[-1] == pytest.approx(12.9)
    lines = reading(_evidence(), rows, {MATMULS: 22.0, DRAWS: 7.0, GRAPH_CALLS: 1.0, "other": 1.0})
    assert "short of 10x by 1.3x" in lines[-1] and "matmuls (aten BLAS calls) 22" in lines[-1]
    assert "are 30 ops per step" in lines[-1] and "8.0x fewer than the baseline at most" in lines[-1]
    # one replay of a graph that draws random numbers: 1 graph launch + 2 RNG-state fills (PyTorch PR #143777),
    # its 2 input copies and the metric ring's read every 50 steps apart: 5.02 calls, "a few launches" holds
    calls = {"baseline": dict(graph=0.0, kernel=300.0, copy=0.0, memset=0.0),
             "optimized": dict(graph=0.0, kernel=290.0, copy=0.0, memset=0.0),
             "captured": dict(graph=1.0, kernel=2.0, copy=2.02, memset=0.0)}
    gpu_rows = assess(_evidence("cuda", host_launches=calls))
    gpu = {r["key"]: r["verdict"] for r in gpu_rows}
    assert gpu["captured_10x"] == "holds" and gpu["captured_launches"] == "holds"
    assert "1.00 graph launch + 2.00 kernel launches" in {r["key"]: r["measured"] for r in gpu_rows}["captured_launches"]
    eager = dict(calls, captured=dict(graph=0.0, kernel=280.0, copy=2.0, memset=0.0))   # not replayed: many launches
    assert {r["key"]: r["verdict"] for r in assess(_evidence("cuda", host_launches=eager))}["captured_launches"] == \
        "does not hold"
    assert gpu["cpu_ops_10x"] == "not tested here"
    assert gpu["optimized_2x"] == "within noise"  # 2.0x whose p20/p80 range straddles 2x
    none_seen = _evidence("cuda", launches={"baseline": 300.0, "optimized": 290.0, "captured": 0.0})
    assert "infx fewer" in {r["key"]: r["measured"] for r in assess(none_seen)}["cpu_ops_10x"]  # no crash


def test_launch_kinds_split_a_count():
    class C:
        by_op = collections.Counter({"aten::mm": 13, "aten::addmm": 8, "aten::detach": 20, "compiled graph": 2,
                                     "aten::cumsum": 1})
        total = 44
    kinds = launch_kinds(C(), steps=2)
    assert kinds[MATMULS] == 10.5 and kinds["detach (autograd hands over each gradient; metrics)"] == 10
    assert kinds[GRAPH_CALLS] == 1 and kinds["cumsum (the remap's ranks: no scan in inductor's C++ code)"] == 0.5
    assert kinds["other (elementwise, reductions, views, host reads)"] == 0 and sum(kinds.values()) == 22


def test_pick_clock():
    import time

    import torch

    from perflab.vae.study import pick_clock, torch_threads

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    with torch_threads(1):
        assert pick_clock("auto", cpu) is time.process_time and pick_clock("cpu", cpu) is time.process_time
        assert pick_clock("wall", cpu) is None and pick_clock("auto", cuda) is None
        with pytest.raises(ValueError, match="needs a cpu device"):
            pick_clock("cpu", cuda)
        with pytest.raises(ValueError, match="clock must be"):
            pick_clock("sundial", cpu)
    with torch_threads(2):
        assert pick_clock("auto", cpu) is None
        with pytest.raises(ValueError, match="one torch thread"):
            pick_clock("cpu", cpu)
