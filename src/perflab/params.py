"""Notebook parameters: one dataclass per study is the schema; the notebook's `parameters` cell holds
the same names as annotated literals (papermill reads them); `validate` checks what a run really got.

    # parameters cell
    batch: int = 64          # candidates per step
    compile: str = "off"     # off | default | reduce-overhead
    # next cell
    cfg = validate(globals(), EvalParams)

papermill only *warns* about a parameter the notebook does not know (a typo like `-p btach 512`
runs the defaults silently); `validate` refuses it, and refuses a wrong type, naming both.
Names papermill injected are read back from the kernel's input history, so a typo is caught even
though the notebook never mentions it.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml



class ParameterError(ValueError):
    """A parameter the study does not know, or a value of the wrong type."""


def fields_of(schema) -> dict[str, dataclasses.Field]:
    if not (dataclasses.is_dataclass(schema) and isinstance(schema, type)):
        raise TypeError(f"schema must be a dataclass type, got {schema!r}")
    return {f.name: f for f in dataclasses.fields(schema)}


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin is Literal:
        return value in typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None) or tp is None:
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        return isinstance(value, (list, tuple)) and all(_type_ok(v, typing.get_args(tp)[0])
                                                        for v in value) if typing.get_args(tp) else True
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any) -> Any:
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(tp) is tuple and isinstance(value, list):
        return tuple(value)
    return value


def check_value(name: str, value: Any, schema) -> Any:
    """Check one parameter against the schema; return it coerced (int -> float where a float is due)."""
    fields = fields_of(schema)
    if name not in fields:
        close = difflib.get_close_matches(name, list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ParameterError(f"unknown parameter {name!r}{hint}; {schema.__name__} takes: {', '.join(fields)}")
    hints = typing.get_type_hints(schema)
    tp = hints[name]
    if not _type_ok(value, tp):
        raise ParameterError(f"parameter {name!r} must be {_type_name(tp)}, got {type(value).__name__} {value!r}")
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
    """Build `schema` (a dataclass) from a notebook's `globals()` or a dict, refusing unknown names and
    wrong types with a ParameterError that names them all. Missing names take the schema's defaults.

    In a notebook, the parameters are the schema's names plus whatever papermill injected (read
    from the kernel's input history), so re-running the cell later in JupyterLab still works.
    With a plain dict every non-underscore key is a parameter. `strict=False` ignores unknown names.
    A schema may define `check(self)` for cross-field rules (see `require`)."""
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
        raise ParameterError("bad notebook parameters:\n  " + "\n  ".join(errors))
    cfg = schema(**values)
    post = getattr(cfg, "check", None)
    if callable(post):
        post()
    return cfg


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


def require(cond: bool, message: str) -> None:
    """For schemas' `check()` methods: raise ParameterError(message) unless `cond`."""
    if not cond:
        raise ParameterError(message)
