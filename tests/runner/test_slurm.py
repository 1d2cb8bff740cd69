"""`perflab sweep --executor slurm` against a real one-node Slurm (tests/slurm_cluster.py: Debian's slurm-wlm and
munge, accounting off), over a fixture notebook that naps while the test holds it (tests/fixtures/slurm/nap.ipynb).

Skipped, with the reason, where Slurm's daemons are not installed or the tests do not run as root; CI installs them
(.ci/run). The time-limit test's point is submitted by the first test and checked after every other test of the
session (marker `last`): Slurm's limits count in minutes, and its minute passes while the other tests run."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, missing

from perflab.runner.cli import main
from perflab.runner.slurm import queue

NB = Path(__file__).parents[1] / "fixtures" / "slurm"
pytestmark = pytest.mark.slurm


def _unavailable(why: str) -> None:
    if os.environ.get("PERFLAB_REQUIRE_CLIENTS"):  # CI installed them (.ci/run): absent means broken, not skipped
        pytest.fail(f"PERFLAB_REQUIRE_CLIENTS is set, but {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    why = missing()
    if why:
        _unavailable(why)
    c = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)  # this cluster, for the test process and every sweep it starts
    try:
        yield c
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        c.stop()


def _start(out: Path, *args: str, nap: Path | None = None) -> subprocess.Popen:
    """`perflab sweep nap ... --executor slurm` in the background (its points nap while `nap`/hold exists)."""
    env = {k: v for k, v in os.environ.items() if k != "NAP_DIR"}
    if nap is not None:
        env["NAP_DIR"] = str(nap)
    cmd = [sys.executable, "-m", "perflab.runner.cli", "sweep", "nap", "--notebooks", str(NB), "--executor", "slurm",
           "--out", str(out), "--no-progress", *args]
    return subprocess.Popen(cmd, env=env, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the sweep did not end within {timeout:.0f} s:\n{out}\n{err}")
    return proc.returncode, out, err


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended before {path.name} appeared:\n" + "\n".join(proc.communicate()))
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path} did not appear within {timeout:.0f} s:\n" + "\n".join(proc.communicate()))
        time.sleep(0.2)


def _napping(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "hold").touch()
    return d


def _status(out: Path, slug: str) -> dict:
    return json.loads((out / "points" / slug / "status.json").read_text())


@pytest.fixture(scope="session")
def timed_out_sweep(cluster, tmp_path_factory):
    """A one-point sweep with a one-minute limit whose point naps past it: started when the first test asks, checked
    by the session's last test."""
    tmp = tmp_path_factory.mktemp("timeout")
    out = tmp / "sweep"
    proc = _start(out, "--grid", "n=1", "--timeout-min", "1", nap=_napping(tmp, "nap"))
    yield out, proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_a_grid_is_one_throttled_array_job_and_resumes_after_scancel(cluster, timed_out_sweep, tmp_path):
    out, nap = tmp_path / "sweep", _napping(tmp_path, "nap")
    args = ("--grid", "n=1,2", "--max-parallel", "1")
    proc = _start(out, *args, nap=nap)
    _wait_for(nap / "1.started", proc)
    array = _status(out, "n-1")["job_id"].split("_")[0]
    states = queue([f"{array}_0", f"{array}_1"])
    assert states[f"{array}_0"][0] == "RUNNING"
    assert states[f"{array}_1"] == ("PENDING", "JobArrayTaskLimit")  # --max-parallel 1: the second waits its turn
    for task in (f"{array}_1", f"{array}_0"):                      # the pending one, then the running one
        subprocess.run(["scancel", task], check=True)
    rc, _, err = _finish(proc)
    assert rc == 1, err
    assert "CANCELLED n-1" in err and "CANCELLED n-2" in err, err
    ran, pending = _status(out, "n-1"), _status(out, "n-2")
    assert (ran["status"], ran["signal"], ran["slurm_state"]) == ("cancelled", "SIGTERM", "CANCELLED")
    assert "SIGTERM received at cell 3 of 5" in ran["error"]       # where the notebook was when Slurm stopped it
    assert pending["status"] == "cancelled" and "it never started" in pending["error"]
    report = (out / "REPORT.md").read_text()
    assert "| n-1 | **cancelled** |" in report and "| n-2 | **cancelled** |" in report
    assert "| nap (n-1) | **cancelled** |" in report.split("## Environment")[0]  # the summary: not "failed"

    (nap / "hold").unlink()                                        # the same command again: both re-run
    rc, text, err = _finish(_start(out, *args, nap=nap))
    assert rc == 0, err
    assert "2 finished, 0 already done (skipped), 0 failed" in text
    again = [_status(out, slug) for slug in ("n-1", "n-2")]
    assert [s["status"] for s in again] == ["ok", "ok"]
    assert [[e["status"] for e in s["earlier"]] for s in again] == [["cancelled"], ["cancelled"]]
    ids = [s["job_id"].split("_") for s in again]
    assert len({a for a, _ in ids}) == 1 and [t for _, t in ids] == ["0", "1"]  # one array job, a task per point
    first, second = sorted(again, key=lambda s: s["started"])
    assert first["finished"] <= second["started"]                 # one at a time
    report = (out / "REPORT.md").read_text()
    assert "| n-1 | ok |" in report and report.count("| cancelled |") == 2  # the earlier attempts' column


def test_a_partition_slurm_does_not_have_is_refused_in_its_words(cluster, tmp_path, capsys):
    out = tmp_path / "sweep"
    rc = main(["sweep", "nap", "--notebooks", str(NB), "--grid", "n=1,2", "--executor", "slurm",
               "--slurm-partition", "nowhere", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Slurm refuses the job, nothing was submitted" in err
    assert "invalid partition specified: nowhere" in err            # sbatch's own message
    assert not (out / "points").exists() and not (out / "sweep.json").exists()
    assert not list(out.rglob("*.pkl"))                             # no job pickled for submission


def test_a_preempted_point_says_preempted(cluster, tmp_path):
    out, nap = tmp_path / "sweep", _napping(tmp_path, "nap")
    proc = _start(out, "--grid", "n=1", "--slurm-partition", "low", "--mem-gb", "40", nap=nap)
    _wait_for(nap / "1.started", proc)
    # a job in the default partition (the higher tier) that needs the memory the point holds pre-empts it
    subprocess.run(["sbatch", "--quiet", "-p", "debug", "--mem=40G", "-o", "/dev/null", "--wrap", "true"], check=True)
    rc, _, err = _finish(proc)
    st = _status(out, "n-1")
    assert rc == 1 and st["status"] == "preempted", err
    assert st["slurm_state"] == "PREEMPTED" and "SIGTERM received at cell 3 of 5" in st["error"]
    assert "| n-1 | **preempted** |" in (out / "REPORT.md").read_text()


def test_a_point_over_its_memory_says_out_of_memory(cluster, tmp_path):
    out = tmp_path / "sweep"
    rc, _, err = _finish(_start(out, "--grid", "n=1", "-p", "mem_mb=3000", "--mem-gb", "1"))
    st = _status(out, "n-1")
    assert rc == 1 and st["status"] == "out of memory", err
    assert "Exceeded job memory limit" in st["error"] or "exceeded memory limit" in st["error"]  # slurmstepd's line
    assert st["slurm_state"] == "FAILED"                            # no cgroups here: the state alone says less
    report = (out / "REPORT.md").read_text()
    assert "| n-1 | **out of memory** |" in report and "| nap (n-1) | **out of memory** |" in report


def test_a_task_slurm_no_longer_knows_is_given_up_within_the_bound(cluster, tmp_path, capfd):
    """No accounting: a task that left squeue and wrote no end is not waited for forever, and sacct's failure is
    said once (not submitit's "Bypassing sacct error" and sacct's own line on every poll)."""
    from submitit.slurm.slurm import SlurmJob

    from perflab.runner.slurm import Task, wait
    from perflab.runner.sweep_dir import Point, write_status

    tasks = []
    for slug, job_id, started in (("ran", "987654_0", True), ("queued", "987654_1", False)):
        point = Point(params={"n": 1}, dir=tmp_path / "points" / slug)
        if started:  # it wrote "running", then nothing: lost with its node, say
            write_status(point.dir, {"ok": False, "status": "running", "job_id": job_id})
        tasks.append(Task(point, SlurmJob(folder=tmp_path / "submitit", job_id=job_id, tasks=[0]), {"n": 1}, "nap"))
    ends: dict[str, dict] = {}
    t0 = time.monotonic()
    wait(tasks, 3.0, lambda t, st: ends.setdefault(t.point.slug, st))
    took = time.monotonic() - t0
    assert 3.0 <= took < 15, took
    assert ends["ran"]["status"] == "vanished" and "wrote no end within 3 s" in ends["ran"]["error"]
    assert ends["queued"]["status"] == "cancelled" and "left Slurm's queue before it started" in ends["queued"]["error"]
    printed = "".join(capfd.readouterr())
    assert "Bypassing sacct error" not in printed
    assert printed.count("Slurm accounting storage is disabled") == 1, printed  # in perflab's one note


@pytest.mark.last
def test_a_point_over_its_time_limit_says_timed_out(timed_out_sweep):
    out, proc = timed_out_sweep
    rc, _, err = _finish(proc, timeout=180)                         # a minute's limit, checked every 30 s by Slurm
    st = _status(out, "n-1")
    assert rc == 1 and st["status"] == "timed out", err
    assert st["slurm_state"] == "TIMEOUT" and "SIGTERM received at cell 3 of 5" in st["error"]
    assert "TIMED OUT n-1" in err
    report = (out / "REPORT.md").read_text()
    assert "| n-1 | **timed out** |" in report and "| nap (n-1) | **timed out** |" in report
