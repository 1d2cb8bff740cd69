import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from perflab.runner.cli import main
from perflab.runner.report import build


def test_list_shows_parameters_with_types_and_help(nb_dir, capsys):
    assert main(["list", "--notebooks", str(nb_dir)]) == 0
    out = capsys.readouterr().out
    assert "tiny" in out and "n: int = 3  # how many squares" in out


@pytest.mark.parametrize("argv, message", [
    (["run", "nope"], "'nope' is not a notebook"),
    (["run", "tiny", "-p", "bogus=1"], "unknown parameter 'bogus'"),
    (["run", "tiny", "-p", "n=many"], "parameter 'n' must be int, got str 'many'"),
    (["run", "tiny", "-p", "novalue"], "expected key=value"),
    (["run", "tiny", "--params", "h100"], "unknown preset 'h100'"),
])
def test_bad_requests_are_refused_before_anything_runs(nb_dir, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(argv + ["--notebooks", str(nb_dir), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing ran


@pytest.mark.slow
def test_run_with_p_and_a_failing_notebook(nb_dir, tmp_path, capfd, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # where the user runs the command: relative paths resolve from here
    # -p applies to every notebook named, so run them as two requests sharing one run folder. With -p, papermill
    # injects a cell after the parameters cell: the failure is still reported at the source notebook's cell 3.
    assert main(["run", "failing", "-p", "x=2", "--notebooks", str(nb_dir), "--out", str(out), "--no-progress"]) == 1
    err = capfd.readouterr().err
    assert "failing: FAILED at cell 3 of 4 (In [4] in the executed notebook)" in err
    assert "RuntimeError: planted failure with x=2" in err
    assert main(["run", "tiny", "-p", "n=4", "-p", "label=yo", "--notebooks", str(nb_dir), "--out", str(out),
                 "--no-progress"]) == 0
    assert "without encryption" not in capfd.readouterr().err  # the kernel talks over IPC, not TCP
    executed = nbformat.read(out / "tiny.ipynb", as_version=4)
    assert "yo [0.0, 1.0, 4.0, 9.0]" in "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    runs = {r["study"]: r for r in rows if r["kind"] == "run"}  # each study's last status row
    assert runs["failing"]["status"] == "failed" and (runs["failing"]["cell"], runs["failing"]["cells"]) == (3, 4)
    assert runs["tiny"]["status"] == "ok" and runs["tiny"]["params"] == {"n": 4, "label": "yo"}
    value = next(r for r in rows if r["kind"] == "value")
    assert value["value"] == 14.0 and value["params"]["n"] == 4
    # one execution, one id: the runner's status rows ("started", "ok") and the notebook's rows share it
    tiny_ids = {r["run_id"] for r in rows if r["study"] == "tiny"}
    assert tiny_ids == {runs["tiny"]["run_id"]}
    assert [r["status"] for r in rows if r["study"] == "tiny" and r["kind"] == "run"] == ["started", "ok"]
    note = next(r["text"] for r in rows if r["kind"] == "note")
    assert note == f"relative paths resolve from {tmp_path}"  # $PERFLAB_CWD, not the notebooks' folder
    report = (out / "REPORT.md").read_text()
    assert "**failed**" in report and "sum of squares" in report and "cell 3 of 4" in report


@pytest.mark.slow
def test_a_failing_notebook_does_not_stop_the_others(nb_dir, tmp_path, capsys):
    out = tmp_path / "out"
    # runs after "failing"; a renamed notebook names itself in its setup call too (the runner refuses a mismatch)
    text = (nb_dir / "tiny.ipynb").read_text()
    assert 'setup(\\"tiny\\"' in text
    (nb_dir / "zz_tiny.ipynb").write_text(text.replace('setup(\\"tiny\\"', 'setup(\\"zz_tiny\\"'))
    (nb_dir / "tiny.ipynb").unlink()
    assert main(["run", "--notebooks", str(nb_dir), "--out", str(out), "--no-progress"]) == 1
    assert (out / "zz_tiny.ipynb").exists()  # ran after the failure
    assert "1 of 2 notebook(s) failed" in capsys.readouterr().err


def _preset(tmp_path, text="n: 5\nscale: 2\n"):
    presets = tmp_path / "params"
    (presets / "big").mkdir(parents=True)
    (presets / "big" / "tiny.yaml").write_text(text)
    return presets


@pytest.mark.slow
def test_preset_values_are_applied_and_p_on_the_same_key_wins_and_is_what_the_run_records(nb_dir, tmp_path):
    """docs/command.md: `-p` overrides one parameter, a preset's too. The run records what ran: the runner's status
    rows, the notebook's rows and the report's run table all say n=4 (the -p), scale=2.0 (the preset)."""
    presets = _preset(tmp_path)
    out = tmp_path / "out"
    assert main(["run", "tiny", "--params", "big", "--params-dir", str(presets), "--notebooks", str(nb_dir),
                 "--out", str(out), "--no-progress", "--no-report"]) == 0
    row = next(json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if '"value"' in x)
    assert row["value"] == 2.0 * (0 + 1 + 4 + 9 + 16)
    (out / "results.jsonl").unlink()
    assert main(["run", "tiny", "--params", "big", "-p", "n=4", "--params-dir", str(presets), "--notebooks",
                 str(nb_dir), "--out", str(out), "--no-progress"]) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    value = next(r for r in rows if r["kind"] == "value")
    assert value["value"] == 2.0 * (0 + 1 + 4 + 9)                         # n=4 ran, at the preset's scale
    assert {r["kind"]: r["params"]["n"] for r in rows} == {"run": 4, "value": 4, "note": 4}
    assert value["params_set"] == {"n": 4, "scale": 2.0}                    # what setup read
    [line] = [x for x in (out / "REPORT.md").read_text().splitlines() if x.startswith("| tiny |")
              and "n=" in x]
    assert "| n=4, scale=2.0 |" in line and "given" not in line


def test_p_wins_over_the_preset_on_the_same_key(nb_dir, tmp_path):
    from perflab.runner.catalog import plan

    presets = _preset(tmp_path)
    [(_, _, params)] = plan(["tiny"], preset="big", overrides=["n=4"], nb_dir=nb_dir, p_dir=presets)
    assert params == {"n": 4, "scale": 2}
    [(_, _, params)] = plan(["tiny"], preset="big", nb_dir=nb_dir, p_dir=presets)
    assert params == {"n": 5, "scale": 2}
    [(_, _, params)] = plan(["tiny"], preset=str(presets / "big"), overrides=["scale=0.5", "label=yo"], nb_dir=nb_dir)
    assert params == {"n": 5, "scale": 0.5, "label": "yo"}           # a preset given as a folder path, the same order


def test_what_a_run_records_is_what_its_notebook_ran_with_a_preset_and_p(nb_dir, tmp_path, monkeypatch):
    """The runner's path without a kernel: plan's parameters injected by papermill's own parameterize_notebook, the
    cells executed in this process, as the kernel would. The rows record n=4 (-p over the preset's 5) and the value
    is n=4's: a runner that records one dict and hands papermill another fails here, in the fast tier."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    from perflab.runner.catalog import plan
    from perflab.runner.report import build

    presets = _preset(tmp_path)
    [(name, path, params)] = plan(["tiny"], preset="big", overrides=["n=4"], nb_dir=nb_dir, p_dir=presets)
    nb = parameterize_notebook(load_notebook_node(str(path)), params, kernel_name="python3", language="python")
    out = tmp_path / "out"
    monkeypatch.setenv("PERFLAB_OUT", str(out))
    monkeypatch.chdir(path.parent)
    namespace: dict = {"In": []}                 # IPython's input history: setup reads papermill's injected cell there
    for cell in nb.cells:
        if cell.cell_type == "code":
            namespace["In"].append(cell.source)
            exec(compile(cell.source, f"<{name} cell>", "exec"), namespace)
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    value = next(r for r in rows if r["kind"] == "value")
    assert value["value"] == 2.0 * (0 + 1 + 4 + 9)
    assert value["params"] == {"n": 4, "scale": 2.0, "label": "x", "out_dir": ""}
    assert value["params_set"] == {"n": 4, "scale": 2.0}
    assert "| n=4, scale=2.0 |" in build(out)


def test_a_list_parameter_given_one_value_is_a_one_element_list(tmp_path):
    """`-p slab_sweep=8` is [8] (02's slab sweep: one size), never the scalar 8; and on the preset's key, it wins."""
    from perflab.kit.params import parse_assignment
    from perflab.probe1d.params import SlabStatsParams
    from perflab.runner.catalog import plan

    assert parse_assignment("slab_sweep=8", SlabStatsParams) == ("slab_sweep", [8])
    assert parse_assignment("slab_sweep=[8]", SlabStatsParams) == ("slab_sweep", [8])
    assert parse_assignment("slab_sweep=8,32", SlabStatsParams) == ("slab_sweep", [8, 32])
    [(_, _, params)] = plan(["02_slab_stats"], preset="gpu", overrides=["slab_sweep=8"])
    assert params["slab_sweep"] == [8] and params["n_latents"] == 16384    # -p over the preset's [8, 32, 151]


@pytest.mark.slow
def test_refresh_strips_volatile_metadata_and_nbval_passes(nb_dir, tmp_path, monkeypatch):
    # nbval runs with notebooks/conftest.py beside the notebook and no $PERFLAB_OUT, in a checkout of its own
    # ($PERFLAB_ROOT): the notebook's results go to a temporary folder, never into the checkout's outputs/local.
    shutil.copy(Path(__file__).resolve().parents[2] / "notebooks" / "conftest.py", nb_dir / "conftest.py")
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "perflab"\n')
    path = nb_dir / "tiny.ipynb"
    assert main(["refresh", "tiny", "--notebooks", str(nb_dir), "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 0
    nb = nbformat.read(path, as_version=4)
    assert "papermill" not in nb.metadata
    assert all("papermill" not in c.metadata and "execution" not in c.metadata for c in nb.cells)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code_cells)
    assert "x [0.0, 1.0, 4.0]" in code_cells[-1].outputs[0]["text"]
    first = path.read_text()
    monkeypatch.setenv("PERFLAB_OUT", str(tmp_path / "env-out"))  # no --out: $PERFLAB_OUT says where results go
    assert main(["refresh", "tiny", "--notebooks", str(nb_dir), "--no-progress"]) == 0
    assert path.read_text() == first  # a second refresh changes nothing
    assert "sum of squares" in (tmp_path / "env-out" / "results.jsonl").read_text()
    env = {k: v for k, v in os.environ.items() if k != "PERFLAB_OUT"} | {"PERFLAB_ROOT": str(root)}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                          "--nbval-current-env", str(path)], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout[-2000:]
    assert not (root / "outputs").exists()


def test_refresh_keeps_the_committed_notebook_when_it_fails(nb_dir, tmp_path):
    before = (nb_dir / "failing.ipynb").read_text()
    assert main(["refresh", "failing", "--notebooks", str(nb_dir), "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 1
    assert (nb_dir / "failing.ipynb").read_text() == before


def test_refresh_stamps_every_notebook_with_the_tree_as_it_was_before_the_first_rewrite(nb_dir, tmp_path,
                                                                                        monkeypatch):
    """Each refreshed notebook is written back in place, so from the second on the tree was dirty by the refresh's own
    hand ("commit c1f95ba566 (dirty tree)" on 02-06 of a clean tree's refresh): every notebook now reads the state
    taken before the first, and the variable is gone after."""
    import perflab.kit.env
    from perflab.runner import catalog

    seen = []

    def fake_refresh(name, path, **kw):
        seen.append(os.environ.get("PERFLAB_COMMIT_AT_START"))
        return type("O", (), {"ok": True, "seconds": 0.0, "describe": lambda self: ""})()

    monkeypatch.delenv("PERFLAB_COMMIT_AT_START", raising=False)
    monkeypatch.setattr(perflab.kit.env, "git_commit", lambda root=None: {"commit": "d" * 40, "dirty": False})
    monkeypatch.setattr(catalog, "refresh", fake_refresh)
    assert main(["refresh", "tiny", "failing", "--notebooks", str(nb_dir), "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 0
    assert seen == ["d" * 40, "d" * 40]
    assert "PERFLAB_COMMIT_AT_START" not in os.environ


def test_nothing_to_run_is_a_failure_that_says_where_it_looked(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["run", "--notebooks", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 1
    assert f"no notebooks in {tmp_path / 'empty'}: nothing to run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_run_with_notebooks_from_a_parent_folder_writes_under_their_project(tmp_path, monkeypatch):
    import argparse

    from perflab.runner.cli import _out

    study = tmp_path / "mystudy"
    study.mkdir()
    (study / "pyproject.toml").write_text('[project]\nname = "mystudy"\n\n[tool.perflab]\n')
    monkeypatch.delenv("PERFLAB_OUT", raising=False)
    monkeypatch.chdir(tmp_path)  # the parent: not a project
    assert _out(argparse.Namespace(out=None, notebooks=Path("mystudy"))) == study / "outputs" / "local"
    assert _out(argparse.Namespace(out=tmp_path / "o", notebooks=Path("mystudy"))) == tmp_path / "o"


@pytest.mark.parametrize("command", ["run", "refresh", "list"])
def test_names_given_where_there_are_no_notebooks_are_refused_with_where_it_looked(tmp_path, monkeypatch, capsys,
                                                                                   command):
    outside = tmp_path / "elsewhere"  # not a study folder: `perflab run 03_eval` here used to say "nothing to run", 0
    outside.mkdir()
    monkeypatch.setenv("PERFLAB_ROOT", str(outside))
    monkeypatch.chdir(outside)
    out = [] if command == "list" else ["--out", str(tmp_path / "out")]
    assert main([command, "03_eval", *out]) == 2
    assert capsys.readouterr().err.startswith(f"perflab {command}: no notebook '03_eval': no notebooks in {outside} ")
    assert not (tmp_path / "out").exists()
    # no names, no notebooks: `run` fails (nothing ran), the others have nothing to do; each says where it looked
    assert main([command, *out]) == (1 if command == "run" else 0)
    assert f"in {outside}" in (capsys.readouterr().err if command == "run" else capsys.readouterr().out)


@pytest.fixture
def read_only(monkeypatch):
    """Makes a folder read-only: chmod, and for root (whom chmod does not stop) os.access answers as for a user."""
    made, real = [], os.access

    def access(path, mode, *args, **kw):
        if mode & os.W_OK and Path(path).resolve() in made:
            return False
        return real(path, mode, *args, **kw)

    def make(d: Path) -> None:
        d.chmod(0o555)
        made.append(d.resolve())

    if os.geteuid() == 0:
        monkeypatch.setattr(os, "access", access)
    yield make
    for d in made:
        d.chmod(0o755)


@pytest.mark.parametrize("command, why", [
    ("run", "the results go to {d}/outputs/local, inside it (give --out DIR, or set $PERFLAB_OUT)"),
    ("refresh", "the refreshed notebooks (written back in place) go there")])
def test_a_read_only_study_folder_is_refused_in_one_line_before_anything_runs(nb_dir, tmp_path, monkeypatch, capsys,
                                                                              read_only, command, why):
    (nb_dir / "pyproject.toml").write_text("[tool.perflab]\n")  # a study folder of one's own: results go into it
    monkeypatch.chdir(nb_dir)
    monkeypatch.delenv("PERFLAB_OUT")
    monkeypatch.delenv("PERFLAB_ROOT", raising=False)
    read_only(nb_dir)
    assert main([command, "tiny", "--no-progress"]) == 2  # was: a 26-line OSError traceback
    assert capsys.readouterr().err == f"perflab {command}: {nb_dir} is not writable: {why.format(d=nb_dir)}\n"
    assert not (nb_dir / "outputs").exists()


def test_schema_mismatches_names_what_differs(nb_dir):
    import dataclasses

    from perflab.runner.catalog import schema_mismatches

    @dataclasses.dataclass
    class Good:
        n: int = 3
        scale: float = 1.0
        label: str = "x"
        out_dir: str = ""

    @dataclasses.dataclass
    class Bad:
        n: float = 4.0
        scale: float = 1.0
        label: str = "x"
        out_dir: str = ""

    assert schema_mismatches(nb_dir / "tiny.ipynb", Good) == []
    assert schema_mismatches(nb_dir / "tiny.ipynb", Bad) == ["n: cell says int, Bad says float",
                                                              "n: cell default 3, Bad default 4.0"]


@pytest.mark.slow
def test_a_direct_papermill_run_never_replaces_what_a_report_links(nb_dir, tmp_path, monkeypatch):
    import papermill

    out = tmp_path / "out"
    assert main(["run", "tiny", "--notebooks", str(nb_dir), "--out", str(out), "--no-progress"]) == 0
    report = (out / "REPORT.md").read_text()
    [link] = [line.split("(", 1)[1].rstrip(")") for line in report.splitlines() if line.startswith("![squares]")]
    plot = out / link
    before = plot.read_text()
    assert link.startswith("tiny/") and "n=3" in before
    # docs/command.md's direct command (papermill), whose results go to the same folder ($PERFLAB_OUT or outputs/local)
    monkeypatch.setenv("PERFLAB_OUT", str(out))
    papermill.execute_notebook(str(nb_dir / "tiny.ipynb"), str(tmp_path / "direct.ipynb"), parameters={"n": 5},
                               progress_bar=False, cwd=str(nb_dir))
    assert plot.read_text() == before                 # the plot the first report links is untouched
    again = build(out)
    assert f"({link})" not in again and "n=5" in again  # the new report shows the latest execution only...
    assert "| tiny | no status |" in again            # ...and does not claim the runner's "ok" for it


def test_help_answers_without_loading_torch_or_nbformat():
    # `perflab --help` took 6 s: the CLI imported torch (through the report) and nbformat (jsonschema) up front
    code = ("import sys, contextlib, io\nimport perflab.runner.cli as c\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    c.main(['--help'])\n"
            "print(sorted(m for m in ('torch', 'nbformat', 'papermill', 'pandas') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr
