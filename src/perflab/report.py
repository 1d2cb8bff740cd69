"""`perflab report DIR`: a Markdown report from a run folder's results log.

Per study: each seed claim beside what was measured and its verdict, the timings (median, spread,
ratio to the baseline of the same benchmark), other values, correctness checks, and the plots.
"""
from __future__ import annotations

import datetime as _dt
import json
from collections import OrderedDict
from pathlib import Path

from .bench import fmt_seconds
from .results import read_rows

ENV_KEYS = ("host", "device_name", "torch", "cuda", "commit", "dirty")


def _md_table(header: list[str], rows: list[list]) -> str:
    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _by_study(rows: list[dict]) -> OrderedDict[str, list[dict]]:
    out: OrderedDict[str, list[dict]] = OrderedDict()
    for r in sorted(rows, key=lambda r: r.get("study") or ""):
        out.setdefault(r.get("study") or "(no study)", []).append(r)
    return out


def _impl(r: dict) -> str:
    return r.get("impl") or r.get("description") or ""


def _ratios(meas: list[dict]) -> dict[int, str]:
    """Ratio of the baseline's median to each row's, within one (label, sub_label) benchmark."""
    out = {}
    groups: dict = {}
    for i, r in enumerate(meas):
        groups.setdefault((r.get("label"), r.get("sub_label"), r["env"].get("device_name")), []).append(i)
    for idx in groups.values():
        base = [i for i in idx if _impl(meas[i]) == "baseline"]
        if not base:
            continue
        b = meas[base[-1]]["median_s"]
        for i in idx:
            out[i] = f"{b / meas[i]['median_s']:.2f}x" if meas[i]["median_s"] > 0 else ""
    return out


def _study_section(study: str, rows: list[dict], out_dir: Path) -> str:
    parts = [f"## {study}"]
    kinds = {k: [r for r in rows if r["kind"] == k] for k in ("claim", "measurement", "value", "check", "note")}
    if kinds["claim"]:
        parts.append("### The seed's claims, measured\n" + _md_table(
            ["claim", "the seed said", "measured here", "device", "verdict"],
            [[r["claim"], r["seed"], r["measured"], r["env"].get("device_name", ""), f"**{r['verdict']}**"]
             for r in kinds["claim"]]))
    if kinds["measurement"]:
        meas = kinds["measurement"]
        ratios = _ratios(meas)
        parts.append("### Timings (median, IQR, p20-p80 over timed blocks)\n" + _md_table(
            ["benchmark", "case", "impl", "median", "IQR", "p20-p80", "n", "vs baseline", "device"],
            [[r.get("label", ""), r.get("sub_label", ""), _impl(r), fmt_seconds(r["median_s"]),
              fmt_seconds(r["iqr_s"]), f"{fmt_seconds(r['p20_s'])} - {fmt_seconds(r['p80_s'])}", r["n"],
              ratios.get(i, ""), r["env"].get("device_name", "")] for i, r in enumerate(meas)]))
    if kinds["value"]:
        skip = {"study", "kind", "metric", "value", "unit", "params", "env"}
        parts.append("### Values\n" + _md_table(
            ["metric", "value", "unit", "context", "device"],
            [[r["metric"], _num(r["value"]), r.get("unit", ""),
              ", ".join(f"{k}={v}" for k, v in r.items() if k not in skip and v not in ("", None)),
              r["env"].get("device_name", "")] for r in kinds["value"]]))
    if kinds["check"]:
        parts.append("### Checks\n" + _md_table(
            ["check", "result", "detail"],
            [[r["name"], "pass" if r["passed"] else "**FAIL**", r.get("detail", "")] for r in kinds["check"]]))
    for r in kinds["note"]:
        parts.append(f"> {r['text']}")
    plots = sorted((out_dir / study).glob("*.png")) if (out_dir / study).is_dir() else []
    if plots:
        parts.append("### Plots\n" + "\n".join(f"![{p.stem}]({p.relative_to(out_dir).as_posix()})" for p in plots))
    return "\n\n".join(parts)


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


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
    from .sweep import swept_parameters

    grid = swept_parameters(out_dir)
    if not grid:
        return ""
    parts = ["## Sweep", "Grid: " + "; ".join(f"`{k}` in {v}" for k, v in grid.items())]
    points = []
    for f in sorted((out_dir / "points").glob("*/status.json")):
        st = json.loads(f.read_text())
        points.append([f.parent.name, "ok" if st["ok"] else "**failed**", st["seconds"], st.get("error") or ""])
    parts.append(_md_table(["point", "status", "seconds", "error"], points))
    for param in grid:
        path = sweep_plot(out_dir, [r for r in rows if r["kind"] != "run"], param, grid)
        if path:
            parts.append(f"![sweep over {param}]({path.name})")
    return "\n\n".join(parts)


def latest(rows: list[dict]) -> tuple[list[dict], int]:
    """Each study's rows from its latest execution only (per sweep point in a sweep folder): a run folder's
    log keeps every earlier execution too. -> (rows kept, number of earlier executions left out)."""
    last: dict = {}
    for r in rows:  # rows are in the order they were written: the last run_id seen wins
        key = (r.get("study"), r.get("sweep_point"), r["kind"] == "run")
        last[key] = r.get("run_id")
    seen = {(r.get("study"), r.get("sweep_point"), r["kind"] == "run", r.get("run_id")) for r in rows}
    kept = [r for r in rows if last[(r.get("study"), r.get("sweep_point"), r["kind"] == "run")] == r.get("run_id")]
    return kept, len(seen) - len(last)


def build(out_dir: str | Path, *, all_runs: bool = False) -> str:
    """The report's Markdown text for the run folder `out_dir` (reads `out_dir/results.jsonl`): each
    study's latest execution, or every row with `all_runs`."""
    out_dir = Path(out_dir)
    rows = read_rows(out_dir / "results.jsonl")
    rows, dropped = (rows, 0) if all_runs else latest(rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    head = [f"# perflab report: `{out_dir}`", f"Generated {now} from `results.jsonl` ({len(rows)} rows"
            + (f"; {dropped} earlier execution(s) of these studies left out: `perflab report --all` shows them)."
               if dropped else ").")]
    if not rows:
        return "\n\n".join(head + ["No results yet: run `perflab run` (or `make run`) first."]) + "\n"
    envs = {tuple(r["env"].get(k) for k in ENV_KEYS) for r in rows if "env" in r}
    head.append("## Environment\n" + _md_table(
        ["host", "device", "torch", "CUDA", "commit", "dirty tree"],
        [[h, d, t, c or "-", (sha or "-")[:10], dirty] for h, d, t, c, sha, dirty in sorted(envs, key=str)]))
    runs = [r for r in rows if r["kind"] == "run"]
    if runs:
        head.append("## Notebooks run\n" + _md_table(
            ["notebook", "status", "seconds", "parameters", "error"],
            [[r["study"], r["status"] if r["status"] == "ok" else "**failed**", r["seconds"],
              ", ".join(f"{k}={v}" for k, v in (r.get("params") or {}).items()) or "defaults",
              (f"cell {r['cell']}: " if r.get("cell") is not None else "") + (r.get("error") or "")]
             for r in runs]))
    sections = [_study_section(s, [r for r in rs if r["kind"] != "run"], out_dir)
                for s, rs in _by_study(rows).items() if any(r["kind"] != "run" for r in rs)]
    sweep = _sweep_section(out_dir, rows)
    return "\n\n".join(head + ([sweep] if sweep else []) + sections) + "\n"


def write(out_dir: str | Path, *, all_runs: bool = False) -> Path:
    """Write `out_dir/REPORT.md` and return its path."""
    path = Path(out_dir) / "REPORT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build(out_dir, all_runs=all_runs))
    return path
