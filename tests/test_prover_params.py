"""The prover notebooks' parameters cells agree with their dataclasses; the GPU presets are valid."""
import ast
import dataclasses
from pathlib import Path

import pytest

from perflab.notebooks import inspect
from perflab.params import ParameterError, load_preset, validate
from perflab.prover.config import EarlyExitParams, EvalParams

ROOT = Path(__file__).resolve().parents[1]
CASES = [("03_eval", EvalParams), ("04_early_exit", EarlyExitParams)]


@pytest.mark.parametrize("name, schema", CASES)
def test_parameters_cell_matches_the_dataclass(name, schema):
    declared = inspect(ROOT / "notebooks" / f"{name}.ipynb")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    assert list(declared) == list(fields)
    for key, f in fields.items():
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert declared[key]["inferred_type_name"] == (f.type if isinstance(f.type, str) else f.type.__name__), key
        assert ast.literal_eval(declared[key]["default"]) == default, key
        assert declared[key]["help"], f"{key} has no help comment"


@pytest.mark.parametrize("name, schema", CASES)
def test_gpu_preset_is_valid(name, schema):
    preset = load_preset(ROOT / "params" / "gpu" / f"{name}.yaml")
    cfg = validate(preset, schema)
    assert cfg.device in ("auto", "cuda")


def test_bad_values_are_refused():
    with pytest.raises(ParameterError, match="mode must be one of"):
        validate({"mode": "sideways"}, EvalParams)
    with pytest.raises(ParameterError, match="compile must be one of"):
        validate({"compile": "max-autotune"}, EvalParams)
    with pytest.raises(ParameterError, match="batch must be >= 0"):
        validate({"batch": -1}, EvalParams)
