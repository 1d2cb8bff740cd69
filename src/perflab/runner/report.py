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
left (`perflab.runner.report_rows`). `write` also draws each study's claims (`perflab.runner.report_claims`) as
`claims-<study>.png` beside REPORT.md and links it in the study's section, and a sweep's figures
(`perflab.runner.sweep_figures`) as `sweep_<param>.png` and `sweep_claims_<param>.png`.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..kit.formatting import SPEEDUP_NOTE, fmt_seconds, reference_rows, short, sig, speedup_text
from ..kit.judge import VERDICTS
from ..kit.paths import repo_root
from ..kit.results import executions, latest, latest_judged, read_rows, results_file
from .report_claims import NO_FIGURE, claims_png, figure_name, judged_cell, verdict_cell
from .report_rows import impl, started, status
from .sweep_figures import sweep_claims_figure, sweep_plot

ENV_KEYS = ("host", "device_name", "torch", "cuda", "commit", "dirty")
CONTEXT_SKIP = {"study", "kind", "metric", "value", "unit", "params", "params_set", "env", "run_id", "sweep_point"}


def _md_table(header: list[str], rows: list[list]) -> str:
    def cell(v) -> str:
        return short(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _device(rows: list[dict]) -> str:
    names = dict.fromkeys(r["env"].get("device_name", "") for r in rows if r["kind"] != "run" and r.get("env"))
    return ", ".join(n for n in names if n) or "-"


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


# ---- claims: the table, and the figure beside it -------------------------------------------------

def _claims(rows: list[dict], out_dir: Path, figure: str | None, title: str, cause: str = "") -> str:
    from ..kit.claims import ClaimRow

    rs = [(raw, ClaimRow.from_log(raw)) for raw in rows]   # the log's row (its point, its device) and the claim's
    point = any(raw.get("sweep_point") for raw, _ in rs)  # a sweep's: which point each row is from
    text = "### Claims, measured\n" + _md_table(
        ["point"] * point + ["claim", "claimed", "measured here", "judged", "device", "verdict"],
        [[raw.get("sweep_point", "")] * point + [c.claim, c.claimed, c.measured, judged_cell(c),
          (raw.get("env") or {}).get("device_name", ""), verdict_cell(c, cause)] for raw, c in rs])
    if figure is None:
        return text
    points = {}
    for raw, c in rs:
        points.setdefault(raw.get("sweep_point") or "", []).append(c)
    drawn = claims_png(out_dir / figure, points if len(points) > 1 else [c for _, c in rs], title)
    return text + "\n\n" + (f"![{title}]({figure})" if drawn else NO_FIGURE)


def _card(claims: list[dict], notes: list[dict], out_dir: Path, study: str, run_id: str | None) -> str:
    """The verdict card, as the notebook shows it at its top (`perflab.kit.card.card_markdown`): the judged claims
    with their value, interval, unit and verdict, the untested ones folded into a line, and the card's figure."""
    from ..kit.card import card_markdown, device_text

    env = next((r.get("env") for r in claims if r.get("env")), {}) or {}
    name = next((r["card_figure"] for r in reversed(notes) if r.get("card_figure")), None)
    path = out_dir / study / run_id / name if name and run_id else None
    figure = path.relative_to(out_dir).as_posix() if path is not None and path.is_file() else ""
    head = next((r.get("key") for r in reversed(notes) if r.get("headline") and r.get("key")), "") or ""
    return "### Verdicts\n" + card_markdown(claims, device=device_text(env), figure=figure, headline=head)


def _cause_line(claims: list[dict], cause: str) -> str:
    """Under the card: the cause the run's `perflab diagnose` found, where a timed claim (decided in paired rounds)
    does not hold or partly holds."""
    from .report_claims import SPEED_MISSES

    missed = [r["claim"] for r in claims if r.get("verdict") in SPEED_MISSES and r.get("rounds") is not None]
    if not cause or not missed:
        return ""
    return f"\n\n{'; '.join(missed)}: {claims_verdict(claims, missed[0])}: {cause} (perflab diagnose)"


def claims_verdict(claims: list[dict], claim: str) -> str:
    return next(r["verdict"] for r in claims if r["claim"] == claim)


# ---- one study's section ------------------------------------------------------------------------

def _timings(meas: list[dict]) -> str:
    point = any(r.get("sweep_point") for r in meas)  # a sweep's rows: each names its point, compared within it
    refs = reference_rows([((r.get("label") or "", r["env"].get("device_name"), r.get("sweep_point") or ""),
                            r.get("sub_label") or "", impl(r)) for r in meas])
    rows = [[r.get("sweep_point", "")] * point + [
             r.get("label", ""), r.get("sub_label", ""), impl(r), fmt_seconds(r["median_s"]),
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
    kinds = {k: [r for r in rows if r["kind"] == k]
             for k in ("claim", "measurement", "value", "check", "note", "diagnosis")}
    failed = _failed_checks(kinds["check"])
    if failed:
        parts.append(failed)
    drawn = False
    if kinds["claim"]:
        cause = kinds["diagnosis"][-1].get("cause", "") if kinds["diagnosis"] else ""   # the run's perflab diagnose
        parts.append(_card(kinds["claim"], kinds["note"], out_dir, study, run_id) + _cause_line(kinds["claim"], cause))
        parts.append(_claims(kinds["claim"], out_dir, figure, f"{study}: claims" + (f" of run {run_id}" if run_id else ""),
                             cause))
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
        if not r.get("card_figure"):  # the card links its figure
            parts.append(f"> {r['text']}")
    for r in kinds["diagnosis"]:
        parts.append(f"> perflab diagnose of `{r.get('target', '')}`: {r.get('headline', '')}; top cause: "
                     f"{r.get('cause') or 'none found'}")
    plots = _plots(out_dir, study, run_id, skip=("claims",) if drawn else ())  # the notebook's own copy of it
    if plots:
        parts.append(plots)
    return "\n\n".join(parts)


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


def folder_label(out_dir: str | Path) -> str:
    """The run folder as a report's title names it: its path inside the project (`outputs/verdicts/0bed3bf/quiet`),
    else its name; never a path of the machine that wrote it (a committed report is read on others)."""
    out_dir = Path(out_dir).resolve()
    try:
        rel = out_dir.relative_to(repo_root().resolve()).as_posix()
    except ValueError:
        return out_dir.name
    return out_dir.name if rel == "." else rel


def build(out_dir: str | Path, *, all_runs: bool = False, figures: bool = False) -> str:
    """The report's Markdown text for the run folder `out_dir` (reads `out_dir/results.jsonl`): each
    study's latest execution (and, where it judged no claims, the latest that did), or every execution with
    `all_runs`. With `figures`, each study's claims are drawn into `out_dir/claims-<study>.png` and linked."""
    out_dir = Path(out_dir)
    source = results_file(out_dir / "results.jsonl")
    all_rows = read_rows(source)
    rows, dropped = (all_rows, 0) if all_runs else latest(all_rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    execs = dict(sorted(executions(rows).items(), key=lambda kv: kv[0][0] or ""))  # sweep points: grid order
    earlier = {} if all_runs else _earlier_judged(all_rows, execs)
    shown = (f" ({len(earlier)} of them shown after their study's latest, which judged no claims: the latest that "
             "did)") if earlier else ""
    head = [f"# perflab report: `{folder_label(out_dir)}`", f"Generated {now} from `{source.name}` ({len(rows)} rows"
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
                    f"the latest that did, run {erid} (started {started(ers)}; {st}), kept in view.")
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
