"""`perflab new NAME`: a study of your own, in a new folder of your project.

    perflab new spmv                  # ./spmv/: package spmv/, spmv.ipynb, params/gpu/spmv.yaml, tests/, README.md
    perflab new spmv --into ~/work    # ~/work/spmv/
    perflab new spmv --no-execute     # the files only: `perflab refresh` in the folder executes the notebook

The files are perflab's template (`src/perflab/template/`: a working study named `mystudy`, a k-means whose
centroid update syncs with the host once per cluster, and its sync-free twin), copied with `mystudy` replaced
by NAME. The folder appears whole or not at all (written beside it, then renamed). Then its notebook is executed
once on its CPU defaults, in place, as `perflab refresh` does, so that nbval has outputs to compare with; if that
fails, the executed notebook (with the error in its cell) and the run's results are kept in the study's
`outputs/first-execution/`, where the message points.

Refused before anything is written, with the reason: a name that is not a Python identifier (the package is
imported by it), one that would shadow a module Python or this environment has (`torch`, `perflab`, `json`),
a folder that already exists (nothing is overwritten), a place that is not a folder or cannot be written, a
Jupyter kernel this environment does not have (`write(..., kernel_name=)`; named with the kernels it has).
"""
from __future__ import annotations

import importlib.util
import keyword
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from .catalog import Outcome, refresh
from .schemas import NotebookError

TEMPLATE = Path(__file__).parents[1] / "template"  # src/perflab/template/
PLACEHOLDER = "mystudy"                 # the template study's name, replaced by yours in every file and path
RESERVED = ("tests", "params", "outputs")  # folders of the study itself: a package of that name would clash
IGNORED = ("__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache", "outputs")
FAILED_RUN = Path("outputs", "first-execution")  # in the study: a failed first execution's notebook and results


class NewStudyError(NotebookError):
    """A name or place `perflab new` refuses, before writing anything."""


def check_name(name: str) -> None:
    """Refuse a name the study's package could not have, or one that would hide a module already importable."""
    if not name.isidentifier() or keyword.iskeyword(name):
        fixed = re.sub(r"\W", "_", name)
        fixed = fixed if fixed.isidentifier() and not keyword.iskeyword(fixed) else f"study_{fixed}"
        raise NewStudyError(f"{name!r} is not a Python identifier, and the study's package is imported by its name "
                            f"(letters, digits and _, not starting with a digit, not a keyword): try {fixed!r}")
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        raise NewStudyError(f"{name!r} would shadow Python's own module {name}: choose another name")
    if name in RESERVED:
        raise NewStudyError(f"{name!r} is the name of a folder inside every study ({', '.join(RESERVED)}): "
                            "choose another name")
    spec = importlib.util.find_spec(name)
    if spec is not None:
        where = spec.origin or ", ".join(spec.submodule_search_locations or []) or "this environment"
        raise NewStudyError(f"{name!r} would shadow the module {name} this environment already has ({where}): "
                            "the notebook's `import` would find one of the two; choose another name")


def check_place(into: Path, name: str) -> Path:
    """The study's folder `into/name`, after refusing a place that is missing, not a folder, taken or read-only."""
    into = Path(into).expanduser()
    if not into.exists():
        raise NewStudyError(f"no folder {into}: create it first, or give another --into")
    if not into.is_dir():
        raise NewStudyError(f"{into} is not a folder")
    target = into / name
    if target.exists() or target.is_symlink():
        raise NewStudyError(f"{target} already exists: perflab new writes a new folder and changes nothing in an "
                            "existing one (choose another name, or move that folder away)")
    if not os.access(into, os.W_OK | os.X_OK):
        raise NewStudyError(f"cannot write in {into}: permission denied")
    return target


def check_kernel(kernel_name: str | None, *, written: Path | None = None) -> None:
    """Refuse a Jupyter kernel this environment does not have, naming the ones it has (None: the notebook's own,
    this Python's). `written`: the study's folder, when the refusal comes after its files were written."""
    if kernel_name is None:
        return
    from jupyter_client.kernelspec import KernelSpecManager

    have = sorted(KernelSpecManager().find_kernel_specs())
    if kernel_name in have:
        return
    then = (f"the files are written in {written}; `perflab refresh --kernel KERNEL` there executes the notebook"
            if written else "nothing written; leave --kernel out for the notebook's own (this Python's)")
    raise NewStudyError(f"no Jupyter kernel {kernel_name!r} here (kernels: {', '.join(have) or 'none'}): {then}")


def template_files() -> list[Path]:
    """The template's files, relative to it (caches and run outputs left out)."""
    files = sorted(p.relative_to(TEMPLATE) for p in TEMPLATE.rglob("*")
                   if p.is_file() and not set(p.relative_to(TEMPLATE).parts) & set(IGNORED))
    if not any(f.suffix == ".ipynb" for f in files):
        raise NewStudyError(f"perflab's template is missing from this install ({TEMPLATE}): reinstall perflab")
    return files


def write(name: str, into: str | os.PathLike = ".", *, kernel_name: str | None = None) -> Path:
    """Write the study `name` into the new folder `into/name` and return it (the checks first: module doc;
    `kernel_name`: the kernel that will execute its notebook, checked too)."""
    check_name(name)
    target = check_place(Path(into), name)
    check_kernel(kernel_name)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    except OSError as e:  # a read-only file system, or permissions that os.access could not see (root, ACLs)
        raise NewStudyError(f"cannot write in {target.parent}: {e.strerror or e}") from None
    try:
        for rel in template_files():
            dst = tmp / str(rel).replace(PLACEHOLDER, name)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text((TEMPLATE / rel).read_text().replace(PLACEHOLDER, name))
        (tmp / ".gitignore").write_text("outputs/\n__pycache__/\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's folder is private; the study's is like any folder made here
        os.rename(tmp, target)  # the folder appears whole, or not at all
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise NewStudyError(f"cannot write {target}: {e.strerror or e}") from None
        raise
    return target


def describe(target: Path, name: str) -> str:
    """What was written, by what a reader looks for."""
    rows = [(f"{name}.ipynb", "the notebook: parameters, setup, correctness, host syncs, benchmark, plot, claims"),
            (f"{name}/reference.py", "the oracle (float64, written for clarity)"),
            (f"{name}/baseline.py", "the slow code: a host sync per cluster, in the loop"),
            (f"{name}/optimized.py", "the fast code, with the baseline's signature"),
            (f"{name}/claims.py", "the claims, as data (perflab.kit.claims), checked when imported"),
            (f"{name}/study.py", "what the notebook calls, by role: inputs, counts, benchmark, plot, evidence"),
            (f"params/gpu/{name}.yaml", "the GPU preset (perflab run --params gpu)"),
            (f"tests/test_{name}.py", "the tests: the oracle on fresh inputs, host syncs counted, the claims judged")]
    width = max(len(r) for r, _ in rows)
    return (f"perflab new: wrote {target}/ (its worked example is a k-means to replace: see its README.md)\n"
            + "\n".join(f"    {r.ljust(width)}  {what}" for r, what in rows))


def execute_once(target: Path, name: str, *, kernel_name: str | None = None, progress: bool = False) -> Outcome:
    """Execute the new study's notebook in place on its defaults (`perflab.runner.catalog.refresh`). Its results go to a
    temporary folder, removed once it ran; a failed execution's folder is kept as the study's FAILED_RUN, and the
    outcome points there. A kernel this environment does not have is refused first (`check_kernel`)."""
    check_kernel(kernel_name, written=target)
    out = Path(tempfile.mkdtemp(prefix="perflab-new-"))
    try:
        outcome = refresh(name, target / f"{name}.ipynb", out_dir=out, kernel_name=kernel_name, progress=progress)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    if outcome.ok:
        shutil.rmtree(out, ignore_errors=True)
        return outcome
    kept = target / FAILED_RUN
    shutil.rmtree(kept, ignore_errors=True)
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(out, kept)
    if Path(outcome.output).is_relative_to(out):
        outcome.output = kept / Path(outcome.output).relative_to(out)
    return outcome


def next_steps(target: Path, name: str) -> str:
    return (f"next, in {target}:\n"
            "    perflab run                  # its notebook into outputs/local/, then REPORT.md with the claims' verdicts\n"
            f"    pytest                       # its tests; then: pytest --nbval-lax --nbval-current-env {name}.ipynb\n"
            f"    then replace the example with your code: README.md lists the edits in order ({name}/reference.py first)")
