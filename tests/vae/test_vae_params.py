"""VAEParams' own rules and the GPU preset's content (the cell/dataclass agreement for every notebook is
in test_notebook_params.py)."""
from pathlib import Path

import pytest

from perflab.kit.params import ParameterError, load_preset, validate
from perflab.vae import VAEParams

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "params" / "gpu" / "05_vae_sync.yaml"


def test_gpu_preset_is_valid():
    preset = load_preset(PRESET)
    cfg = validate(preset, VAEParams)
    assert cfg.device == "cuda" and cfg.batch == 64 and max(cfg.sweep_batches) >= 4096


def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError, match="unknown parameter 'btach'"):
        validate({"btach": 64}, VAEParams)
    with pytest.raises(ParameterError, match=r"parameter .group. must be 0 \| 1"):
        validate({"group": 2}, VAEParams)
    with pytest.raises(ParameterError, match="sweep_batches"):
        validate({"sweep_batches": [64]}, VAEParams)
