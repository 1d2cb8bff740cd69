from dataclasses import dataclass
from typing import Literal

import pytest

from perflab.params import ParameterError, load_preset, require, validate


@dataclass
class EvalParams:
    batch: int = 64
    lr: float = 1e-3
    mode: Literal["head", "tail", "both"] = "both"
    compile: bool = False
    max_rows: int | None = None
    device: str = "auto"

    def check(self):
        require(self.batch > 0, f"batch must be positive, got {self.batch}")


def test_defaults_and_overrides():
    cfg = validate({"batch": 8, "lr": 1}, EvalParams)
    assert cfg.batch == 8 and cfg.lr == 1.0 and isinstance(cfg.lr, float) and cfg.mode == "both"


@pytest.mark.parametrize("ns, message", [
    ({"btach": 8}, "unknown parameter 'btach' (did you mean 'batch'?)"),
    ({"batch": "8"}, "parameter 'batch' must be int, got str '8'"),
    ({"batch": True}, "parameter 'batch' must be int, got bool"),
    ({"mode": "sideways"}, "parameter 'mode' must be 'head' | 'tail' | 'both'"),
    ({"max_rows": 2.5}, "parameter 'max_rows'"),
    ({"batch": -1}, "batch must be positive"),
])
def test_bad_parameters_are_refused_by_name(ns, message):
    with pytest.raises(ParameterError) as e:
        validate(ns, EvalParams)
    assert message in str(e.value)


def test_every_error_is_reported_at_once():
    with pytest.raises(ParameterError) as e:
        validate({"btach": 1, "lr": "x"}, EvalParams)
    assert "btach" in str(e.value) and "lr" in str(e.value)


def test_notebook_namespace_uses_the_injected_cell():
    # what a kernel's globals look like after the parameters cell and papermill's injected cell
    ns = {"In": ["import perflab", "batch: int = 64", "# Parameters\nbatch = 512\nbogus = 1\n"],
          "batch": 512, "bogus": 1, "speedup": 3.0, "perflab": object()}
    with pytest.raises(ParameterError, match="unknown parameter 'bogus'"):
        validate(ns, EvalParams)
    ns["In"][-1] = "# Parameters\nbatch = 512\n"
    cfg = validate(ns, EvalParams)  # later simple-typed globals (speedup) are not parameters
    assert cfg.batch == 512


def test_preset_must_be_a_mapping(tmp_path):
    (tmp_path / "ok.yaml").write_text("batch: 512\nmode: head\n")
    assert load_preset(tmp_path / "ok.yaml") == {"batch": 512, "mode": "head"}
    (tmp_path / "bad.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ParameterError, match="mapping"):
        load_preset(tmp_path / "bad.yaml")
