"""What the reports read off an execution's rows: how it ended and when it started (`perflab report`'s status
column, `perflab.runner.report`), and which implementation a timing measured.

An execution's status comes from the runner's status rows ("started", then "ok", "failed" or "interrupted"). Without
them (run with papermill, nbconvert or Jupyter) it is derived from what the execution left: the papermill metadata of
its executed notebook when that is in the run folder, else its rows (claims judged: it reached its end; a failed
check: `report_checks` stopped it there).
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path


def impl(r: dict) -> str:
    """A timing row's implementation: its `impl`, else its `description`."""
    return r.get("impl") or r.get("description") or ""


def status(exec_rows: list[dict], out_dir: Path | None = None) -> tuple[str, str]:
    """An execution's status as the report shows it, and where it stopped / why. Without status rows (not run by
    `perflab run`), derived from the papermill metadata of its executed notebook in `out_dir`, else its rows."""
    runs = [r for r in exec_rows if r["kind"] == "run"]
    if not runs:
        return _papermill_status(exec_rows, out_dir) or _derived_status(exec_rows)
    last = runs[-1]
    st = last.get("status")
    if st == "started":
        return "**did not finish**", "no end was recorded: the runner was killed, or is still running"
    if "cells" in last:
        where = f"cell {last['cell']} of {last['cells']}" if last.get("cell") is not None else ""
    else:  # old-style rows: papermill's index, its injected cell counted
        where = f"cell {last['cell']} (0-based, papermill's count)" if last.get("cell") is not None else ""
    why = ": ".join(x for x in (where, last.get("error") or "") if x)
    return ("ok" if st == "ok" else f"**{st}**"), why


OUTSIDE = "no status row: run outside `perflab run` (papermill, nbconvert or Jupyter)"


def _derived_status(exec_rows: list[dict]) -> tuple[str, str]:
    """What an execution's rows say of how it ended: claims are a notebook's last step; a failed check stops it."""
    claims = [r for r in exec_rows if r["kind"] == "claim"]
    checks = [r for r in exec_rows if r["kind"] == "check"]
    failed = [r["name"] for r in checks if not r.get("passed")]
    if claims:
        return "ok (no status row)", f"{OUTSIDE}; it judged its {len(claims)} claim(s), a notebook's last step"
    if failed:
        return ("**failed** (no status row)", f"{OUTSIDE}; check {', '.join(map(repr, failed))} failed, which "
                "stops a notebook (`report_checks`)")
    if checks:
        return "no status", f"{OUTSIDE}; it logged {len(checks)} passing check(s) but no claims: how it ended is unknown"
    return "no status", f"{OUTSIDE}: nothing recorded how it ended"


def _utc(text) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)  # papermill and the env stamp write UTC


def _papermill_status(exec_rows: list[dict], out_dir: Path | None) -> tuple[str, str] | None:
    """The status papermill recorded in the executed notebook of this execution, if one in `out_dir` is: same
    notebook (its input path's name) and started no later than the execution's rows, ended no earlier."""
    times = [t for r in exec_rows if r.get("env") and (t := _utc(r["env"].get("time")))]
    if out_dir is None or not times or not exec_rows:
        return None
    study, first, last = exec_rows[0].get("study"), min(times), max(times)
    for path in sorted(Path(out_dir).glob("*.ipynb")):
        try:
            nb = json.loads(path.read_text())
            pm = nb.get("metadata", {}).get("papermill") or {}
        except (OSError, ValueError, AttributeError):
            continue
        start, end = _utc(pm.get("start_time")), _utc(pm.get("end_time"))
        if (Path(str(pm.get("input_path") or "")).stem != study or start is None
                or not start - _dt.timedelta(seconds=1) <= first or (end is not None and last > end)):
            continue  # the env stamp is cut to whole seconds: one second's slack at the start
        where = f"from the papermill metadata of `{path.name}`; {OUTSIDE}"
        if end is None:
            return "**did not finish** (papermill)", f"no end time: killed, or still running ({where})"
        if not pm.get("exception"):
            return "ok (papermill)", f"every cell ran ({where})"
        return "**failed** (papermill)", " ".join(x for x in (": ".join(x for x in _failed_cell(nb) if x),
                                                             f"({where})") if x)
    return None


def _failed_cell(nb: dict) -> tuple[str, str]:
    """(cell N of M, ename: evalue) of a notebook papermill marked failed, cells counted as in the source."""
    cells = [c for c in nb.get("cells", []) if "papermill-error-cell-tag" not in c.get("metadata", {}).get("tags", [])
             and "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    for i, c in enumerate(cells, 1):
        if (c.get("metadata", {}).get("papermill") or {}).get("exception"):
            err = next((o for o in c.get("outputs", []) if o.get("output_type") == "error"), {})
            return f"cell {i} of {len(cells)}", ": ".join(x for x in (err.get("ename"), err.get("evalue")) if x)
    return "", ""


def started(rows: list[dict]) -> str:
    """When an execution started, from its rows' environment stamp: '2026-11-23 09:17:43 UTC'."""
    times = sorted(t for r in rows if r.get("env") and (t := _utc(r["env"].get("time"))))
    return times[0].astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if times else "time not recorded"
