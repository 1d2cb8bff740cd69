"""`perflab compare A B`: two result sets (two hosts, two commits) side by side, per study and metric.

Rows pair when study, kind, metric, benchmark label, case, implementation and parameters (all but
`out_dir`) are equal. Timings compare medians; values compare values. The ratio is B / A: for a time,
below 1 means B is faster. Rows without a partner are listed, never dropped silently.

Each study's claims are shown side by side too: A's and B's verdicts (with their reasons) and judged intervals, per
claim, from each side's latest execution that judged claims; with `--out`, one figure per study draws both sides'
intervals against the thresholds (`perflab.kit.claims.claims_figure`), linked in COMPARE.md.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

from ..kit.formatting import fmt_seconds, sig
from ..kit.results import executions, latest, latest_judged, read_rows, results_file

IGNORED_PARAMS = ("out_dir",)


def load_rows(path: str | Path) -> list[dict]:
    """Every row of a run folder (its results.jsonl) or of a results file."""
    f = results_file(path)
    if not f.is_file():
        raise FileNotFoundError(f"no results at {f} (expected a run folder holding results.jsonl or results.jsonl.gz, "
                                "or the file)")
    return read_rows(f)


def load(path: str | Path) -> list[dict]:
    """Rows of a run folder (its results.jsonl) or of a results file: each study's latest execution, as
    `perflab report` shows it (an earlier execution's rows never pair with a later one's)."""
    return latest(load_rows(path))[0]


class ClaimSet(NamedTuple):
    """One side's claims of one study: the execution that judged them, and whether a later one judged none."""
    run_id: str | None
    rows: list  # ClaimRows
    earlier: bool


def load_claims(path: str | Path) -> dict[str, ClaimSet]:
    """{study (and sweep point): its claims}, from each study's latest execution that judged claims (an execution
    that failed before its claims cell does not hide the verdicts before it: `earlier` says so)."""
    rows = load_rows(path)
    last = {key[:2]: key[2] for key in executions(rows)}
    from ..kit.claims import ClaimRow

    return {study + (f" ({point})" if point else ""): ClaimSet(rid, [ClaimRow.from_log(r) for r in rs
                                                                    if r["kind"] == "claim"],
                                                              rid != last[(study, point)])
            for (study, point), (rid, rs) in latest_judged(rows).items()}


def _key(r: dict) -> tuple:
    params = {k: v for k, v in (r.get("params") or {}).items() if k not in IGNORED_PARAMS}
    return (r.get("study", ""), r["kind"], r.get("metric", ""), r.get("label", ""), r.get("sub_label", ""),
            r.get("impl") or r.get("description") or "", json.dumps(params, sort_keys=True))


def _number(r: dict) -> float | None:
    v = r.get("median_s") if r["kind"] == "measurement" else r.get("value")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclasses.dataclass
class Comparison:
    paired: list[tuple[tuple, dict, dict]]
    only_a: list[dict]
    only_b: list[dict]
    repeated: int  # rows that had a later row with the same key on the same side (the last one is used)


def compare(a_rows: list[dict], b_rows: list[dict]) -> Comparison:
    def index(rows):
        out, rep = {}, 0
        for r in rows:
            if r.get("kind") in ("measurement", "value") and _number(r) is not None:
                k = _key(r)
                rep += k in out
                out[k] = r
        return out, rep

    a, ra = index(a_rows)
    b, rb = index(b_rows)
    paired = [(k, a[k], b[k]) for k in a if k in b]
    return Comparison(paired=paired, only_a=[a[k] for k in a if k not in b],
                      only_b=[b[k] for k in b if k not in a], repeated=ra + rb)


def _show(r: dict) -> str:
    v = _number(r)
    return fmt_seconds(v) if r["kind"] == "measurement" else f"{sig(r.get('value'))} {r.get('unit', '')}".strip()


def _range(ra: dict, rb: dict) -> str:
    """For timings, the conservative spread of B / A (B p20 / A p80 .. B p80 / A p20), marked when it
    includes 1: the two cannot be told apart at this spread."""
    if ra["kind"] != "measurement" or not ra.get("p20_s") or not rb.get("p20_s"):
        return ""
    lo, hi = rb["p20_s"] / ra["p80_s"], rb["p80_s"] / ra["p20_s"]
    return f"{sig(lo)}-{sig(hi)}" + (" (within spread)" if lo <= 1 <= hi else "")


def _side(rows: list[dict]) -> str:
    """What is known of where one side ran (device, torch, commit): the notebooks' rows (the runner's status rows
    know no device), what none of them recorded left out."""
    stamped = [r for r in rows if r.get("env")]
    stamped = [r for r in stamped if r["kind"] != "run"] or stamped
    envs = {(r["env"].get("device_name"), r["env"].get("torch"), str(r["env"].get("commit") or "")[:10])
            for r in stamped}
    shown = [", ".join(x for x in (d, t and f"torch {t}", c and f"commit {c}") if x) for d, t, c in envs]
    return "; ".join(sorted(x for x in shown if x)) or "no environment recorded"


def _case(k: tuple) -> str:
    study, kind, metric, label, sub, impl, params = k
    parts: list[str] = []
    for x in (metric, label, sub, impl):
        if x and x not in parts:
            parts.append(x)
    return " / ".join(parts)


def _split_params(keys: list[tuple]) -> tuple[dict, list[str]]:
    """Parameters shared by every row of `keys` (shown once) and the names that vary (shown per row)."""
    all_params = [json.loads(k[6]) for k in keys]
    names = sorted({n for p in all_params for n in p})
    common = {n: all_params[0][n] for n in names
              if all(n in p and p[n] == all_params[0].get(n) for p in all_params)}
    return common, [n for n in names if n not in common]


def _keyed(a: dict[str, ClaimSet], b: dict[str, ClaimSet]) -> tuple[dict, dict]:
    """A and B with every claim row keyed: a row logged without a key (before `perflab.kit.claims`: its key is its
    text, `ClaimRow.from_log`) takes the key of a row with the same claim text on either side (the H100 run of
    1a70d9c against today's), so the two sides' rows of one claim pair up."""
    import dataclasses

    by_text = {r.claim: r.key for sets in (a, b) for cs in sets.values() for r in cs.rows if r.key != r.claim}

    def keyed(sets):
        return {s: cs._replace(rows=[dataclasses.replace(r, key=by_text.get(r.claim, r.key)) if r.key == r.claim
                                     else r for r in cs.rows]) for s, cs in sets.items()}
    return keyed(a), keyed(b)


def _claim_cell(r) -> str:
    from .report_claims import judged_cell, verdict_cell

    if r is None:
        return "-"
    judged = judged_cell(r)
    return verdict_cell(r) + (f": {judged}" if judged else "")


def _run_note(side: str, cs: ClaimSet | None) -> str:
    if cs is None:
        return f"{side}: no claims judged"
    return f"{side}: run {cs.run_id or '-'}" + (" (an earlier execution: the latest judged no claims)"
                                                 if cs.earlier else "")


def claims_markdown(a: dict[str, ClaimSet], b: dict[str, ClaimSet], figures: dict[str, str] | None = None) -> list[str]:
    """Per study, each claim's verdict and judged interval in A and in B; `figures`: {study: file} to link."""
    lines: list[str] = []
    a, b = _keyed(a, b)
    for study in sorted(set(a) | set(b)):
        ra = {r.key: r for r in (a[study].rows if study in a else [])}
        rb = {r.key: r for r in (b[study].rows if study in b else [])}
        lines += [f"## {study}: claims", "", f"{_run_note('A', a.get(study))}; {_run_note('B', b.get(study))}", "",
                  "| claim | claimed | A | B |", "|---|---|---|---|"]
        for k in dict.fromkeys([*ra, *rb]):
            r = ra.get(k) or rb[k]
            cells = [r.claim, r.claimed, _claim_cell(ra.get(k)), _claim_cell(rb.get(k))]
            lines.append("| " + " | ".join(str(x).replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
        if figures and study in figures:
            lines += ["", f"![claims of {study}: A and B]({figures[study]})"]
        lines.append("")
    return lines


def claims_figures(a: dict[str, ClaimSet], b: dict[str, ClaimSet], out: Path, a_name: str, b_name: str) -> dict:
    """One figure per study, A's and B's claim intervals side by side, as `out/claims-<study>.png`: {study: file
    name} of those drawn (a study whose rows carry no interval, logged before `perflab.kit.claims`, has none)."""
    from .report_claims import claims_png, figure_name

    def clip(name: str) -> str:
        return name if len(name) <= 40 else "..." + name[-37:]

    drawn = {}
    a, b = _keyed(a, b)
    for study in sorted(set(a) | set(b)):
        runs = {side: sets[study].rows for side, sets in (("A", a), ("B", b)) if study in sets}
        name = figure_name(study)
        if claims_png(out / name, runs, f"{study}: A = {clip(a_name)}, B = {clip(b_name)}"):
            drawn[study] = name
    return drawn


def to_markdown(c: Comparison, a_rows: list[dict], b_rows: list[dict], a_name: str, b_name: str, *,
                claims: tuple[dict, dict] | None = None, figures: dict[str, str] | None = None) -> str:
    """The comparison as Markdown; `claims`: (A's, B's) `load_claims`, shown per study; `figures`: their files."""
    lines = [f"# perflab compare: A = `{a_name}`, B = `{b_name}`", "",
             f"- A: {_side(a_rows)}", f"- B: {_side(b_rows)}",
             f"- {len(c.paired)} paired rows; {len(c.only_a)} only in A; {len(c.only_b)} only in B"
             + (f"; {c.repeated} repeated rows (the last of each is used)" if c.repeated else ""),
             "", "Ratio is B / A: for a time, below 1 means B is faster; range is the conservative spread of the",
             "ratio (B p20 / A p80 to B p80 / A p20), 'within spread' when it includes 1.", ""]
    for study in sorted({k[0] for k, _, _ in c.paired}):
        pairs = [p for p in c.paired if p[0][0] == study]
        common, varying = _split_params([k for k, _, _ in pairs])
        lines += [f"## {study}", "", "Parameters of every row: "
                  + (", ".join(f"{n}={v}" for n, v in common.items()) or "none"), "",
                  "| case | " + "".join(f"{n} | " for n in varying) + "A | B | B / A | range |",
                  "|---|" + "---|" * (len(varying) + 4)]
        for k, ra, rb in pairs:
            va, vb = _number(ra), _number(rb)
            ratio = sig(vb / va) if va else "n/a"
            params = json.loads(k[6])
            lines.append(f"| {_case(k)} | " + "".join(f"{params.get(n, '')} | " for n in varying)
                         + f"{_show(ra)} | {_show(rb)} | {ratio} | {_range(ra, rb)} |")
        lines.append("")
    if claims:
        lines += claims_markdown(*claims, figures)
    for title, rows in (("Only in A (no partner in B)", c.only_a), ("Only in B (no partner in A)", c.only_b)):
        if rows:
            lines += [f"## {title}", ""] + [f"- {r.get('study')}: {_case(_key(r))} = {_show(r)}" for r in rows] + [""]
    return "\n".join(lines)


def plot(c: Comparison, path: str | Path, a_name: str, b_name: str) -> Path | None:
    """B / A per paired row as a dot on a log scale, a timing's conservative spread (B p20 / A p80 .. B p80 / A p20)
    as its error bar; coloured only where the two can be told apart: a timing green where B is faster
    beyond the spread, red where slower, grey within it; a value that did not move (a count, the same) grey, another
    value blue (whether more is better is the claim's to say). None when nothing pairs."""
    if not c.paired:
        return None
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import log_ticks

    studies = {k[0] for k, _, _ in c.paired}
    one = len(studies) == 1  # one study: its name in the title, not on every bar
    labels = ["\n".join(textwrap.wrap(_case(k) if one else f"{k[0]}: {_case(k)}", 60)) or "?" for k, _, _ in c.paired]
    ratios, lows, highs, colors = [], [], [], []
    for _, a, b in c.paired:
        r = (_number(b) / _number(a)) if _number(a) else float("nan")
        lo = hi = r
        if a["kind"] == "measurement" and a.get("p20_s") and b.get("p20_s") and a.get("p80_s") and b.get("p80_s"):
            lo, hi = b["p20_s"] / a["p80_s"], b["p80_s"] / a["p20_s"]
            color = "#9e9e9e" if lo <= 1 <= hi else ("#2e7d32" if hi < 1 else "#c62828")
        else:
            color = "#9e9e9e" if r == 1 else "#1565c0"
        ratios.append(r)
        lows.append(max(r - lo, 0.0) if r == r else 0.0)
        highs.append(max(hi - r, 0.0) if r == r else 0.0)
        colors.append(color)
    lines = sum(label.count("\n") + 1 for label in labels)
    fig, ax = plt.subplots(figsize=(9, 0.22 * lines + 0.3 * len(labels) + 1.2), layout="constrained")
    for y, (r, lo, hi, color) in enumerate(zip(ratios, lows, highs, colors)):  # a dot and its spread: on a log axis
        ax.hlines(y, min(r, 1.0), max(r, 1.0), color=color, lw=1, alpha=0.5)  # a bar's length would mean nothing
        ax.errorbar([r], [y], xerr=[[lo], [hi]], fmt="o", color=color, ecolor=color, capsize=2, ms=5)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    finite = [x for r, lo, hi in zip(ratios, lows, highs) for x in (r - lo, r + hi) if x == x and x > 0]
    ax.set_xscale("log")
    if finite:
        left, right = min(finite + [1.0]), max(finite + [1.0])
        pad = max((right / left) ** 0.1, 1.2)
        ax.set_xlim(left / pad, right * pad)
    log_ticks(ax.xaxis)
    ax.set_xlabel(f"B / A  (B = {b_name}, A = {a_name}; time: < 1 means B faster; bars: p20-p80 spread; "
                  "grey: within it, or unchanged)", fontsize=8)
    ax.invert_yaxis()
    ax.set_ylim(len(labels) - 0.5, -0.5)
    if one:
        ax.set_title(next(iter(studies)), fontsize=9, loc="left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
