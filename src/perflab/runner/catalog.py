"""Find, inspect, execute and refresh the study notebooks (papermill underneath).

The CLI (`perflab list|run|refresh`) is a thin layer over these functions; they are usable from Python too.
Executing one notebook (and saying how it ended) is `perflab.runner.execute`.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kit.params import ParameterError, load_preset, parse_assignment, validate
from ..kit.paths import notebooks_dir, params_dir
from .execute import Interrupted, Outcome, execute
from .schemas import NotebookError, declared, schema_for, setup_above_parameters

if TYPE_CHECKING:  # nbformat costs seconds to import (jsonschema): loaded when a notebook is read
    import nbformat

__all__ = ["NotebookError", "Interrupted", "Outcome", "execute", "discover", "resolve", "inspect", "plan",
           "collect", "preset_file", "schema_mismatches", "refresh", "clean", "error_cells"]


def discover(nb_dir: Path | None = None) -> dict[str, Path]:
    """Notebooks by name (file stem), sorted: {'01_profile_probe1d': Path(...), ...}."""
    d = Path(nb_dir) if nb_dir else notebooks_dir()
    return {p.stem: p for p in sorted(d.glob("*.ipynb")) if not p.name.startswith(".")}


def resolve(names: list[str], available: dict[str, Path]) -> list[str]:
    """Map user names (full stem, a notebook's number such as '03' or '03b', or a unique prefix) to notebook names;
    refuse unknown ones. A number names the notebook it numbers: '03' is 03_eval even beside 03b_links."""
    if not names:
        return list(available)
    out = []
    for n in names:
        n = Path(n).stem if n.endswith(".ipynb") else n
        hits = ([k for k in available if k == n] or [k for k in available if k.split("_")[0] == n]
                or [k for k in available if k.startswith(n)])
        if len(hits) != 1:
            why = "matches several" if hits else "is not a notebook"
            close = difflib.get_close_matches(n, list(available), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise NotebookError(f"{n!r} {why} in {_where(available)} (have: {', '.join(available) or 'none'}){hint}")
        out.append(hits[0])
    return out


def _where(available: dict[str, Path]) -> str:
    return str(next(iter(available.values())).parent) if available else "the notebooks folder"


def inspect(path: Path) -> dict[str, dict]:
    """The notebook's parameters: {name: {inferred_type_name, default, help}} (papermill.inspect_notebook)."""
    import papermill

    return papermill.inspect_notebook(str(path))


def schema_mismatches(path: Path, schema, *, helps: bool = True) -> list[str]:
    """How a notebook's parameters cell disagrees with its dataclass: names (and order), annotated types,
    default values, and (with `helps`) help comments (present, and naming every choice of a Literal). [] when they
    agree. `perflab run` refuses the first three (`plan`); the tests hold the six to all four."""
    import ast
    import typing

    from ..kit.params import cell_type_name, default_of

    declared = inspect(path)
    fields = {f.name: f for f in dataclasses.fields(schema)}
    if list(declared) != list(fields):
        return [f"names differ: cell {list(declared)} vs {schema.__name__} {list(fields)}"]
    hints = typing.get_type_hints(schema)
    problems = []
    for key, info in declared.items():
        default = default_of(fields[key])
        tname = cell_type_name(hints[key])
        if info["inferred_type_name"] != tname:
            problems.append(f"{key}: cell says {info['inferred_type_name']}, {schema.__name__} says {tname}")
        try:
            cell_default = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            cell_default = info["default"]
        if cell_default != default:
            problems.append(f"{key}: cell default {info['default']}, {schema.__name__} default {default!r}")
        help_ = info.get("help") or ""
        if not helps:
            continue
        if not help_:
            problems.append(f"{key}: no help comment")
        elif typing.get_origin(hints[key]) is typing.Literal:
            missing = [c for c in typing.get_args(hints[key]) if str(c) not in help_]
            if missing:
                problems.append(f"{key}: help comment does not name the choice(s) {missing}")
    return problems


def preset_file(preset: str, name: str, p_dir: Path | None = None, nb_dir: Path | None = None) -> Path | None:
    """params/<preset>/<name>.yaml if it exists (None if the preset has no file for this notebook).
    `params/` is `p_dir`, else the one beside the notebooks in `nb_dir` (`perflab.kit.paths.params_dir`).
    `preset` may also be a folder path. An unknown preset is refused."""
    base = Path(p_dir) if p_dir else params_dir(nb_dir)
    d = Path(preset) if Path(preset).is_dir() else base / preset
    if not d.is_dir():
        have = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        raise NotebookError(f"unknown preset {preset!r}: no folder {d} (presets: {', '.join(have) or 'none'})")
    f = d / f"{name}.yaml"
    return f if f.is_file() else None


BASE_KEY = "base"  # a preset file's `base: gpu`: that preset's file for the notebook first, then this one's keys


def kind_preset(preset: str | None, kind: str, p_dir: Path | None = None, nb_dir: Path | None = None) -> str | None:
    """The preset for this card: `<preset>-<kind>` (params/gpu-h200/ for `gpu` on an H200) where that folder exists,
    else `preset` itself (a preset named by its folder's path is kept as given)."""
    base = Path(p_dir) if p_dir else params_dir(nb_dir)
    if not preset or not kind or not (base / preset).is_dir():
        return preset
    return f"{preset}-{kind}" if (base / f"{preset}-{kind}").is_dir() else preset


def load_preset_file(f: Path, seen: tuple = ()) -> dict[str, Any]:
    """A preset file's parameters, with its `base:` preset's file for the same notebook under them (a card's preset
    says only what differs from the preset it extends: params/gpu-h200/ from params/gpu/)."""
    data = load_preset(f)
    base = data.pop(BASE_KEY, None)
    if base is None:
        return data
    parent = f.parent.parent / str(base) / f.name
    if not parent.is_file() or parent.resolve() in seen:
        raise ParameterError(f"{f}: base {base!r} has no {parent.relative_to(f.parent.parent)} to extend"
                             if not parent.is_file() else f"{f}: base {base!r} extends itself")
    return {**load_preset_file(parent, (*seen, f.resolve())), **data}


def collect(name: str, path: Path, *, preset: str | None = None,
            overrides: dict[str, Any] | list[str] | None = None, p_dir: Path | None = None) -> dict[str, Any]:
    """A notebook's parameters from a preset file, then overrides (a dict, or `-p` texts such as
    'batch=512' typed by the notebook's schema). Not yet validated: see `plan`."""
    if isinstance(overrides, list):
        schema = schema_for(name, path)
        overrides = dict(parse_assignment(a, schema) for a in overrides)
    params: dict[str, Any] = {}
    if preset:
        f = preset_file(preset, name, p_dir, path.parent)
        if f is not None:
            params.update(load_preset_file(f))
    params.update(overrides or {})
    return params


def plan(names: list[str], *, preset: str | None = None, overrides: dict[str, Any] | list[str] | None = None,
         nb_dir: Path | None = None, p_dir: Path | None = None) -> list[tuple[str, Path, dict]]:
    """Resolve notebooks and their parameters (`collect`), checking every notebook's with its own schema
    (`perflab.kit.params.validate`, what its first cell calls) before anything runs. Returns [(name, path, params)]."""
    available = discover(nb_dir)
    jobs, errors = [], []
    for name in resolve(names, available):
        try:
            params = collect(name, available[name], preset=preset, overrides=overrides, p_dir=p_dir)
            schema = schema_for(name, available[name])
            validate(params, schema)
        except ParameterError as e:
            errors.append(f"{name}: {e}")
            continue
        order = setup_above_parameters(available[name])
        if order:
            errors.append(f"{name}: {order}")
            continue
        d = declared(available[name])
        if d is not None and d.module is not None:
            off = schema_mismatches(available[name], schema, helps=False)  # a cell built schema agrees with itself
            if off:
                errors.append(f"{name}: its parameters cell disagrees with {schema.__module__}.{schema.__name__} "
                              "(a run on its defaults would run the cell's values and record 'defaults'); make them "
                              "agree:\n    " + "\n    ".join(off))
                continue
        jobs.append((name, available[name], params))
    if errors:
        raise ParameterError("\n".join(errors))
    return jobs


# ---- refresh: re-execute committed notebooks in place, without volatile metadata ----------------

VOLATILE_NB_KEYS = ("papermill", "widgets")
VOLATILE_CELL_KEYS = ("papermill", "execution", "collapsed", "scrolled")


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what changes on every run and means nothing (papermill timestamps, execution times, the
    injected-parameters cell) and keep what nbval needs (outputs and execution counts)."""
    for k in VOLATILE_NB_KEYS:
        nb.metadata.pop(k, None)
    cells = []
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            continue
        for k in VOLATILE_CELL_KEYS:
            cell.metadata.pop(k, None)
        cells.append(cell)
    nb.cells = cells
    return nb


def error_cells(nb: nbformat.NotebookNode) -> list[int]:
    return [i for i, c in enumerate(nb.cells)
            if any(o.get("output_type") == "error" for o in c.get("outputs", []) or [])]


def refresh(name: str, path: Path, *, out_dir: Path, kernel_name: str | None = None,
            progress: bool = True, cell_timeout: int | None = None) -> Outcome:
    """Re-execute `path` on its defaults and, only if it ran cleanly, write it back in place, cleaned.
    A failure or Ctrl-C leaves the committed notebook untouched."""
    import nbformat

    outcome = execute(name, path, {}, Path(out_dir), kernel_name=kernel_name, progress=progress,
                      cell_timeout=cell_timeout)
    if not outcome.ok:
        return outcome
    nb = clean(nbformat.read(outcome.output, as_version=4))
    if error_cells(nb):
        outcome.status, outcome.error = "failed", f"error outputs in cells {[i + 1 for i in error_cells(nb)]}"
        return outcome
    tmp = path.with_name(f".{path.name}.tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, path)  # atomic: the committed notebook is either the old one or the new one
    outcome.output = path
    return outcome


def run_all(jobs: list[tuple[str, Path, dict]], out: Path, *, preset: str | None = None, p_dir: Path | None = None,
            kernel_name: str | None = None, progress: bool = True,
            cell_timeout: float | None = None) -> tuple[list[Outcome], Interrupted | None]:
    """Execute the planned notebooks (`plan`) in order into `out`, a line each as it starts and ends. An interrupt
    stops the set: the rows so far stay in out/results.jsonl. -> (the outcomes, the interrupt or None)"""
    outcomes = []
    for i, (name, path, params) in enumerate(jobs, 1):
        shown = ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
        if preset and preset_file(preset, name, p_dir, path.parent) is None:
            shown += f"; preset {preset!r} has no file for it"
        print(f"[{i}/{len(jobs)}] {name} ({shown})", flush=True)
        try:
            o = execute(name, path, params, out, kernel_name=kernel_name, progress=progress, cell_timeout=cell_timeout)
        except Interrupted as e:
            return outcomes + [e.outcome], e
        print("   ", o.describe(), flush=True)
        outcomes.append(o)
    return outcomes, None


def run_summary(outcomes: list[Outcome], stop: Interrupted | None, jobs: list[tuple[str, Path, dict]], out: Path,
                report: Path | None) -> int:
    """How a set ended, said on stdout/stderr. -> the exit status: 0, 1 (a notebook failed), 130 (interrupted)"""
    import sys

    if stop is not None:
        not_run = [n for n, _, _ in jobs[len(outcomes):]]
        print(f"\nperflab run: {stop.outcome.describe()}; its rows so far are kept in {out / 'results.jsonl'}"
              + (f"; not run: {', '.join(not_run)}" if not_run else "") + (f"; report: {report}" if report else ""),
              file=sys.stderr)
        return 130
    if report:
        print("report:", report)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        print(f"{len(failed)} of {len(outcomes)} notebook(s) failed:", file=sys.stderr)
        for o in failed:
            print("  " + o.describe(), file=sys.stderr)
        return 1
    return 0
