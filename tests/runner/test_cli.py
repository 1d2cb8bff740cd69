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


@pytest.mark.slow
def test_preset_values_are_applied(nb_dir, tmp_path):
    presets = tmp_path / "params"
    (presets / "big").mkdir(parents=True)
    (presets / "big" / "tiny.yaml").write_text("n: 5\nscale: 2\n")
    out = tmp_path / "out"
    assert main(["run", "tiny", "--params", "big", "--params-dir", str(presets), "--notebooks", str(nb_dir),
                 "--out", str(out), "--no-progress", "--no-report"]) == 0
    row = next(json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if '"value"' in x)
    assert row["value"] == 2.0 * (0 + 1 + 4 + 9 + 16)


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
