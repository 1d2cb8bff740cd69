"""What Slurm says about a sweep's jobs, how a job ended, by name, and the sweep's wait for them.

    name_end("CANCELLED")                               # 'cancelled'
    name_end("FAILED", log)                             # 'out of memory' when slurmstepd's log line says so
    queue(["812_0", "812_1"])                           # {'812_0': ('RUNNING', 'None'), ...} from one squeue call
    wait(tasks, vanish_s, ended)                        # until every task has ended: ended(task, status) for each

A point's job can end in ways its notebook never sees: cancelled (`scancel`), pre-empted, stopped at its time limit,
killed for memory, lost with its node. Its kernel then just dies, so the job alone would say "DeadKernelError". The
name comes from Slurm: the job's state (`squeue` while the controller remembers the job, then `sacct` through
submitit where the cluster keeps accounting), and slurmstepd's own line in the task's log ("CANCELLED AT ... DUE TO
TIME LIMIT", "Exceeded job memory limit"), which holds without accounting. Names are `perflab.kit.results.JOB_ENDS`.

`wait` never waits on a state nobody can give: a pending task that left the queue without a trace was cancelled
(without accounting Slurm keeps none), and a task Slurm no longer knows that wrote no end is recorded as vanished
after `vanish_s`. The ends it names are written to the point's status.json and log (`perflab.runner.sweep_dir.record_end`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

from .sweep_dir import Point, read_status, record_end

VANISH_S = 120.0   # a task Slurm no longer knows, that wrote no end, is given up after this long
STATUS_LAG_S = 10  # after Slurm says a job ended, how long its status.json may take to show (a shared file system)
_SAID: set[str] = set()  # notes printed once per process

# states in which a job may still run (or run again): anything else is an end
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
NAMED = {"CANCELLED": "cancelled", "PREEMPTED": "preempted", "TIMEOUT": "timed out", "DEADLINE": "timed out",
         "OUT_OF_MEMORY": "out of memory", "NODE_FAIL": "node failed", "BOOT_FAIL": "node failed"}
# slurmstepd's lines in a task's log, most specific first: without cgroups a memory kill leaves the state FAILED
LOG_LINES = [
    (re.compile(r"exceeded (job |step )?memory limit|oom[-_ ]kill", re.I), "out of memory"),
    (re.compile(r"CANCELLED AT \S+ DUE TO TIME LIMIT"), "timed out"),
    (re.compile(r"CANCELLED AT \S+ DUE TO PREEMPTION"), "preempted"),
    (re.compile(r"CANCELLED AT \S+ DUE TO NODE FAIL"), "node failed"),
    (re.compile(r"CANCELLED AT \S+ \*\*\*"), "cancelled"),
]


def state_word(state: str | None) -> str:
    """'CANCELLED by 1000' (sacct) -> 'CANCELLED'; None -> ''."""
    return (state or "").split()[0].upper() if (state or "").strip() else ""


def telling_line(log: str) -> tuple[str, str] | None:
    """(name, slurmstepd's line) for the most specific line of the task's log that says how it ended, or None."""
    lines = (log or "").splitlines()
    for pattern, name in LOG_LINES:
        hit = next((line.strip() for line in lines if pattern.search(line)), None)
        if hit:
            return name, hit
    return None


def name_end(state: str | None, log: str = "") -> str | None:
    """How a job ended, named (a JOB_ENDS entry), from the task's log and Slurm's state; None when neither
    says more than "it stopped" (COMPLETED, FAILED with no telling line, unknown)."""
    told = telling_line(log)
    return told[0] if told else NAMED.get(state_word(state))


def queue(job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """{task id: (state, reason)} for the tasks the controller still knows (one `squeue` call; array tasks one
    by one). None when squeue itself failed (nothing may be concluded from that)."""
    ids = sorted({j.split("_")[0] for j in job_ids})
    if not ids:
        return {}
    try:
        r = subprocess.run(["squeue", "--noheader", "--array", "--states=all", "--jobs=" + ",".join(ids),
                            "--format=%i|%T|%r"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        # every id asked for has left the controller's memory: squeue calls that an error
        return {} if "Invalid job id" in r.stderr else None
    out = {}
    for line in r.stdout.splitlines():
        task, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if task:
            out[task] = (state_word(state), reason)
    return out


def no_accounting() -> str:
    """Why `sacct` answers nothing on this cluster (its own message: "Slurm accounting storage is disabled"), or ''
    where it answers. Asked once per cluster (slurm.conf): without accounting, every sacct call fails and says so."""
    return _no_accounting(os.environ.get("SLURM_CONF", ""))


@functools.cache
def _no_accounting(conf: str) -> str:
    try:
        r = subprocess.run(["sacct", "--noheader", "--parsable2", "--format=JobID", "--starttime=now"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sacct could not run: {e}"
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or [f"sacct: exit {r.returncode}"])[-1]


def refusal(sbatch_text: str) -> str | None:
    """Slurm's own message when it would refuse this batch script (`sbatch --test-only`: checked against the
    partitions, limits and accounts, nothing submitted), else None."""
    with tempfile.NamedTemporaryFile("w", prefix="perflab-", suffix=".sbatch") as f:
        f.write(sbatch_text)
        f.flush()
        try:
            r = subprocess.run(["sbatch", "--test-only", f.name], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"sbatch --test-only could not run: {e}"
    if r.returncode == 0:
        return None
    return "\n".join(line for line in (r.stderr + r.stdout).splitlines() if line.strip()) or f"exit {r.returncode}"


class _Once(logging.Filter):
    """Lets each distinct warning through once ("Call #12 - Bypassing sacct error ..." and "Call #13 - ..." are
    one warning)."""

    def __init__(self):
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = re.sub(r"^Call #\d+ - ", "", record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING


def quiet_submitit() -> None:
    """submitit's warnings printed once: it logs each to stderr and again to stdout, on every poll (a cluster
    without accounting: "Bypassing sacct error ..., status may be inaccurate" every few seconds). Idempotent."""
    log = logging.getLogger("submitit")
    if not any(isinstance(f, _Once) for f in log.filters):
        log.addFilter(_Once())
    for h in log.handlers:  # its stdout handler takes every level: warnings already go to its stderr one
        if h.name == "submitit_out" and not any(isinstance(f, _BelowWarning) for f in h.filters):
            h.addFilter(_BelowWarning())


# ---- waiting for a sweep's tasks --------------------------------------------------------------------

@dataclasses.dataclass
class Task:
    point: Point
    job: Any
    params: dict
    study: str
    started: bool = False           # it ran (Slurm said so, or it wrote "running", or it has a log)
    running: dict | None = None     # the "running" status it wrote when it started (its run id, start time)
    gone_polls: int = 0             # polls in a row where Slurm did not know it
    gone_since: float | None = None
    ended_since: float | None = None


def _own_status(t: Task) -> dict | None:
    st = read_status(t.point.dir)
    return st if st and st.get("job_id") == t.job.job_id else None


def _record(t: Task, st: dict | None, status_: str, error: str, slurm_state: str = "") -> dict:
    base = st or t.running or {"params": t.params, "job_id": t.job.job_id, "host": None}
    return record_end(t.point.dir, t.study, base, status_, error, slurm_state)


def _job_error(job) -> str:
    """The last line of the exception a job's function raised (submitit pickles it), or ''."""
    from submitit.core.utils import pickle_load

    with contextlib.suppress(Exception):
        outcome, trace = pickle_load(job.paths.result_pickle)
        if outcome == "error":
            return str(trace).strip().splitlines()[-1][:300]
    return ""


def _ended(t: Task, st: dict | None, state: str, reason: str, log: str) -> dict:
    """The point's end, once Slurm's word (or its silence) is in: the job's own status, renamed when Slurm names
    what stopped it."""
    name = name_end(state, log)
    if st is not None and (st["ok"] or not name):
        return st
    told = telling_line(log)
    said = "; ".join(x for x in (f"Slurm: {state}" + (f" ({reason})" if reason and reason != "None" else "")
                                 if state else "", f"job log: {told[1]!r}" if told else "") if x)
    if st is not None:
        return _record(t, st, name, f"{name} ({said}); the job saw: {st['error']}", state)
    error = _job_error(t.job) or ("the job ended without writing its status (killed outright)" if t.started
                                  else "it never started")
    return _record(t, None, name or "failed", f"{name or 'failed'} ({said or 'Slurm has no record'}): {error}", state)


def _sacct_state(job) -> str:
    """The job's state from sacct (submitit's watcher), '' where there is none (no accounting, not yet recorded)."""
    why = no_accounting()
    if why:  # submitit would call sacct on every poll, and sacct and submitit would each say so every time
        if why not in _SAID:
            _SAID.add(why)
            print(f"perflab sweep: sacct has nothing here ({why}): a job's end is named from squeue and its log",
                  file=sys.stderr)
        return ""
    state = state_word(job.watcher.get_state(job.job_id, mode="force"))
    return "" if state == "UNKNOWN" else state


def end_of(t: Task, states: dict | None, now: float, vanish_s: float) -> dict | None:
    """One look at one task: its end (written to status.json), or None while it may still run."""
    st = _own_status(t)
    if st and st.get("status") == "running":
        t.started, t.running, st = True, st, None
    if st and st["ok"]:
        return st
    if states is None:  # squeue failed this time: conclude nothing
        return None
    state, reason = states.get(t.job.job_id) or (_sacct_state(t.job), "")
    if state in ACTIVE:
        t.started |= state != "PENDING"
        t.gone_polls, t.gone_since = 0, None
        return None
    log = t.job.stderr() or ""
    t.started |= bool(log)
    if state:  # Slurm says it ended; its status.json may lag a little behind on a shared file system
        t.ended_since = t.ended_since or now
        if st is None and not t.job.paths.result_pickle.exists() and now - t.ended_since < STATUS_LAG_S \
                and not name_end(state, log):
            return None
        return _ended(t, st, state, reason, log)
    t.gone_polls += 1
    t.gone_since = t.gone_since or now
    if st is not None:  # it wrote its end, and Slurm has forgotten it since
        return _ended(t, st, "", "", log)
    if not t.started and t.gone_polls >= 2:
        return _record(t, None, "cancelled", "left Slurm's queue before it started; Slurm keeps no record of why "
                       "(no accounting: sacct has nothing), and a pending task leaves the queue when cancelled")
    if now - t.gone_since >= vanish_s:
        return _record(t, None, "vanished", f"Slurm no longer knows task {t.job.job_id} (not in squeue, nothing "
                       f"in sacct) and it wrote no end within {vanish_s:.0f} s")
    return None


def wait(tasks: list[Task], vanish_s: float, ended) -> None:
    """Poll squeue until every task has ended, calling `ended(task, status)` for each as it does."""
    quiet_submitit()
    open_ = {t.job.job_id: t for t in tasks}
    pause = 1.0
    while open_:
        states = queue(list(open_))
        now = time.monotonic()
        for job_id, t in list(open_.items()):
            st = end_of(t, states, now, vanish_s)
            if st is not None:
                del open_[job_id]
                ended(t, st)
        if open_:
            time.sleep(pause)
            pause = min(5.0, pause * 1.2)  # a long sweep asks the controller every 5 s at most
