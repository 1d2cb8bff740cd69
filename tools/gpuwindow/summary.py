"""The one-screen table a call ends with, read from the run folders' window.jsonl (`perflab.runner.deadline` writes
it): one line per planned part, and the call's exit status."""
from __future__ import annotations

from pathlib import Path

from perflab.runner.deadline import rows


def summary(root: Path, window: str) -> tuple[int, str]:
    """The call's outcome, one line per planned part, and its exit status: 0 all ok or skipped, 1 a part failed, 3 a
    part was cut by the deadline (nothing failed: the next call goes on from there), 2 nothing was planned (the run
    stopped before its plan: the log says why)."""
    found = rows(root, window)
    plans = [r for r in found if "plan" in r]
    if not plans:
        return 2, "nothing planned: the runner stopped before its plan (see log.txt above)"
    folder = plans[-1]["folder"]
    latest = {r["part"]: r for r in found if "part" in r}
    lines = [f"{'part':28s} {'status':8s} {'seconds':>8s}  note", "-" * 72]
    statuses = []
    for part in plans[-1]["plan"]:
        r = latest.get(part) or {"status": "cut", "seconds": 0.0, "note": "not reached: the call ended first"}
        statuses.append(r["status"])
        lines.append(f"{part:28s} {r['status']:8s} {r['seconds']:8.1f}  {r['note']}"[:140])
    lines.append(f"folder: {folder}")
    rc = 1 if "failed" in statuses else 3 if "cut" in statuses else 0
    return rc, "\n".join(lines)

