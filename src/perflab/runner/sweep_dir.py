"""A sweep folder on disk: its request (sweep.json) and its points (points/<slug>/status.json, results.jsonl).

A point's status.json says how its latest attempt ended, in words (`status`: ok, failed, interrupted, or one of
`perflab.kit.results.JOB_ENDS` such as cancelled, timed out, out of memory), with `earlier`: how each attempt before it
ended, so a point re-run after a `scancel` still says it was cancelled once. A job writes "running" when it starts,
then its end; `perflab.runner.sweep` writes the end itself when the job could not (killed outright, never started).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import time
from pathlib import Path

EARLIER_KEYS = ("status", "error", "job_id", "signal", "slurm_state", "run_id", "finished")


@dataclasses.dataclass
class Point:
    params: dict      # the swept values of this point
    dir: Path

    @property
    def slug(self) -> str:
        return self.dir.name


def _slug(params: dict) -> str:
    text = "__".join(f"{k}-{v}" for k, v in params.items())
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:150]


def points(grid: dict[str, list], out: Path) -> list[Point]:
    """The grid's points, in the order the keys and values were given."""
    keys = list(grid)
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*grid.values())]
    return [Point(params=c, dir=out / "points" / _slug(c)) for c in combos]


def read_status(point_dir: Path) -> dict | None:
    """A point's status.json, or None when it has none or it cannot be read (a point killed while writing it,
    a disk error): such a point is run again, like an unfinished one."""
    f = Path(point_dir) / "status.json"
    try:
        st = json.loads(f.read_text())
    except (OSError, ValueError):  # missing, unreadable, not JSON (UnicodeDecodeError is a ValueError)
        return None
    return st if isinstance(st, dict) else None


def status(point: Point) -> dict | None:
    return read_status(point.dir)


def _same_attempt(a: dict, b: dict) -> bool:
    key_a, key_b = a.get("job_id") or a.get("run_id"), b.get("job_id") or b.get("run_id")
    return key_a is not None and key_a == key_b


def write_status(point_dir: Path, st: dict) -> dict:
    """Write status.json atomically, keeping how the earlier attempts ended in `earlier` (one attempt's "running",
    then its end, then the end the sweep named for it, replace one another). -> what was written."""
    d = Path(point_dir)
    old = read_status(d)
    earlier = list((old or {}).get("earlier") or [])
    if old and not _same_attempt(old, st):
        earlier.append({k: old[k] for k in EARLIER_KEYS if old.get(k) is not None})
    st = {**st, "earlier": earlier}
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".status.json.tmp"
    tmp.write_text(json.dumps(st))
    os.replace(tmp, d / "status.json")
    return st


def log_end(point_dir: Path, study: str, st: dict) -> None:
    """Add the end named for a point's execution to its results log (under that execution's run id), so the report's
    summary says "cancelled", not the "failed: DeadKernelError" the job saw. Nothing when it never started."""
    from ..kit.results import ResultsLog

    log = Path(point_dir) / "results.jsonl"
    if not st.get("run_id") or not log.is_file():
        return
    ResultsLog(log, study=study, params=st.get("params"), stamp={}, run_id=st["run_id"]).append(
        "run", status=st["status"], seconds=st.get("seconds"), cell=st.get("cell"), cells=st.get("cells"),
        error=st.get("error") or "", notebook=f"{study}.ipynb")


def record_end(point_dir: Path, study: str, base: dict, status: str, error: str, slurm_state: str = "") -> dict:
    """Write the end the sweep named for a point (over the job's own `base`, or where it wrote none) and add it to
    the point's log with its execution. -> the status written."""
    st = write_status(point_dir, ended_now({**base, "ok": False, "status": status, "error": error,
                                            "slurm_state": slurm_state or None}))
    log_end(point_dir, study, st)
    return st


def ended_now(st: dict) -> dict:
    """`st` stamped with the time it ended (and its length, from the job's start when known)."""
    now = time.time()
    out = {**st, "finished": now, "time": now}
    if st.get("started") and st.get("seconds") is None:
        out["seconds"] = round(now - st["started"], 2)
    return out


def swept_parameters(out: Path) -> dict[str, list]:
    """The grid of the sweep in `out` ({} when `out` is not a sweep folder)."""
    f = Path(out) / "sweep.json"
    return json.loads(f.read_text())["grid"] if f.is_file() else {}
