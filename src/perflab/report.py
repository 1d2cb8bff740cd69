"""`perflab report DIR`: a Markdown report from a run folder's results log.

It leads with one line per study (status, headline, verdict counts, checks, device), then the environment, the
notebooks run, and per study: each seed claim beside what was measured and its verdict, the timings (median with
spread, and the speedup against the case's reference), other values, correctness checks, and the plots. Numbers
are shown to three significant figures.

A run folder's log keeps every execution; the report shows each study's latest one (`--all`: every one). An
execution is the set of rows that share a run id: the notebook's own rows and the runner's status rows ("started",
then "ok", "failed" or "interrupted"), and its plots are the files in `<study>/<run id>/`. So a study interrupted
half-way shows as interrupted, with the rows it wrote, never beside an earlier execution's "ok" or plots.
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from .formatting import SPEEDUP_NOTE, fmt_seconds, reference_rows, short, sig, speedup_text
from .results import executions, latest, read_rows
from .verdicts import VERDICTS

ENV_KEYS = ("host", "device_name", "torch", "cuda", "commit", "dirty")
CONTEXT_SKIP = {"study", "kind", "metric", "value", "unit", "params", "env", "run_id"}


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


def status(exec_rows: list[dict]) -> tuple[str, str]:
    """An execution's status as the report shows it, and where it stopped / why."""
    runs = [r for r in exec_rows if r["kind"] == "run"]
    if not runs:
        return "no status", "not run by `perflab run` (papermill or Jupyter): nothing recorded how it ended"
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


def _checks(exec_rows: list[dict]) -> str:
    checks = [r for r in exec_rows if r["kind"] == "check"]
    if not checks:
        return "-"
    failed = sum(1 for r in checks if not r["passed"])
    return f"{len(checks) - failed}/{len(checks)} pass" + (f", **{failed} FAIL**" if failed else "")


def _summary(execs: dict[tuple, list[dict]]) -> str:
    rows = []
    for (study, point, rid), rs in execs.items():
        st, _why = status(rs)
        rows.append([study + (f" ({point})" if point else ""), st, _headline(rs), _verdicts(rs), _checks(rs),
                     _device(rs), rid or "-"])
    return "## Summary\n" + _md_table(
        ["study", "status", "headline", "claims (verdicts)", "checks", "device", "run id (start time)"], rows)


def _runs_table(execs: dict[tuple, list[dict]]) -> str:
    rows = []
    for (study, point, rid), rs in execs.items():
        st, why = status(rs)
        params = next((r.get("params") for r in rs if r["kind"] == "run"), None)
        params = params if params is not None else (rs[0].get("params") or {})
        shown = ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"  # as given, not rounded
        rows.append([study + (f" ({point})" if point else ""), rid or "-", st, _seconds(rs), shown, why])
    return "## Notebooks run\n" + _md_table(["notebook", "run id", "status", "time", "parameters", "stopped at / why"],
                                             rows)


# ---- one study's section ------------------------------------------------------------------------

def _timings(meas: list[dict]) -> str:
    refs = reference_rows([((r.get("label") or "", r["env"].get("device_name")), r.get("sub_label") or "", _impl(r))
                           for r in meas])
    rows = [[r.get("label", ""), r.get("sub_label", ""), _impl(r), fmt_seconds(r["median_s"]),
             fmt_seconds(r["iqr_s"]), f"{fmt_seconds(r['p20_s'])} - {fmt_seconds(r['p80_s'])}", r["n"],
             "" if ref is None else speedup_text(meas[ref]["median_s"], r["median_s"], ref == i),
             r["env"].get("device_name", "")] for i, (r, ref) in enumerate(zip(meas, refs))]
    return ("### Timings (median, IQR, p20-p80 over timed blocks)\n"
            + _md_table(["benchmark", "case", "impl", "median", "IQR", "p20-p80", "n", "speedup", "device"], rows)
            + f"\n\n{SPEEDUP_NOTE}.")


def _plots(out_dir: Path, study: str, run_id: str | None) -> str:
    own = out_dir / study / run_id if run_id else None
    if own is not None and own.is_dir():
        plots = sorted(own.glob("*.png"))
        note = ""
    else:  # a log from before executions had folders of their own
        plots = sorted((out_dir / study).glob("*.png")) if (out_dir / study).is_dir() else []
        note = ("\n\n(plots in the study's folder, written before each execution had its own: they may come from "
                "another execution)")
    if not plots:
        return ""
    return "### Plots\n" + "\n".join(f"![{p.stem}]({p.relative_to(out_dir).as_posix()})" for p in plots) + note


def _study_section(title: str, study: str, run_id: str | None, rows: list[dict], out_dir: Path) -> str:
    parts = [f"## {title}"]
    kinds = {k: [r for r in rows if r["kind"] == k] for k in ("claim", "measurement", "value", "check", "note")}
    if kinds["claim"]:
        parts.append("### Claims, measured\n" + _md_table(
            ["claim", "claimed", "measured here", "device", "verdict"],
            [[r["claim"], r.get("claimed", r.get("seed", "")), r["measured"], r["env"].get("device_name", ""),
              f"**{r['verdict']}**"]
             for r in kinds["claim"]]))
    if kinds["measurement"]:
        parts.append(_timings(kinds["measurement"]))
    if kinds["value"]:
        parts.append("### Values\n" + _md_table(
            ["metric", "value", "unit", "context", "device"],
            [[r["metric"], sig(r["value"]), r.get("unit", ""),
              ", ".join(f"{k}={short(v)}" for k, v in r.items() if k not in CONTEXT_SKIP and v not in ("", None)),
              r["env"].get("device_name", "")] for r in kinds["value"]]))
    if kinds["check"]:
        parts.append("### Checks\n" + _md_table(
            ["check", "result", "detail"],
            [[r["name"], "pass" if r["passed"] else "**FAIL**", r.get("detail", "")] for r in kinds["check"]]))
    for r in kinds["note"]:
        parts.append(f"> {r['text']}")
    plots = _plots(out_dir, study, run_id)
    if plots:
        parts.append(plots)
    return "\n\n".join(parts)


def sweep_plot(out_dir: Path, rows: list[dict], param: str, grid: dict[str, list]) -> Path | None:
    """One plot for one swept parameter: each timing (or value, when a sweep has no timings) against
    `param`, one line per benchmark case and combination of the other swept parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        ax.plot(xs, [y for _, y in pts], marker="o", label=name[:60])
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


def _sweep_section(out_dir: Path, rows: list[dict]) -> str:
    from .points import read_status, swept_parameters

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
        path = sweep_plot(out_dir, [r for r in rows if r["kind"] != "run"], param, grid)
        if path:
            parts.append(f"![sweep over {param}]({path.name})")
    return "\n\n".join(parts)


def build(out_dir: str | Path, *, all_runs: bool = False) -> str:
    """The report's Markdown text for the run folder `out_dir` (reads `out_dir/results.jsonl`): each
    study's latest execution, or every execution with `all_runs`."""
    out_dir = Path(out_dir)
    rows = read_rows(out_dir / "results.jsonl")
    rows, dropped = (rows, 0) if all_runs else latest(rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    head = [f"# perflab report: `{out_dir}`", f"Generated {now} from `results.jsonl` ({len(rows)} rows"
            + (f"; {dropped} earlier execution(s) of these studies left out: `perflab report --all` shows them)."
               if dropped else ").")]
    if not rows:
        return "\n\n".join(head + ["No results yet: run `perflab run` (or `make run`) first."]) + "\n"
    execs = dict(sorted(executions(rows).items(), key=lambda kv: kv[0][0] or ""))  # sweep points: grid order
    head.append(_summary(execs))
    envs = {tuple(r["env"].get(k) for k in ENV_KEYS) for r in rows if r.get("env") and r["kind"] != "run"}
    head.append("## Environment\n" + _md_table(
        ["host", "device", "torch", "CUDA", "commit", "dirty tree"],
        [[h, d, t, c or "-", (sha or "-")[:10], dirty] for h, d, t, c, sha, dirty in sorted(envs, key=str)]))
    head.append(_runs_table(execs))
    sweep = _sweep_section(out_dir, rows)
    sections = []
    for (study, point, rid), rs in execs.items():
        data = [r for r in rs if r["kind"] != "run"]
        if data and not point:
            title = study + (f" (run {rid})" if all_runs else "")
            sections.append(_study_section(title, study, rid, data, out_dir))
    if sweep:  # a sweep's points: one section per study, every point's rows together
        by_study: dict[str, list[dict]] = {}
        for (study, point, _), rs in execs.items():
            if point:
                by_study.setdefault(study, []).extend(r for r in rs if r["kind"] != "run")
        sections += [_study_section(s, s, None, rs, out_dir) for s, rs in by_study.items() if rs]
    return "\n\n".join(head + ([sweep] if sweep else []) + sections) + "\n"


def write(out_dir: str | Path, *, all_runs: bool = False) -> Path:
    """Write `out_dir/REPORT.md` and return its path."""
    path = Path(out_dir) / "REPORT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build(out_dir, all_runs=all_runs))
    return path
