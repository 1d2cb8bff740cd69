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
