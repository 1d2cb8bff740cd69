"""Where things are: the repository, its notebooks and presets, and the folder a run writes to."""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]  # src/perflab


def _is_root(d: Path) -> bool:
    """perflab's checkout (its pyproject.toml) or a project of perflab studies (a pyproject.toml with a
    [tool.perflab] table, as `perflab new` writes one)."""
    pp = d / "pyproject.toml"
    if not pp.is_file():
        return False
    text = pp.read_text(errors="replace")
    return 'name = "perflab"' in text or "[tool.perflab]" in text


def repo_root() -> Path:
    """The project perflab works in: $PERFLAB_ROOT, else the first parent of the cwd that is perflab's checkout
    or a study folder of your own (`_is_root`), else the checkout an editable install points at, else the cwd."""
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


def project_of(path: str | os.PathLike) -> Path | None:
    """The project a folder belongs to (`_is_root`: itself or a parent), or None: where `perflab run --notebooks DIR`
    puts DIR's results when no --out is given, wherever the command is typed."""
    p = Path(path).expanduser().resolve()
    return next((d for d in (p, *p.parents) if _is_root(d)), None)


def notebooks_dir() -> Path:
    """The project's `notebooks/` folder; a project without one (a study made by `perflab new`) keeps its
    notebooks in its root."""
    root = repo_root()
    return root / "notebooks" if (root / "notebooks").is_dir() else root


def params_dir(nb_dir: str | os.PathLike | None = None) -> Path:
    """The presets' root `params/`: beside the notebooks of `nb_dir` (in that folder, as a study made by `perflab new`
    keeps it, or beside it, as perflab's checkout keeps `notebooks/` and `params/`), else the project's."""
    if nb_dir is not None:
        for d in (Path(nb_dir), Path(nb_dir).parent):
            if (d / "params").is_dir():
                return d / "params"
    return repo_root() / "params"


class NotWritable(Exception):
    """A folder perflab must write into cannot be written: the message names it (the CLI prints it as one line)."""


def check_writable(path: str | os.PathLike, what: str, hint: str = "") -> Path:
    """`path` resolved, if perflab can write there: the folder itself, or (not made yet) the nearest existing folder
    above it, must be a writable folder. Else `NotWritable` naming that folder and `what` was to go there. Nothing
    is created: a command checks its folders this way before anything runs."""
    p = Path(path).expanduser().resolve()
    have = next(d for d in (p, *p.parents) if d.exists())
    where = f"{what} go there" if have == p else f"{what} go to {p}, inside it"
    if not have.is_dir():
        raise NotWritable(f"{have} is not a folder: {where}{hint}")
    if not os.access(have, os.W_OK | os.X_OK):
        raise NotWritable(f"{have} is not writable: {where}{hint}")
    return p


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
