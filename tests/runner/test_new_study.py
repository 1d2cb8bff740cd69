"""`perflab new`: a study of one's own, and perflab as a library.

- Refused before anything is written, with the problem named: a name that is not an identifier or would shadow a
  module, a folder that exists, a place that is missing or cannot be written, a kernel this environment lacks.
- The study it writes (from src/perflab/template/) has the house's rooms by file name, passes ruff, its own tests
  and nbval, and `perflab list/run/sweep/compare/report` treat it like the six studies, its claims and checks in the
  report. Its notebook calls the study by role (no code cell but the parameters names the worked example), and a
  claim mistake fails its tests and stops its notebook at the first cell, before anything is timed.
- The whole path from a wheel (slow): built from this checkout, installed in a fresh venv outside it, then the kit
  imported and `perflab new`, the study's tests, nbval, ruff, `perflab run` and `report` run there with no file of the
  repository in reach; each step timed and printed.
"""
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from pathlib import Path

import pytest

from perflab.runner import new
from perflab.runner.cli import main
from perflab.runner.new import PLACEHOLDER, template_files

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROOMS = ("params", "data", "reference", "baseline", "optimized", "checks", "claims", "study")
FAST = ["-p", "min_run_time=0.02", "-p", "max_run_time=0.1", "-p", "iters=2", "-p", "n=512"]


def _listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


@pytest.mark.parametrize("name, message", [
    ("my-study", "'my-study' is not a Python identifier, and the study's package is imported by its name (letters, "
                 "digits and _, not starting with a digit, not a keyword): try 'my_study'"),
    ("2fast", "'2fast' is not a Python identifier"),
    ("class", "'class' is not a Python identifier"),
    ("json", "'json' would shadow Python's own module json"),
    ("torch", "'torch' would shadow the module torch this environment already has"),
    ("perflab", "'perflab' would shadow the module perflab this environment already has"),
    ("tests", "'tests' is the name of a folder inside every study"),
])
def test_a_name_the_package_cannot_have_is_refused(tmp_path, capsys, name, message):
    assert main(["new", name, "--into", str(tmp_path), "--no-execute"]) == 2
    assert message in capsys.readouterr().err
    assert _listing(tmp_path) == []


def test_an_existing_folder_is_refused_and_left_as_it_was(tmp_path, capsys):
    (tmp_path / "spmv").mkdir()
    (tmp_path / "spmv" / "mine.py").write_text("x = 1\n")
    assert main(["new", "spmv", "--into", str(tmp_path), "--no-execute"]) == 2
    assert f"{tmp_path / 'spmv'} already exists: perflab new writes a new folder" in capsys.readouterr().err
    assert _listing(tmp_path) == ["spmv", "spmv/mine.py"] and (tmp_path / "spmv" / "mine.py").read_text() == "x = 1\n"


def test_a_place_that_is_not_a_folder_is_refused(tmp_path, capsys):
    assert main(["new", "spmv", "--into", str(tmp_path / "nope"), "--no-execute"]) == 2
    assert f"no folder {tmp_path / 'nope'}" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["new", "spmv", "--into", str(tmp_path / "file"), "--no-execute"]) == 2
    assert f"{tmp_path / 'file'} is not a folder" in capsys.readouterr().err
    assert _listing(tmp_path) == ["file"]


def test_a_folder_that_cannot_be_written_is_refused(tmp_path, capsys):
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        locked.chmod(0o555)
        reason = "permission denied"
    else:  # root writes through permission bits; sysfs takes no folder, not even root's
        locked, reason = Path("/sys"), ""
        try:
            os.rmdir(tempfile.mkdtemp(dir=locked))
            pytest.skip("this host's /sys takes new folders: no place here that root cannot write")
        except OSError:
            pass
    before = sorted(os.listdir(locked))
    try:
        assert main(["new", "spmv", "--into", str(locked), "--no-execute"]) == 2
    finally:
        if locked.is_relative_to(tmp_path):
            locked.chmod(0o755)  # so that pytest can remove it
    assert f"perflab new: cannot write in {locked}: {reason}" in capsys.readouterr().err
    assert sorted(os.listdir(locked)) == before


def test_a_kernel_this_environment_lacks_is_refused_with_the_kernels_it_has(tmp_path, capsys):
    from jupyter_client.kernelspec import KernelSpecManager

    have = ", ".join(sorted(KernelSpecManager().find_kernel_specs()))
    with pytest.raises(new.NewStudyError) as e:
        new.write("spmv", tmp_path, kernel_name="nosuch")
    assert str(e.value) == (f"no Jupyter kernel 'nosuch' here (kernels: {have}): nothing written; leave --kernel out "
                            "for the notebook's own (this Python's)")
    assert _listing(tmp_path) == []
    # the command: one line naming the kernel and the kernels there are, no temporary notebook to look for
    assert main(["new", "spmv", "--into", str(tmp_path), "--kernel", "nosuch"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"perflab new: no Jupyter kernel 'nosuch' here (kernels: {have}): ") and "/tmp" not in \
        line.replace(str(tmp_path), "")


def test_the_template_is_a_study_named_by_its_placeholder():
    files = {str(p) for p in template_files()}
    assert {f"{PLACEHOLDER}/{room}.py" for room in ROOMS} <= files
    assert {f"{PLACEHOLDER}.ipynb", f"params/gpu/{PLACEHOLDER}.yaml", f"tests/test_{PLACEHOLDER}.py", "README.md",
            "pyproject.toml", "conftest.py"} <= files
    assert not any("__pycache__" in f for f in files)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A study written by `perflab new spmv` (files only: `perflab run` executes it)."""
    into = tmp_path_factory.mktemp("project")
    assert main(["new", "spmv", "--into", str(into), "--no-execute"]) == 0
    return into / "spmv"


def test_the_study_has_the_house_rooms_by_file_name_and_no_placeholder_left(study):
    files = set(_listing(study))
    assert {f"spmv/{room}.py" for room in ROOMS} <= files
    assert {"spmv.ipynb", "params/gpu/spmv.yaml", "tests/test_spmv.py", "README.md", ".gitignore"} <= files
    written = [str(f).replace(PLACEHOLDER, "spmv") for f in template_files()] + [".gitignore"]
    assert set(written) <= files
    for f in written:   # what perflab new wrote (not what later tests leave there: bytecode, ruff's cache)
        assert PLACEHOLDER not in (study / f).read_text(), f
    nb = json.loads((study / "spmv.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    # the house's order: the verdict card (its two imports only: the card is the page's first output, under the
    # question), parameters, the study's imports and setup (the card attached, the findings), the baseline's
    # diagnosis, correctness (checked), counts (checked), benchmark, plot (the card's figure), claims (the card)
    assert "from spmv.claims import CLAIMS" in code[0] and "card = VerdictCard(CLAIMS)" in code[0]
    assert [ln.split(" import ")[0] for ln in code[0].splitlines() if ln.startswith(("import ", "from "))] == \
        ["from perflab.kit.card", "from spmv.claims"]
    setup_code = code[2].split("\n\n")
    assert "parameters" in nb["cells"][2]["metadata"]["tags"] and "from perflab.kit.notebook import setup" in code[2]
    assert any(part.startswith('run = setup("spmv", globals()') for part in setup_code)
    assert "card=card" in code[2] and "found = study.Findings(" in code[2]
    assert "diagnose(setup=lambda: baseline_step(run))" in code[3]   # it starts with its baseline's diagnosis
    assert [i for i, c in enumerate(code) if c.startswith("# NBVAL_CHECK_OUTPUT")] == [4, 5]
    assert "report_checks(run, checks.correctness(run, found.data))" in code[4]
    assert "found.times = study.benchmark(run)" in code[6]
    assert "card.figure(" in code[7]
    assert all(f in code[8] for f in ("card.judge(study.evidence(run, found), diagnosis=diagnosis)", "card.details()"))
    assert nb["cells"][-1]["cell_type"] == "markdown"
    assert os.stat(study).st_mode & 0o777 == 0o777 & ~_umask()  # like any folder made here, not mkdtemp's 0o700


# what the worked example is made of: a notebook that calls the study by role names none of it outside its
# parameters cell (and its prose), so a study of one's own changes the package, not the notebook's code
EXAMPLE = {"kmeans", "blobs", "points", "start", "centroids", "assign", "k", "n", "dim", "iters", "sweep_k", "ks",
           "syncs", "syncs_per_iteration", "time_calls", "oracle_checks", "empty_cluster_check", "same_result_check",
           "assess", "headline", "IMPLS", "baseline", "optimized", "reference", "SYNCS", "SPEED"}


def test_the_notebook_calls_the_study_by_role(study):
    nb = json.loads((study / "spmv.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or "parameters" in cell["metadata"].get("tags", []):
            continue
        src = "".join(cell["source"])
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
        names = {t.string for t in tokens if t.type == tokenize.NAME} & EXAMPLE
        words = {w for t in tokens if t.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING))
                 for w in re.findall(r"k-means|cluster|centroid|sync|k=", t.string)}
        assert not names and not words, f"{src}\nnames the worked example: {sorted(names | words)}"


@pytest.mark.slow
@pytest.mark.parametrize("module, mistake, message", [
    ("study", ('CLAIMS["speed"]', 'CLAIMS["sped"]'), "no claim 'sped'; the claims: syncs, speed"),
    ("claims", ('headline="speed"', 'headline="sped"'), "headline 'sped' is not among the claims: syncs, speed"),
    ("claims", ("at_least=2,", "at_lest=2,"), "claim 'speed': unknown field 'at_lest'; a Claim takes key, text, "),
])
def test_a_claim_mistake_fails_the_study_tests_with_the_claim_named(study, tmp_path, module, mistake, message):
    """The three typos a user made (a claim key, the headline, a field): each used to pass pytest and stop the
    notebook at its last cell; now the study's tests fail to import, naming the claim and what is allowed."""
    d = tmp_path / "spmv"
    shutil.copytree(study, d)
    f = d / "spmv" / f"{module}.py"
    assert f.read_text().count(mistake[0]) == 1
    f.write_text(f.read_text().replace(*mistake))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co"], cwd=d,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "ClaimError: " + message in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.slow
def test_a_claim_mistake_stops_the_notebook_at_its_first_cell_and_the_failed_run_is_kept(study, tmp_path):
    """Before anything is timed; `perflab new`'s first execution keeps the executed notebook where it points."""
    d = tmp_path / "spmv"
    shutil.copytree(study, d)
    claims = d / "spmv" / "claims.py"
    claims.write_text(claims.read_text().replace('headline="speed"', 'headline="sped"'))
    o = new.execute_once(d, "spmv")
    assert not o.ok and o.cell == 2 and "ClaimError: headline 'sped' is not among the claims" in o.error
    assert o.output == d / new.FAILED_RUN / "spmv.ipynb" and o.output.is_file()
    rows = [json.loads(line) for line in (d / new.FAILED_RUN / "results.jsonl").read_text().splitlines()]
    assert not [r for r in rows if r["kind"] in ("measurement", "check", "claim")]  # nothing checked, nothing timed


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_the_studys_early_stop_is_tested_on_data_that_needs_many_iterations(study, tmp_path, monkeypatch):
    """Issue 48: on its own blobs the worked example settles in one iteration, so a loop whose convergence test always
    read 0 (stopping after one) passed every test. The study's own test now runs on `strung` data (tens of
    iterations): run here, in this process, on the generated study, so that a template that stops too early fails
    perflab's fast tier, not only the wheel's leg."""
    d = tmp_path / "spmv"
    shutil.copytree(study, d)                        # the shared study stays as written (no bytecode in it)
    monkeypatch.syspath_prepend(str(d))              # the conftest forgets the package after the test
    spec = importlib.util.spec_from_file_location("generated_test_spmv", d / "tests" / "test_spmv.py")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    assert list(tests.IMPLS) == ["baseline", "optimized"]
    for name in tests.IMPLS:
        tests.test_stops_where_the_oracle_settles_on_data_that_needs_many_iterations(name, 400, 2, 6, 1)


@pytest.mark.slow
def test_the_studys_own_tests_pass(study, tmp_path):
    """Its whole test file, as a user runs it (its conftest, its folder first on the path): in make test, not only in
    make test-wheel, so that a template mistake any of them catches fails perflab's slow tier."""
    d = tmp_path / "spmv"
    shutil.copytree(study, d)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=d,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "failed" not in r.stdout


def test_the_study_passes_ruff_with_its_own_settings(study):
    r = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=study, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_perflab_finds_the_study_from_inside_its_folder(study, monkeypatch, capsys):
    from perflab.runner import catalog as nbs

    monkeypatch.chdir(study / "tests")  # a folder below it: [tool.perflab] in its pyproject.toml marks the root
    assert main(["list"]) == 0
    assert capsys.readouterr().out.startswith("spmv  (spmv.params.Params)\n    device: str = 'auto'")
    [(name, path, params)] = nbs.plan([], preset="gpu")  # params/gpu/spmv.yaml, beside the notebook
    assert (name, path, params["device"]) == ("spmv", study / "spmv.ipynb", "cuda")
    assert main(["run", "-p", "k=0"]) == 2
    assert "spmv: bad Params: need 1 <= k <= n, got k=0, n=4096" in capsys.readouterr().err


def test_a_renamed_notebook_is_refused_with_the_fix(study, tmp_path, capsys):
    d = tmp_path / "nb"
    shutil.copytree(study, d)
    (d / "spmv.ipynb").rename(d / "other.ipynb")
    assert main(["run", "--notebooks", str(d), "--out", str(tmp_path / "out")]) == 2
    assert "other.ipynb calls setup('spmv', globals(), Params, card=card): the study's name must be the notebook's, 'other'" \
        in capsys.readouterr().err


@pytest.mark.slow
def test_run_sweep_compare_and_report_treat_it_like_the_six(study, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--notebooks", str(study), "--out", str(out), "--no-progress", *FAST, "-p", "k=8"]) == 0
    report = (out / "REPORT.md").read_text()
    assert "| spmv | ok | The optimized k-means is at least 2x faster at k=32 clusters:" in report
    assert "4/4 pass" in report
    card, syncs = [ln for ln in report.splitlines() if ln.startswith("| The optimized k-means makes at least 10x")]
    assert "| >= 10x fewer | **9x** against >= 10x · exact | **does not hold** |" in card  # the card: k=8, 9x
    assert "| >= 10x fewer | 9 -> 1 host syncs per iteration at k=8: 9x fewer |" in syncs  # k=8: 9x, short of 10x
    assert "| **does not hold** |" in syncs and "![benchmark](spmv/" in report
    assert "Not tested here (1): speed (measured at k=8)." in report and "![the main figure](spmv/" in report
    speed = next(ln for ln in report.splitlines() if ln.startswith("| The optimized k-means is at least 2x"))
    assert "not tested here" in speed and "(measured at k=8)" in speed  # the claim is about k=32: no verdict at k=8

    sweep = tmp_path / "sweep"
    assert main(["sweep", "spmv", "--notebooks", str(study), "--grid", "k=4,16", "--out", str(sweep),
                 "--no-progress", *FAST]) == 0
    report = (sweep / "REPORT.md").read_text()
    assert "Grid: `k` in [4, 16]" in report and "5 -> 1 host syncs per iteration at k=4" in report
    assert "17 -> 1 host syncs per iteration at k=16" in report and "![sweep over k](sweep_k.png)" in report

    points = sorted((sweep / "points").iterdir())
    capsys.readouterr()
    assert main(["compare", str(points[0]), str(points[1])]) == 0
    assert "spmv" in capsys.readouterr().out


@pytest.mark.gpu
def test_cuda_the_new_study_on_the_gpu(study, tmp_path):
    """On a GPU host (`perflab gpu-check`): the study's own tests with their CUDA cases, then its notebook on its GPU
    preset at a smaller size, to a report with its claims and checks."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cuda or preset"], cwd=study,
                       capture_output=True, text=True)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    out = tmp_path / "gpu"
    assert main(["run", "--notebooks", str(study), "--params", "gpu", "-p", "n=200000", "-p", "sweep_k=[16,256]",
                 "--out", str(out), "--no-progress"]) == 0
    report = (out / "REPORT.md").read_text()
    assert "4/4 pass" in report and "33 -> 1 host syncs per iteration at k=32: 33x fewer" in report


def _timed(steps: dict, name: str, cmd: list, check: bool = True, **kw) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    steps[name] = time.perf_counter() - t0
    assert r.returncode == 0 or not check, f"{name}: {' '.join(map(str, cmd))}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


KIT = """
import dataclasses, pathlib, sys, tempfile
import torch
import perflab
from perflab.kit.bench import measure, summary
from perflab.kit.compiles import count_compiles
from perflab.kit.launches import count_launches
from perflab.kit.params import RunParams
from perflab.kit.results import ResultsLog
from perflab.kit.notebook import setup
from perflab.kit.syncs import count_host_syncs
from perflab.kit.verdicts import Measured, judge

assert pathlib.Path(perflab.__file__).is_relative_to(sys.prefix), perflab.__file__  # the wheel, not the checkout
x = torch.ones(64)
with count_host_syncs("cpu") as s:
    x.sum().item()
assert s.total == 1, s.by_op
with count_launches("cpu") as n:
    (x * 2).sum()
assert n.total >= 2, n.by_op
with count_compiles() as c:
    torch.compile(lambda t: t * 2 + 1, backend="eager")(x)
assert c.graphs == 1, c
assert summary(measure(lambda: x.sum(), label="sum", min_run_time=0.01, max_run_time=0.1))["median_s"] > 0
assert judge(Measured(5.0, 4.5, 5.5), at_least=4.0) == "holds"

@dataclasses.dataclass
class Mine(RunParams):
    size: int = 3

out = tempfile.mkdtemp()
run = setup("mine", {"size": 5, "out_dir": out}, Mine)
run.log.value("size", run.cfg.size)
assert ResultsLog(pathlib.Path(out) / "results.jsonl").rows(kind="value")[0]["value"] == 5
print("kit ok")
"""


# a step in the user's own file, diagnosed from the wheel: the command and its JSON, then a notebook's display
USER_STEP = """import torch

x = torch.randn(128, 16)


def step():
    y = x
    for _ in range(40):
        y = torch.relu(y - 0.01)
    return y.sum().item()
"""
DIAG_CELL = """import torch
torch.set_num_threads(1)
from perflab.kit import diagnose
import train
d = diagnose(train.step, calls=3, warmup=1, device="cpu")
d"""
DIAG_NOTEBOOK = """
import json, nbclient, nbformat, sys
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(sys.argv[1])])
nbclient.NotebookClient(nb, kernel_name="python3", timeout=300).execute()
[out] = [o for o in nb.cells[0].outputs if o.get("output_type") == "execute_result"]
html = out["data"]["text/html"]
assert "<table>" in html and "Python loop of small ops" in html and "train.py:8 (step)" in html, html[:2000]
assert "Python loop of small ops" in out["data"]["text/plain"]
print("notebook display ok")
"""


def _diagnose_from_the_wheel(work: Path, env: dict, steps: dict, venv: Path) -> None:
    """`perflab diagnose` on train.py's step (the table, the JSON), then `diagnose(step)` in a notebook (its HTML)."""
    (work / "train.py").write_text(USER_STEP)
    r = _timed(steps, "diagnose", ["perflab", "diagnose", "train:step", "--calls", "3", "--warmup", "1", "--threads",
                                   "1", "--json", "out/d.json"], cwd=work, env=env)
    assert "train:step on cpu" in r.stdout and "train.py:8 (step)" in r.stdout, r.stdout
    d = json.loads((work / "out" / "d.json").read_text())
    assert d["schema"] == "perflab.diagnosis/1"
    assert {(f["kind"], f["where"]["line"]) for f in d["findings"]} >= {("Python loop of small ops", 8),
                                                                        ("host sync", 10)}
    r = _timed(steps, "diagnose bad input", ["perflab", "diagnose", "train:nope"], cwd=work, env=env, check=False)
    assert r.returncode == 2 and "train has no attribute 'nope'" in r.stderr, r.stderr
    r = _timed(steps, "diagnose in a notebook", [str(venv / "bin" / "python"), "-c", DIAG_NOTEBOOK, DIAG_CELL],
               cwd=work, env=env)
    assert "notebook display ok" in r.stdout


# the last commit whose template imported the kit by perflab 0.1's names (perflab.bench, perflab.run, ...)
BEFORE_THE_MOVE = "d75c414"


def _old_study(name: str, into: Path, monkeypatch) -> Path:
    """The study `perflab new` wrote before the kit moved to perflab.kit: the template read from git at
    BEFORE_THE_MOVE, written by today's `perflab new` (which only copies it, the placeholder replaced)."""
    from perflab.runner import new

    old = into / "old-template"
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE_THE_MOVE, "src/perflab/template"],
                         capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    (into / "src" / "perflab" / "template").rename(old)
    monkeypatch.setattr(new, "TEMPLATE", old)
    return new.write(name, into)


@pytest.mark.wheel
def test_the_wheel_in_a_fresh_venv_runs_a_new_study_to_a_report(tmp_path, capsys, monkeypatch):
    """The CI path: wheel -> fresh venv (no site packages) -> `perflab new` -> the study's tests, nbval and ruff ->
    `perflab run` -> `perflab report` with the claims' verdicts. torch is pinned to this environment's build first
    (a bare `torch` requirement could pull a multi-GB CUDA build); pip skips byte-compiling (--no-compile)."""
    import torch

    steps: dict[str, float] = {}
    venv, work = tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERFLAB_", "PYTHON", "VIRTUAL_ENV", "JUPYTER"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", JUPYTER_DATA_DIR=str(tmp_path / "jupyter"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    t0 = time.perf_counter()
    src = tmp_path / "perflab-src"  # a copy: an in-tree build would reuse build/ (files since removed included)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / f, src / f)
    _timed(steps, "wheel", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(src)], env=env)
    [wheel] = (tmp_path / "dist").glob("perflab-*.whl")
    _timed(steps, "venv", [getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], env=env)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    _timed(steps, "torch", pip + [f"torch=={torch.__version__.split('+')[0]}"], env=env)  # no local label: PyPI's
    _timed(steps, "install", pip + [f"{wheel}[study]"], env=env)
    r = _timed(steps, "kit", [str(venv / "bin" / "python"), "-c", KIT], cwd=work, env=env)
    assert "kit ok" in r.stdout
    _diagnose_from_the_wheel(work, env, steps, venv)

    r = _timed(steps, "perflab new", ["perflab", "new", "spmv"], cwd=work, env=env)
    assert "ok in" in r.stdout
    study = work / "spmv"
    r = _timed(steps, "study tests", ["pytest", "-q", "-p", "no:cacheprovider"], cwd=study, env=env)
    assert " passed" in r.stdout and "failed" not in r.stdout
    r = _timed(steps, "nbval", ["pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
                                "spmv.ipynb"], cwd=study, env=env)
    assert " passed" in r.stdout and "failed" not in r.stdout
    _timed(steps, "ruff", ["ruff", "check", "--no-cache", "."], cwd=study, env=env)
    _timed(steps, "perflab run", ["perflab", "run", "--no-progress", "--no-report"], cwd=study, env=env)
    r = _timed(steps, "perflab report", ["perflab", "report", "outputs/local"], cwd=study, env=env)
    report = (study / "outputs" / "local" / "REPORT.md").read_text()
    total = time.perf_counter() - t0

    assert "| spmv | ok | The optimized k-means is at least 2x faster at k=32 clusters: " in report
    assert "4/4 pass" in report
    assert "### Claims, measured" in report
    assert "| The optimized k-means makes at least 10x fewer host syncs per iteration | >= 10x fewer | 33 -> 1 " \
           "host syncs per iteration at k=32: 33x fewer | " in report and "| **holds** |" in report
    speed = next(line for line in report.splitlines() if line.startswith("| The optimized k-means is at least 2x"))
    assert any(f"**{v}**" in speed for v in ("holds", "within noise", "does not hold", "partly holds")), speed  # shown

    # a study written before the kit moved (perflab 0.1's names) runs on this wheel: its tests, then its notebook
    old = _old_study("oldkm", work, monkeypatch)
    assert "from perflab.run import setup" in (old / "oldkm.ipynb").read_text()   # the old names, really
    r = _timed(steps, "old study tests", ["pytest", "-q", "-p", "no:cacheprovider"], cwd=old, env=env)
    assert " passed" in r.stdout and "failed" not in r.stdout
    _timed(steps, "old study run", ["perflab", "run", "--no-progress", "-p", "min_run_time=0.02", "-p",
                                    "max_run_time=0.1"], cwd=old, env=env)
    assert "4/4 pass" in (old / "outputs" / "local" / "REPORT.md").read_text()
    with capsys.disabled():
        print(f"\n[fresh venv -> report: {total:.0f} s] " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()))
