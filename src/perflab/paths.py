"""Where things are: the repository, its notebooks and presets, and the folder a run writes to."""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _is_root(d: Path) -> bool:
    pp = d / "pyproject.toml"
    return pp.is_file() and 'name = "perflab"' in pp.read_text(errors="replace")


def repo_root() -> Path:
    """The perflab checkout: $PERFLAB_ROOT, else the first parent of the cwd holding perflab's
    pyproject.toml, else the checkout an editable install points at, else the cwd."""
    env = os.environ.get("PERFLAB_ROOT")
    if env:
        return Path(env).resolve()
    cwd = Path.cwd().resolve()
    for d in (cwd, *cwd.parents):
        if _is_root(d):
            return d
    src_checkout = _PKG.parent.parent  # src/perflab -> checkout (editable install)
    if _is_root(src_checkout):
        return src_checkout
    return cwd


def notebooks_dir() -> Path:
    return repo_root() / "notebooks"


def params_dir() -> Path:
    return repo_root() / "params"


def run_dir(out_dir: str | os.PathLike = "", study: str | None = None) -> Path:
    """The folder a run writes results, plots and profiles into, created if missing.

    `out_dir` (a notebook's parameter) wins; else $PERFLAB_OUT (set by `perflab run`); else
    `outputs/local/` in the checkout. With `study`, the study's own subfolder of it.
    """
    base = Path(out_dir or os.environ.get("PERFLAB_OUT") or repo_root() / "outputs" / "local")
    base = base.expanduser().resolve()
    d = base / study if study else base
    d.mkdir(parents=True, exist_ok=True)
    return d


def user_path(path: str | os.PathLike) -> Path:
    """A path a user gave as a parameter (a data folder, a file), resolved from where they ran the command:
    $PERFLAB_CWD (set by `perflab run` and `perflab sweep`, whose kernels run in the notebooks' folder), else
    the current directory. Absolute paths and `~` are kept as given."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    return (Path(os.environ.get("PERFLAB_CWD") or Path.cwd()) / p).resolve()
