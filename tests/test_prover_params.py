"""The prover parameter dataclasses' own rules (cell/dataclass agreement and presets: test_notebook_params.py)."""
import pytest

from perflab.params import ParameterError, validate
from perflab.prover.config import EvalParams

def test_bad_values_are_refused():
    with pytest.raises(ParameterError, match="mode must be one of"):
        validate({"mode": "sideways"}, EvalParams)
    with pytest.raises(ParameterError, match="compile must be one of"):
        validate({"compile": "max-autotune"}, EvalParams)
    with pytest.raises(ParameterError, match="batch must be >= 0"):
        validate({"batch": -1}, EvalParams)
