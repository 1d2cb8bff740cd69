"""What Slurm says about a sweep's jobs, and how a job ended, by name.

    ends = name_end("CANCELLED")                        # 'cancelled'
    name_end("FAILED", log)                             # 'out of memory' when slurmstepd's log line says so
    queue(["812_0", "812_1"])                           # {'812_0': ('RUNNING', 'None'), ...} from one squeue call

A point's job can end in ways its notebook never sees: cancelled (`scancel`), pre-empted, stopped at its time limit,
killed for memory, lost with its node. Its kernel then just dies, so the job alone would say "DeadKernelError". The
name comes from Slurm: the job's state (`squeue` while the controller remembers the job, then `sacct` through
submitit where the cluster keeps accounting), and slurmstepd's own line in the task's log ("CANCELLED AT ... DUE TO
TIME LIMIT", "Exceeded job memory limit"), which holds without accounting. Names are `perflab.results.JOB_ENDS`.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
import tempfile

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
