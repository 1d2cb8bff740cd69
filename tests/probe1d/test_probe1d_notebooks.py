"""The probe parameter dataclasses' own rules (cell/dataclass agreement and presets: test_notebook_params.py),
and the shape of notebooks 01 and 02: thin cells, no raw floats in their outputs."""
import json
import re

import pytest

from perflab.kit.params import ParameterError, validate
from perflab.kit.paths import notebooks_dir
from perflab.probe1d.params import ProfileParams, SlabStatsParams

NOTEBOOKS = ("01_profile_probe1d", "02_slab_stats")


def test_params_reject_bad_values():
    with pytest.raises(ParameterError, match="l0"):
        validate({"l0": 10_000}, ProfileParams)
    with pytest.raises(ParameterError, match="row_sweep"):
        validate({"row_sweep": [0]}, SlabStatsParams)
    with pytest.raises(ParameterError, match="unknown parameter 'n_row'"):
        validate({"n_row": 5}, SlabStatsParams)
    with pytest.raises(ParameterError, match="profile_repeats must be >= 1"):
        validate({"profile_repeats": 0}, ProfileParams)


def test_compile_is_the_mode_and_backend_the_backend():
    cfg = validate({}, SlabStatsParams)
    assert (cfg.compile, cfg.backend) == ("default", "inductor")      # today's inductor default, as a mode + backend
    assert validate({"compile": "off"}, SlabStatsParams).compile == "off"
    with pytest.raises(ParameterError, match=re.escape("parameter 'compile' must be 'off' | 'default' | "
                                                       "'reduce-overhead' | 'max-autotune', got str 'inductor'")):
        validate({"compile": "inductor"}, SlabStatsParams)
    with pytest.raises(ParameterError, match="parameter 'backend'"):
        validate({"backend": "off"}, SlabStatsParams)


def _cells(name):
    return json.loads((notebooks_dir() / f"{name}.ipynb").read_text())["cells"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_cell_holds_more_than_a_screen(name):
    long = {i: len("".join(c["source"]).splitlines()) for i, c in enumerate(_cells(name)) if c["cell_type"] == "code"}
    assert {i: n for i, n in long.items() if n > 25} == {}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_outputs_print_no_raw_floats(name):
    # `spread=[0.9916623814676818, ...]`: numbers are rounded (3 significant figures) before they are printed
    raw = re.compile(r"\d\.\d{6,}")
    for i, c in enumerate(_cells(name)):
        for out in c.get("outputs", []):
            text = "".join(out.get("text") or out.get("data", {}).get("text/plain") or "")
            assert not raw.search(text), f"cell {i}: {raw.search(text).group()} in {text[:200]!r}"
