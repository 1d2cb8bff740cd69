import json
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from perflab.kit.bench import measure
from perflab.kit.notebook import open_run
from perflab.kit.results import ResultsLog, read_rows


@dataclass
class P:
    batch: int = 4
    device: str = "cpu"


def test_rows_are_stamped_with_params_and_environment(tmp_path):
    log = ResultsLog(tmp_path / "r.jsonl", study="s1", params=P())
    m = measure(lambda: torch.ones(10).sum(), label="sum", description="baseline", min_run_time=0.01)
    log.measurement(m, impl="baseline")
    log.value("count", 3, unit="syncs")
    log.check("equal", True)
    log.claim("fast", claimed="2x", measured="1.9x", verdict="partly holds")
    rows = log.rows()
    assert [r["kind"] for r in rows] == ["measurement", "value", "check", "claim"]
    for r in rows:
        assert r["study"] == "s1" and r["params"] == {"batch": 4, "device": "cpu"}
        assert r["env"]["torch"] == torch.__version__ and "commit" in r["env"]
    assert rows[0]["median_s"] > 0 and rows[0]["impl"] == "baseline"
    t = log.table()
    assert len(t) == 4 and "params.batch" in t.columns and "env.device_name" in t.columns


def test_bad_kind_and_verdict_are_refused(tmp_path):
    log = ResultsLog(tmp_path / "r.jsonl", stamp={})
    with pytest.raises(ValueError):
        log.append("timing", x=1)
    with pytest.raises(ValueError, match="verdict"):
        log.claim("c", claimed="s", measured="m", verdict="true-ish")


def test_a_partial_last_line_is_skipped_and_the_next_row_starts_clean(tmp_path):
    path = tmp_path / "r.jsonl"
    log = ResultsLog(path, study="s", stamp={})
    log.value("a", 1)
    log.value("b", 2)
    with open(path, "ab") as f:              # what a crash mid-write leaves behind
        f.write(b'{"study": "s", "kind": "value", "metric": "c", "val')
    with pytest.warns(UserWarning, match="incomplete"):
        assert [r["metric"] for r in log.rows()] == ["a", "b"]
    assert log.skipped == 1
    log.value("d", 4)
    with pytest.warns(UserWarning):
        assert [r["metric"] for r in log.rows()] == ["a", "b", "d"]


def test_a_process_killed_while_writing_loses_no_earlier_row(tmp_path):
    path = tmp_path / "r.jsonl"
    code = textwrap.dedent(f"""
        from perflab.kit.results import ResultsLog
        log = ResultsLog({str(path)!r}, study="crash", stamp={{"host": "x"}})
        i = 0
        while True:
            log.value("i", i, payload="x" * 5000)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 30
    while time.time() < deadline and (not path.exists() or path.stat().st_size < 200_000):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = read_rows(path)
    assert len(rows) >= 20
    assert [r["value"] for r in rows] == list(range(len(rows)))  # in order, none missing


def test_open_run_uses_perflab_out_and_a_folder_per_execution(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_OUT", str(tmp_path / "out"))
    monkeypatch.delenv("PERFLAB_RUN_ID", raising=False)
    run = open_run("demo", P())
    assert run.dir == (tmp_path / "out" / "demo" / run.log.run_id) and run.dir.is_dir()
    run.log.value("x", 1.5)
    assert json.loads((tmp_path / "out" / "results.jsonl").read_text())["value"] == 1.5
    again = open_run("demo", P())                      # a second execution: its own id, its own folder
    assert again.log.run_id != run.log.run_id and again.dir != run.dir
    monkeypatch.setenv("PERFLAB_RUN_ID", "20261123-101010-abcd")  # what `perflab run` hands the kernel
    assert open_run("demo", P()).dir == tmp_path / "out" / "demo" / "20261123-101010-abcd"


def test_a_row_shows_in_one_line(tmp_path):
    from IPython.lib.pretty import pretty

    row = ResultsLog(tmp_path / "r.jsonl", study="s", device="cpu").value("ms per step", 1.5, unit="ms", impl="opt")
    assert repr(row) == "<value row: study='s', metric='ms per step', value=1.50, unit='ms', impl='opt'>"
    assert pretty(row) == repr(row)                    # what a notebook cell ending with the call displays
    assert row["env"]["torch"] == torch.__version__   # still the whole row underneath


def test_thread_count_is_stamped_when_the_row_is_written(tmp_path):
    log = ResultsLog(tmp_path / "r.jsonl", study="s", device="cpu")
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)        # a notebook sets its threads after opening the run
        log.value("a", 1)
        torch.set_num_threads(2)
        log.value("b", 2)
    finally:
        torch.set_num_threads(n)
    assert [r["env"]["torch_threads"] for r in log.rows()] == [1, 2]


def test_user_paths_resolve_from_where_the_command_ran(tmp_path, monkeypatch):
    from perflab.kit.paths import user_path

    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path))
    assert user_path("data/kg") == tmp_path / "data" / "kg"
    assert user_path("/abs/kg") == Path("/abs/kg")
    monkeypatch.delenv("PERFLAB_CWD")
    monkeypatch.chdir(tmp_path)
    assert user_path("kg") == tmp_path / "kg"


def test_a_claim_row_carries_its_claimed_number(tmp_path):
    log = ResultsLog(tmp_path / "r.jsonl", stamp={})
    assert log.claim("a", claimed="2x", measured="m", verdict="holds")["claimed"] == "2x"
    with pytest.raises(TypeError, match="claimed"):
        log.claim("c", measured="m", verdict="holds")
