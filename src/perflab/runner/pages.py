"""`perflab pages`: the README's headlines and docs/results.md's evidence, written from recorded runs, never by hand.

    perflab refresh --out outputs/local          # the committed notebooks, executed on their CPU defaults
    perflab pages outputs/local                  # keep that run's evidence, write the pages from it
    perflab pages --check                        # the pages say what the kept evidence says (a test runs this)

`pages RUN_DIR` keeps, under `outputs/refresh/`, each study's latest execution that judged claims (its claim, check
and note rows, `results.jsonl.gz`) and its card's figure (`<study>.png`), then writes between the markers
`<!-- perflab pages: NAME -->` and `<!-- /perflab pages: NAME -->`:
- README.md, `headlines`: one row per study (its headline claim, then every claim that does not hold or is not
  decided, beside the count of those that hold), from the kept rows;
- docs/results.md, `cpu`: each study's verdict card (`perflab.kit.card.card_markdown`, as the notebook shows it at
  its top and REPORT.md prints it) with its figure; `h100`: the cards of the H100 run kept under `outputs/h100/`.
`--check` writes nothing: it rebuilds the blocks from what is kept and fails (exit 1) naming the page and block
that differ.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from ..kit.card import card_markdown, device_text, ordered
from ..kit.claims import as_row
from ..kit.formatting import value_text
from ..kit.results import executions, latest_judged, read_rows, results_file

KEEP = "outputs/refresh"                 # the evidence the pages quote, relative to the project
H100 = "outputs/h100/1a70d9c"            # the H100 run the pages quote (judged by the rule of its day)
KINDS = ("claim", "check", "note", "diagnosis")   # what the pages read of an execution


class PagesError(ValueError):
    """Pages that cannot be written or checked: the message names the file and what is wrong."""


def _rows_of(run_dir: Path) -> dict[str, list[dict]]:
    """Each study's latest execution that judged claims, in the folder's log: {study: its rows}."""
    log = run_dir / "results.jsonl"
    if not log.is_file():
        raise PagesError(f"{run_dir}: no results.jsonl (run `perflab refresh --out {run_dir}` first)")
    judged = latest_judged(read_rows(log))
    return {study: rows for (study, point), (_, rows) in sorted(judged.items()) if not point}


def keep(run_dir: str | Path, root: Path) -> Path:
    """Keep each study's latest judged execution of `run_dir` under `root/KEEP` (rows and card figures). -> folder"""
    run_dir, dest = Path(run_dir), root / KEEP
    studies = _rows_of(run_dir)
    if not studies:
        raise PagesError(f"{run_dir}: no study judged claims there")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    kept = []
    for study, rows in studies.items():
        kept += [r for r in rows if r["kind"] in KINDS]
        fig = _card_figure(run_dir, study, rows)
        if fig is not None:
            shutil.copyfile(fig, tmp / f"{study}.png")
    with gzip.open(tmp / "results.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in kept)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)   # all at once: a failure above leaves the evidence kept before
    return dest


def _card_figure(run_dir: Path, study: str, rows: list[dict]) -> Path | None:
    name = next((r["card_figure"] for r in reversed(rows) if r.get("card_figure")), None)
    rid = rows[0].get("run_id") if rows else None
    path = run_dir / study / rid / name if name and rid else None
    return path if path is not None and path.is_file() else None


def kept_rows(root: Path, where: str = KEEP) -> dict[str, list[dict]]:
    """The kept evidence: {study: rows}, from `results.jsonl.gz` (or a run's `results.jsonl`) under `root/where`."""
    folder = root / where
    log = results_file(folder)
    if not log.is_file():
        raise PagesError(f"{folder}: no results.jsonl.gz (write it with `perflab pages RUN_DIR`)")
    rows = read_rows(log)
    out: dict[str, list[dict]] = {}
    for (study, point, _), rs in executions(rows).items():
        if not point and any(r["kind"] == "claim" for r in rs):
            out[study] = rs  # the last execution of each study that judged claims
    return dict(sorted(out.items()))


def _env(rows: list[dict]) -> dict:
    return next((r.get("env") for r in rows if r.get("env")), {}) or {}


def _cell(r) -> str:
    return f"{r.key}: {value_text(r.value, r.low, r.high, r.unit)}" if r.value is not None else r.key


SHORT = 120   # the README's headline cell: a claim's text whole up to this many characters, else to its first
#               parenthesis (03b's ran 190 characters before its number), else cut at a word


def short_claim(text: str) -> str:
    """A claim's text for the README's table (the card and docs/results.md keep it whole): whole where it is short
    (a cut there lost what a number means: "~4-6 hours" beside "3.65x"), else up to its first parenthesis where that
    leaves a sentence, else cut at a word within SHORT characters ('...')."""
    if len(text) <= SHORT:
        return text
    at = text.find(" (")
    if at >= 40:
        text = text[:at]
    if len(text) <= SHORT:
        return text
    return text[:text.rfind(" ", 0, SHORT - 3)].rstrip(",;:") + "..."


def headlines(studies: dict[str, list[dict]]) -> str:
    """The README's table: per study its headline claim (the card's first row: the headline where it was tested, else
    the first of what does not hold, is undecided, holds), the other claims that do not hold or are undecided (every
    one, by name with its value), and how many hold; the device and commit of the run."""
    lines = ["| study | headline | not holding or undecided | holds | device, commit |", "|---|---|---|---|---|"]
    for study, rs in studies.items():
        claims = [as_row(r) for r in rs if r["kind"] == "claim"]
        head_key = next((r.get("key") for r in reversed(rs) if r.get("headline") and r.get("key")), None)
        judged = [c for c in claims if c.verdict != "not tested here"]
        head = ordered(judged, head_key or "")[0] if judged else claims[0]   # the card's first row: a tested claim
        shown = (f"{short_claim(head.claim)}: **{value_text(head.value, head.low, head.high, head.unit)}** "
                 f"{head.verdict}" if head.value is not None else f"{short_claim(head.claim)}: {head.verdict}")
        bad = [c for c in claims if c.verdict in ("does not hold", "within noise", "partly holds") and c is not head]
        held = sum(c.verdict in ("holds", "fixed") for c in claims)
        untested = sum(c.verdict == "not tested here" for c in claims)
        env = _env(rs)
        where = f"{device_text(env)}, {(env.get('commit') or '')[:7]}".strip(", ")
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in (
            study, shown, "; ".join(f"{_cell(c)} ({c.verdict})" for c in bad)
            or ("none besides the headline" if head.verdict in ("does not hold", "within noise", "partly holds")
                else "none"),
            f"{held} of {len(claims)}" + (f" ({untested} not tested here)" if untested else ""), where)) + " |")
    return "\n".join(lines)


def cards(studies: dict[str, list[dict]], root: Path, figures: str | None, page: Path, commit: str = "") -> str:
    """Each study's card (its figure linked relative to `page`, where `root/figures` holds `<study>.png`); `commit`:
    the commit of a run whose rows do not stamp one (the H100 run's folder name), said as its folder's."""
    parts = []
    for study, rs in studies.items():
        env = _env(rs)
        fig = Path(figures) / f"{study}.png" if figures is not None else None
        link = Path(*[".."] * len(page.parent.parts)) / fig if fig is not None and (root / fig).is_file() else None
        title = f"{study} · {device_text(env)} · torch {env.get('torch', '?')} · commit {(env.get('commit') or '?')[:7]}"
        if not env.get("commit") and commit:
            title = title.removesuffix("commit ?") + f"commit {commit} (its folder's)"
        cause = next((r.get("cause", "") for r in reversed(rs) if r["kind"] == "diagnosis"), "")
        head = next((r.get("key") for r in reversed(rs) if r.get("headline") and r.get("key")), "") or ""
        parts.append(f"### {study}\n\n" + card_markdown([r for r in rs if r["kind"] == "claim"], device=device_text(env),
                                                        figure=link.as_posix() if link else "", title=title,
                                                        cause=cause, headline=head))
    return "\n\n".join(parts)


def blocks(root: Path) -> dict[str, dict[str, str]]:
    """{page: {block name: text}}, from the evidence kept under the project `root`."""
    studies = kept_rows(root)
    page = Path("docs/results.md")
    out = {"README.md": {"headlines": headlines(studies)},
           page.as_posix(): {"cpu": cards(studies, root, KEEP, page)}}
    if results_file(root / H100).is_file():
        out[page.as_posix()]["h100"] = cards(kept_rows(root, H100), root, None, page, commit=Path(H100).name)
    return out


def _replace(text: str, name: str, block: str, path: str) -> str:
    start, end = f"<!-- perflab pages: {name} -->", f"<!-- /perflab pages: {name} -->"
    if start not in text or end not in text:
        raise PagesError(f"{path}: no block {name!r} (the lines {start!r} and {end!r} mark where it goes)")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}\n{end}{tail}"


def write(root: Path, *, check: bool = False) -> list[str]:
    """Write the pages' blocks from the kept evidence (`check`: compare only). -> the blocks that differed"""
    differ = []
    for page, named in blocks(root).items():
        path = root / page
        if not path.is_file():
            raise PagesError(f"{path}: no such page")
        text = old = path.read_text()
        for name, block in named.items():
            new = _replace(text, name, block, page)
            if new != text:
                differ.append(f"{page}: {name}")
            text = new
        if text != old and not check:
            path.write_text(text)
    return differ
