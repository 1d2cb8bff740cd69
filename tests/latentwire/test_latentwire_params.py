"""LatentWireParams' own rules and the GPU preset's content (cell/dataclass agreement: test_notebook_params.py)."""
from pathlib import Path

import pytest

from perflab.kit.params import ParameterError, load_preset, validate
from perflab.latentwire import LatentWireParams, Tokenizer

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "params" / "gpu" / "06_latentwire_amp.yaml"


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
