import pytest
import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from perflab.kit.bench import (
    Table,
    compare,
    fmt,
    fmt_seconds,
    measure,
    measure_interleaved,
    memory_bandwidth,
    speedup,
    summary,
)


def test_measure_returns_a_measurement_with_spread_and_labels():
    x = torch.randn(256, 256)
    m = measure(lambda: x @ x, label="mm", sub_label="256", description="eager", min_run_time=0.05,
                max_run_time=1.0)
    s = summary(m)
    assert s["n"] >= 4 or s["median_s"] * s["n"] * s["calls_per_block"] >= 1.0  # >= 4 blocks unless out of time
    assert s["p20_s"] <= s["median_s"] <= s["p80_s"] and s["iqr_s"] >= 0
    assert m.task_spec.label == "mm" and m.task_spec.num_threads == torch.get_num_threads()
    assert "IQR" in fmt(m)


def test_warmup_calls_are_not_timed():
    calls = []
    measure(lambda: calls.append(1), label="count", warmup=3, min_run_time=0.01, max_run_time=0.05)
    assert len(calls) > 3


def test_speedup_and_compare():
    x = torch.randn(64, 64)
    a = measure(lambda: [x @ x for _ in range(8)], label="mm", description="baseline", min_run_time=0.05,
                max_run_time=0.5)
    b = measure(lambda: x @ x, label="mm", description="optimized", min_run_time=0.05, max_run_time=0.5)
    assert speedup(a, b) == pytest.approx(a.median / b.median)
    assert "baseline" in str(compare([a, b]))


def _fixed(median_s: float, sub_label: str, description: str) -> Measurement:
    spec = TaskSpec(stmt="fn()", setup="", global_setup="", label="step", sub_label=sub_label,
                    description=description, env="", num_threads=1)
    return Measurement(number_per_run=1, raw_times=[median_s * f for f in (0.9, 1.0, 1.0, 1.1)], task_spec=spec)


def test_compare_prints_precise_medians_and_every_speedup():
    # torch's Compare, trimmed by the noise, printed these three as "14 / 10 / 10"
    table = compare([_fixed(0.0140, "B=64", "baseline"), _fixed(0.0133, "B=64", "masked"),
                     _fixed(0.0137, "B=64", "compact"), _fixed(0.0070, "B=128", "compact")], title="step")
    lines = str(table).splitlines()
    assert lines[0] == "[ step ]" and lines[1].split() == list(Table.HEADER)
    rows = [line.split() for line in lines[3:]]
    assert [(r[1], r[2], r[3], r[-1]) for r in rows[:3]] == [
        ("B=64", "baseline", "14.0", "ref"), ("B=64", "masked", "13.3", "1.05x"), ("B=64", "compact", "13.7", "1.02x")]
    assert rows[3][:4] == ["step", "B=128", "compact", "7.00"] and rows[3][-1] == "4"  # a lone case: no speedup


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        measure(lambda: None, label="x", min_run_time=0)


def test_fmt_seconds_units():
    assert fmt_seconds(2.5) == "2.50 s" and fmt_seconds(0.034) == "34.0 ms" and fmt_seconds(1.2e-5) == "12.0 us"
    assert fmt_seconds(0.0133) == "13.3 ms" and fmt_seconds(0.99996) == "1.00 s" and fmt_seconds(1234.5) == "1230 s"


def test_memory_bandwidth_is_positive():
    bw, m = memory_bandwidth("cpu", nbytes=16 * 2**20, min_run_time=0.05, max_run_time=0.5)
    assert bw > 1e8  # any machine copies more than 100 MB/s


def test_measure_with_a_cpu_time_clock_ignores_waiting():
    import time

    def work_then_wait():  # ~2 ms of CPU work, then 10 ms asleep
        t0 = time.process_time()
        while time.process_time() - t0 < 0.002:
            pass
        time.sleep(0.010)

    kw = dict(label="wait", warmup=0, min_run_time=0.03, max_run_time=0.1)
    wall = measure(work_then_wait, **kw)
    cpu = measure(work_then_wait, timer=time.process_time, **kw)
    assert wall.median >= 0.011 and 0.0015 < cpu.median < 0.006  # the sleep costs wall time only


def test_measure_interleaved_alternates_and_merges():
    order = []
    ms = measure_interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, label="x",
                             rounds=3, descriptions={"b": "second"}, min_run_time=0.03, max_run_time=0.06)
    assert set(ms) == {"a", "b"} and ms["b"].task_spec.description == "second"
    assert ms["a"].task_spec.sub_label == "a" and len(ms["a"].times) >= 3  # blocks of all rounds merged
    switches = sum(1 for x, y in zip(order, order[1:]) if x != y)
    assert switches >= 5  # a, b, a, b, a, b at least: interleaved, not one after the other
    with pytest.raises(ValueError, match="rounds"):
        measure_interleaved({"a": lambda: None}, label="x", rounds=0)


def _times(raw, number_per_run=1, threads=2) -> Measurement:
    spec = TaskSpec(stmt="fn()", setup="", global_setup="", label="x", sub_label="", description="", env="",
                    num_threads=threads)
    return Measurement(number_per_run=number_per_run, raw_times=raw, task_spec=spec)


def test_summary_and_its_ratios_are_the_block_times_percentiles():
    from perflab.kit.bench import speedup_range

    m = _times([2.0, 4.0, 6.0, 8.0, 10.0], number_per_run=2, threads=3)   # blocks of 2 calls: 1..5 s per call
    assert summary(m) == {"median_s": 3.0, "iqr_s": 2.0, "p20_s": 1.8, "p80_s": 4.2, "mean_s": 3.0, "n": 5,
                          "calls_per_block": 2, "num_threads": 3}
    assert fmt(m) == "3.00 s (IQR 2.00 s, n=5)"
    fast = _times([1.0, 2.0, 3.0, 4.0, 5.0], number_per_run=2)             # 0.5..2.5 s per call
    assert speedup(m, fast) == 2.0
    assert speedup_range(m, fast) == pytest.approx((1.8 / 2.1, 4.2 / 0.9))


class _Timer:
    """torch's Timer, recorded: its arguments, then adaptive_autorange's."""
    made: list = []

    def __init__(self, **kw):
        _Timer.made.append(kw)

    def adaptive_autorange(self, **kw):
        _Timer.made.append(kw)
        return "measurement"


def test_measure_warms_up_synchronizes_and_hands_its_budget_to_torchs_timer(monkeypatch):
    from perflab.kit import bench

    seen = []
    monkeypatch.setattr(bench.benchmark, "Timer", _Timer)
    monkeypatch.setattr(bench, "synchronize", seen.append)
    _Timer.made = []
    fn = lambda: seen.append("call")  # noqa: E731
    clock = lambda: 0.0  # noqa: E731
    assert measure(fn, label="l", sub_label="s", description="d", min_run_time=0.3, max_run_time=4.0, threshold=0.05,
                   warmup=2, num_threads=3, device="cpu", timer=clock) == "measurement"
    assert seen == ["call", "call", "cpu"]                 # two warm-up calls, then the device synchronized
    assert _Timer.made == [dict(stmt="fn()", globals={"fn": fn}, label="l", sub_label="s", description="d",
                                num_threads=3, timer=clock), dict(threshold=0.05, min_run_time=0.3, max_run_time=4.0)]
    _Timer.made, seen[:] = [], []
    measure(fn, label="l")                                 # the defaults: one warm-up, no device, torch's clock
    assert seen == ["call"]
    assert _Timer.made == [dict(stmt="fn()", globals={"fn": fn}, label="l", sub_label="", description="",
                                num_threads=torch.get_num_threads()), dict(threshold=0.1, min_run_time=0.2,
                                                                           max_run_time=10.0)]
    for bad in (dict(warmup=-1), dict(min_run_time=0.5, max_run_time=0.4)):
        with pytest.raises(ValueError, match="measure: need warmup >= 0 and 0 < min_run_time <= max_run_time"):
            measure(fn, label="l", **bad)


def test_measure_interleaved_splits_the_budget_and_warms_up_in_the_first_round_only(monkeypatch):
    from perflab.kit import bench

    calls = []
    monkeypatch.setattr(bench, "measure", lambda fn, **kw: calls.append(kw) or _times([1.0, 1.0]))
    ms = measure_interleaved({"a": None, 2: None}, label="l", rounds=2, sub_labels={"a": "A"}, min_run_time=0.4,
                             max_run_time=2.0, warmup=3, threshold=0.2)
    assert [(c["sub_label"], c["warmup"], c["description"]) for c in calls] == [("A", 3, ""), ("2", 3, ""),
                                                                               ("A", 0, ""), ("2", 0, "")]
    assert all((c["label"], c["min_run_time"], c["max_run_time"], c["threshold"]) == ("l", 0.2, 1.0, 0.2) for c in calls)
    assert len(ms["a"].times) == 4                         # both rounds' blocks, merged


def test_the_floors_are_bytes_and_flops_over_the_median(monkeypatch):
    from perflab.kit import bench

    made = []
    monkeypatch.setattr(bench, "measure", lambda fn, **kw: (fn(), made.append(kw)) and _times([0.5]))
    bw, _ = bench.memory_bandwidth("cpu", nbytes=2**20, max_run_time=1.0)
    assert bw == 2 * 2**20 / 0.5                           # a copy reads and writes every byte
    flops, _ = bench.matmul_peak("cpu", n=64)
    assert flops == 2 * 64**3 / 0.5
    bench.matmul_peak("cpu", dtype=torch.float64)
    assert [(k["sub_label"], k["description"], k["label"]) for k in made] == [
        ("copy 1 MiB", "cpu", "floor"), ("matmul 64^3 float32", "cpu", "floor"), ("matmul 1024^3 float64", "cpu", "floor")]
    assert made[0]["max_run_time"] == 1.0 and made[0]["device"] == torch.device("cpu")


def test_a_table_as_torchs_compare_keeps_its_title():
    t = compare([_fixed(0.01, "B=1", "a")], title="step")
    assert t.torch_compare().title == "step" and not hasattr(compare([_fixed(0.01, "B=1", "a")]).torch_compare(), "title")


def test_a_table_prints_its_columns_as_wide_as_their_widest_cell(capsys):
    # the baseline is the reference wherever it stands in its case; a timing without case or implementation prints
    # empty cells (and, alone in its case, no speedup)
    table = compare([_fixed(0.0133, "B=64", "masked"), _fixed(0.0140, "B=64", "baseline"), _fixed(0.5, "", "")])
    assert table.rows[2][:3] == ["step", "", ""]
    expected = "\n".join([
        "benchmark  case  impl      median   IQR      p20-p80            n  speedup",
        "---------  ----  --------  -------  -------  -----------------  -  -------",
        "step       B=64  masked    13.3 ms  665 us   12.8 ms - 13.8 ms  4  1.05x",
        "step       B=64  baseline  14.0 ms  700 us   13.4 ms - 14.6 ms  4  ref",
        "step                       500 ms   25.0 ms  480 ms - 520 ms    4"])
    assert str(table) == expected                          # no title: no title line
    table.print()
    assert capsys.readouterr().out == expected + "\n"


def test_measure_accepts_an_equal_minimum_and_maximum_and_names_its_bad_arguments(monkeypatch):
    import re

    from perflab.kit import bench

    monkeypatch.setattr(bench.benchmark, "Timer", _Timer)
    assert measure(lambda: None, label="l", min_run_time=0.3, max_run_time=0.3) == "measurement"
    with pytest.raises(ValueError, match="^" + re.escape("measure: need warmup >= 0 and 0 < min_run_time <= "
                                                         "max_run_time") + "$"):
        measure(lambda: None, label="l", max_run_time=0.1)


def test_measure_interleaved_defaults_to_three_rounds_of_a_third_of_the_budget_and_allows_one(monkeypatch):
    from perflab.kit import bench

    calls = []
    monkeypatch.setattr(bench, "measure", lambda fn, **kw: calls.append(kw) or _times([1.0]))
    measure_interleaved({"a": None}, label="l")
    assert [c["warmup"] for c in calls] == [1, 0, 0]       # warm-up in the first round only
    assert all(c["min_run_time"] == pytest.approx(0.2 / 3) and c["max_run_time"] == pytest.approx(10.0 / 3)
               for c in calls)
    calls.clear()
    ms = measure_interleaved({"a": None}, label="l", rounds=1, max_run_time=2.0)
    assert len(calls) == 1 and calls[0]["max_run_time"] == 2.0 and len(ms["a"].times) == 1


def test_the_floors_time_a_copy_and_a_product_on_the_device_asked_for(monkeypatch):
    # the meta device stands in for an accelerator: tensors with a device and a shape, no data
    from perflab.kit import bench

    made, results, operands = [], [], []
    monkeypatch.setattr(bench, "measure", lambda fn, **kw: (results.append(fn()), made.append(kw)) and _times([0.5]))
    randn = torch.randn
    monkeypatch.setattr(torch, "randn", lambda *a, **kw: operands.append(randn(*a, **kw)) or operands[-1])
    bw, _ = bench.memory_bandwidth("meta", nbytes=2**20, max_run_time=1.0)
    assert bw == 2 * 2**20 / 0.5
    flops, _ = bench.matmul_peak("meta", n=64, max_run_time=1.0)
    assert flops == 2 * 64**3 / 0.5
    flops, _ = bench.matmul_peak("meta")                   # an accelerator's default product: 8192^3
    assert flops == 2 * 8192**3 / 0.5 and made[2]["sub_label"] == "matmul 8192^3 float32"
    assert [(r.device.type, tuple(r.shape)) for r in results] == [("meta", (2**18,)), ("meta", (64, 64)),
                                                                  ("meta", (8192, 8192))]
    assert [k["device"] for k in made] == [torch.device("meta")] * 3
    # both operands on the device: a GPU refuses a product of a device tensor and a host one; meta does not
    assert [(t.device.type, tuple(t.shape)) for t in operands[:2]] == [("meta", (64, 64))] * 2
    assert made[0]["max_run_time"] == made[1]["max_run_time"] == 1.0


def test_a_measurement_from_times_taken_by_hand_reads_as_measures_do():
    from perflab.kit.bench import from_times

    m = from_times([0.3, 0.1, 0.2], label="whole fit", sub_label="8 rows", description="baseline")
    assert (m.median, summary(m)["n"], m.task_spec.description) == (pytest.approx(0.2), 3, "baseline")
    blocks = from_times([4.0, 8.0], label="step", calls=4)   # blocks of 4 steps: a step's time is the block's / 4
    assert blocks.times == [1.0, 2.0] and summary(blocks)["calls_per_block"] == 4
    for bad in ([], [0.1, float("nan")], [-1.0]):
        with pytest.raises(ValueError, match="from_times: need at least one finite time"):
            from_times(bad, label="x")
    with pytest.raises(ValueError, match="calls >= 1"):
        from_times([0.1], label="x", calls=0)
