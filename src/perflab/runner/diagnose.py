"""`perflab diagnose`: why a step is slow, from the command line (the kit's `diagnose`, perflab.kit.diagnosing).

    perflab diagnose train:step                          # train.py (here, or on sys.path): step() is one step
    perflab diagnose --setup train:build                 # build() returns the step (a model built first)
    perflab diagnose train:step --setup train:prepare    # prepare() runs first, then step() is diagnosed
    perflab diagnose path/to/train.py:Trainer.step ...   # a file, and an attribute path in it

Bad input is refused with one line naming it, before anything is written (exit 2): a target that cannot be imported
(its traceback from the user's frame when the module itself raised), an attribute that is not there, something that
is not callable, a device that is not there, a --json or --figure folder that cannot be written. A step (or setup)
that raises: its traceback from the user's frame, exit 2. The JSON and the figure are written atomically, and only
once the diagnosis is complete.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from ..kit.paths import check_writable


class DiagnoseError(Exception):
    """Bad input to `perflab diagnose` (the message names it): exit 2."""


def resolve(spec: str, what: str = "the step"):
    """The object `spec` names: "module:attr.path" (a dotted module importable from here or sys.path, or a .py
    file), -> (object, its display name)."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise DiagnoseError(f"{what} {spec!r}: expected MODULE:FUNCTION (e.g. train:step, or path/to/train.py:step)")
    mod = _import(module, spec, what)
    obj = mod
    for i, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            where = ".".join([module, *attr.split(".")[:i]]) if i else module
            names = sorted(n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None)))
            hint = f"; callables there: {', '.join(names[:12])}" if names else ""
            raise DiagnoseError(f"{what} {spec!r}: {where} has no attribute {part!r}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise DiagnoseError(f"{what} {spec!r} is not callable (it is {type(obj).__name__}: {_short(obj)})")
    return obj, spec


def _import(module: str, spec: str, what: str):
    from ..kit.diagnosing import user_traceback

    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)   # a module in the folder the command runs in, as `python -m` finds it
    try:
        if module.endswith(".py") or os.sep in module:
            path = Path(module).resolve()
            if not path.is_file():
                raise DiagnoseError(f"{what} {spec!r}: no file {path}")
            name = path.stem
            sys.path.insert(0, str(path.parent))   # its own imports of its neighbours
            ispec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(ispec)
            sys.modules[name] = mod
            ispec.loader.exec_module(mod)
            return mod
        return importlib.import_module(module)
    except DiagnoseError:
        raise
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise DiagnoseError(f"{what} {spec!r}: cannot import {module!r}: no module named {e.name!r} (looked in "
                                f"{here} and sys.path)") from e
        raise DiagnoseError(f"{what} {spec!r}: importing {module!r} failed: {type(e).__name__}: {e}\n"
                            f"{user_traceback(e)}") from e
    except Exception as e:  # noqa: BLE001 (the module's own code raised: its traceback, from the user's frame)
        raise DiagnoseError(f"{what} {spec!r}: importing {module!r} raised {type(e).__name__}: {e}\n"
                            f"{user_traceback(e)}") from e


def _short(obj) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def run(args) -> int:
    """The command (cli.py parses): check every input, diagnose, print the table, then write the JSON and figure."""
    import torch

    from ..kit.diagnosing import StepError, diagnose
    from ..kit.env import pick_device

    if args.target is None and args.setup is None:
        raise DiagnoseError("give the step (MODULE:FUNCTION) or --setup MODULE:FUNCTION (which returns it)")
    if args.calls < 1 or args.warmup < 1 or not args.budget > 0:
        raise DiagnoseError(f"need --calls >= 1, --warmup >= 1 and --budget > 0, got {args.calls}, {args.warmup}, "
                            f"{args.budget}")
    for path, what in ((args.json, "the JSON"), (args.figure, "the figure")):
        if path is not None:
            check_writable(Path(path).resolve().parent, what)
    try:
        device = pick_device(args.device)
    except ValueError as e:
        raise DiagnoseError(f"--device {args.device}: {e}") from e
    if args.threads:
        torch.set_num_threads(args.threads)
    step, name = resolve(args.target) if args.target else (None, None)
    setup = resolve(args.setup, "the setup")[0] if args.setup else None
    if setup is not None and step is not None:   # setup prepares, then the named step runs
        prepare, setup = setup, None
        try:
            made = prepare()
        except Exception as e:  # noqa: BLE001
            raise StepError(f"the setup {args.setup}", e) from e
        if callable(made):
            raise DiagnoseError(f"the setup {args.setup} returned a callable and a step was named too: give the step "
                                "or --setup, or make the setup return None")
    try:
        d = diagnose(step, setup=setup, calls=args.calls, warmup=args.warmup, device=device, budget=args.budget,
                     library_modules=tuple(args.library), floor=args.floor, name=name or args.setup,
                     lifetimes=args.lifetimes)
    except ModuleNotFoundError as e:   # a --library module
        raise DiagnoseError(f"--library: {e}") from e
    except ValueError as e:   # diagnose's own refusal (the step's errors come as StepError)
        raise DiagnoseError(str(e).removeprefix("diagnose: ")) from e
    print(d.table(top=args.top))
    if args.json is not None:
        print("written:", d.save(args.json))
    if args.figure is not None:
        print("written:", d.save_figure(args.figure))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("diagnose", help="why a step is slow: each cause at its line (host syncs, copies, recompiles, "
                                        "graph breaks, loops of small ops, launches, data loading), ranked by cost")
    p.add_argument("target", nargs="?", default=None, metavar="MODULE:FUNCTION",
                   help="the step: a callable of no arguments (a module here or on sys.path, or a .py file)")
    p.add_argument("--setup", default=None, metavar="MODULE:FUNCTION",
                   help="called first; returns the step (or, with a step named, prepares it and returns None)")
    p.add_argument("--calls", type=int, default=10, help="timed calls of the step (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first; compiles count from the first (default 2)")
    p.add_argument("--device", default="auto", help="the compute device: auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--budget", type=float, default=20.0,
                   help="seconds of the step's calls at most: a longer step gets fewer calls, and the report says so")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the diagnosis as JSON (atomically)")
    p.add_argument("--figure", type=Path, default=None, metavar="FILE",
                   help="write the step's time by cause as PNG (atomically)")
    p.add_argument("--library", action="append", default=[], metavar="MODULE",
                   help="count this module (or folder) as library code: findings name the line that calls it")
    p.add_argument("--floor", type=float, default=None, metavar="SECONDS", help="the step's floor, when you know it")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default 0: torch's own)")
    p.add_argument("--top", type=int, default=12, help="findings in the table (default 12; the JSON has all)")
    p.add_argument("--lifetimes", action="store_true", default=None,
                   help="build the step again (--setup) under check_lifetimes() and call it twice (default: where "
                        "the setup built a CUDA-graph step)")
    p.add_argument("--no-lifetimes", dest="lifetimes", action="store_false", help="never check the lifetimes")
