"""How a sweep point's job ended, named from what Slurm says (no Slurm needed here: its words are given), the
earlier attempts a point's status keeps, the signals a job notes, and submitit's warnings printed once.
tests/runner/test_slurm.py produces each end with a real Slurm."""
import logging
import os
import signal

import pytest

from perflab.kit.results import JOB_ENDS
from perflab.runner.slurm import Task, end_of, name_end, quiet_submitit, state_word, telling_line
from perflab.runner.sweep import _signals_noted
from perflab.runner.sweep_dir import Point, read_status, write_status

CANCEL = "slurmstepd-vm: error: *** STEP 12.0 ON vm CANCELLED AT 2026-11-25T11:50:21 ***"
MEMORY = "slurmstepd-vm: error: Exceeded job memory limit"


@pytest.mark.parametrize("state, log, name", [
    ("CANCELLED", "", "cancelled"),
    ("CANCELLED by 1000", "", "cancelled"),                    # sacct's form
    ("PREEMPTED", "", "preempted"),
    ("TIMEOUT", "", "timed out"),
    ("OUT_OF_MEMORY", "", "out of memory"),
    ("NODE_FAIL", "", "node failed"),
    ("FAILED", f"{CANCEL}\n{MEMORY}", "out of memory"),       # no cgroups: the log says more than the state
    ("", "*** JOB 8 ON vm CANCELLED AT 2026-11-25T11:11:09 DUE TO TIME LIMIT ***", "timed out"),
    ("", "*** JOB 9 ON vm CANCELLED AT 2026-11-25T11:29:22 DUE TO PREEMPTION ***", "preempted"),
    ("", CANCEL, "cancelled"),
    ("COMPLETED", "", None),                                  # the notebook's own end: nothing to add
    ("FAILED", "Traceback ...", None),
    ("", "", None),
])
def test_a_job_end_is_named_from_the_state_or_slurmstepds_line(state, log, name):
    assert name_end(state, log) == name
    assert name is None or name in JOB_ENDS


def test_the_telling_line_is_the_most_specific_one():
    assert telling_line(f"{CANCEL}\n{MEMORY}") == ("out of memory", MEMORY)
    assert telling_line("nothing here") is None
    assert state_word("CANCELLED by 0") == "CANCELLED" and state_word(None) == ""


def test_a_points_status_keeps_how_earlier_attempts_ended(tmp_path):
    d = tmp_path / "p"
    write_status(d, {"ok": False, "status": "running", "job_id": "5_0"})
    write_status(d, {"ok": False, "status": "terminated", "job_id": "5_0", "signal": "SIGTERM"})
    write_status(d, {"ok": False, "status": "cancelled", "job_id": "5_0", "error": "cancelled (Slurm: CANCELLED)"})
    assert read_status(d)["earlier"] == []                     # one attempt: running, its end, then its name
    write_status(d, {"ok": False, "status": "running", "job_id": "9_0"})
    write_status(d, {"ok": True, "status": "ok", "job_id": "9_0"})
    st = read_status(d)
    assert st["status"] == "ok"
    assert st["earlier"] == [{"status": "cancelled", "job_id": "5_0", "error": "cancelled (Slurm: CANCELLED)"}]


def test_a_job_notes_sigterm_and_ignores_the_time_limit_warning():
    usr2: list[int] = []
    old_usr2 = signal.signal(signal.SIGUSR2, lambda signum, frame: usr2.append(signum))  # submitit's, standing in
    try:
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)
        with _signals_noted() as received:
            os.kill(os.getpid(), signal.SIGUSR2)  # the warning before the time limit: ignored, by the kernel too
            os.kill(os.getpid(), signal.SIGTERM)  # what Slurm sends to stop a job: noted, not obeyed
        assert received == ["SIGTERM"] and usr2 == []
        assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)) == before  # given back
    finally:
        signal.signal(signal.SIGUSR2, old_usr2)


def _task(tmp_path, job_id="7_0", log=""):
    from submitit.slurm.slurm import SlurmJob

    job = SlurmJob(folder=tmp_path / "submitit", job_id=job_id, tasks=[0])
    if log:
        job.paths.stderr.parent.mkdir(parents=True, exist_ok=True)
        job.paths.stderr.write_text(log)
    return Task(Point(params={"n": 1}, dir=tmp_path / "points" / "n-1"), job, {"n": 1}, "nap")


def test_the_sweep_names_an_end_from_slurms_word(tmp_path):
    t = _task(tmp_path)
    write_status(t.point.dir, {"ok": False, "status": "running", "job_id": "7_0", "run_id": "r1"})
    assert end_of(t, {"7_0": ("RUNNING", "None")}, 0.0, 60) is None      # still running: wait
    assert end_of(t, None, 1.0, 60) is None                              # squeue failed: conclude nothing
    write_status(t.point.dir, {"ok": False, "status": "terminated", "job_id": "7_0", "run_id": "r1",
                               "signal": "SIGTERM", "error": "SIGTERM received at cell 3 of 5: DeadKernelError"})
    st = end_of(t, {"7_0": ("TIMEOUT", "TimeLimit")}, 2.0, 60)
    assert st["status"] == "timed out" and st["slurm_state"] == "TIMEOUT"
    assert "Slurm: TIMEOUT (TimeLimit)" in st["error"] and "SIGTERM received at cell 3 of 5" in st["error"]


def test_a_job_killed_outright_is_named_from_its_log(tmp_path):
    t = _task(tmp_path, log=f"{CANCEL}\n{MEMORY}\n")
    write_status(t.point.dir, {"ok": False, "status": "running", "job_id": "7_0", "run_id": "r1"})
    assert end_of(t, {"7_0": ("RUNNING", "None")}, 0.0, 60) is None
    st = end_of(t, {"7_0": ("FAILED", "NonZeroExitCode")}, 1.0, 60)
    assert st["status"] == "out of memory" and MEMORY.split(": ", 1)[1] in st["error"]
    assert st["run_id"] == "r1"                                              # the execution it belongs to


def test_submitits_warnings_are_printed_once(monkeypatch):
    import submitit  # noqa: F401  (configures its logger: a stderr handler, and a stdout one for every level)

    log = logging.getLogger("submitit")
    seen: list[str] = []
    catcher = logging.Handler()
    catcher.emit = lambda record: seen.append(record.getMessage())
    log.addHandler(catcher)
    monkeypatch.setattr(log, "filters", list(log.filters))  # the filter added here goes when the test ends
    try:
        quiet_submitit()
        quiet_submitit()                                     # idempotent
        for call in (1, 2, 3):
            log.warning(f"Call #{call} - Bypassing sacct error Command 'sacct' returned 1, status may be inaccurate.")
        log.warning("another warning")
        log.info("Call #4 - info lines pass")
    finally:
        log.removeHandler(catcher)
    assert [m for m in seen if "Bypassing" in m] == [
        "Call #1 - Bypassing sacct error Command 'sacct' returned 1, status may be inaccurate."]
    assert "another warning" in seen and "Call #4 - info lines pass" in seen
    out = [h for h in log.handlers if h.name == "submitit_out"]
    warning = logging.LogRecord("submitit", logging.WARNING, "", 0, "w", None, None)
    assert out and not out[0].filter(warning)                # warnings go to its stderr handler only
