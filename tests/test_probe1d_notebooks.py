"""The probe notebooks' `parameters` cells and their dataclasses agree (names, types, defaults), and the GPU
presets name only parameters the notebooks take, with the right types."""
import ast
import dataclasses
import typing

import pytest

from perflab.notebooks import discover, inspect, plan
from perflab.params import ParameterError, validate
from perflab.paths import notebooks_dir
from perflab.probe1d.params import ProfileParams, SlabStatsParams

NOTEBOOKS = {"01_profile_probe1d": ProfileParams, "02_slab_stats": SlabStatsParams}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameters_cell_matches_dataclass(name):
    schema = NOTEBOOKS[name]
    declared = inspect(notebooks_dir() / f"{name}.ipynb")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    assert list(declared) == list(fields)                           # same names, same order
    hints = typing.get_type_hints(schema)
    for key, info in declared.items():
        assert info["inferred_type_name"] == hints[key].__name__, key
        f = fields[key]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert ast.literal_eval(info["default"]) == default, key
        assert info["help"] and "=" not in info["help"], key        # papermill-safe help comment


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_gpu_preset_is_valid(name):
    assert name in discover()
    [(_, _, params)] = plan([name], preset="gpu")                    # refuses unknown names and wrong types
    cfg = validate(params, NOTEBOOKS[name])                          # and the dataclass's own rules
    assert cfg.device == "cuda"


def test_params_reject_bad_values():
    with pytest.raises(ParameterError, match="l0"):
        validate({"l0": 10_000}, ProfileParams)
    with pytest.raises(ParameterError, match="row_sweep"):
        validate({"row_sweep": [0]}, SlabStatsParams)
    with pytest.raises(ParameterError, match="unknown parameter 'n_row'"):
        validate({"n_row": 5}, SlabStatsParams)
