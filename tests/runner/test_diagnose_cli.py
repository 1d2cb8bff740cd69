"""`perflab diagnose`: a step in the user's own file, its JSON and figure; bad input refused with one line naming it
(exit 2) and nothing written; a step that raises shown from the user's frame."""
import json

import pytest
import torch

from perflab.runner.cli import main

STEP = '''import torch

x = torch.randn(128, 16)


def step():
    y = x
    for _ in range(40):
        y = torch.relu(y - 0.01)
    return y.sum().item()


def build():
    w = torch.randn(16, 16)
    return lambda: (x @ w).sum()


def broken():
    y = x * 2
    return y.no_such_method()


def prepare():
    global x
    x = torch.randn(64, 16)


def make_not_callable():
    return 42


limit = 3
'''


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The user's folder: train.py in it, the command run there."""
    (tmp_path / "train.py").write_text(STEP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(__import__("sys").modules, "train", raising=False)
    n = torch.get_num_threads()
    yield tmp_path
    torch.set_num_threads(n)


QUICK = ["--calls", "3", "--warmup", "1", "--threads", "1", "--device", "cpu"]


@pytest.mark.slow
def test_a_step_in_the_users_file_gets_its_table_json_and_figure(user, capsys):
    assert main(["diagnose", "train:step", *QUICK, "--json", "out/d.json", "--figure", "out/d.png"]) == 0
    out = capsys.readouterr().out
    assert "train:step on cpu" in out and "Python loop of small ops" in out and "train.py:8 (step)" in out
    j = json.loads((user / "out" / "d.json").read_text())
    kinds = {(f["kind"], f["where"].get("line")) for f in j["findings"]}
    assert ("Python loop of small ops", 8) in kinds and ("host sync", 10) in kinds
    assert (user / "out" / "d.png").stat().st_size > 1000
    assert sorted(p.name for p in (user / "out").iterdir()) == ["d.json", "d.png"]   # no temporary left


def test_a_file_path_and_a_setup_that_returns_the_step(user, capsys):
    assert main(["diagnose", str(user / "train.py") + ":step", *QUICK]) == 0
    assert main(["diagnose", "--setup", "train:build", *QUICK]) == 0
    assert main(["diagnose", "train:step", "--setup", "train:prepare", *QUICK]) == 0
    out = capsys.readouterr().out
    assert out.count(" on cpu: ") == 3


@pytest.mark.parametrize("argv, message", [
    (["nomodule:step"], "cannot import 'nomodule': no module named 'nomodule'"),
    (["train:stpe"], "train has no attribute 'stpe'; callables there: broken, build, make_not_callable, prepare, step"),
    (["train:limit"], "'train:limit' is not callable (it is int: 3)"),
    (["train"], "expected MODULE:FUNCTION"),
    ([], "give the step (MODULE:FUNCTION) or --setup"),
    (["--setup", "train:make_not_callable"], "the step must be callable, got int"),
    (["train:step", "--setup", "train:build"], "returned a callable and a step was named too"),
    (["train:step", "--device", "cuda:7"], "--device cuda:7: device 'cuda:7' was asked for but"),
    (["train:step", "--library", "no.such.module"], "no module named 'no.such.module'"),
])
def test_bad_input_is_refused_with_one_line_and_nothing_written(user, capsys, argv, message):
    if "cuda" in message and torch.cuda.device_count() > 7:
        pytest.skip("this host has a cuda:7")
    assert main(["diagnose", *argv, *QUICK[:-2], "--json", "d.json"]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert err.startswith("perflab diagnose: ")
    assert not (user / "d.json").exists()


def test_a_step_that_raises_shows_its_traceback_from_the_users_frame(user, capsys):
    assert main(["diagnose", "train:broken", *QUICK, "--json", "d.json"]) == 2
    err = capsys.readouterr().err
    assert "the step train:broken raised AttributeError" in err
    tb = err.split("Traceback (most recent call last):\n", 1)[1]
    assert tb.startswith(f'  File "{user / "train.py"}", line 20, in broken'), tb
    assert "perflab" not in tb
    assert not (user / "d.json").exists()


def test_a_folder_that_cannot_be_written_is_refused_before_the_step_runs(user, capsys):
    (user / "ro").mkdir()
    (user / "ro").chmod(0o500)
    try:
        if __import__("os").access(user / "ro", __import__("os").W_OK):
            pytest.skip("running as a user who can write anywhere")
        assert main(["diagnose", "train:step", *QUICK, "--json", "ro/d.json"]) == 2
        assert "is not writable" in capsys.readouterr().err
    finally:
        (user / "ro").chmod(0o700)
