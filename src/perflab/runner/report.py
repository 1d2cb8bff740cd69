"""`perflab report DIR`: a Markdown report from a run folder's results log.

It leads with one line per study (status, headline, verdict counts, checks, device), then the environment, the
notebooks run, and per study: a failed check's name and what it measured, each claim beside what was measured,
how it was judged (the interval against the threshold) and its verdict with its reason, the timings (median with
spread, and the speedup against the case's reference), other values, correctness checks, and the plots. Numbers
are shown to three significant figures.

A run folder's log keeps every execution; the report shows each study's latest one (`--all`: every one). An
execution is the set of rows that share a run id: the notebook's own rows and the runner's status rows ("started",
then "ok", "failed" or "interrupted"), and its plots are the files in `<study>/<run id>/`. So a study interrupted
half-way shows as interrupted, with the rows it wrote, never beside an earlier execution's "ok" or plots. Where
the latest execution judged no claims (it failed first), the latest that did is shown after it, marked as earlier
with its run id and start time: verdicts already computed stay in view.

An execution without status rows (run with papermill, nbconvert or Jupyter) gets a status derived from what it
left: the papermill metadata of its executed notebook when that is in the run folder, else its rows (claims
judged: it reached its end; a failed check: `report_checks` stopped it there). `write` also draws each study's
claims (`perflab.kit.claims.claims_figure`: intervals against thresholds, coloured by verdict) as
`claims-<study>.png` beside REPORT.md and links it in the study's section.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

from ..kit.formatting import SPEEDUP_NOTE, fmt_seconds, reference_rows, short, sig, speedup_text
from ..kit.results import executions, latest, latest_judged, read_rows
from ..kit.verdicts import VERDICTS

ENV_KEYS = ("host", "device_name", "torch", "cuda", "commit", "dirty")
CONTEXT_SKIP = {"study", "kind", "metric", "value", "unit", "params", "params_set", "env", "run_id", "sweep_point"}


def _md_table(header: list[str], rows: list[list]) -> str:
    def cell(v) -> str:
        return short(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _impl(r: dict) -> str:
    return r.get("impl") or r.get("description") or ""


def _device(rows: list[dict]) -> str:
    names = dict.fromkeys(r["env"].get("device_name", "") for r in rows if r["kind"] != "run" and r.get("env"))
    return ", ".join(n for n in names if n) or "-"


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


def _seconds(exec_rows: list[dict]) -> str:
    s = [r.get("seconds") for r in exec_rows if r["kind"] == "run" and r.get("seconds") is not None]
    return fmt_seconds(s[-1]) if s else "-"


# ---- the summary --------------------------------------------------------------------------------

def _headline(exec_rows: list[dict]) -> str:
    marked = [r for r in exec_rows if r["kind"] == "note" and r.get("headline")]
    if marked:
        return marked[-1]["text"]
    claims = [r for r in exec_rows if r["kind"] == "claim"]
    if claims:
        text = f"{claims[0]['claim']}: {claims[0]['measured']}"
        return text if len(text) <= 160 else text[:157] + "..."
    return "-"


def _verdicts(exec_rows: list[dict]) -> str:
    verdicts = [r["verdict"] for r in exec_rows if r["kind"] == "claim"]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts) or "-"


def _clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _checks(exec_rows: list[dict]) -> str:
    """'3/4 pass, **1 FAIL**: name (what was measured)': a failed check names itself and its detail."""
    checks = [r for r in exec_rows if r["kind"] == "check"]
    if not checks:
        return "-"
    failed = [r for r in checks if not r["passed"]]
    shown = "; ".join(r["name"] + (f" ({_clip(r['detail'])})" if r.get("detail") else "") for r in failed)
    return f"{len(checks) - len(failed)}/{len(checks)} pass" + (f", **{len(failed)} FAIL**: {shown}" if failed else "")


def _when(rows: list[dict]) -> str:
    """When an execution started, from its rows' environment stamp: '2026-11-23 09:17:43 UTC'."""
    times = sorted(t for r in rows if r.get("env") and (t := _utc(r["env"].get("time"))))
    return times[0].astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if times else "time not recorded"


def _summary(execs: dict[tuple, list[dict]], earlier: dict[tuple, tuple], out_dir: Path) -> str:
    rows = []
    for key, rs in execs.items():
        study, point, rid = key
        st, _why = status(rs, out_dir)
        headline, verdicts, device = _headline(rs), _verdicts(rs), _device(rs)
        if key in earlier:  # the latest judged no claims: the latest that did, marked as earlier
            erid, ers = earlier[key]
            headline = headline if headline != "-" else f"{_headline(ers)} (earlier run {erid})"
            verdicts = f"earlier run {erid}: {_verdicts(ers)}"
            device = device if device != "-" else _device(ers)
        rows.append([study + (f" ({point})" if point else ""), st, headline, verdicts, _checks(rs), device,
                     rid or "-"])
    return "## Summary\n" + _md_table(
        ["study", "status", "headline", "claims (verdicts)", "checks", "device", "run id (start time)"], rows)


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"  # as given, not rounded


def _runs_table(execs: dict[tuple, list[dict]], out_dir: Path) -> str:
    rows = []
    for (study, point, rid), rs in execs.items():
        st, why = status(rs, out_dir)
        given = next((r.get("params") for r in rs if r["kind"] == "run"), None)
        setup_row = next((r for r in rs if r.get("params_set") is not None), None)  # what setup read
        read = setup_row["params_set"] if setup_row else None
        if read is None:  # setup did not run (or rows older than it): what the runner was given, said so
            params = given if given is not None else (rs[0].get("params") or {})
            shown = _params(params) + (" (as given: setup did not record what it read)" if given is not None else "")
        else:
            shown = _params(read)
            if given is not None and any((setup_row.get("params") or {}).get(k, v) != v for k, v in given.items()):
                shown += f" (given: {_params(given)})"  # a value given that setup did not read as given
        rows.append([study + (f" ({point})" if point else ""), rid or "-", st, _seconds(rs), shown, why])
    return "## Notebooks run\n" + _md_table(["notebook", "run id", "status", "time", "parameters", "stopped at / why"],
                                             rows)


# ---- claims: the table and the figure -----------------------------------------------------------

def drawable(r: dict) -> bool:
    """Whether a claim row (`perflab.kit.claims.read_row`) has an interval and a threshold to draw it against."""
    return "value" in r and any(isinstance(r.get(k), (int, float)) for k in ("at_least", "at_most"))


def verdict_cell(r: dict) -> str:
    """'**not tested here** (measured at batch=16)': the verdict in bold, with its reason."""
    from ..kit.claims import verdict_text

    return verdict_text(r).replace(r["verdict"], f"**{r['verdict']}**", 1)


def judged_cell(r: dict) -> str:
    """'2.41 [2.30, 2.55] against >= 2 (99% interval, 12 rounds, 0.31 s)'; '' for a row logged without it."""
    from ..kit.claims import judged_text

    return judged_text(r)  # '' for a row from before perflab.kit.claims


def claims_png(path: Path, runs: dict[str, list[dict]] | list[dict], title: str) -> Path | None:
    """Draw claim rows (or {label: rows}, side by side) with `perflab.kit.claims.claims_figure` into `path`; None when
    no row has an interval to draw (rows logged before the kit: the section says so)."""
    from ..kit.claims import read_row

    runs = {label: [read_row(r) for r in rows] for label, rows in
            (runs.items() if isinstance(runs, dict) else [("", runs)])}
    if not any(drawable(r) for rows in runs.values() for r in rows):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import claims_figure

    fig = claims_figure(runs, title=title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


NO_FIGURE = ("No figure: no claim here carries a measured interval and a threshold (rows logged before "
             "`perflab.kit.claims` judged claims); the table above is all there is.")


def figure_name(study: str, run_id: str | None = None) -> str:
    """claims-<study>.png (claims-<study>-<run id>.png for one execution of several), a safe file name."""
    stem = "-".join(x for x in ("claims", study, run_id) if x)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in stem) + ".png"


def _claims(rows: list[dict], out_dir: Path, figure: str | None, title: str) -> str:
    from ..kit.claims import read_row

    rs = [read_row(r) for r in rows]
    point = any(r.get("sweep_point") for r in rs)  # a sweep's: which point each row is from
    text = "### Claims, measured\n" + _md_table(
        ["point"] * point + ["claim", "claimed", "measured here", "judged", "device", "verdict"],
        [[r.get("sweep_point", "")] * point + [r["claim"], r.get("claimed", r.get("seed", "")), r["measured"],
          judged_cell(r), (r.get("env") or {}).get("device_name", ""), verdict_cell(r)] for r in rs])
    if figure is None:
        return text
    points = {}
    for r in rs:
        points.setdefault(r.get("sweep_point") or "", []).append(r)
    drawn = claims_png(out_dir / figure, points if len(points) > 1 else rs, title)
    return text + "\n\n" + (f"![{title}]({figure})" if drawn else NO_FIGURE)


# ---- one study's section ------------------------------------------------------------------------

def _timings(meas: list[dict]) -> str:
    point = any(r.get("sweep_point") for r in meas)  # a sweep's rows: each names its point, compared within it
    refs = reference_rows([((r.get("label") or "", r["env"].get("device_name"), r.get("sweep_point") or ""),
                            r.get("sub_label") or "", _impl(r)) for r in meas])
    rows = [[r.get("sweep_point", "")] * point + [
             r.get("label", ""), r.get("sub_label", ""), _impl(r), fmt_seconds(r["median_s"]),
             fmt_seconds(r["iqr_s"]), f"{fmt_seconds(r['p20_s'])} - {fmt_seconds(r['p80_s'])}", r["n"],
             "" if ref is None else speedup_text(meas[ref]["median_s"], r["median_s"], ref == i),
             r["env"].get("device_name", "")] for i, (r, ref) in enumerate(zip(meas, refs))]
    return ("### Timings (median, IQR, p20-p80 over timed blocks)\n"
            + _md_table(["point"] * point + ["benchmark", "case", "impl", "median", "IQR", "p20-p80", "n", "speedup",
                                             "device"], rows)
            + f"\n\n{SPEEDUP_NOTE}.")


def _plots(out_dir: Path, study: str, run_id: str | None, skip: tuple[str, ...] = ()) -> str:
    own = out_dir / study / run_id if run_id else None
    if own is not None and own.is_dir():
        plots = sorted(p for p in own.glob("*.png") if p.stem not in skip)
        note = ""
    else:  # a log from before executions had folders of their own
        plots = sorted((out_dir / study).glob("*.png")) if (out_dir / study).is_dir() else []
        note = ("\n\n(plots in the study's folder, written before each execution had its own: they may come from "
                "another execution)")
    if not plots:
        return ""
    return "### Plots\n" + "\n".join(f"![{p.stem}]({p.relative_to(out_dir).as_posix()})" for p in plots) + note


def _failed_checks(checks: list[dict]) -> str:
    failed = [r for r in checks if not r["passed"]]
    if not failed:
        return ""
    return "**Failed checks** (what was measured):\n" + "\n".join(
        f"- **{r['name']}**: {r.get('detail') or '(no detail logged: the check did not say what it measured)'}"
        for r in failed)


def _study_section(title: str, study: str, run_id: str | None, rows: list[dict], out_dir: Path,
                   figure: str | None = None, lead: str = "") -> str:
    """One execution's section (a sweep's: every point's rows); `figure`: the claims figure's file name to write
    beside the report (None: no figure); `lead`: a line under the title."""
    parts = [f"## {title}"] + ([lead] if lead else [])
    kinds = {k: [r for r in rows if r["kind"] == k] for k in ("claim", "measurement", "value", "check", "note")}
    failed = _failed_checks(kinds["check"])
    if failed:
        parts.append(failed)
    drawn = False
    if kinds["claim"]:
        parts.append(_claims(kinds["claim"], out_dir, figure, f"{study}: claims" + (f" of run {run_id}" if run_id else "")))
        drawn = figure is not None and f"]({figure})" in parts[-1]
    if kinds["measurement"]:
        parts.append(_timings(kinds["measurement"]))
    if kinds["value"]:
        point = any(r.get("sweep_point") for r in kinds["value"])
        parts.append("### Values\n" + _md_table(
            ["point"] * point + ["metric", "value", "unit", "context", "device"],
            [[r.get("sweep_point", "")] * point + [r["metric"], sig(r["value"]), r.get("unit", ""),
              ", ".join(f"{k}={short(v)}" for k, v in r.items() if k not in CONTEXT_SKIP and v not in ("", None)),
              r["env"].get("device_name", "")] for r in kinds["value"]]))
    if kinds["check"]:
        point = any(r.get("sweep_point") for r in kinds["check"])
        parts.append("### Checks\n" + _md_table(
            ["point"] * point + ["check", "result", "detail"],
            [[r.get("sweep_point", "")] * point + [r["name"], "pass" if r["passed"] else "**FAIL**",
              r.get("detail", "") if r["passed"] or not r.get("detail") else f"**{r['detail']}**"]
             for r in kinds["check"]]))
    for r in kinds["note"]:
        parts.append(f"> {r['text']}")
    plots = _plots(out_dir, study, run_id, skip=("claims",) if drawn else ())  # the notebook's own copy of it
    if plots:
        parts.append(plots)
    return "\n\n".join(parts)


def sweep_plot(out_dir: Path, rows: list[dict], param: str, grid: dict[str, list]) -> Path | None:
    """One plot for one swept parameter: each timing (or value, when a sweep has no timings) against
    `param`, one line per benchmark case and combination of the other swept parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import _wrap

    kind = "measurement" if any(r["kind"] == "measurement" for r in rows) else "value"
    others = [k for k in grid if k != param]
    points = []
    for r in rows:
        if r["kind"] != kind or param not in (r.get("params") or {}):
            continue
        y = r.get("median_s") if kind == "measurement" else r.get("value")
        if isinstance(y, (int, float)) and not isinstance(y, bool):
            group = (r.get("study"), r.get("label") or r.get("metric"), _impl(r),
                     *(f"{k}={r['params'].get(k)}" for k in others))
            points.append((group, r.get("sub_label") or "", r["params"][param], y))
    # a case's sub_label often names the swept value itself ("B=64"): it splits a line only where one
    # point holds several cases of the same group
    split = {g for g, _, x, _ in points if len({s for g2, s, x2, _ in points if g2 == g and x2 == x}) > 1}
    series: dict = {}
    for group, sub, x, y in points:
        parts = [str(v) for v in (*group[:2], sub if group in split else "", *group[2:]) if v]
        name = " / ".join(dict.fromkeys(parts))  # drop repeats such as label == metric
        series.setdefault(name, []).append((x, y))
    if not series:
        return None
    order = {json.dumps(v): i for i, v in enumerate(grid[param])}
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in grid[param])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in list(series.items())[:12]:
        pts.sort(key=lambda t: order.get(json.dumps(t[0]), 0))
        xs = [x if numeric else order.get(json.dumps(x), 0) for x, _ in pts]
        ax.plot(xs, [y for _, y in pts], marker="o", label=_wrap(name, 60))  # wrapped, never cut
    if not numeric:
        ax.set_xticks(range(len(grid[param])), [str(v) for v in grid[param]])
    elif min(grid[param]) > 0 and max(grid[param]) / min(grid[param]) >= 8:
        ax.set_xscale("log", base=2)
    ys = [y for pts in series.values() for _, y in pts]
    if min(ys) > 0 and max(ys) / min(ys) >= 10:
        ax.set_yscale("log")
    ax.set_xlabel(param)
    ax.set_ylabel("median time (s)" if kind == "measurement" else "value")
    ax.set_title(f"sweep over {param}" + (f" ({len(series) - 12} more series not shown)" if len(series) > 12 else ""))
    ax.legend(fontsize=6)
    fig.tight_layout()
    path = out_dir / f"sweep_{param}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sweep_claims_figure(rows: list[dict], param: str, grid: dict[str, list]):
    """Each claim measured in a sweep, on a panel of its own: its value and interval (coloured by verdict) at each
    value of `param`, the threshold as a black line (a `partly` one dashed), log scale where the claim is a ratio,
    each point's value and verdict printed beside it and the claim's full text on top, so the figure reads without
    the table. A line per combination of the other swept parameters. -> Figure, or None when no claim was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import COLORS, _num, _ratio_scale, _wrap, log_ticks, read_row

    others = [k for k in grid if k != param]
    by_claim: dict[str, list] = {}
    text: dict[str, str] = {}
    for r in rows:
        if r["kind"] != "claim" or param not in (r.get("params") or {}) or not drawable(r):
            continue
        nums = read_row(r)
        if "value" not in nums or r.get("verdict") == "not tested here":
            continue
        key = r.get("key") or r["claim"]
        text[key] = r["claim"]
        series = ", ".join(f"{k}={r['params'].get(k)}" for k in others)
        by_claim.setdefault(key, []).append((series, r["params"][param], nums, r["verdict"]))
    if not by_claim:
        return None
    values = list(grid[param])
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    order = {json.dumps(v): i for i, v in enumerate(values)}
    fig, axes = plt.subplots(len(by_claim), 1, figsize=(8, 0.8 + 2.6 * len(by_claim)), squeeze=False)
    for ax, (key, pts) in zip(axes[:, 0], by_claim.items()):
        names = list(dict.fromkeys(s for s, *_ in pts))
        n0 = pts[0][2]
        thr = n0["at_least"] if n0.get("at_least") is not None else n0["at_most"]
        log = all(_ratio_scale({k: v for k, v in n.items() if k in ("value", "low", "high", "at_least", "at_most")})
                  for _, _, n, _ in pts)
        for j, name in enumerate(names):
            mine = sorted((p for p in pts if p[0] == name), key=lambda p: order.get(json.dumps(p[1]), 0))
            xs = [(x if numeric else order.get(json.dumps(x), 0)) for _, x, _, _ in mine]
            if not numeric and len(names) > 1:
                xs = [x + (j - (len(names) - 1) / 2) * 0.08 for x in xs]  # side by side, not on top of each other
            ax.plot(xs, [n["value"] for _, _, n, _ in mine], color="#9e9e9e", lw=0.8, zorder=1,
                    label=name or None)
            for x, (_, _, n, verdict) in zip(xs, mine):
                color = COLORS.get(verdict, "black")
                lo = n["low"] if math.isfinite(n["low"]) else n["value"]
                hi = n["high"] if math.isfinite(n["high"]) else n["value"]
                ax.errorbar([x], [n["value"]], yerr=[[n["value"] - lo], [hi - n["value"]]], fmt="o", color=color,
                            mec="black", mew=0.5, capsize=3, zorder=2)
                ax.annotate(f"{_num(n['value'])} [{_num(n['low'])}, {_num(n['high'])}] {verdict}", (x, n["value"]),
                            textcoords="offset points", xytext=(6, 4), fontsize=6.5)
        ax.axhline(thr, color="black", lw=1.1)
        rule = pts[0][2].get("rule") or (f">= {_num(thr)}" if n0.get("at_least") is not None else f"<= {_num(thr)}")
        ax.annotate(f"threshold {rule}", (0, thr), xycoords=("axes fraction", "data"), textcoords="offset points",
                    xytext=(2, 3), fontsize=6.5)
        if n0.get("partly") is not None:
            ax.axhline(n0["partly"], color="#f9a825", lw=1.0, ls="--")
        if log:
            ax.set_yscale("log")
            log_ticks(ax.yaxis)
        ax.margins(x=0.25)  # room for the printed values beside the last point
        if not numeric:
            ax.set_xticks(range(len(values)), [str(v) for v in values])
        elif min(values) > 0 and max(values) / min(values) >= 8:
            ax.set_xscale("log", base=2)
            ax.set_xticks(values, [str(v) for v in values])
        ax.set_xlabel(param)
        ax.set_ylabel(pts[0][2].get("quantity") or "measured")
        ax.set_title(_wrap(text[key], 110), fontsize=8, loc="left")
        if any(names):
            ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _sweep_section(out_dir: Path, rows: list[dict]) -> str:
    from .sweep_dir import read_status, swept_parameters

    grid = swept_parameters(out_dir)
    if not grid:
        return ""
    parts = ["## Sweep", "Grid: " + "; ".join(f"`{k}` in {v}" for k, v in grid.items())]
    points = []
    for d in sorted(p for p in (out_dir / "points").glob("*") if p.is_dir()):
        st = read_status(d)
        if st is None:
            points.append([d.name, "**no status**", "-", "not finished, or its status.json is unreadable", ""])
        else:
            shown = "ok" if st.get("ok") else f"**{st.get('status') or 'failed'}**"  # named: cancelled, timed out
            earlier = ", ".join(e.get("status") or "?" for e in st.get("earlier") or [])
            points.append([d.name, shown, fmt_seconds(st.get("seconds") or 0), st.get("error") or "", earlier])
    parts.append(_md_table(["point", "status", "time", "error", "earlier attempts"], points))
    for param in grid:
        fig = sweep_claims_figure(rows, param, grid)
        if fig is not None:
            import matplotlib.pyplot as plt

            fig.savefig(out_dir / f"sweep_claims_{param}.png", dpi=110)
            plt.close(fig)
            parts.append(f"![the claims over {param}](sweep_claims_{param}.png)")
        path = sweep_plot(out_dir, [r for r in rows if r["kind"] != "run"], param, grid)
        if path:
            parts.append(f"![sweep over {param}]({path.name})")
    return "\n\n".join(parts)


def _earlier_judged(all_rows: list[dict], execs: dict[tuple, list[dict]]) -> dict[tuple, tuple]:
    """{latest execution's key: (run id, rows) of the study's latest execution that judged claims}, where the latest
    judged none (it failed, or stopped, before its claims cell)."""
    judged = latest_judged(all_rows)
    out = {}
    for key, rs in execs.items():
        if key[1]:  # a sweep point: the sweep's table says how each point's attempts ended
            continue
        hit = judged.get(key[:2])
        if hit and hit[0] != key[2] and not any(r["kind"] == "claim" for r in rs):
            out[key] = hit
    return out


def build(out_dir: str | Path, *, all_runs: bool = False, figures: bool = False) -> str:
    """The report's Markdown text for the run folder `out_dir` (reads `out_dir/results.jsonl`): each
    study's latest execution (and, where it judged no claims, the latest that did), or every execution with
    `all_runs`. With `figures`, each study's claims are drawn into `out_dir/claims-<study>.png` and linked."""
    out_dir = Path(out_dir)
    all_rows = read_rows(out_dir / "results.jsonl")
    rows, dropped = (all_rows, 0) if all_runs else latest(all_rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    execs = dict(sorted(executions(rows).items(), key=lambda kv: kv[0][0] or ""))  # sweep points: grid order
    earlier = {} if all_runs else _earlier_judged(all_rows, execs)
    shown = (f" ({len(earlier)} of them shown after their study's latest, which judged no claims: the latest that "
             "did)") if earlier else ""
    head = [f"# perflab report: `{out_dir}`", f"Generated {now} from `results.jsonl` ({len(rows)} rows"
            + (f"; {dropped} earlier execution(s) of these studies left out{shown}: `perflab report --all` shows "
               "them)." if dropped else ").")]
    if not rows:
        return "\n\n".join(head + ["No results yet: run `perflab run` (or `make run`) first."]) + "\n"
    head.append(_summary(execs, earlier, out_dir))
    envs = {tuple(r["env"].get(k) for k in ENV_KEYS) for r in rows if r.get("env") and r["kind"] != "run"}
    head.append("## Environment\n" + _md_table(
        ["host", "device", "torch", "CUDA", "commit", "dirty tree"],
        [[h, d, t, c or "-", sha[:10] if sha else "not a git checkout", "-" if dirty is None else dirty]
         for h, d, t, c, sha, dirty in sorted(envs, key=str)]))
    head.append(_runs_table(execs, out_dir))
    sweep = _sweep_section(out_dir, rows)
    sections = []
    for key, rs in execs.items():
        study, point, rid = key
        data = [r for r in rs if r["kind"] != "run"]
        if point:
            continue
        fig = figure_name(study, rid if all_runs else None) if figures else None
        if data:
            title = study + (f" (run {rid})" if all_runs else "")
            sections.append(_study_section(title, study, rid, data, out_dir, fig))
        if key in earlier:
            erid, ers = earlier[key]
            st, _ = status(ers, out_dir)
            lead = (f"The latest execution, run {rid or '-'} ({status(rs, out_dir)[0]}), judged no claims: this is "
                    f"the latest that did, run {erid} (started {_when(ers)}; {st}), kept in view.")
            sections.append(_study_section(f"{study}: earlier run {erid}, the latest that judged claims", study, erid,
                                           [r for r in ers if r["kind"] != "run"], out_dir, fig, lead))
    if sweep:  # a sweep's points: one section per study, every point's rows together
        by_study: dict[str, list[dict]] = {}
        for (study, point, _), rs in execs.items():
            if point:
                by_study.setdefault(study, []).extend(r for r in rs if r["kind"] != "run")
        sections += [_study_section(s, s, None, rs, out_dir, figure_name(s) if figures else None)
                     for s, rs in by_study.items() if rs]
    return "\n\n".join(head + ([sweep] if sweep else []) + sections) + "\n"


def write(out_dir: str | Path, *, all_runs: bool = False) -> Path:
    """Write `out_dir/REPORT.md`, with each study's claims figure beside it, and return its path."""
    path = Path(out_dir) / "REPORT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build(out_dir, all_runs=all_runs, figures=True))
    return path
