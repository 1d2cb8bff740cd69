"""Every study notebook names its parameters dataclass in its setup call (how `perflab run` finds it: no list of
studies to keep), its parameters cell agrees with that dataclass (names, order, types, defaults, help), and its GPU
presets name only known parameters with valid values (the dataclass's own rules included)."""
import pytest

from perflab.kit.params import RunParams, validate
from perflab.runner.catalog import discover, plan, schema_mismatches
from perflab.runner.schemas import declared, schema_for

NOTEBOOKS = discover()


def test_the_six_notebooks_are_found():
    assert len(NOTEBOOKS) == 6, sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_the_setup_call_names_the_study_and_an_imported_dataclass(name):
    d = declared(NOTEBOOKS[name])
    assert d is not None and d.study == name, d
    assert d.module is not None and d.module.startswith("perflab."), d  # imported, not built from the cell
    schema = schema_for(name, NOTEBOOKS[name])
    assert issubclass(schema, RunParams) and (schema.__module__, schema.__name__) == (d.module, d.name)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_parameters_cell_matches_the_dataclass(name):
    assert schema_mismatches(NOTEBOOKS[name], schema_for(name, NOTEBOOKS[name])) == []


@pytest.mark.parametrize("preset", ["gpu", "gpu-smoke"])
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_gpu_preset_is_valid(name, preset):
    [(_, _, params)] = plan([name], preset=preset)   # refuses unknown names and wrong types
    assert params, f"params/{preset}/{name}.yaml is missing or empty"
    cfg = validate(params, schema_for(name, NOTEBOOKS[name]))  # and the dataclass's own checks
    assert cfg.device in ("cuda", "auto")
