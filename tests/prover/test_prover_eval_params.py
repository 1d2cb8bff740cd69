"""The prover parameter dataclasses' own rules (cell/dataclass agreement and presets: test_notebook_params.py)."""
import pytest

from perflab.kit.params import ParameterError, validate
from perflab.prover.evaluation.params import EvalParams


@pytest.mark.parametrize("values, message", [
    ({"mode": "sideways"}, "parameter 'mode' must be 'head' | 'tail' | 'both'"),
    ({"compile": "eager"}, "parameter 'compile' must be 'off' |"),        # a backend, not a mode
    ({"backend": "cudagraphs"}, "parameter 'backend' must be 'inductor' |"),
    ({"batch": -1}, "batch must be >= 1 (or 0: the memory model picks)"),
    ({"batch_sizes": [0]}, "batch_sizes must list ints >= 1"),
])
def test_bad_values_are_refused(values, message):
    with pytest.raises(ParameterError, match="bad EvalParams") as e:
        validate(values, EvalParams)
    assert message in str(e.value)
