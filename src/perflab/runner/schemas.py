"""Which parameter dataclass a notebook validates against: the one its own setup call names.

    from perflab.vae.params import VAEParams                # any code cell: the import that binds the name
    run = setup("05_vae_sync", globals(), VAEParams)        # the setup cell

`schema_for(name, path)` reads the notebook's code (nothing is executed) and imports that class the way the
notebook's kernel does: with the notebook's folder first on `sys.path` (the kernel's working folder), so a study
package beside its notebook is found without being installed, and an installed one (perflab's six) as usual.
No list of studies to keep: a notebook of one's own, in any folder, is found like the six.

A notebook without a setup call, or whose dataclass is defined in the notebook itself, gets a schema built from
its parameters cell (`perflab.kit.params.schema_from_cell`): same names and types, no rules of its own.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import sys
from pathlib import Path


class NotebookError(ValueError):
    """An unknown notebook, preset or parameter, or a notebook whose parameters class cannot be found:
    refused before anything runs."""


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a notebook's setup call says: the study's name, and where its parameters class comes from."""
    study: str | None     # setup's first argument, when it is a string literal
    module: str | None    # the module the class is imported from (None: defined in the notebook, or not named)
    name: str | None      # the class's name in that module
    call: str             # the call as written, for messages


def _python(cell: dict) -> str:
    """A code cell's source as Python (IPython's `%magic` and `!shell` lines blanked)."""
    src = cell.get("source", "")
    src = "".join(src) if isinstance(src, list) else src
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())


def _code_cells(path: Path) -> list[str]:
    """The notebook's code cells as Python (`_python`)."""
    return [_python(c) for c in json.loads(Path(path).read_text())["cells"] if c.get("cell_type") == "code"]


def _is_setup(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "setup") or (isinstance(f, ast.Attribute) and f.attr == "setup")


def _imported(target: ast.expr, trees: list[ast.Module]) -> tuple[str | None, str | None]:
    """(module, name) for `Params` bound by `from M import Params [as P]`, or `m.Params` with `m` bound by
    `import M as m` / `from P import m`; (None, None) when the notebook defines it or does not import it."""
    nodes = [n for t in trees for n in ast.walk(t)]
    if isinstance(target, ast.Name):
        for n in nodes:
            if isinstance(n, ast.ImportFrom) and n.level == 0:
                for a in n.names:
                    if (a.asname or a.name) == target.id:
                        return n.module, a.name
        return None, None
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        alias = target.value.id
        for n in nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.asname == alias or (a.asname is None and a.name == alias):
                        return a.name, target.attr
            if isinstance(n, ast.ImportFrom) and n.level == 0:
                for a in n.names:
                    if (a.asname or a.name) == alias:
                        return f"{n.module}.{a.name}", target.attr
    return None, None


def declared(path: Path) -> Declared | None:
    """The notebook's `setup(study, globals(), Params)` call, read from its code; None when it has none."""
    trees = []
    for src in _code_cells(path):
        try:
            trees.append(ast.parse(src))
        except SyntaxError:  # a cell that is not plain Python (cell magics): it cannot hold the call we read
            continue
    call = next((n for t in trees for n in ast.walk(t) if _is_setup(n)), None)
    if call is None:
        return None
    first = call.args[0]
    study = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    target = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "schema"), None)
    module, name = _imported(target, trees) if target is not None else (None, None)
    if target is not None and module is None:
        name = ast.unparse(target)  # defined in the notebook: its cell is the schema
    return Declared(study, module, name, ast.unparse(call))


def setup_above_parameters(path: Path) -> str | None:
    """Why the notebook's setup call would read the defaults under papermill: its cell comes before the cell tagged
    `parameters` (papermill injects -p values right after that cell), or there is no such cell. None when in order,
    or when the notebook has no setup call."""
    cells = json.loads(Path(path).read_text())["cells"]
    params_at = next((i for i, c in enumerate(cells) if "parameters" in (c.get("metadata") or {}).get("tags", [])), None)
    setup_at = None
    for i, c in enumerate(cells):
        if c.get("cell_type") != "code":
            continue
        try:
            if any(_is_setup(n) for n in ast.walk(ast.parse(_python(c)))):
                setup_at = i
                break
        except SyntaxError:
            continue
    if setup_at is None:
        return None
    if params_at is None:
        return (f"{Path(path).name}: no cell is tagged `parameters`, so papermill would inject -p values at the top "
                f"and setup (cell {setup_at + 1}) could not tell them from the defaults; tag the parameters cell")
    if setup_at < params_at:
        return (f"{Path(path).name}: setup(...) in cell {setup_at + 1} comes before the parameters cell (cell "
                f"{params_at + 1}): papermill injects -p values right after the parameters cell, so setup would read "
                "the defaults and the run would record values it did not use. Move the setup cell below the "
                "parameters cell")
    return None


def _load(d: Declared, path: Path) -> type:
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as in the notebook's kernel, whose working folder it is
    try:
        cls = getattr(importlib.import_module(d.module), d.name)
    except Exception as e:  # a missing package, an error in it, a missing name: said with the notebook's line
        raise NotebookError(f"{path.name}: its parameters class comes from `from {d.module} import {d.name}`, which "
                            f"fails here ({type(e).__name__}: {e}); the package must sit beside the notebook "
                            f"({path.parent}) or be installed") from None
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise NotebookError(f"{path.name}: {d.module}.{d.name} is not a dataclass (write `@dataclasses.dataclass "
                            "class Params(RunParams): ...`)")
    return cls


def schema_for(notebook: str, path: Path) -> type:
    """The parameters dataclass of notebook `notebook` (its file stem) at `path`: the class its setup call names
    (imported as its kernel would), else one built from its parameters cell. A setup call that names another
    study, or no class, is refused: its rows would not join the runner's, or the kernel would stop at setup."""
    path = Path(path)
    d = declared(path)
    if d is not None:
        if d.study is not None and d.study != notebook:
            raise NotebookError(f"{path.name} calls {d.call}: the study's name must be the notebook's, {notebook!r} "
                                "(the results of the notebook and of the runner are joined by it)")
        if d.name is None:
            raise NotebookError(f"{path.name} calls {d.call} without its parameters class: write "
                                f"setup({notebook!r}, globals(), Params), with Params imported in the notebook")
        if d.module is not None:
            return _load(d, path)
    import papermill  # read the cell here: perflab.runner.catalog sits above this module and imports it

    from ..kit.params import schema_from_cell

    return schema_from_cell(notebook, papermill.inspect_notebook(str(path)))
