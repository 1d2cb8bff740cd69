"""A GPU window of 15 minutes (issue 31, gpu-review-2026-11-26 T2, T6, T10): what `tools/gpu-session.sh` does here and
on the lent host, run on this machine with stand-ins for the downloader and the host's folders.

- `prepare` empties `.whl/`, fetches the pinned set (tools/gpu-wheels.txt) for CPython 3.11, 3.12 and 3.13, refuses a
  set with two versions of a wheel (pip's ResolutionImpossible would stop the call on the host before anything ran),
  one that shadows an image package or whose requirements neither it nor the image meets, and checks that each
  Python's set installs offline into a clean folder (issue 51);
- a call (`smoke`, `tests`, `full`) packs the run folder and its compile caches so that each file comes back (16 MiB a
  file): the newest cache entries in at most two files under the limit, the oldest left out and said so; `bring` keeps
  them and the next call unpacks them all (`seed`); a call ends with one summary and its exit status, and a start
  that cannot work fails in seconds with its reason;
- the GPU tests' two parts (`perflab.runner.gpu_tests`): the quick part is what the smoke runs, every other GPU test is the
  compiled part, each with its log, both in REPORT.md.
"""
import ast
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from gpuwindow import cache, carry, summary

from perflab.runner import deadline, gpu_tests, gpucheck
from perflab.runner.cli import main

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "tools" / "gpu-session.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None, reason="needs bash and git")


def _wheel(folder: Path, name: str, version: str, requires: list[str] = ()) -> Path:
    """A pure-Python wheel pip can install: `name`/__init__.py and its dist-info (with its Requires-Dist)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{name}/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return path


@pytest.fixture
def project(tmp_path):
    """tmp/project: a git checkout with one commit."""
    proj = tmp_path / "project"
    proj.mkdir()
    run = lambda *a: subprocess.run(a, cwd=proj, check=True, capture_output=True)  # noqa: E731
    run("git", "init", "-q")
    (proj / "README").write_text("x\n")
    run("git", "add", "README")
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return proj


def _session(cwd: Path, *args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SESSION), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def _index(tmp_path: Path, wheels: dict[str, str], requires: dict[str, list[str]] | None = None) -> dict[str, str]:
    """A local index (pip's find-links folder) of pure wheels, a pins file and an image list naming `numpy`: the
    environment `prepare` runs in, with no network."""
    index = tmp_path / "index"
    index.mkdir(exist_ok=True)
    for name, version in wheels.items():
        _wheel(index, name, version, (requires or {}).get(name, []))
    (tmp_path / "pins.txt").write_text("".join(f"{n}=={v}\n" for n, v in wheels.items()))
    (tmp_path / "image.txt").write_text("numpy==2.5.2\n")
    return dict(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(index), GPU_SESSION_PINS=str(tmp_path / "pins.txt"),
                GPU_SESSION_IMAGE=str(tmp_path / "image.txt"))


@pytest.mark.slow  # three pip downloads and three offline installs: ~8 s
def test_prepare_empties_the_wheel_folder_and_checks_each_pythons_set_installs_offline(tmp_path, project):
    (project / ".whl").mkdir()
    _wheel(project / ".whl", "alpha", "1.0")                      # an earlier prepare's version
    r = _session(project, "prepare", **_index(tmp_path, {"alpha": "2.0", "beta": "0.1"}, {"beta": ["numpy>=2"]}))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in (project / ".whl").glob("*.whl")) == ["alpha-2.0-py3-none-any.whl",
                                                                        "beta-0.1-py3-none-any.whl"]
    assert sorted(p.name for p in (project / ".whl").glob("cp*")) == ["cp311", "cp312", "cp313"]
    for v in ("3.11", "3.12", "3.13"):
        assert f"Python {v}: 2 wheels install offline" in r.stdout, r.stdout
    assert "closed under their requirements" in r.stdout and "prepared .whl/ for commit" in r.stdout
    assert len((project / ".whl" / "COMMIT").read_text().strip()) == 40


def test_prepare_refuses_a_set_that_is_not_closed_or_shadows_the_image(tmp_path, project):
    # beta needs gamma, which neither the set nor the image has; numpy is the image's: the call would stop there
    env = _index(tmp_path, {"alpha": "1.0", "beta": "0.1", "numpy": "2.4.6"}, {"beta": ["gamma>=1", "alpha<1"]})
    r = _session(project, "prepare", **env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "beta requires gamma>=1: neither in the set nor in the image" in r.stderr
    assert "beta requires alpha<1, the set has 1.0" in r.stderr
    assert "shadows the image's numpy" in r.stderr and not (project / ".whl" / "COMMIT").exists()


def test_the_wheel_check_refuses_two_versions_and_a_pin_not_met(tmp_path):
    from gpuwindow import wheels

    (tmp_path / "cp312").mkdir()
    _wheel(tmp_path, "jupyter_client", "8.6.0")
    _wheel(tmp_path / "cp312", "Jupyter.Client", "8.7.0")        # one project, two spellings, two versions
    problems, _ = wheels.check(tmp_path, {"jupyter-client": "8.6.0"}, {}, pythons=("3.12",))
    assert any("two versions of jupyter-client" in p for p in problems), problems
    problems, _ = wheels.check(tmp_path, {"jupyter-client": "8.6.0", "nbval": "0.11.0"}, {}, pythons=("3.11",))
    assert problems == ["cp3.11: no wheel of nbval==0.11.0 (prepare fetches it)"]


def test_the_pins_are_one_version_each_and_leave_the_image_out():
    from gpuwindow import wheels

    pins, image = wheels.read_pins(ROOT / wheels.PINS), wheels.read_image(ROOT / wheels.IMAGE)
    assert not set(pins) & set(image), set(pins) & set(image)       # a wheel would shadow the image's copy
    assert {"papermill", "ipykernel", "nbval", "pyinstrument", "submitit"} <= set(pins)
    assert set(wheels.left_out(ROOT / wheels.PINS)) == {"debugpy", "jedi", "parso"}
    assert image["torch"] == "2.11.0" and image["python-dateutil"] is None


def test_the_import_check_covers_what_the_notebooks_and_tests_import_and_names_a_failure():
    from gpuwindow import wheels

    found = wheels.modules(ROOT)
    assert {"torch", "pandas", "scipy", "matplotlib", "tqdm", "psutil", "pyinstrument", "submitit", "papermill",
            "nbval", "ipykernel", "pytest_timeout", "numpy", "yaml"} <= set(found), sorted(found)
    assert not {"perflab", "os", "test_prover_links_fit", "old_code", "planted"} & set(found)   # mutation/ is ours
    done, failed = wheels.import_all(["json", "no_such_module_here"], {"no_such_module_here": ["notebooks/x.ipynb"]})
    assert done == ["json"] and failed.startswith("no_such_module_here: ModuleNotFoundError")
    assert "(imported by notebooks/x.ipynb)" in failed


# ---- a call's packing: what comes back under 16 MiB a file (T6) -----------------------------------------------------------

def _fake_cache(res: Path, mib: float) -> list[Path]:
    """res/h100/abc1234/: a finished run's folder with a compile cache of FX graph and AOTAutograd entries of
    incompressible bytes (64 KiB .. 256 KiB each, `mib` in all), a Triton folder and generated code. -> the
    entries, oldest first."""
    run = res / "h100" / "abc1234"
    (run / "03_eval").mkdir(parents=True)
    (run / "REPORT.md").write_text("# report\n")
    (run / "03_eval" / "policy.pt").write_bytes(b"x" * 1000)
    cache = run / gpucheck.CACHE_DIR
    (cache / "triton" / "0" / "k").mkdir(parents=True)
    (cache / "triton" / "0" / "k" / "kernel.cubin").write_bytes(os.urandom(1000))
    entries, total, i = [], 0, 0
    t0 = time.time() - 10_000
    while total < mib * 2**20:
        size = (64 + 64 * (i % 4)) * 1024
        entry = cache / ("fxgraph" if i % 3 else "aotautograd") / (f"{i:02d}" if i % 3 else "") / f"key{i:03d}"
        entry.mkdir(parents=True, exist_ok=True)
        (entry / "entry").write_bytes(os.urandom(size))
        os.utime(entry / "entry", (t0 + i, t0 + i))               # entry i was written i seconds after the first
        entries.append(entry)
        total, i = total + size, i + 1
    (cache / "ab").mkdir()
    (cache / "ab" / "cab.py").write_text("print('generated')\n" * 100)
    (res / "log.txt").write_text("the call's log\n")
    return entries


def test_a_call_brings_back_the_newest_cache_entries_under_the_limit_and_the_next_unpacks_them(tmp_path, project):
    res, out = tmp_path / "host" / "res", tmp_path / "out"
    out.mkdir()
    entries = _fake_cache(res, mib=3.2)
    r = _session(project, "pack", GPU_SESSION_RES=str(res), OUT=str(out), GPU_SESSION_MAX_MIB="1")
    assert r.returncode == 0, r.stdout + r.stderr
    parts = sorted(out.glob("cache*.tgz"))
    assert [p.name for p in parts] == ["cache-2.tgz", "cache.tgz"]               # two parts at most
    assert all(p.stat().st_size <= 2**20 for p in [*parts, out / "res.tgz"])     # each comes back
    assert "left out" in r.stdout and "the next window compiles them again" in r.stdout
    assert "res.tgz:" in r.stdout
    kept = {n for p in parts for n in tarfile.open(p).getnames()}
    names = [f"res/h100/abc1234/compile-cache/{e.relative_to(res / 'h100' / 'abc1234' / 'compile-cache')}/entry"
             for e in entries]
    assert names[-1] in kept and names[0] not in kept                           # the newest kept, the oldest not
    assert not any("/triton/" in n for n in kept)
    assert "res/h100/abc1234/REPORT.md" in tarfile.open(out / "res.tgz").getnames()
    assert not any(n.endswith(".pt") or "compile-cache" in n for n in tarfile.open(out / "res.tgz").getnames())

    # here: bring keeps every part; the next call unpacks them (seed), never over newer files
    r = _session(project, "bring", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (project / ".gpu-res").iterdir()) == ["cache-2.tgz", "cache.tgz", "res.tgz"]
    assert (project / "outputs" / "h100" / "abc1234" / "REPORT.md").exists()
    fresh = tmp_path / "host2" / "res"
    r = _session(project, "seed", GPU_SESSION_RES=str(fresh))
    assert r.returncode == 0 and r.stdout.count("seeded") == 3, r.stdout + r.stderr
    restored = {str(p.relative_to(fresh.parent)) for p in fresh.rglob("entry")}
    assert restored == {n for n in kept if n.endswith("/entry")}
    assert not (fresh / "log.txt").exists()                                     # the old call's log stays behind


def test_a_cache_under_the_limit_comes_back_whole(tmp_path):
    res, out = tmp_path / "res", tmp_path / "out"
    out.mkdir()
    entries = _fake_cache(res, mib=0.5)
    r = cache.pack_cache(res, out, limit=2**20, parts=2)
    assert [p[0] for p in r["parts"]] == ["cache.tgz"] and r["left_out"] == 0
    assert r["kept"] == len(entries) + 1                                          # and the generated code


# ---- the GPU tests' two parts ---------------------------------------------------------------------------------

def _gpu_tests() -> dict[str, ast.FunctionDef]:
    found = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_gpu = any(isinstance(n, ast.Assign) and "pytest.mark.gpu" in ast.unparse(n.value) for n in tree.body)
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and (module_gpu or any("mark.gpu" in ast.unparse(d) for d in n.decorator_list)):
                found[f"{path.relative_to(ROOT).as_posix()}::{n.name}"] = n
    return found


def test_the_quick_part_names_gpu_tests_that_exist():
    gpu = _gpu_tests()
    for nodeid in deadline.QUICK_GPU_TESTS:
        assert nodeid.split("[")[0] in gpu, f"{nodeid}: no such GPU test"
    assert len(gpu) > len(deadline.QUICK_GPU_TESTS) >= 10           # the rest: the compiled part


def test_every_gpu_test_that_claims_cuda_graphs_asserts_one_was_recorded():
    # issue 38 item 5 (review W1, P1): a test that compiles for CUDA graphs (reduce-overhead, max-autotune) asserts
    # inductor recorded one and skipped none (tests/prover/test_prover_eval.py's pattern): else it passes on eager
    # code; one that captures a graph itself asserts its replays. No exact kernel-launch count: a GPU's CUPTI may
    # report a launch twice, so a range
    claims, found = 0, []
    for nodeid, fn in _gpu_tests().items():
        if not fn.name.startswith("test"):
            continue
        src = ast.unparse(fn)
        if "reduce-overhead" in src or "max-autotune" in src:
            claims += 1
            skips = "counters['inductor']['cudagraph_skips'] =="  # as ast.unparse writes it
            if "cudagraph_recordings >= 1" not in src or skips not in src:
                found.append(f"{nodeid}: compiles for CUDA graphs, asserts no recording (and no skip)")
        if ("torch.cuda.graph(" in src or "Captured(" in src) and "graph_launches" not in src:
            found.append(f"{nodeid}: captures a CUDA graph, asserts no replay")
        found += [f"{nodeid}: exact kernel-launch count: {line.strip()}" for line in src.splitlines()
                  if "kernel_launches" in line and "==" in line]
    assert claims >= 6 and not found, "\n".join(found)


def test_each_part_selects_its_tests_and_keeps_its_own_log(tmp_path, monkeypatch):
    tests = tmp_path / "tests"
    monkeypatch.delenv(gpu_tests.PART_ENV, raising=False)
    assert gpu_tests.test_part() == "" and gpu_tests.pytest_selection("", tests) == [str(tests)]
    quick = gpu_tests.pytest_selection("quick", tests)
    assert quick == [str(tmp_path / n) for n in deadline.QUICK_GPU_TESTS]
    compiled = gpu_tests.pytest_selection("compiled", tests)
    assert compiled[0] == str(tests) and compiled[1:] == [f"--deselect={n}" for n in deadline.QUICK_GPU_TESTS]
    monkeypatch.setenv(gpu_tests.PART_ENV, "fast")
    with pytest.raises(ValueError, match="quick, compiled"):
        gpu_tests.test_part()

    out, commit = tmp_path / "out", {"commit": "abc", "dirty": False}
    out.mkdir()
    monkeypatch.setenv(gpu_tests.PART_ENV, "quick")                               # the smoke's window
    (out / "gpu-tests-quick.txt").write_text(
        "perflab gpu-check: pytest -m gpu (quick part) at commit abc\n== 13 passed, 670 deselected in 30.0s ==\n")
    assert gpu_tests.earlier_pass(out, commit) == "13 passed, 670 deselected in 30.0s"
    monkeypatch.setenv(gpu_tests.PART_ENV, "compiled")                            # a later window
    assert gpu_tests.earlier_pass(out, commit) is None                            # the quick part's pass is not its
    (out / "gpu-tests-compiled.txt").write_text(
        "perflab gpu-check: pytest -m gpu (compiled part) at commit abc\n== 1 failed, 11 passed in 250.0s ==\n")
    report = out / "REPORT.md"
    report.write_text("# perflab report\n")
    gpu_tests.lead_report(report, 1, "1 failed, 11 passed in 250.0s")
    text = report.read_text()
    assert text.startswith(gpu_tests.TESTS_HEADER + "\n\nFAILED (exit 1) (compiled part): 1 failed, 11 passed in 250.0s")
    assert "passed (quick part, an earlier run): 13 passed, 670 deselected in 30.0s" in text
    monkeypatch.delenv(gpu_tests.PART_ENV)                                        # full without --tests (--no-tests)
    rc, line = gpu_tests.earlier_tests(out)
    assert rc == 1 and line.startswith("quick part: 13 passed") and "compiled part: 1 failed" in line


def test_the_tests_alone_lead_the_report_once_and_are_skipped_after_a_pass(tmp_path, monkeypatch):
    # the `tests` call in the smoke's window: REPORT.md (the smoke's) keeps one lead section, now with both parts
    import perflab.kit.env

    out, ran = tmp_path / "out", []
    out.mkdir()
    monkeypatch.setattr(perflab.kit.env, "git_commit", lambda root=None: {"commit": "abc", "dirty": False})
    monkeypatch.setattr(gpucheck, "gpu_kind", lambda: "testgpu")
    (out / "gpu-tests-quick.txt").write_text(
        "perflab gpu-check: pytest -m gpu (quick part) at commit abc\n== 13 passed, 670 deselected in 30.0s ==\n")
    (out / "REPORT.md").write_text(f"{gpu_tests.TESTS_HEADER}\n\npassed (quick part): 13 passed\n\n# perflab report\nbody\n")

    def fake(out, commit, **kw):
        ran.append(gpu_tests.test_part())
        gpu_tests.test_log(out).write_text(gpu_tests._header(commit, "compiled") + "== 12 passed in 250.0s ==\n")
        return 0, "12 passed in 250.0s"

    monkeypatch.setattr(gpu_tests, "run_gpu_tests", fake)
    monkeypatch.setenv(gpu_tests.PART_ENV, "compiled")
    assert main(["gpu-check", "--tests-only", "--out", str(out)]) == 0 and ran == ["compiled"]
    text = (out / "REPORT.md").read_text()
    assert text.count(gpu_tests.TESTS_HEADER) == 1 and text.endswith("# perflab report\nbody\n")
    assert "passed (compiled part): 12 passed in 250.0s" in text and "(quick part, an earlier run)" in text
    assert main(["gpu-check", "--tests-only", "--out", str(out)]) == 0 and ran == ["compiled"]          # passed: skipped
    assert "an earlier run at this commit" in (out / "REPORT.md").read_text()
    assert main(["gpu-check", "--tests-only", "--out", str(out), "--redo"]) == 0 and len(ran) == 2
    assert main(["gpu-check", "--tests-only", "tiny", "--out", str(out)]) == 2 and len(ran) == 2  # no notebooks


def test_the_session_script_parses_and_refuses_an_unknown_step():
    assert subprocess.run(["bash", "-n", str(SESSION)], capture_output=True).returncode == 0
    r = _session(ROOT, "start", "smoke")                            # the two-call flow is gone
    assert r.returncode == 2 and "smoke | tests [quick|compiled|all] | full" in r.stderr
    r = _session(ROOT, "tests", "everything")
    assert r.returncode == 2 and "tests [quick|compiled|all]" in r.stderr


def test_a_call_without_wheels_fails_at_once_with_its_reason_and_its_log_comes_back(tmp_path, project):
    res, out = tmp_path / "host" / "res", tmp_path / "out"
    t0 = time.monotonic()
    r = _session(project, "smoke", GPU_SESSION_RES=str(res), OUT=str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "START FAILED (wheels): no .whl/COMMIT" in r.stdout and "exit 2" in r.stdout
    assert time.monotonic() - t0 < 20                                # no waiting on a run that never started
    assert "START FAILED (wheels)" in (out / "log.txt").read_text()
    assert "kind=unknown-gpu commit=unknown rc=2" in (res / "CALL").read_text()
    r = _session(project, "bring", str(out))                         # here: the reason lands beside the evidence
    assert r.returncode == 0, r.stdout + r.stderr
    log = project / "outputs" / "unknown-gpu" / "unknown" / "gpu-check.log"
    assert log.read_text().startswith("==== window=smoke-") and "START FAILED (wheels)" in log.read_text()
    assert "what travels:" in r.stdout                                # and the next call's carry


def test_the_summary_names_each_planned_part_and_what_the_deadline_cut(tmp_path, monkeypatch):

    run = tmp_path / "res" / "h100" / "abc1234"
    monkeypatch.setenv(deadline.WINDOW_ENV, "smoke-1")
    deadline.plan(run, ["tests-quick", "01_profile_probe1d", "02_slab_stats", "03_eval"])
    deadline.record(run, "tests-quick", "ok", 31.0, "13 passed in 30.0s")
    deadline.record(run, "01_profile_probe1d", "skipped", 0.0, "ok earlier at this commit")
    deadline.record(run, "02_slab_stats", "ok", 40.2)
    rc, text = summary.summary(tmp_path / "res", "smoke-1")
    assert rc == 3, text                                             # 03 never reported: cut by the deadline
    lines = {line.split()[0]: line.split()[1] for line in text.splitlines()[2:-1]}
    assert lines == {"tests-quick": "ok", "01_profile_probe1d": "skipped", "02_slab_stats": "ok", "03_eval": "cut"}
    deadline.record(run, "03_eval", "failed", 12.0, "FAILED at cell 4")
    assert summary.summary(tmp_path / "res", "smoke-1")[0] == 1
    assert summary.summary(tmp_path / "res", "smoke-2")[0] == 2       # another call's rows are not this one's
    monkeypatch.setenv(deadline.WINDOW_ENV, "smoke-2")
    deadline.plan(run, ["03_eval"])
    deadline.record(run, "03_eval", "ok", 50.0)
    assert summary.summary(tmp_path / "res", "smoke-2") == (0, summary.summary(tmp_path / "res", "smoke-2")[1])


@pytest.mark.parametrize("preset", ["gpu-smoke", "gpu", "gpu-h200"])
def test_no_preset_repeats_a_key(preset):
    # YAML takes the last of two equal keys without a word: two edits of one preset (04's smoke preset once held
    # verdict_time twice) would leave one of them silently unused
    for path in sorted((ROOT / "params" / preset).glob("*.yaml")):
        keys = [line.split(":")[0] for line in path.read_text().splitlines() if line and line[0] not in " #"]
        assert len(keys) == len(set(keys)), f"{path.name}: {sorted(k for k in set(keys) if keys.count(k) > 1)} repeated"


# ---- what travels in (issue 38 item 3, review L1) ---------------------------------------------------------------

def test_what_travels_is_summed_as_the_device_tool_counts_it(project):
    (project / ".gitignore").write_text("ignored/\n.whl/\n.gpu-res/\n")
    (project / "untracked.txt").write_bytes(b"u" * 3000)                    # untracked, not ignored: travels
    (project / "ignored").mkdir()
    (project / "ignored" / "big").write_bytes(b"i" * 50_000)                # ignored: stays here
    (project / ".whl").mkdir()
    (project / ".whl" / "a.whl").write_bytes(b"w" * 20_000)
    c = carry.carry(project)
    assert c["files"] == 3 and c["tree"] == 2 + 3000 + len("ignored/\n.whl/\n.gpu-res/\n")  # README, untracked, .gitignore
    assert c["carried"] == {".whl": 20_000, ".gpu-res": 0} and c["total"] == c["tree"] + 20_000
    assert c["margin"] == 64 * 2**20 - c["total"]
    assert "margin" in carry.carry_text(c) and "OVER" not in carry.carry_text(c)
    subprocess.run(["truncate", "-s", "65M", str(project / ".whl" / "b.whl")], check=True)   # sparse: no disk used
    r = subprocess.run([sys.executable, "-m", "gpuwindow", "carry", "--root", str(project)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tools")})
    assert r.returncode == 1 and "OVER by 1.0 MiB" in r.stdout and "would be refused" in r.stdout, r.stdout


def test_the_caches_get_what_the_next_carry_leaves(tmp_path):
    host = tmp_path / "w"                                                   # the copy there: no .git
    (host / ".whl").mkdir(parents=True)
    (host / ".whl" / "a.whl").write_bytes(os.urandom(2 * 2**20))
    (host / ".gpu-res").mkdir()
    (host / ".gpu-res" / "res.tgz").write_bytes(os.urandom(2**20))         # replaced by bring: not counted
    res = tmp_path / "res" / "h100" / "abc1234"
    res.mkdir(parents=True)
    (res / "results.jsonl").write_bytes(os.urandom(3 * 2**20))
    with tarfile.open(tmp_path / "res.tgz", "w:gz") as tar:
        tar.add(tmp_path / "res", arcname="res")
    room = carry.cache_budget(host, tmp_path / "res.tgz")
    used = 2 * 2**20 + (tmp_path / "res.tgz").stat().st_size + 3 * 2**20   # wheels, res.tgz, what bring unpacks
    assert abs(room - (60 * 2**20 - used) / 2**20) < 1e-6
    entries = _fake_cache(tmp_path / "cres", mib=3.0)
    r = cache.pack_cache(tmp_path / "cres", tmp_path, limit=2**20, parts=2, total=2**20)
    assert sum(size for _, size, _ in r["parts"]) <= 2**20 and r["left_out"] > 0 and len(entries) > r["kept"]


# ---- the rehearsal here (issue 38 item 6): the first call of a window, up to where CUDA is needed -----------------

@pytest.mark.slow  # ~15 s: a copy of the tree, a wheel install, a kernel spec, the imports and the runner's plan
def test_the_rehearsal_runs_the_smokes_call_until_it_needs_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("rehearses a host without CUDA (on a GPU host the call would run the smoke)")
    r = subprocess.run(["bash", str(SESSION), "rehearse", "smoke"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "GPU_SESSION_PYTHON": sys.executable})
    assert r.returncode == 0 and "rehearse smoke: ok" in r.stdout, r.stdout[-6000:] + r.stderr
    assert "notebook(s) planned on gpu-smoke" in r.stdout and "no CUDA device is visible" in r.stdout
    assert "$OUT: 2 files" in r.stdout and "all come back" in r.stdout          # log.txt and res.tgz
    assert "what travels:" in r.stdout and "OVER" not in r.stdout


def test_what_would_not_come_back_is_named(tmp_path):

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "res.tgz").write_bytes(b"x")
    (tmp_path / "a" / "b" / "ok.txt").write_bytes(b"x")                        # two folders down: comes back
    (tmp_path / "a" / "b" / "c" / "deep.txt").write_bytes(b"x")
    (tmp_path / "bad name.txt").write_bytes(b"x")
    subprocess.run(["truncate", "-s", "17M", str(tmp_path / "big.bin")], check=True)
    bad = carry.comeback(tmp_path)
    assert len(bad) == 3 and any("big.bin: over 16 MiB" in b for b in bad), bad
    assert any("deep.txt: more than 2 folders down" in b for b in bad) and any("bad name.txt: a name" in b for b in bad)
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x")
    assert "10 files: at most 8 come back" in carry.comeback(tmp_path)
