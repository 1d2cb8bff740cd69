"""The notebook's parameters cell and LatentWireParams agree (names, types, defaults), and the GPU preset is valid."""
import dataclasses
import typing
from pathlib import Path

import pytest

from perflab.latentwire import LatentWireParams, Tokenizer
from perflab.notebooks import inspect
from perflab.params import ParameterError, load_preset, validate

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "06_latentwire_amp.ipynb"
PRESET = ROOT / "params" / "gpu" / "06_latentwire_amp.yaml"


def test_parameters_cell_matches_the_dataclass():
    declared = inspect(NOTEBOOK)
    fields = {f.name: f for f in dataclasses.fields(LatentWireParams)}
    assert list(declared) == list(fields)
    hints = typing.get_type_hints(LatentWireParams)
    for name, info in declared.items():
        assert info["inferred_type_name"] == hints[name].__name__, name
        assert eval(info["default"]) == fields[name].default, name  # literals written by us
        assert info["help"], f"{name} has no help comment"


def test_gpu_preset_is_valid_and_complete():
    preset = load_preset(PRESET)
    cfg = validate(preset, LatentWireParams)
    assert cfg.device == "cuda" and cfg.amp and cfg.max_batch >= 256
    model_cfg = cfg.model_config()
    pre, post = (len(Tokenizer().encode(t)) for t in Tokenizer().scaffold())
    assert pre + model_cfg.latent_len + post + model_cfg.max_answer_tokens + 1 <= model_cfg.lm_max_pos  # the LM fits


def test_bad_notebook_parameters_are_refused():
    with pytest.raises(ParameterError, match="n_examples"):
        validate({"n_examples": 4}, LatentWireParams)
    with pytest.raises(ParameterError, match="compile"):
        validate({"compile": "fast"}, LatentWireParams)
