"""The probe parameter dataclasses' own rules (cell/dataclass agreement and presets: test_notebook_params.py)."""
import pytest

from perflab.params import ParameterError, validate
from perflab.probe1d.params import ProfileParams, SlabStatsParams


def test_params_reject_bad_values():
    with pytest.raises(ParameterError, match="l0"):
        validate({"l0": 10_000}, ProfileParams)
    with pytest.raises(ParameterError, match="row_sweep"):
        validate({"row_sweep": [0]}, SlabStatsParams)
    with pytest.raises(ParameterError, match="unknown parameter 'n_row'"):
        validate({"n_row": 5}, SlabStatsParams)
