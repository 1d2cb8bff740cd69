"""The notebook's helpers: per-step scaling, savings and verdicts, the sweep's fit, the floor."""
import pytest
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from perflab.vae import ModelConfig, build_model, count_parameters, single_changes
from perflab.vae.study import (
    SEED_TABLE,
    fit_fixed_and_per_sample,
    per_step,
    range_verdict,
    saving,
    saving_verdict,
    seed_claims,
    seed_table,
    step_floor,
)


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
    assert saving_verdict(s["median_s"], s["lo_s"], claim_lo=40.0 * 0.9) == "holds"
    assert saving_verdict(s["median_s"], s["lo_s"], claim_lo=100.0) == "partly holds"
    assert saving_verdict(0.5, -0.2, claim_lo=5.0) == "does not hold"   # cannot be told from zero
    assert saving_verdict(-3.0, -5.0, claim_lo=5.0) == "does not hold"  # slower
    assert range_verdict(0.08, 0.11, 13, 25) == "does not hold"
    assert range_verdict(12.0, 14.0, 13, 25) == "holds"


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


def test_seed_table_and_claims():
    names = list(single_changes())
    times = {n: _m([10e-3, 10.1e-3, 9.9e-3, 10e-3], n) for n in names}
    times["optimized"] = _m([5e-3, 5.1e-3, 4.9e-3, 5e-3])
    syncs = {n: 13.0 for n in names} | {"optimized": 0.1}
    table = seed_table(times, syncs, 5000, "cpu")
    assert len(table) == len(SEED_TABLE) + 1
    assert list(table["verdict"][:4]) == ["does not hold"] * 4   # no change between equal timings
    assert table["syncs removed per step"].iloc[-1] == pytest.approx(12.9)
    times["baseline"] = _m([20e-3, 20e-3, 20e-3])  # 3 blocks: too few for a verdict
    assert seed_table(times, syncs, 5000, "cpu")["verdict"].iloc[0] == "not tested here"
    claims = seed_claims(table, {"remap_host": _m([1e-4] * 4), "remap_unique": _m([2e-4] * 4)},
                         {"unique": 1, "__setitem__[bool mask]": 3}, True, 100, True, 5000, "cpu")
    verdicts = {c[0]: c[3] for c in claims}
    assert verdicts["GPU-side remap (torch.unique) removes the remap's syncs"] == "does not hold"
    assert verdicts["Algorithm integrity: loss and curves unchanged"] == "holds"
    assert verdicts["The separability term shapes the latent space"] == "fixed"


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
