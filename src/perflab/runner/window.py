"""A GPU window in calls of one command each: the lent host's limits as code, and what a call says at its end.

A lent GPU host runs one command at most 10 minutes (`CALL_S`) and goes back after 30 s idle, so each step of a window
(`tools/gpu-session.sh smoke | tests | full ...`) is one command that starts, runs and packs before a deadline below
that limit (`DEADLINE_S`); nothing waits for a second call. The runner (`perflab gpu-check`, `python -m
perflab.runner.gpucheck tests`) writes one row per part of the call into the run folder's `window.jsonl` (the plan
first, then each test part and notebook: ok, failed, skipped, cut), and the call ends with `summary`, read from those
rows: a part planned but never reported was cut by the deadline.

    python -m perflab.runner.window summary /tmp/res --window ID   # the one-screen table a call ends with
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

CALL_S = 600          # one command on the lent host, at most
DEADLINE_S = 540      # a call's whole run (start, run, pack) ends by then: 60 s of margin under CALL_S
WINDOW_ENV = "PERFLAB_WINDOW"   # the call's id (tools/gpu-session.sh sets it): rows of earlier calls are not this one's
LOG = "window.jsonl"
STATUSES = ("ok", "failed", "skipped", "cut")


def record(out: Path, part: str, status: str, seconds: float = 0.0, note: str = "") -> None:
    """One row of this call's outcome in out/window.jsonl: `part` ("tests-quick", "03_eval"), `status` (one of
    STATUSES), its seconds and a short note."""
    assert status in STATUSES, status
    row = {"window": os.environ.get(WINDOW_ENV, ""), "part": part, "status": status, "seconds": round(seconds, 1),
           "note": note}
    _append(out, row)


def plan(out: Path, parts: list[str]) -> None:
    """The parts this call means to run, in order, before any runs: what has no row at the end was cut."""
    _append(out, {"window": os.environ.get(WINDOW_ENV, ""), "plan": parts})


def _append(out: Path, row: dict) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOG, "a") as f:
        f.write(json.dumps(row) + "\n")


def rows(root: Path, window: str) -> list[dict]:
    """This call's rows from every run folder under `root` (root/<gpu kind>/<commit>/window.jsonl)."""
    found = []
    for f in sorted(Path(root).glob(f"*/*/{LOG}")):
        for line in f.read_text(errors="replace").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            if r.get("window") == window:
                found.append({**r, "folder": f.parent})
    return found


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


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m perflab.runner.window", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="this call's outcome from the run folders' window.jsonl; exit 0/1/2/3")
    s.add_argument("root", type=Path, help="the folder of run folders (/tmp/res)")
    s.add_argument("--window", default=os.environ.get(WINDOW_ENV, ""))
    args = ap.parse_args(argv)
    rc, text = summary(args.root, args.window)
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
