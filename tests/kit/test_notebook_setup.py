"""One validator before anything runs (CLI, sweep, notebook: the same message), and one setup call."""
import shutil
from pathlib import Path

import pytest
import torch

from perflab.kit.notebook import setup
from perflab.kit.params import ParameterError, validate
from perflab.prover.evaluation.params import EvalParams
from perflab.runner.cli import main

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _message(values) -> str:
    with pytest.raises(ParameterError) as e:
        validate(values, EvalParams)
    return str(e.value)


@pytest.mark.parametrize("assign, values", [
    ("batch=-5", {"batch": -5}),
    ("compile=eager", {"compile": "eager"}),          # a backend, not a torch.compile mode
    ("mode=sideways", {"mode": "sideways"}),
])
def test_run_refuses_what_the_notebook_would_refuse_with_its_message(tmp_path, capsys, assign, values):
    out = tmp_path / "out"
    assert main(["run", "03", "-p", assign, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert _message(values) in err            # the dataclass's own message, word for word
    assert not out.exists()                   # nothing ran


def test_sweep_refuses_a_bad_point_before_submitting(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "03", "--grid", "batch=64,-5", "--out", str(out), "--no-progress"]) == 2
    assert _message({"batch": -5}) in capsys.readouterr().err
    assert not (out / "points").exists() and not (out / "submitit").exists()


def test_list_shows_choices_and_accepts_the_defaults(capsys):
    assert main(["list", "03"]) == 0
    out = capsys.readouterr().out
    assert "mode: 'head' | 'tail' | 'both' = 'both'" in out and "perflab.prover.evaluation.params.EvalParams" in out


def test_setup_validates_sets_threads_then_opens_the_run(tmp_path, capsys):
    n = torch.get_num_threads()
    try:
        run = setup("03_eval", {"threads": 1, "batch": 64, "out_dir": str(tmp_path), "device": "cpu"}, EvalParams)
        assert run.cfg.batch == 64 and run.device == torch.device("cpu") and torch.get_num_threads() == 1
        assert run.log.env["torch_threads"] == 1 and run.dir == tmp_path / "03_eval" / run.log.run_id
        assert "1 CPU thread(s)" in capsys.readouterr().out
        with pytest.raises(ParameterError, match="unknown parameter 'btach'"):
            setup("03_eval", {"btach": 64, "out_dir": str(tmp_path)}, EvalParams)
        with pytest.raises(TypeError, match=r"setup\('03_eval', globals\(\), Params\): name the notebook's parameters"):
            setup("03_eval", {"out_dir": str(tmp_path)})
    finally:
        torch.set_num_threads(n)


def test_a_notebook_without_a_registered_schema_is_checked_from_its_cell(tmp_path, capsys):
    d = tmp_path / "nbs"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "notebooks", d)
    assert main(["run", "tiny", "-p", "scale=big", "--notebooks", str(d), "--out", str(tmp_path / "o")]) == 2
    assert "parameter 'scale' must be float, got str 'big'" in capsys.readouterr().err


def test_a_time_scale_shortens_every_timed_claims_budget_and_the_run_says_so(tmp_path, capsys, monkeypatch):
    """make nbval sets PERFLAB_TIME_SCALE: the checked cells print counts and pass/fail, which no budget changes, and
    04's three 45-s decisions were most of nbval's 7 minutes. The run records the budget it ran with, as set."""
    from perflab.kit.results import read_rows

    monkeypatch.setenv("PERFLAB_TIME_SCALE", "0.25")
    run = setup("03_eval", {"verdict_time": 2.0, "out_dir": str(tmp_path), "device": "cpu", "threads": 0}, EvalParams)
    assert run.cfg.verdict_time == 0.5 and run.log.params_set["verdict_time"] == 0.5
    assert "PERFLAB_TIME_SCALE=0.25: every timed claim's budget 2 s -> 0.5 s" in capsys.readouterr().out
    [note] = [r for r in read_rows(tmp_path / "results.jsonl") if r["kind"] == "note"]
    assert note["time_scale"] == 0.25 and note["params"]["verdict_time"] == 0.5
    for bad in ("0", "1.5", "fast"):
        monkeypatch.setenv("PERFLAB_TIME_SCALE", bad)
        with pytest.raises(ValueError, match=f"PERFLAB_TIME_SCALE='{bad}': give a number in \\(0, 1\\]"):
            setup("03_eval", {"out_dir": str(tmp_path), "device": "cpu", "threads": 0}, EvalParams)


def test_a_saved_figures_labels_sit_above_its_lines(tmp_path):
    # a threshold's line drawn through a value's label struck it through (02, 03b, 04, 06; grading 2026-12-03):
    # Run.savefig puts each label without a box of its own on a white one above the lines, and keeps its own boxes
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perflab.kit.notebook import open_run

    run = open_run("labels", out_dir=str(tmp_path), run_id="r")
    fig, ax = plt.subplots()
    ax.axhline(1.0, zorder=3)
    plain = ax.text(0.5, 1.0, "judged: 5.97x [5.69, 6.27]")
    boxed = ax.annotate("own box", (0.2, 0.2), bbox=dict(facecolor="yellow"))
    blank = ax.text(0.1, 0.1, " ")
    assert run.savefig(fig, "f").exists()
    patch = plain.get_bbox_patch()
    assert patch is not None and patch.get_facecolor()[:3] == (1.0, 1.0, 1.0) and plain.get_zorder() > 3
    assert boxed.get_bbox_patch().get_facecolor()[:3] == matplotlib.colors.to_rgb("yellow")
    assert blank.get_bbox_patch() is None
    plt.close(fig)
