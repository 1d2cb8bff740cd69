"""Every study notebook: its parameters cell agrees with its dataclass (names, order, types, defaults, help),
and its GPU preset names only known parameters with valid values (the dataclass's own rules included)."""
import pytest

from perflab.notebooks import discover, plan, schema_mismatches
from perflab.params import validate
from perflab.studies import SCHEMAS, schema

NOTEBOOKS = discover()


def test_every_notebook_has_a_registered_schema():
    assert sorted(NOTEBOOKS) == sorted(SCHEMAS)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_parameters_cell_matches_the_dataclass(name):
    assert schema_mismatches(NOTEBOOKS[name], schema(name)) == []


@pytest.mark.parametrize("preset", ["gpu", "gpu-smoke"])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_gpu_preset_is_valid(name, preset):
    [(_, _, params)] = plan([name], preset=preset)   # refuses unknown names and wrong types
    assert params, f"params/{preset}/{name}.yaml is missing or empty"
    cfg = validate(params, schema(name))             # and the dataclass's own checks
    assert cfg.device in ("cuda", "auto")
