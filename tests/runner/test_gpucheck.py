"""`perflab gpu-check` (issue 21 part 5): what a CPU can check of the command for a lent GPU."""
import os
import time
from pathlib import Path

import nbformat
import pytest
import torch

import perflab.kit.env
from perflab.kit.results import read_rows
from perflab.runner import gpu_tests, gpucheck
from perflab.runner import gpucheck as compile_cache  # its compile_cache() and CACHE_DIR
from perflab.runner.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "notebooks"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a host without CUDA")
def test_without_a_gpu_it_refuses_before_anything_runs(capsys, tmp_path):
    assert main(["gpu-check", "--out", str(tmp_path / "x")]) == 2
    assert "needs a GPU host" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_the_folder_is_named_for_the_gpu_and_the_commit():
    out = gpucheck.default_out("h100", {"commit": "0123456789abcdef", "dirty": True})
    assert out.parts[-3:] == ("outputs", "h100", "0123456-dirty")
    assert gpucheck.default_out("h200", {"commit": None, "dirty": None}).name == "unknown-commit"


def test_the_report_leads_with_the_gpu_tests(tmp_path):
    text = "tests/gpu/test_cuda_paths.py ..F\n=========== 1 failed, 20 passed, 480 deselected in 31.2s ===========\n"
    assert gpu_tests.summary_line(text) == "1 failed, 20 passed, 480 deselected in 31.2s"
    assert gpu_tests.summary_line("collecting ...") == "no summary line: see gpu-tests.txt"
    report = tmp_path / "REPORT.md"
    report.write_text("# perflab report\n")
    gpu_tests.lead_report(report, 1, "1 failed, 20 passed in 31.2s")
    assert report.read_text().startswith(gpu_tests.TESTS_HEADER + "\n\nFAILED (exit 1): 1 failed, 20 passed in 31.2s")
    assert report.read_text().endswith("# perflab report\n")


def test_a_later_run_without_tests_keeps_the_earlier_outcome(tmp_path):
    assert gpu_tests.earlier_tests(tmp_path) == (0, "not run (--no-tests)")
    (tmp_path / "gpu-tests.txt").write_text("== 2 failed, 30 passed in 40.0s ==\n")
    assert gpu_tests.earlier_tests(tmp_path) == (1, "2 failed, 30 passed in 40.0s (an earlier run, kept in this folder)")


def test_a_test_log_cut_off_before_its_summary_is_no_pass(tmp_path):
    (tmp_path / "gpu-tests.txt").write_text("perflab gpu-check: pytest -m gpu at commit abc\ntests/gpu/test_cuda_paths.py ..")
    assert gpu_tests.earlier_tests(tmp_path)[0] == 1
    assert gpu_tests.earlier_pass(tmp_path, {"commit": "abc", "dirty": False}) is None


def test_the_gpu_tests_are_skipped_only_after_a_pass_at_this_commit(tmp_path):
    clean, log = {"commit": "abc", "dirty": False}, tmp_path / "gpu-tests.txt"
    assert gpu_tests.earlier_pass(tmp_path, clean) is None                          # never ran here
    log.write_text("perflab gpu-check: pytest -m gpu at commit abc\n== 20 passed, 480 deselected in 31.2s ==\n")
    assert gpu_tests.earlier_pass(tmp_path, clean) == "20 passed, 480 deselected in 31.2s"
    assert gpu_tests.earlier_pass(tmp_path, {"commit": "def", "dirty": False}) is None   # another commit
    assert gpu_tests.earlier_pass(tmp_path, {"commit": "abc", "dirty": True}) is None    # a dirty tree: never
    log.write_text("perflab gpu-check: pytest -m gpu at commit abc\n== 1 failed, 19 passed in 31.2s ==\n")
    assert gpu_tests.earlier_pass(tmp_path, clean) is None


def _execution(out, study, params, status, commit="abc", dirty=False):
    from perflab.kit.results import ResultsLog

    log = ResultsLog(out / "results.jsonl", study=study, params=params, stamp={"commit": commit, "dirty": dirty})
    log.append("run", status="started")
    if status != "started":  # a runner killed mid-notebook leaves only its "started" row
        log.append("run", status=status)
    return log.run_id


def test_a_notebook_is_done_when_its_latest_execution_here_ended_ok(tmp_path):
    jobs = [(name, None, {"batch": 64, "sizes": [1, 2]}) for name in ("a", "b", "c", "d", "e")]
    ok_a = _execution(tmp_path, "a", {"batch": 64, "sizes": [1, 2]}, "ok")
    _execution(tmp_path, "b", {"batch": 64, "sizes": [1, 2]}, "ok")
    _execution(tmp_path, "b", {"batch": 64, "sizes": [1, 2]}, "failed")         # the latest counts
    _execution(tmp_path, "c", {"batch": 64, "sizes": [1, 2]}, "started")         # cut off with its window
    _execution(tmp_path, "d", {"batch": 512, "sizes": [1, 2]}, "ok")             # other parameters
    _execution(tmp_path, "e", {"batch": 64, "sizes": [1, 2]}, "ok", commit="fff")
    assert gpucheck.finished(tmp_path, jobs, {"commit": "abc", "dirty": False}) == {"a": ok_a}
    assert gpucheck.finished(tmp_path, jobs, {"commit": "abc", "dirty": True}) == {}
    assert gpucheck.finished(tmp_path / "empty", jobs, {"commit": "abc", "dirty": False}) == {}


def test_the_compile_caches_go_to_the_run_folder_unless_told_otherwise(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    with compile_cache.compile_cache(tmp_path) as folder:
        assert folder == tmp_path / compile_cache.CACHE_DIR and os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    cache_dir()  # torch writes its default into the variable: not a place anyone chose
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == default_cache_dir()
    with compile_cache.compile_cache(tmp_path) as folder:
        assert folder == tmp_path / compile_cache.CACHE_DIR
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == default_cache_dir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    with compile_cache.compile_cache(tmp_path) as folder:
        assert folder == tmp_path / "mine"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


@pytest.mark.slow
def test_a_second_window_skips_what_is_done_and_reruns_the_rest(nb_dir, tmp_path, monkeypatch, capsys):
    # the fixture notebooks stand for the six: "tiny" ends ok, "failing" fails at its cell 3 every time
    out, ran = tmp_path / "out", []
    monkeypatch.setattr(gpucheck, "gpu_kind", lambda: "testgpu")
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # as torch leaves it once it asked (plan does)
    monkeypatch.setattr(perflab.kit.env, "git_commit", lambda root=None: {"commit": "a" * 40, "dirty": False})

    def fake_tests(out, commit, **kw):
        ran.append(os.environ.get("TORCHINDUCTOR_CACHE_DIR"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu-tests.txt").write_text(f"perflab gpu-check: pytest -m gpu at commit {'a' * 40}\n== 3 passed in 1.0s ==\n")
        return 0, "3 passed in 1.0s"

    monkeypatch.setattr(gpu_tests, "run_gpu_tests", fake_tests)
    argv = ["gpu-check", "--notebooks", str(nb_dir), "--out", str(out), "--no-progress"]
    executions = lambda: [r["study"] for r in read_rows(out / "results.jsonl") if r.get("status") == "started"]  # noqa: E731
    assert main(argv) == 1 and executions() == ["failing", "tiny"] and ran == [str(out / compile_cache.CACHE_DIR)]
    capsys.readouterr()
    assert main(argv) == 1 and executions() == ["failing", "tiny", "failing"] and len(ran) == 1
    said = capsys.readouterr().out
    assert "skipped, already ok here at this commit" in said and "tiny (run " in said and "failing (run" not in said
    assert "3 passed in 1.0s (an earlier run at this commit" in said
    assert (out / "REPORT.md").read_text().startswith(gpu_tests.TESTS_HEADER + "\n\npassed: 3 passed in 1.0s")
    assert main(argv + ["tiny", "--redo"]) == 0 and executions()[-1] == "tiny" and len(ran) == 2


def test_the_notebook_kernels_keep_their_compile_caches_in_the_run_folder(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    out = tmp_path / "out"
    monkeypatch.setattr(gpucheck, "gpu_kind", lambda: "testgpu")
    monkeypatch.setattr(perflab.kit.env, "git_commit", lambda root=None: {"commit": "b" * 40, "dirty": False})
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    assert main(["gpu-check", "--notebooks", str(FIXTURES.parent / "gpucheck"), "--out", str(out), "--no-progress",
                 "--no-tests"]) == 0
    printed = "".join(o.get("text", "") for c in nbformat.read(out / "cache_dir.ipynb", as_version=4).cells
                      for o in c.get("outputs", []))
    assert f"cache: {out / compile_cache.CACHE_DIR}\n" in printed, printed
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == default_cache_dir()


# ---- a hard stop for everything (issue 38 item 2): a test's limit, a cell's limit, the call's deadline -----------

def test_gpu_kind_gives_up_on_a_cuda_start_that_hangs(monkeypatch):
    import subprocess

    # a child that does not answer within its limit (a CUDA start that hangs): killed, NoGPU with the reason, at once
    run = subprocess.run
    monkeypatch.setattr(gpucheck.subprocess, "run", lambda cmd, **kw: run(["sleep", "30"], **kw))
    t0 = time.monotonic()
    with pytest.raises(gpucheck.NoGPU, match="CUDA did not start in 0.5 s"):
        gpucheck.gpu_kind(timeout=0.5)
    assert time.monotonic() - t0 < 10


def test_the_limits_are_sized_from_the_estimate_and_capped_by_the_deadline(monkeypatch):
    from perflab.runner import deadline as window
    from perflab.runner import estimate

    monkeypatch.setattr(estimate, "notebook_estimate", lambda preset, name: {"a": 40.0, "b": 70.0}.get(name))
    assert estimate.limit_per_cell("gpu-smoke", ["a", "b"]) == estimate.CELL_FACTOR * 70
    assert estimate.limit_per_cell("gpu-smoke", ["tiny"]) is None              # nothing estimated: no limit of its own
    assert estimate.limit_per_test("quick") >= estimate.MIN_TEST_S
    assert estimate.limit_per_test("compiled") == estimate.COMPILED_S
    assert window.Deadline(None).cap(120) == 120 and window.Deadline(None).cap(None) is None
    assert window.Deadline(30).cap(10) == 10  # a cell's own limit, before the deadline
    # limited by the deadline alone: just after it, so the deadline's alarm stops the cell ("cut", not "failed")
    assert 30 < window.Deadline(30).cap(120) <= 30 + window.ALARM_FIRST_S and window.Deadline(30).cap(None) > 30


def test_a_notebook_whose_estimate_does_not_fit_is_not_started_unless_it_is_the_first(tmp_path, monkeypatch):
    from perflab.runner import catalog
    from perflab.runner import deadline as window
    from perflab.runner.execute import Outcome

    monkeypatch.setenv(window.WINDOW_ENV, "w1")
    monkeypatch.setattr(gpucheck.estimate, "notebook_estimate", lambda preset, name: 1000)
    ran = []

    def run_all(jobs, out, **kw):
        ran.append(jobs[0][0])
        return [Outcome(jobs[0][0], out / "x.ipynb", "ok", 1.0)], None

    monkeypatch.setattr(catalog, "run_all", run_all)
    jobs = [("first", None, {}), ("second", None, {})]
    # the first notebook of a call starts anyway (the time would be idle), the second does not fit in 100 s
    outcomes, cut = gpucheck.notebooks_step(jobs, tmp_path / "k" / "c", window.Deadline(100), cell_timeout=None,
                                            preset=None, p_dir=None, kernel_name=None, progress=False)
    assert ran == ["first"] and [o.name for o in outcomes] == ["first"] and cut == ["second"]
    row = window.rows(tmp_path, "w1")[-1]
    assert row["status"] == "cut" and "s left before the deadline, its estimate 1000 s" in row["note"]


@pytest.mark.slow  # two notebook executions (~20 s on a loaded 2-core box)
def test_a_cell_over_its_limit_fails_and_the_deadline_cuts_the_running_notebook(tmp_path, monkeypatch):
    from perflab.runner import catalog
    from perflab.runner import deadline as window

    monkeypatch.setenv("SLEEPY_MARKER", str(tmp_path / "marker"))              # sleepy's cell 5 sleeps 120 s
    monkeypatch.setenv(window.WINDOW_ENV, "w2")
    sleepy = catalog.plan(["sleepy"], preset=None, overrides=[], nb_dir=FIXTURES.parent / "interrupt", p_dir=None)
    tiny = catalog.plan(["tiny"], preset=None, overrides=[], nb_dir=FIXTURES, p_dir=None)
    run = dict(preset=None, p_dir=None, kernel_name=None, progress=False)
    out = tmp_path / "res" / "k" / "c"
    outcomes, cut = gpucheck.notebooks_step(sleepy, out, window.Deadline(None), cell_timeout=3, **run)
    assert cut == [] and outcomes[0].status == "failed" and outcomes[0].cell == 5, outcomes[0].describe()
    t0 = time.monotonic()
    outcomes, cut = gpucheck.notebooks_step(sleepy + tiny, out, window.Deadline(15), cell_timeout=None, **run)
    assert outcomes == [] and cut == ["sleepy", "tiny"] and time.monotonic() - t0 < 60
    rows = {r["part"]: r for r in window.rows(tmp_path / "res", "w2")}
    assert rows["sleepy"]["status"] == "cut" and "stopped at the deadline, cell 5" in rows["sleepy"]["note"]
    assert rows["tiny"]["note"] == "not started: the call's deadline came first"
    rows = [r for r in read_rows(out / "results.jsonl") if r.get("study") == "sleepy" and r.get("kind") == "run"]
    # recorded at its cell: as Ctrl-C by the deadline's alarm, or as the cell's limit just after the deadline
    assert rows[-1]["status"] == "interrupted" or "CellTimeoutError" in rows[-1]["error"], rows[-1]
    assert rows[-1]["cell"] == 5


@pytest.mark.slow  # two pytest runs of a hanging test (~8 s)
def test_the_gpu_tests_stop_at_their_limit_and_at_the_deadline(tmp_path, monkeypatch):
    from perflab.runner import deadline as window

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_hang.py").write_text("import time\n\nimport pytest\n\npytestmark = pytest.mark.gpu\n\n\n"
                                        "def test_hangs():\n    time.sleep(60)\n\n\ndef test_after():\n    pass\n")
    monkeypatch.delenv(gpu_tests.PART_ENV, raising=False)
    out, commit = tmp_path / "out", {"commit": "abc", "dirty": False}
    rc, line = gpu_tests.run_gpu_tests(out, commit, tests, test_timeout=2)   # the hanging test fails, the next runs
    assert rc == 1 and line.startswith("1 failed, 1 passed"), (out / "gpu-tests.txt").read_text()
    t0 = time.monotonic()
    rc, line = gpu_tests.run_gpu_tests(out, commit, tests, deadline=window.Deadline(4))   # the call's deadline
    assert rc == gpu_tests.CUT and line.startswith("stopped by the call's deadline") and time.monotonic() - t0 < 40
    assert gpu_tests.outcome((out / "gpu-tests.txt").read_text())[0] == 1     # a cut run is no pass


@pytest.mark.slow  # a pytest run of a test stuck where no alarm reaches it (~8 s)
def test_a_test_the_alarm_cannot_reach_is_stopped_when_the_run_falls_silent(tmp_path, monkeypatch):
    # pytest-timeout's signal fails a test that Python runs; one blocked in C (here: SIGALRM masked, as a wait inside a
    # CUDA call never lets Python run the handler) would hold the window to its deadline: the silence stops it
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_stuck.py").write_text("import signal\nimport time\n\nimport pytest\n\npytestmark = pytest.mark.gpu\n\n\n"
                                         "def test_stuck():\n    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
                                         "    time.sleep(120)\n")
    monkeypatch.delenv(gpu_tests.PART_ENV, raising=False)
    monkeypatch.setattr(gpu_tests, "GRACE_S", 6.0)   # the stacks at 1 + 3 s of the test, the stop 7 s after the last output
    t0 = time.monotonic()
    rc, line = gpu_tests.run_gpu_tests(tmp_path / "out", {"commit": "abc", "dirty": False}, tests, test_timeout=1)
    assert rc == gpu_tests.STUCK and line.startswith("stopped: no output for 7 s") and time.monotonic() - t0 < 60
    assert "Timeout" in (tmp_path / "out" / "gpu-tests.txt").read_text()     # faulthandler's stacks, before the stop


@pytest.mark.slow  # one notebook executed (~5 s)
def test_gpu_check_runs_the_cards_own_preset_where_it_has_one(nb_dir, tmp_path, monkeypatch, capsys):
    # --params gpu on an H200 runs params/gpu-h200/ (issue 51 item 5): read from the device, said, and recorded
    params = nb_dir.parent / "params"
    (params / "gpu").mkdir(parents=True)
    (params / "gpu" / "tiny.yaml").write_text("n: 4\nlabel: h100\n")
    (params / "gpu-testgpu").mkdir()
    (params / "gpu-testgpu" / "tiny.yaml").write_text("base: gpu\nlabel: bigger\n")
    monkeypatch.setattr(gpucheck, "gpu_kind", lambda: "testgpu")
    monkeypatch.setattr(perflab.kit.env, "git_commit", lambda root=None: {"commit": "c" * 40, "dirty": False})
    out = tmp_path / "out"
    assert main(["gpu-check", "tiny", "--notebooks", str(nb_dir), "--params", "gpu", "--out", str(out),
                 "--no-progress", "--no-tests"]) == 0
    assert "a testgpu: preset 'gpu-testgpu' (params/gpu-testgpu/) for 'gpu'" in capsys.readouterr().out
    run = next(r for r in read_rows(out / "results.jsonl") if r.get("kind") == "run")
    assert run["params"]["n"] == 4 and run["params"]["label"] == "bigger"       # the base's n, the card's label
