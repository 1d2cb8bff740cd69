from dataclasses import dataclass
from typing import Literal

import pytest

from perflab.kit.params import ParameterError, load_preset, require, validate


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


def test_values_from_the_command_line_are_typed_by_the_schema():
    from perflab.kit.params import parse_assignment

    @dataclass
    class P:
        kg: str = ""
        compile: Literal["off", "default"] = "off"
        sizes: list = None
        lr: float = 1e-3

    assert parse_assignment("kg=2024", P) == ("kg", "2024")        # a str field keeps the text
    assert parse_assignment("compile=off", P) == ("compile", "off")
    assert parse_assignment("sizes=16,64", P) == ("sizes", [16, 64])
    assert parse_assignment("sizes=[16, 64]", P) == ("sizes", [16, 64])
    assert parse_assignment("lr=1e-4", P) == ("lr", 1e-4)
    assert parse_assignment("other=5", P) == ("other", 5)                  # unknown: typed like papermill, refused later
    with pytest.raises(ParameterError, match="expected key=value"):
        parse_assignment("lr", P)


def test_every_study_schema_keeps_the_run_fields_and_their_rules():
    import dataclasses

    from perflab.kit.params import RunParams
    from perflab.runner.catalog import discover
    from perflab.runner.schemas import schema_for

    run_fields = [f.name for f in dataclasses.fields(RunParams)]
    for name, path in discover().items():
        s = schema_for(name, path)
        assert issubclass(s, RunParams) and [f.name for f in dataclasses.fields(s)][:len(run_fields)] == run_fields
        for bad, message in (({"threads": -1}, "threads must be >= 0"), ({"device": "gpu"}, "device must be"),
                             ({"min_run_time": 2.0, "max_run_time": 1.0}, "min_run_time <= max_run_time")):
            with pytest.raises(ParameterError, match=message):  # the study's check() calls RunParams.check()
                validate(bad, s)


def test_setup_in_a_kernel_refuses_a_run_that_would_record_values_it_did_not_use():
    from perflab.kit.params import as_run

    defaults = {f: getattr(EvalParams(), f) for f in EvalParams.__dataclass_fields__}
    # the setup cell above the parameters cell: the study's names are not defined yet
    with pytest.raises(ParameterError, match=r"batch, .* are not defined when setup\(\) runs.*Move the parameters"):
        as_run({"In": ["import perflab"], "device": "auto"}, EvalParams)
    # a parameters cell edited away from the dataclass: refused, every such value named with its default
    ns = {"In": ["import perflab", "batch: int = 512"], **defaults, "batch": 512, "mode": "head"}
    with pytest.raises(ParameterError) as e:
        as_run(ns, EvalParams)
    assert "batch = 512 where EvalParams's default is 64; mode = 'head' where EvalParams's default is 'both'" in str(e.value)
    assert "`-p batch=...`" in str(e.value) and "`# Parameters`" in str(e.value)
    # the same values injected (papermill's cell, or one written like it in JupyterLab): read, and recorded as set
    ns["In"].append("# Parameters\nbatch = 512\nmode = 'head'\n")
    cfg, set_ = as_run(ns, EvalParams)
    assert (cfg.batch, cfg.mode) == (512, "head") and set_ == {"batch": 512, "mode": "head"}
    # on its defaults nothing is set; a plain dict (a script) is read as given
    assert as_run({"In": ["x"], **defaults}, EvalParams)[1] == {}
    assert as_run({"batch": 128}, EvalParams)[1] == {"batch": 128}
