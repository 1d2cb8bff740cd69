"""The user's line: the first frame of a call stack outside torch, the standard library and perflab's kit and runner.

    site = user_stack()[0]            # Site(file, line, function): where the user's code called into torch
    site.short                        # 'train.py:42' (the path from the folder it was imported from)
    with library("perflab.prover.core"):   # count these modules as library too: the line is their caller's
        ...

What counts as the user's code is everything else: the user's own files, a notebook cell, a third-party package
other than torch, and a perflab study (its baseline, its optimized code and its engine library are the code a study
measures). `library(*modules)` adds modules to the library for a block (`perflab diagnose --library`), for a user
whose own library sits between their step and torch. `boundary(frame)` cuts every stack below a frame for a block
(diagnose: its caller's frames are not the step's).

A stack is a tuple of Sites, innermost first; `user_stack()` costs a walk up the frames (about 1 us per frame; the
kind of each file is cached), so the counters that record one per call do it only when asked (`sites=True`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

_KIT = os.path.dirname(os.path.abspath(__file__))
_PERFLAB = os.path.dirname(_KIT)
_LIBRARY_DIRS: list[str] = [_KIT + os.sep, os.path.join(_PERFLAB, "runner") + os.sep]
_STDLIB = [os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}]
_EXTRA: list[str] = []        # library(...) prefixes, for a block
_BOUNDARY: list = []          # boundary(frame): stacks stop below this frame (diagnose's caller), for a block
_KIND: dict[str, bool] = {}   # filename -> is library (cache)


def _torch_dirs() -> list[str]:
    import torch

    dirs = [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep]
    for name in ("functorch", "torchgen", "triton"):   # torch's own companions: never the user's line
        spec = importlib.util.find_spec(name) if name not in sys.modules else sys.modules[name].__spec__
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
    return dirs


_LIBRARY_DIRS += _torch_dirs()


@dataclasses.dataclass(frozen=True)
class Site:
    """One frame of the user's code: its file, the line it was at, its function."""
    file: str
    line: int
    function: str

    @property
    def short(self) -> str:
        return f"{short_path(self.file)}:{self.line}"

    def as_dict(self) -> dict:
        return {"file": short_path(self.file), "line": self.line, "function": self.function, "path": self.file}


def short_path(file: str) -> str:
    """A file as a reader finds it: relative to the working folder when under it, else from the package root it was
    imported from (the longest entry of sys.path holding it: 'perflab/vae/step_ops.py'), else as given."""
    if file.startswith("<"):
        return file
    path = os.path.abspath(file)
    here = os.getcwd() + os.sep
    if path.startswith(here):
        return path[len(here):]
    roots = [os.path.abspath(p) + os.sep for p in sys.path if p and os.path.isdir(p)]
    under = [r for r in roots if path.startswith(r)]
    return path[len(max(under, key=len)):] if under else path


def _is_library(file: str) -> bool:
    kind = _KIND.get(file)
    if kind is None:
        path = os.path.abspath(file) if not file.startswith("<") else file
        if file.startswith("<"):
            # "<frozen importlib._bootstrap>", fx's "<eval_with_key>.3", "<string>" (what dataclasses and namedtuples
            # exec: their __init__, __eq__, __hash__): machinery; "<stdin>", "<ipython-input-...>": the user's
            kind = file.startswith(("<frozen", "<eval_with_key", "<string>"))
        else:
            stdlib = any(path.startswith(p) for p in _STDLIB) and "-packages" + os.sep not in path
            kind = stdlib or any(path.startswith(p) for p in _LIBRARY_DIRS) or any(path.startswith(p) for p in _EXTRA)
        _KIND[file] = kind
    return kind


def is_user_file(file: str) -> bool:
    """Whether a frame in `file` is the user's code (module doc)."""
    return not _is_library(file)


def user_stack(frame=None, limit: int = 12) -> tuple[Site, ...]:
    """The user's frames of the current call stack (or from `frame` up), innermost first, at most `limit`."""
    f = frame if frame is not None else sys._getframe(1)
    stop = _BOUNDARY[-1] if _BOUNDARY else None
    out = []
    while f is not None and f is not stop and len(out) < limit:
        code = f.f_code
        if not _is_library(code.co_filename):
            out.append(Site(code.co_filename, f.f_lineno, code.co_qualname if hasattr(code, "co_qualname")
                            else code.co_name))
        f = f.f_back
    return tuple(out)


def calling_frame(frame):
    """The frame that made a call a counter saw: `frame` or the first above it that is neither a torch-function
    mode's handler (`__torch_function__`: modes stacked on one another call through each other) nor the kit's own."""
    f = frame
    while f is not None and (f.f_code.co_name == "__torch_function__" or f.f_code.co_filename.startswith(_KIT)):
        f = f.f_back
    return f if f is not None else frame


def stack_from_traceback(tb) -> tuple[Site, ...]:
    """The user's frames of a traceback, innermost first (where an exception was raised in the user's code)."""
    import traceback

    frames = [fs for fs in traceback.extract_tb(tb) if not _is_library(fs.filename)]
    return tuple(Site(fs.filename, fs.lineno or 0, fs.name) for fs in reversed(frames))


def _module_dir(module: str) -> str:
    """The folder (a package) or file (a module) of an importable module, found without running it where possible."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:   # a parent package that is not there
        spec = None
    if spec is None or not spec.origin:
        raise ModuleNotFoundError(f"no module named {module!r} (given as library)")
    origin = os.path.abspath(spec.origin)
    if spec.submodule_search_locations:
        return os.path.dirname(origin) + os.sep
    return origin


@contextlib.contextmanager
def boundary(frame):
    """Stacks taken inside the block stop below `frame` (exclusive): the frames of whoever called the code being
    measured (a notebook cell, a test, the command) are not the measured code's."""
    _BOUNDARY.append(frame)
    try:
        yield
    finally:
        _BOUNDARY.pop()


@contextlib.contextmanager
def library(*modules: str):
    """Count these modules (dotted names, or folders/files) as library code inside the block (module doc)."""
    added = [(str(Path(m).resolve()) + (os.sep if Path(m).is_dir() else "")) if os.sep in m or m.endswith(".py")
             else _module_dir(m) for m in modules]
    _EXTRA.extend(added)
    _KIND.clear()
    try:
        yield added
    finally:
        for a in added:
            _EXTRA.remove(a)
        _KIND.clear()
