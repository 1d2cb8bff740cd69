"""Ctrl-C during `perflab run`: one line, an "interrupted" status, the notebook marked at the cell it reached,
the rows written so far kept, and a report that shows the study as interrupted (never as an earlier "ok").
A kernel that dies is recorded the same way, as failed at its cell."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from perflab.kit.results import ResultsLog
from perflab.runner.report import build

FIXTURES = Path(__file__).parents[1] / "fixtures" / "interrupt"


def _default_sigint() -> None:
    # a test started with SIGINT ignored (`nohup make test &`, a script's background job) would pass that on,
    # and Python keeps an inherited SIG_IGN: the child that must see Ctrl-C gets the default back
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _perflab(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "perflab.runner.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_default_sigint)


@pytest.mark.slow  # one notebook execution (~10 s on a loaded 2-core box)
def test_ctrl_c_is_recorded_where_it_stopped(tmp_path):
    out, marker = tmp_path / "out", tmp_path / "marker"
    earlier = ResultsLog(out / "results.jsonl", study="sleepy", stamp={}, run_id="20260101-000000-0000")
    earlier.append("run", status="started")          # an earlier execution in the same folder that finished
    earlier.value("before the wait", 3)
    earlier.value("after the wait", 1)
    earlier.append("run", status="ok", seconds=52.0, cell=None, cells=None, error="")

    run = ["run", "sleepy", "--notebooks", str(FIXTURES), "--out", str(out), "--no-progress"]
    proc = _perflab(*run, env={**os.environ, "SLEEPY_MARKER": str(marker), "PYTHONFAULTHANDLER": "1"})
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate()[1]
    os.killpg(proc.pid, signal.SIGINT)                # what Ctrl-C in a terminal sends: the whole process group
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:                 # say where it hangs (PYTHONFAULTHANDLER dumps on SIGABRT)
        os.killpg(proc.pid, signal.SIGABRT)
        pytest.fail("perflab run did not stop after Ctrl-C:\n" + proc.communicate()[1][-8000:])

    assert proc.returncode == 130
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err  # one line, no traceback (nor a kernel's)
    assert "sleepy: INTERRUPTED at cell 5 of 6" in lines[0] and "its rows so far are kept" in lines[0]
    kernel = int(marker.read_text())
    for _ in range(50):                               # the kernel is shut down, not left running
        try:
            os.kill(kernel, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"kernel {kernel} still running")

    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    last_id = rows[-1]["run_id"]
    assert last_id != earlier.run_id
    last = [r for r in rows if r["run_id"] == last_id]
    assert [(r["kind"], r.get("status") or r.get("metric")) for r in last] == [
        ("run", "started"), ("value", "before the wait"), ("run", "interrupted")]  # finished rows kept
    assert (last[-1]["cell"], last[-1]["cells"]) == (5, 6)

    nb = nbformat.read(out / "sleepy.ipynb", as_version=4)
    assert nb.metadata["perflab"] == {"status": "interrupted", "cell": 5}
    banner, cells = nb.cells[0], nb.cells[1:]
    assert "Interrupted" in banner.source and "cell 5 of 6" in banner.source
    assert cells[4].metadata.papermill["status"] == "interrupted"
    assert [o.get("ename") for o in cells[4].outputs] == ["KeyboardInterrupt"]
    assert cells[5].metadata.papermill["status"] == "pending" and cells[5].outputs == []  # never ran

    report = build(out)
    summary = report.split("## Environment")[0]
    assert "| sleepy | **interrupted** |" in summary and "| ok |" not in summary
    assert "1 earlier execution(s)" in report and "after the wait" not in report  # no row of the earlier one
    assert "| ok |" in build(out, all_runs=True)     # the earlier execution is still there, apart


@pytest.mark.slow  # one notebook execution
def test_a_kernel_that_dies_is_recorded_at_its_cell(tmp_path, monkeypatch, capsys):
    from perflab.runner.cli import main

    monkeypatch.setenv("SLEEPY_DIE", "1")
    out = tmp_path / "out"
    assert main(["run", "sleepy", "--notebooks", str(FIXTURES), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err  # In [n] is there only when the kernel announced the cell before it died
    assert "sleepy: FAILED at cell 5 of 6" in err and "DeadKernelError: Kernel died" in err
    nb = nbformat.read(out / "sleepy.ipynb", as_version=4)
    assert nb.metadata["perflab"] == {"status": "failed", "cell": 5}
    assert nb.cells[5].metadata.papermill["status"] == "failed"
    assert nb.cells[6].metadata.papermill["status"] == "pending"  # papermill alone says "completed"
    assert "| sleepy | **failed** |" in build(out)
