"""Every study notebook names its parameters dataclass in its setup call (how `perflab run` finds it: no list of
studies to keep), its parameters cell agrees with that dataclass (names, order, types, defaults, help), and its GPU
presets name only known parameters with valid values (the dataclass's own rules included)."""
import json
from pathlib import Path

import pytest

from perflab.kit.params import RunParams, validate
from perflab.runner.catalog import discover, plan, schema_mismatches
from perflab.runner.schemas import declared, schema_for

NOTEBOOKS = discover()


def test_the_seven_notebooks_are_found():
    assert len(NOTEBOOKS) == 7, sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_the_setup_call_names_the_study_and_an_imported_dataclass(name):
    d = declared(NOTEBOOKS[name])
    assert d is not None and d.study == name, d
    assert d.module is not None and d.module.startswith("perflab."), d  # imported, not built from the cell
    schema = schema_for(name, NOTEBOOKS[name])
    assert issubclass(schema, RunParams) and (schema.__module__, schema.__name__) == (d.module, d.name)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_parameters_cell_matches_the_dataclass(name):
    problems = schema_mismatches(NOTEBOOKS[name], schema_for(name, NOTEBOOKS[name]))
    assert not problems, "\n".join(problems)  # the whole message, not cut


@pytest.mark.parametrize("preset", ["gpu", "gpu-h200", "gpu-smoke"])
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_gpu_preset_is_valid(name, preset):
    [(_, _, params)] = plan([name], preset=preset)   # refuses unknown names and wrong types
    assert params, f"params/{preset}/{name}.yaml is missing or empty"
    cfg = validate(params, schema_for(name, NOTEBOOKS[name]))  # and the dataclass's own checks
    assert cfg.device in ("cuda", "auto")


def _copy(src, d, edit):
    import json
    nb = json.loads(src.read_text())
    edit(nb["cells"])
    d.mkdir(exist_ok=True)
    (d / src.name).write_text(json.dumps(nb))
    return d


def _tagged(cells, tag="parameters"):
    return next(i for i, c in enumerate(cells) if tag in c["metadata"].get("tags", []))


def test_run_refuses_a_setup_cell_above_the_parameters_cell_before_anything_runs(tmp_path, capsys):
    from pathlib import Path

    from perflab.runner.cli import main

    def move_setup_up(cells):
        at = _tagged(cells)
        cells.insert(at, cells.pop(at + 1))  # the setup cell, right below it, moved above it

    d = _copy(Path(__file__).parents[1] / "fixtures" / "notebooks" / "tiny.ipynb", tmp_path / "nbs", move_setup_up)
    assert main(["run", "tiny", "-p", "n=5", "--notebooks", str(d), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "setup(...) in cell 3 comes before the parameters cell (cell 4)" in err and "Move the setup cell" in err
    assert not (tmp_path / "o").exists()


def test_run_refuses_a_parameters_cell_off_its_dataclass_with_the_whole_message(tmp_path, capsys):
    from perflab.runner.cli import main

    def edit(cells):
        c = cells[_tagged(cells)]
        src = "".join(c["source"])
        c["source"] = src.replace("batch: int = 128", "batch: int = 512").replace("seed: int = 0", "seed: int = 3")

    d = _copy(NOTEBOOKS["03_eval"], tmp_path / "nbs", edit)
    assert main(["run", "03_eval", "--notebooks", str(d), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "its parameters cell disagrees with perflab.prover.evaluation.params.EvalParams" in err
    assert "seed: cell default 3, EvalParams default 0" in err and "batch: cell default 512, EvalParams default 128" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_papermill_alone_stops_at_setup_when_setup_would_not_read_what_the_run_records(tmp_path):
    """papermill straight (no `perflab run` to check first): the kernel's setup refuses, naming the fix."""
    from pathlib import Path

    from perflab.runner.execute import execute

    tiny = Path(__file__).parents[1] / "fixtures" / "notebooks" / "tiny.ipynb"

    def move_setup_up(cells):
        at = _tagged(cells)
        cells.insert(at, cells.pop(at + 1))

    def edit_cell(cells):
        c = cells[_tagged(cells)]
        c["source"] = "".join(c["source"]).replace("n: int = 3", "n: int = 4")

    d = _copy(tiny, tmp_path / "moved", move_setup_up)
    o = execute("tiny", d / "tiny.ipynb", {"n": 5}, tmp_path / "o1", progress=False)
    assert o.status == "failed" and o.cell == 3, o.describe()
    assert "n, scale, label, out_dir are not defined when setup() runs" in o.error, o.error
    d = _copy(tiny, tmp_path / "edited", edit_cell)
    o = execute("tiny", d / "tiny.ipynb", {}, tmp_path / "o2", progress=False)
    assert o.status == "failed" and "n = 4 where TinyParams's default is 3" in o.error, o.error
    o = execute("tiny", d / "tiny.ipynb", {"n": 4}, tmp_path / "o3", progress=False)  # injected: read, recorded
    assert o.ok, o.describe()
    rows = [json.loads(line) for line in (tmp_path / "o3" / "results.jsonl").read_text().splitlines()]
    assert {r.get("kind"): r.get("params_set") for r in rows}["value"] == {"n": 4}


def test_a_cards_preset_extends_its_base_and_is_picked_by_the_card(tmp_path):
    # params/gpu-h200/ says `base: gpu` and what an H200's memory changes (issue 51 item 5)
    from perflab.kit.params import ParameterError
    from perflab.runner.catalog import kind_preset, load_preset_file

    params = Path(__file__).resolve().parents[2] / "params"
    h100 = load_preset_file(params / "gpu" / "06_latentwire_amp.yaml")
    h200 = load_preset_file(params / "gpu-h200" / "06_latentwire_amp.yaml")
    assert "base" not in h200 and h200["mem_budget_gb"] > h100["mem_budget_gb"] and h200["max_batch"] == 1024
    assert {k: v for k, v in h200.items() if k not in ("mem_budget_gb", "max_batch")} == \
        {k: v for k, v in h100.items() if k not in ("mem_budget_gb", "max_batch")}
    assert kind_preset("gpu", "h200") == "gpu-h200" and kind_preset("gpu", "h100") == "gpu"
    assert kind_preset("gpu-smoke", "h200") == "gpu-smoke" and kind_preset(None, "h200") is None
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "n.yaml").write_text("base: b\nx: 1\n")
    with pytest.raises(ParameterError, match="base 'b' has no b/n.yaml to extend"):
        load_preset_file(tmp_path / "a" / "n.yaml")
    (tmp_path / "a" / "n.yaml").write_text("base: a\n")
    with pytest.raises(ParameterError, match="extends itself"):
        load_preset_file(tmp_path / "a" / "n.yaml")


def test_a_notebooks_number_names_it_beside_a_lettered_sibling():
    """`perflab run 03` is 03_eval, `03b` is 03b_links (the docs' abbreviation), a prefix still works where unique, and
    the two run in that order (the catalog sorts by name: the chapter stays together)."""
    from perflab.runner.catalog import resolve
    from perflab.runner.schemas import NotebookError

    assert resolve(["03"], NOTEBOOKS) == ["03_eval"] and resolve(["03b"], NOTEBOOKS) == ["03b_links"]
    assert resolve(["03b_l", "03_e", "04"], NOTEBOOKS) == ["03b_links", "03_eval", "04_early_exit"]
    names = list(NOTEBOOKS)
    assert names.index("03b_links") == names.index("03_eval") + 1 and names[-1] == "06_latentwire_amp"
    fake = {n: NOTEBOOKS["03_eval"] for n in ("03a_x", "03b_y")}   # no notebook numbered 03: a prefix of two
    with pytest.raises(NotebookError, match="matches several"):
        resolve(["03"], fake)
