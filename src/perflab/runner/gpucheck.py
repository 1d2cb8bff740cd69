"""`perflab gpu-check`: the first thing to run when a GPU host is at hand for a short time.

    perflab gpu-check                        # pytest -m gpu, then all six notebooks on params/gpu-smoke/
    perflab gpu-check 03 05 06 --params gpu  # the full GPU presets of some notebooks (no tests: --no-tests)

It writes one folder, `<root>/<gpu kind>/<commit>/` (root: `outputs/`, `--root`) unless `--out` says otherwise:
`gpu-tests.txt` and `gpu-tests.xml` (pytest's output and JUnit file), the notebooks' results, plots and executed copies
as `perflab run` writes them, `REPORT.md`, which leads with the GPU tests' summary, and `window.jsonl` (each part's
outcome, call by call: `perflab.runner.window`). The commit is the project's (`perflab.kit.env.git_commit`:
$PERFLAB_COMMIT where the tree is a copy without .git). On a host whose commands are cut at 10 minutes,
`tools/gpu-session.sh` runs this in one call to a deadline and packs the folder.

Resumable, notebook by notebook: run again on the same folder, it skips each notebook whose latest execution there
with the same parameters at this commit ended ok (`finished`), and the GPU tests when the last run of them there
passed at this commit (`earlier_pass`); a failed or interrupted one runs again, `--redo` runs everything. Only a clean
tree's known commit counts: on a dirty or unknown one nothing is skipped. Inductor's and Triton's compile caches go
to `<folder>/compile-cache/` (TORCHINDUCTOR_CACHE_DIR, unless set already), so a later window that brings the folder
back finds the kernels already compiled.

A hard stop for everything: with `--deadline SECONDS` (tools/gpu-session.sh gives the runner its share of the call)
a notebook starts only if its estimate (`perflab.runner.estimate`) fits in what is left, the first of the call
always, and the one running at the deadline is stopped at its cell, as Ctrl-C stops it; the GPU tests are stopped
there too. Each cell stops at a limit sized from the estimate (`--cell-timeout` to choose another) and each GPU test
at its part's (`perflab.runner.testguard`). Each part's outcome goes to window.jsonl (ok, failed, skipped, cut); the
exit status is 0, 1 (a part failed) or 3 (the deadline cut one; the next call goes on from there).

The GPU tests come in two parts on a host lent for minutes ($PERFLAB_GPU_TESTS; unset: all of them in one run):
"quick" (`QUICK_GPU_TESTS`: eager code on CUDA, no inductor compile, no subprocess; `tools/gpu-session.sh smoke`
runs them with the smoke notebooks) and "compiled" (every other `-m gpu` test: inductor's kernels, CUDA graphs,
torchrun, the new study, nbval; `tools/gpu-session.sh tests`, or `full --tests NAME ...`). Each part keeps its own log
(`gpu-tests-quick.txt`, ...), is skipped once it passed at this commit, and REPORT.md leads with every part's outcome
found in the folder (params/gpu-smoke/ESTIMATE.md: why the split, and the windows).

    python -m perflab.runner.gpucheck tests --root DIR            # the GPU tests alone (tools/gpu-session.sh tests)
    python -m perflab.runner.gpucheck wheels .whl                 # one version of each wheel (tools/gpu-session.sh prepare)
    python -m perflab.runner.gpucheck pack-cache /tmp/res OUT     # the folder's compile caches into OUT/cache*.tgz
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from ..kit.paths import repo_root
from . import estimate, window
from .window import QUICK_GPU_TESTS  # the quick part

TESTS_HEADER = "## GPU tests (`pytest -m gpu`)"
CACHE_DIR = "compile-cache"  # in the run folder: inductor's FX graph and AOT caches, Triton's kernels
PART_ENV = "PERFLAB_GPU_TESTS"  # quick, compiled, or all (unset)
PARTS = ("quick", "compiled")


class NoGPU(RuntimeError):
    pass


def gpu_kind() -> str:
    """`perflab.kit.env.device_kind` of the CUDA device ("h100", ...), asked in a child process so that this one (the
    runner) holds no CUDA context while the notebooks run; NoGPU with the reason on a host without CUDA."""
    code = "from perflab.kit.env import device_kind, pick_device; print(device_kind(pick_device('cuda')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        raise NoGPU(f"needs a GPU host: {(r.stderr.strip().splitlines() or ['no CUDA device'])[-1]}")
    return r.stdout.strip()


def default_out(kind: str, commit: dict, root: Path | None = None) -> Path:
    """<root>/<gpu kind>/<short commit>[-dirty]/ ("unknown-commit" when the commit cannot be told); root: outputs/."""
    sha = (commit["commit"][:7] if commit.get("commit") else "unknown-commit") + ("-dirty" if commit.get("dirty") else "")
    return Path(root or repo_root() / "outputs") / kind / sha


def commit_label(commit: dict) -> str:
    """"<sha>", "<sha>-dirty" or "unknown": what a folder's runs were made of."""
    return (commit.get("commit") or "unknown") + ("-dirty" if commit.get("commit") and commit.get("dirty") else "")


def resumable(commit: dict) -> bool:
    """Whether earlier runs can stand for this one: a known commit of a clean tree (a dirty tree may differ between
    two runs with the same label)."""
    return bool(commit.get("commit")) and not commit.get("dirty")


def test_part() -> str:
    """The part of the GPU tests this process runs: "quick", "compiled", or "" (all), from $PERFLAB_GPU_TESTS."""
    part = os.environ.get(PART_ENV, "").strip()
    if part in ("", "all"):
        return ""
    if part not in PARTS:
        raise ValueError(f"{PART_ENV}={part!r}: expected one of {', '.join(PARTS)} or all")
    return part


def test_log(out: Path, part: str | None = None) -> Path:
    """out/gpu-tests.txt (all the GPU tests), or out/gpu-tests-<part>.txt; its JUnit file has the suffix .xml."""
    part = test_part() if part is None else part
    return Path(out) / (f"gpu-tests-{part}.txt" if part else "gpu-tests.txt")


def _header(commit: dict, part: str) -> str:
    return f"perflab gpu-check: pytest -m gpu{f' ({part} part)' if part else ''} at commit {commit_label(commit)}\n"


def pytest_selection(part: str, tests: Path) -> list[str]:
    """pytest's arguments after `-m gpu` for a part: the quick tests by node id, or the test folder without them."""
    root = Path(tests).parent
    if part == "quick":
        return [str(root / nodeid) for nodeid in QUICK_GPU_TESTS]
    return [str(tests)] + ([f"--deselect={nodeid}" for nodeid in QUICK_GPU_TESTS] if part == "compiled" else [])


CUT = 124  # the GPU tests' status when the call's deadline stopped them (timeout(1)'s)


def run_gpu_tests(out: Path, commit: dict, tests: Path | None = None, *, test_timeout: float | None = None,
                  deadline: window.Deadline | None = None) -> tuple[int, str]:
    """`pytest -m gpu` over the project's tests (this process's part of them, `test_part`), its output in
    out/gpu-tests[-part].txt (after a first line naming the part and the commit) and the .xml beside it; each test
    stopped at `test_timeout` seconds (`perflab.runner.testguard`), the whole run at the deadline (SIGINT, so pytest
    still writes its summary; killed 20 s later). -> (pytest's exit status, or CUT; its summary line)."""
    tests = tests or repo_root() / "tests"
    part, log_path = test_part(), test_log(out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", *pytest_selection(part, tests), "-p", "no:cacheprovider",
           "-p", "perflab.runner.testguard", f"--junitxml={log_path.with_suffix('.xml')}"]
    env = {**os.environ, **({"PERFLAB_TEST_TIMEOUT": f"{test_timeout:g}"} if test_timeout else {})}
    left = (deadline or window.Deadline(None)).left()
    print("gpu-check:", " ".join(cmd[1:6]), f"({part} part)" if part else "",
          f"each test stopped at {test_timeout:g} s" if test_timeout else "", flush=True)
    with open(log_path, "w") as log:
        log.write(_header(commit, part))
        log.flush()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root(), env=env)
        try:
            rc = p.wait(timeout=None if left == float("inf") else max(left, 1))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)  # pytest stops and writes its summary line
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            rc = CUT
    line = summary_line(log_path.read_text())
    return rc, (f"stopped by the call's deadline: {line}" if rc == CUT else line)


def outcome(text: str) -> tuple[int, str]:
    """A test log's outcome: (0, line) only when pytest's summary line is there and names no failure or error (a
    log cut off before its summary counts as failed)."""
    line = summary_line(text)
    found = not line.startswith("no summary line")
    return int(not found or bool(re.search(r"\b(failed|error|errors)\b", line))), line


def _logs(out: Path) -> list[tuple[str, Path]]:
    """The GPU test logs an earlier gpu-check left in `out`: ("", gpu-tests.txt) and/or one per part."""
    return [(part, test_log(out, part)) for part in ("", *PARTS) if test_log(out, part).exists()]


def earlier_tests(out: Path) -> tuple[int, str]:
    """Without a test run (--no-tests): the outcome of the ones an earlier gpu-check left in `out`, if any (this
    process's part's log; for all the tests, the whole run's log or else every part's)."""
    part = test_part()
    logs = [(p, f) for p, f in _logs(out) if p == part] or ([] if part else _logs(out))
    if not logs:
        return 0, "not run (--no-tests)"
    found = [(p, *outcome(f.read_text())) for p, f in logs]
    rc = max(r for _, r, _ in found)
    if len(found) == 1:
        return rc, f"{found[0][2]} (an earlier run, kept in this folder)"
    return rc, "; ".join(f"{p} part: {line}" for p, _, line in found) + " (earlier runs, kept in this folder)"


def earlier_pass(out: Path, commit: dict) -> str | None:
    """The summary line of the GPU tests (this process's part) an earlier gpu-check ran in `out` at this commit, if
    they passed."""
    log = test_log(out)
    if not resumable(commit) or not log.exists():
        return None
    text = log.read_text()
    if not text.startswith(_header(commit, test_part())):
        return None
    rc, line = outcome(text)
    return None if rc else line


def finished(out: Path, jobs: list[tuple[str, Path, dict]], commit: dict) -> dict[str, str]:
    """{notebook: run id} for each job (`perflab.runner.catalog.plan`'s) whose latest execution in out/results.jsonl with
    the same parameters at this commit ended ok. The runner's status rows carry all three: its parameters, its
    environment stamp (`perflab.kit.env.host_stamp`) and how it ended."""
    from ..kit.results import executions, read_rows

    if not resumable(commit):
        return {}
    key = lambda study, params: (study, json.dumps(params, sort_keys=True, default=str))  # noqa: E731
    latest = {}
    for (study, point, run_id), rows in executions(read_rows(out / "results.jsonl")).items():
        runs = [r for r in rows if r["kind"] == "run"]
        if point or not runs:
            continue
        env = runs[0].get("env") or {}
        if (env.get("commit"), env.get("dirty")) != (commit["commit"], commit["dirty"]):
            continue
        latest[key(study, runs[0].get("params") or {})] = (run_id, runs[-1].get("status"))  # later ones win
    done = {name: latest.get(key(name, params)) for name, _, params in jobs}
    return {name: d[0] for name, d in done.items() if d and d[1] == "ok"}


@contextlib.contextmanager
def compile_cache(out: Path):
    """While it lasts, the processes started (pytest, the notebooks' kernels) keep inductor's and Triton's compile
    caches in out/compile-cache/, unless TORCHINDUCTOR_CACHE_DIR names another place than torch's default (torch
    writes its default into the variable the first time it asks for its cache folder: here too, when the notebooks'
    parameters are checked). Yields the folder used."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    given = before and os.path.abspath(before) != os.path.abspath(default_cache_dir())
    folder = Path(before).resolve() if given else Path(out).resolve() / CACHE_DIR
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


def folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20 if folder.is_dir() else 0.0


def summary_line(text: str) -> str:
    """pytest's last summary line ("3 failed, 20 passed in 9.1s"), or what is known without it."""
    found = [line.strip(" =") for line in text.splitlines() if re.search(r"\b(passed|failed|error|skipped|deselected)\b", line)
             and re.search(r"\bin [\d.]+s\b", line)]
    return found[-1] if found else "no summary line: see gpu-tests.txt"


def lead_report(report: Path, rc: int, summary: str) -> None:
    """Put the GPU tests' outcome at the top of REPORT.md (the notebooks' report follows): this run's, then each other
    part's that an earlier run left in the folder."""
    part, out = test_part(), report.parent
    verdict = lambda rc: "passed" if rc == 0 else f"FAILED (exit {rc})"  # noqa: E731
    log = test_log(out)
    files = f"`{log.name}`, `{log.with_suffix('.xml').name}`" if log.exists() else \
        ", ".join(f"`{f.name}`" for _, f in _logs(out)) or "no log in this folder"
    lines = [f"{verdict(rc)}{f' ({part} part)' if part else ''}: {summary} ({files})"]
    for other, f in _logs(out):
        if part and other not in ("", part):
            orc, line = outcome(f.read_text())
            lines.append(f"{verdict(orc)} ({other} part, an earlier run): {line} (`{f.name}`)")
    head = f"{TESTS_HEADER}\n\n" + "\n\n".join(lines) + "\n\n"
    body = report.read_text() if report.exists() else ""
    if body.startswith(TESTS_HEADER):  # an earlier lead (`python -m perflab.runner.gpucheck tests`): replaced
        i = body.find("\n# ")
        body = body[i + 1:] if i >= 0 else ""
    report.write_text(head + body)


def tests_part_name() -> str:
    """The GPU tests' row in window.jsonl: "tests-quick", "tests-compiled" or "tests-all"."""
    return f"tests-{test_part() or 'all'}"


def tests_step(out: Path, commit: dict, redo: bool, no_tests: bool,
               deadline: window.Deadline | None = None) -> tuple[int, str]:
    """The GPU tests of this call, or an earlier pass at this commit, recorded in window.jsonl. -> (rc, line)"""
    import time

    t0 = time.perf_counter()
    passed = None if redo or no_tests else earlier_pass(out, commit)
    if passed:
        tests = 0, f"{passed} (an earlier run at this commit, kept in this folder; --redo runs them again)"
        window.record(out, tests_part_name(), "skipped", 0.0, f"passed earlier at this commit: {passed}")
    elif no_tests:
        tests = earlier_tests(out)
    else:
        tests = run_gpu_tests(out, commit, test_timeout=estimate.limit_per_test(test_part()), deadline=deadline)
        status = "cut" if tests[0] == CUT else "failed" if tests[0] else "ok"
        window.record(out, tests_part_name(), status, time.perf_counter() - t0, tests[1])
    print(f"gpu-check: GPU tests {tests[1]}", flush=True)
    return tests


def tests_alone(out: Path | None, redo: bool = False, root: Path | None = None, deadline: float | None = None) -> int:
    """The GPU tests ($PERFLAB_GPU_TESTS's part) into the run folder `out` (default: <root>/<gpu kind>/<commit>/)
    without the notebooks (`tools/gpu-session.sh tests`): skipped when they passed there at this commit, compile
    caches in the folder's compile-cache/, REPORT.md led by them. -> pytest's exit status (0 when skipped)."""
    from ..kit.env import git_commit

    kind = gpu_kind()  # on a host without CUDA every GPU test would skip and "pass": refused instead
    commit = git_commit()
    out = Path(out or default_out(kind, commit, root)).resolve()
    window.plan(out, [tests_part_name()])
    with compile_cache(out) as cache:
        print(f"gpu-check: compile caches in {cache} ({folder_mib(cache):.1f} MiB already there)", flush=True)
        tests = tests_step(out, commit, redo, no_tests=False, deadline=window.Deadline(deadline))
    lead_report(out / "REPORT.md", *tests)
    return tests[0]


# ---- the lent host's limits: wheels carried in, compile caches carried out --------------------------------------

WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-.*\.whl$")


def wheel_versions(folder: Path) -> dict[str, list[str]]:
    """{project name (normalized): [wheel files]} of the wheels in `folder`."""
    found: dict[str, list[str]] = {}
    for f in sorted(Path(folder).glob("*.whl")):
        m = WHEEL_NAME.match(f.name)
        name = re.sub(r"[-_.]+", "-", m["name"] if m else f.name).lower()
        found.setdefault(name, []).append(f.name)
    return found


def duplicate_wheels(folder: Path) -> dict[str, list[str]]:
    """The projects with more than one wheel in `folder`: pip refuses the whole install (ResolutionImpossible)."""
    return {name: files for name, files in wheel_versions(folder).items() if len(files) > 1}


def _cache_entries(cache: Path) -> list[Path]:
    """What can be left out of a compile cache one piece at a time: an FX graph cache entry, an AOTAutograd entry,
    any other top-level file or folder (generated code, C++ builds); not triton/ (inductor's FX graph cache bundles
    each graph's Triton kernels and writes them back on a hit) nor locks/."""
    entries = []
    for top in sorted(cache.iterdir()):
        if top.name in ("triton", "locks"):
            continue
        if top.name == "fxgraph" and top.is_dir():
            entries += [e for d in sorted(top.iterdir()) if d.is_dir() for e in sorted(d.iterdir())]
        elif top.name == "aotautograd" and top.is_dir():
            entries += sorted(top.iterdir())
        else:
            entries.append(top)
    return entries


def _files(entry: Path) -> list[Path]:
    return [entry] if entry.is_file() else sorted(f for f in entry.rglob("*") if f.is_file())


def _gz_bytes(files: list[Path]) -> int:
    """About what these files add to a .tgz: their deflated bytes and a tar header each."""
    import zlib

    total = 0
    for f in files:
        z = zlib.compressobj(6)
        total += len(z.compress(f.read_bytes())) + len(z.flush()) + 120
    return total


def pack_cache(root: Path, dest: Path, *, limit: int = 16 * 2**20, parts: int = 2, total: int | None = None) -> dict:
    """The compile caches of the run folders under `root` (root/<kind>/<commit>/compile-cache/) into dest/cache.tgz,
    dest/cache-2.tgz ..., each under `limit` bytes (what can come back from the lent host), at most `parts` files.
    `total`: the parts together at most that (what the next call's carry leaves: `window.cache_budget`).
    Newest entries first: the notebook a window cut off compiled them last, and what finished is not run again at
    this commit; what does not fit is left out (the next window compiles it again). Paths in the archives start at
    root's name, as `tar -C root/.. root` writes them. -> {"parts": [(file, bytes, entries)], "kept": n,
    "left_out": n, "left_out_mib": MiB before compression, "mib": MiB of the caches before compression}."""
    root, dest = Path(root), Path(dest)
    for old in dest.glob("cache*.tgz"):
        old.unlink()
    caches = sorted(root.glob(f"*/*/{CACHE_DIR}"))
    entries = [e for c in caches for e in _cache_entries(c)]
    sized = []
    for e in entries:
        files = _files(e)
        if files:
            sized.append((max(f.stat().st_mtime for f in files), e, files, sum(f.stat().st_size for f in files)))
    sized.sort(key=lambda t: -t[0])
    target = int(limit * 0.94)  # room for the estimate's error; checked after writing
    room = int((limit * parts if total is None else total) * 0.94)
    bins: list[list] = [[] for _ in range(parts)]
    used = [0] * parts
    left = []
    for _, e, files, raw in sized:
        est = _gz_bytes(files)
        fits = sum(used) + est <= room
        i = next((i for i in range(parts) if fits and used[i] + est <= target), None)
        if i is None:
            left.append(raw)
            continue
        bins[i].append((e, raw))
        used[i] += est
    written = []
    for i, items in enumerate(b for b in bins if b):
        name = dest / ("cache.tgz" if i == 0 else f"cache-{i + 1}.tgz")
        while True:
            _write_tgz(name, root, [e for e, _ in items])
            if name.stat().st_size <= limit or len(items) == 1:
                break
            left.append(items.pop()[1])  # the estimate was short: the oldest entry of this part goes
        if name.stat().st_size > limit:
            left.append(items.pop()[1])
            name.unlink()
            continue
        written.append((name.name, name.stat().st_size, len(items)))
    kept = sum(n for *_, n in written)
    return {"parts": written, "kept": kept, "left_out": len(left), "left_out_mib": sum(left) / 2**20,
            "mib": sum(raw for *_, raw in sized) / 2**20}


def _write_tgz(name: Path, root: Path, entries: list[Path]) -> None:
    import tarfile

    with tarfile.open(name, "w:gz") as tar:
        for e in entries:
            tar.add(e, arcname=str(Path(root.name) / e.relative_to(root)))



def check(names: list[str], *, preset: str | None, overrides: list[str], nb_dir: Path | None, p_dir: Path | None,
          out: Path | None, redo: bool, no_tests: bool, kernel_name: str | None, progress: bool,
          cell_timeout: float | None, root: Path | None = None, deadline: float | None = None) -> int:
    """`perflab gpu-check`: the GPU tests (or an earlier pass at this commit), then the notebooks not already ok
    here at this commit, then REPORT.md led by the tests' line; each part's outcome in window.jsonl. With `deadline`
    (seconds from now) a notebook starts only if its estimate fits in what is left, and the one running at the
    deadline is stopped at its cell ("cut"); `cell_timeout` None: sized from the estimate (`estimate.limit_per_cell`).
    -> the exit status (0: all passed, 1: a part failed, 3: the deadline cut a part)"""
    from ..kit.env import git_commit
    from ..kit.paths import check_writable
    from . import catalog, report

    clock = window.Deadline(deadline)
    # names, presets and parameters refused before CUDA is asked for (a rehearsal without a GPU gets this far)
    jobs = catalog.plan(names, preset=preset, overrides=overrides, nb_dir=nb_dir, p_dir=p_dir)
    print(f"gpu-check: {len(jobs)} notebook(s) planned on {preset or 'their defaults'}: "
          + ", ".join(name for name, _, _ in jobs), flush=True)
    kind = gpu_kind()  # in a child process: no CUDA context held here while the notebooks run
    commit = git_commit()
    # absolute: the notebooks' kernels start in their own folder
    out = check_writable(out or default_out(kind, commit, root), "the results", "" if out else " (give --out DIR)")
    done = {} if redo else finished(out, jobs, commit)
    if not resumable(commit):
        print(f"gpu-check: commit {commit_label(commit)}: nothing earlier is taken as done", flush=True)
    window.plan(out, ([] if no_tests else [tests_part_name()]) + [name for name, _, _ in jobs])
    with compile_cache(out) as cache:
        print(f"gpu-check: compile caches in {cache} ({folder_mib(cache):.1f} MiB already there)", flush=True)
        tests = tests_step(out, commit, redo, no_tests, clock)
        for name, run_id in done.items():
            window.record(out, name, "skipped", 0.0, f"ok earlier at this commit (run {run_id}); --redo runs it")
        if done:
            print("gpu-check: skipped, already ok here at this commit with these parameters (--redo runs them "
                  "again): " + ", ".join(f"{name} (run {run_id})" for name, run_id in done.items()), flush=True)
        todo = [job for job in jobs if job[0] not in done]
        limit = cell_timeout or estimate.limit_per_cell(preset, [name for name, _, _ in todo])
        outcomes, cut = notebooks_step(todo, out, clock, preset=preset, p_dir=p_dir, kernel_name=kernel_name,
                                       progress=progress, cell_timeout=limit)
    rc = catalog.run_summary(outcomes, None, todo, out, report.write(out))  # the notebooks' REPORT.md
    lead_report(out / "REPORT.md", *tests)
    print(f"gpu-check: {out / 'REPORT.md'}")
    if rc or tests[0] not in (0, CUT):
        return 1
    return 3 if cut or tests[0] == CUT else 0


def notebooks_step(jobs: list, out: Path, clock: window.Deadline, *, cell_timeout: float | None,
                   **run) -> tuple[list, list[str]]:
    """The notebooks one by one before the deadline, each outcome in window.jsonl: one whose estimate does not fit
    in what is left is not started (unless it is the first), one running at the deadline is stopped at its cell;
    both "cut", and what follows is not started. -> (the outcomes that ended, the names cut)"""
    from . import catalog

    outcomes, cut = [], []
    for i, (name, path, params) in enumerate(jobs):
        need, left = estimate.notebook_estimate(run.get("preset"), name) or 0, clock.left()
        # the call's first notebook always starts (else the time is idle: the estimates are estimates)
        if cut or (i and left < need):
            why = "not started: the call's deadline came first" if cut else \
                f"not started: {left:.0f} s left before the deadline, its estimate {need:.0f} s"
            print(f"gpu-check: {name}: {why}", flush=True)
            window.record(out, name, "cut", 0.0, why)
            cut.append(name)
            continue
        print(f"gpu-check: {name}, each cell stopped at {clock.cap(cell_timeout)} s", flush=True)
        with clock.alarm():
            done, stop = catalog.run_all([(name, path, params)], out, cell_timeout=clock.cap(cell_timeout), **run)
        o = done[-1]
        # cut at the deadline: by its alarm (Ctrl-C's path), or, where a signal did not reach the cell in time, by the
        # cell limit `cap` sets just after the deadline
        if stop is not None or (not o.ok and "CellTimeoutError" in o.error and clock.left() <= 0):
            window.record(out, name, "cut", o.seconds, f"stopped at the deadline, {o.where()}")
            cut.append(name)
            continue
        window.record(out, name, "ok" if o.ok else "failed", o.seconds, "" if o.ok else o.describe().split(": ", 1)[1])
        outcomes.append(o)
    return outcomes, cut


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m perflab.runner.gpucheck", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheels", help="refuse a wheel folder holding two versions of a project")
    w.add_argument("folder", type=Path)
    c = sub.add_parser("pack-cache", help="the run folders' compile caches into OUT/cache*.tgz, each under the limit")
    c.add_argument("root", type=Path, help="the folder of run folders (/tmp/res)")
    c.add_argument("dest", type=Path)
    c.add_argument("--limit-mib", type=float, default=16.0)
    c.add_argument("--parts", type=int, default=2)
    c.add_argument("--total-mib", type=float, default=None, help="all parts together at most (the carry's room)")
    t = sub.add_parser("tests", help="the GPU tests alone ($PERFLAB_GPU_TESTS's part) into a run folder")
    t.add_argument("--out", type=Path, default=None, help="the run folder (default: <root>/<gpu kind>/<commit>/)")
    t.add_argument("--root", type=Path, default=None, help="where the run folders go (default: outputs/)")
    t.add_argument("--redo", action="store_true", help="run them even if they passed there at this commit")
    t.add_argument("--deadline", type=float, default=None, help="seconds from now: stopped then, said so")
    args = ap.parse_args(argv)
    if args.cmd == "tests":
        try:
            return tests_alone(args.out, args.redo, args.root, args.deadline)
        except NoGPU as e:
            print(f"gpu-check tests: {e}", file=sys.stderr)
            return 2
    if args.cmd == "wheels":
        found, dups = wheel_versions(args.folder), duplicate_wheels(args.folder)
        for name, files in dups.items():
            print(f"two versions of {name} in {args.folder}: {', '.join(files)} (pip refuses the install)", file=sys.stderr)
        print(f"{args.folder}: {len(found)} projects, {sum(map(len, found.values()))} wheels")
        return 1 if dups or not found else 0
    total = None if args.total_mib is None else int(args.total_mib * 2**20)
    r = pack_cache(args.root, args.dest, limit=int(args.limit_mib * 2**20), parts=args.parts, total=total)
    for name, size, n in r["parts"]:
        print(f"{name}: {size / 2**20:.1f} MiB ({n} cache entries; the limit is {args.limit_mib:g} MiB a file)")
    print(f"compile caches: {r['mib']:.1f} MiB before compression, {r['kept']} entries kept"
          + (f", {r['left_out']} left out ({r['left_out_mib']:.1f} MiB, the oldest first: the next window compiles "
             "them again)" if r["left_out"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
