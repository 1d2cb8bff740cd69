"""Notebook parameters: one dataclass per study notebook is the only schema.

The notebook's `parameters` cell holds the same names as annotated literals (papermill reads them), and
every path that accepts parameters checks them with the same `validate`: the notebook's first cell (through
`perflab.kit.notebook.setup`), `perflab run`, `perflab sweep` (every point, before anything is submitted, locally
or on Slurm) and `perflab list`. So a value the notebook would refuse is refused before anything runs,
with the same message.

    @dataclass
    class EvalParams(RunParams):          # device, out_dir, seed, threads, min/max_run_time, verdict_time first
        batch: int = 64                   # candidates per step
        compile: CompileMode = "off"      # choices are Literal types
        def check(self):                  # cross-field and range rules
            super().check()
            require(self.batch >= 1, f"batch must be >= 1, got {self.batch}")

papermill only *warns* about a parameter the notebook does not know (a typo like `-p btach 512` runs the
defaults silently); `validate` refuses it, and refuses a wrong type, naming both. Names papermill injected
are read back from the kernel's input history, so a typo is caught even though the notebook never
mentions it. This module imports no torch: the CLI checks parameters without loading it.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

# What `compile` means in every study: the torch.compile mode ("off": plain eager). The backend is a
# second parameter where a study needs it ("eager" counts dynamo graphs without inductor's codegen).
CompileMode = Literal["off", "default", "reduce-overhead", "max-autotune"]
Backend = Literal["inductor", "eager", "aot_eager"]

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


class ParameterError(ValueError):
    """A parameter the study does not know, a value of the wrong type, or one its rules refuse."""


def require(cond: bool, message: str) -> None:
    """For schemas' `check()` methods: raise ParameterError(message) unless `cond`."""
    if not cond:
        raise ParameterError(message)


@dataclasses.dataclass
class RunParams:
    """The run fields every study notebook takes, first in its parameters cell."""
    device: str = "auto"          # auto, cpu, cuda or cuda:N
    out_dir: str = ""             # results folder; empty means $PERFLAB_OUT or outputs/local
    seed: int = 0                 # seeds the data, the weights and every random draw
    threads: int = 1              # torch CPU threads; 0 keeps torch's default
    min_run_time: float = 0.2     # seconds per timing at least
    max_run_time: float = 1.0     # seconds per timing at most
    verdict_time: float = 2.0     # seconds of paired rounds per timed claim at most (a verdict stops once decided)

    def check(self) -> None:
        require(bool(_DEVICE.match(self.device)), f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
        require(self.threads >= 0, f"threads must be >= 0 (0 keeps torch's default), got {self.threads}")
        require(0 < self.min_run_time <= self.max_run_time,
                f"need 0 < min_run_time <= max_run_time, got {self.min_run_time} and {self.max_run_time}")
        require(self.verdict_time > 0, f"verdict_time must be > 0 seconds, got {self.verdict_time}")


def fields_of(schema) -> dict[str, dataclasses.Field]:
    if not (dataclasses.is_dataclass(schema) and isinstance(schema, type)):
        raise TypeError(f"schema must be a dataclass type, got {schema!r}")
    return {f.name: f for f in dataclasses.fields(schema)}


def default_of(field: dataclasses.Field) -> Any:
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None) or tp is None:
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (list, tuple) or origin in (list, tuple):
        args = typing.get_args(tp)
        return isinstance(value, (list, tuple)) and (not args or all(_type_ok(v, args[0]) for v in value))
    if tp is dict or origin is dict:
        return isinstance(value, dict)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def type_name(tp: Any) -> str:
    """How a type reads in a message: 'int', "'head' | 'tail' | 'both'", 'list[int]'."""
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is not None:
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def cell_type_name(tp: Any) -> str:
    """The annotation a parameters cell writes for `tp` (papermill reads plain names): a Literal of
    strings is `str`, `list[int]` is `list`."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return type(typing.get_args(tp)[0]).__name__
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any) -> Any:
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(tp) is tuple and isinstance(value, list):
        return tuple(value)
    return value


def _hints(schema) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def check_value(name: str, value: Any, schema) -> Any:
    """Check one parameter's name and type against the schema; return it coerced (int -> float where a
    float is due)."""
    fields = fields_of(schema)
    if name not in fields:
        close = difflib.get_close_matches(name, list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ParameterError(f"unknown parameter {name!r}{hint}; {schema.__name__} takes: {', '.join(fields)}")
    tp = _hints(schema)[name]
    if not _type_ok(value, tp):
        raise ParameterError(f"parameter {name!r} must be {type_name(tp)}, got {type(value).__name__} {value!r}")
    return _coerce(value, tp)


def injected_names(namespace: dict) -> set[str] | None:
    """Names papermill injected into this kernel (its "# Parameters" cell, read back from IPython's
    input history `In`), or None outside IPython."""
    history = namespace.get("In")
    if not isinstance(history, list):
        return None
    for src in reversed(history):
        if isinstance(src, str) and src.lstrip().startswith("# Parameters"):
            names = set()
            for node in ast.parse(src).body:
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            return names
    return set()


def validate(namespace: dict | Any, schema, *, strict: bool = True):
    """Build `schema` (a dataclass) from a notebook's `globals()` or a dict, refusing unknown names, wrong
    types and values its `check()` refuses, with a ParameterError that names them. Missing names take
    the schema's defaults.

    In a notebook, the parameters are the schema's names plus whatever papermill injected (read from the
    kernel's input history), so re-running the cell later in JupyterLab still works. With a plain dict
    every non-underscore key is a parameter. `strict=False` ignores unknown names."""
    if not isinstance(namespace, dict):
        namespace = vars(namespace)
    fields = fields_of(schema)
    injected = injected_names(namespace)
    if injected is None:
        names = [k for k in namespace if not k.startswith("_")]
    else:
        names = [k for k in fields if k in namespace] + sorted(injected - set(fields))
    errors, values = [], {}
    for name in names:
        if name not in fields and not strict:
            continue
        try:
            values[name] = check_value(name, namespace[name], schema)
        except ParameterError as e:
            errors.append(str(e))
    if errors:
        raise ParameterError(f"bad {schema.__name__}:\n  " + "\n  ".join(errors))
    cfg = schema(**values)
    post = getattr(cfg, "check", None)
    if callable(post):
        try:
            post()
        except ParameterError as e:
            raise ParameterError(f"bad {schema.__name__}: {e}") from None
    return cfg


def as_run(namespace: dict | Any, schema) -> tuple[Any, dict[str, Any]]:
    """What a notebook's `setup` reads: `validate`, and, inside a kernel, the two ways a run would record values it
    did not use, refused before anything is measured:

    - a parameter of `schema` not defined yet (the setup cell above the parameters cell: papermill injects `-p`
      values right after the parameters cell, so setup would read the defaults while the run records the -p values);
    - a value that differs from the dataclass's default and was not injected (a parameters cell edited away from
      `params.py`: the run table would say "defaults"). In JupyterLab another value goes in a cell of its own below
      the parameters cell whose first line is `# Parameters`, as papermill's injected cell; it is then read as set.

    -> (the parameters, {name: value} of those that differ from the defaults: what the run records as set)."""
    if not isinstance(namespace, dict):
        namespace = vars(namespace)
    cfg = validate(namespace, schema)
    fields = fields_of(schema)
    set_ = {k: getattr(cfg, k) for k, f in fields.items() if getattr(cfg, k) != default_of(f)}
    injected = injected_names(namespace)
    if injected is None:  # a plain dict (tests, scripts): every key is a value given
        return cfg, set_
    missing = [k for k in fields if k not in namespace]
    if missing:
        raise ParameterError(
            f"{schema.__name__}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not defined when setup() "
            "runs. The parameters cell must come before the setup cell and assign every parameter: papermill and "
            "`perflab run` inject -p values right after the parameters cell, so a setup above it reads the defaults "
            "while the run records the -p values. Move the parameters cell above setup(...).")
    edited = [k for k in set_ if k not in injected]
    if edited:
        lines = [f"{k} = {getattr(cfg, k)!r} where {schema.__name__}'s default is {default_of(fields[k])!r}"
                 for k in edited]
        raise ParameterError(
            "the notebook sets " + "; ".join(lines) + ". A parameters cell holds the dataclass's defaults, so that "
            "what a run records ('defaults', or the -p values) is what ran: pass another value with "
            f"`-p {edited[0]}=...` (papermill, perflab run), or in JupyterLab put it in a cell of its own right below "
            "the parameters cell whose first line is `# Parameters` (as papermill's injected cell); to change the "
            f"default, change {schema.__module__}.{schema.__name__} and the parameters cell together.")
    return cfg, set_


def parse_value(raw: str, tp: Any = None) -> Any:
    """A `-p key=value` text as a value. With the field's type known, the type decides: a str or a
    Literal of strs keeps the text as written (`-p kg=2024`, `-p compile=off`); a list reads
    `[1, 2]` or `1,2`. Otherwise it is typed the way papermill's `-p` types it: True/False/None, int,
    float, else the text."""
    if tp is not None:
        origin = typing.get_origin(tp)
        if tp is str or (origin is Literal and all(isinstance(a, str) for a in typing.get_args(tp))):
            return raw
        if tp in (list, tuple) or origin in (list, tuple):
            text = raw.strip()
            if text.startswith(("[", "(")):
                try:
                    return list(ast.literal_eval(text))
                except (ValueError, SyntaxError):
                    return raw
            return [parse_value(item.strip()) for item in text.split(",") if item.strip()]
    if raw in ("True", "False"):
        return raw == "True"
    if raw == "None":
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def split_assignment(text: str) -> tuple[str, str]:
    """'batch=512' -> ('batch', '512'): the name checked, the value as written."""
    if "=" not in text:
        raise ParameterError(f"expected key=value, got {text!r}")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key.isidentifier():
        raise ParameterError(f"{text!r}: {key!r} is not a parameter name")
    return key, raw


def parse_assignment(text: str, schema=None) -> tuple[str, Any]:
    """'batch=512' -> ('batch', 512). With `schema`, the value is typed by the field's type (see
    `parse_value`); an unknown name is left for `validate` to refuse, with its suggestion."""
    key, raw = split_assignment(text)
    tp = _hints(schema).get(key) if schema is not None else None
    return key, parse_value(raw, tp)


def load_preset(path: str | Path) -> dict:
    """Read a YAML preset (a flat mapping of parameter names to values)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ParameterError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ParameterError(f"{path}: a preset must be a mapping of parameter: value, got {type(data).__name__}")
    return data


def schema_from_cell(name: str, declared: dict[str, dict]) -> type:
    """A schema for a notebook no study registered, built from its parameters cell (papermill's
    `inspect_notebook` output), so that it goes through the same `validate`."""
    types_ = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}
    spec = []
    for key, info in declared.items():
        tp = types_.get((info.get("inferred_type_name") or "").strip(), Any)
        try:
            default = ast.literal_eval(info.get("default") or "None")
        except (ValueError, SyntaxError):
            default = None
        mutable = isinstance(default, (list, dict))
        spec.append((key, tp, dataclasses.field(default_factory=lambda d=default: d) if mutable
                     else dataclasses.field(default=default)))
    return dataclasses.make_dataclass(f"{name} parameters", spec)  # messages read "bad tiny parameters"
