"""The notebook's parameters cell and VAEParams agree (names, types, defaults), and the GPU preset
names only known parameters with valid values."""
import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from perflab.notebooks import inspect
from perflab.params import ParameterError, load_preset, validate
from perflab.vae import VAEParams

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_vae_sync.ipynb"
PRESET = ROOT / "params" / "gpu" / "05_vae_sync.yaml"


def test_parameters_cell_matches_the_dataclass():
    declared = inspect(NOTEBOOK)
    fields = {f.name: f for f in dataclasses.fields(VAEParams)}
    assert list(declared) == list(fields)
    hints = typing.get_type_hints(VAEParams)
    defaults = VAEParams()
    for name, p in declared.items():
        assert p["inferred_type_name"] == getattr(hints[name], "__name__", str(hints[name])), name
        assert ast.literal_eval(p["default"]) == getattr(defaults, name), name
        assert p["help"], f"{name} has no help comment"


def test_gpu_preset_is_valid():
    preset = load_preset(PRESET)
    cfg = validate(preset, VAEParams)
    assert cfg.device == "cuda" and cfg.batch == 64 and max(cfg.sweep_batches) >= 4096


def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError, match="unknown parameter 'btach'"):
        validate({"btach": 64}, VAEParams)
    with pytest.raises(ParameterError, match="group must be 0"):
        validate({"group": 2}, VAEParams)
    with pytest.raises(ParameterError, match="sweep_batches"):
        validate({"sweep_batches": [64]}, VAEParams)
