"""`perflab gpu-check`: the first thing to run when a GPU host is at hand for a short time.

    perflab gpu-check                        # pytest -m gpu, then all six notebooks on params/gpu-smoke/
    perflab gpu-check 03 05 06 --params gpu  # the full GPU presets of some notebooks (no tests: --no-tests)
    perflab gpu-check --tests-only           # the GPU tests alone, $PERFLAB_GPU_TESTS's part (gpu-session.sh tests)

It writes one folder, `<root>/<gpu kind>/<commit>/` (root: `outputs/`, `--root`) unless `--out` says otherwise:
`gpu-tests.txt` and `gpu-tests.xml` (pytest's output and JUnit file), the notebooks' results, plots and executed copies
as `perflab run` writes them, `REPORT.md`, which leads with the GPU tests' summary, and `window.jsonl` (each part's
outcome, call by call: `perflab.runner.window`). The commit is the project's (`perflab.kit.env.git_commit`:
$PERFLAB_COMMIT where the tree is a copy without .git). On a host whose commands are cut at 10 minutes,
`tools/gpu-session.sh` runs this in one call to a deadline and packs the folder.

Resumable, notebook by notebook: run again on the same folder, it skips each notebook whose latest execution there
with the same parameters at this commit ended ok (`finished`), and the GPU tests when the last run of them there
passed at this commit (`perflab.runner.gpu_tests.earlier_pass`); a failed or interrupted one runs again, `--redo` runs
everything. Only a clean tree's known commit counts: on a dirty or unknown one nothing is skipped. Inductor's and
Triton's compile caches go to `<folder>/compile-cache/` (`perflab.runner.compile_cache`), so a later window that
brings the folder back finds the kernels already compiled.

A hard stop for everything: with `--deadline SECONDS` (tools/gpu-session.sh gives the runner its share of the call)
a notebook starts only if its estimate (`perflab.runner.estimate`) fits in what is left, the first of the call
always, and the one running at the deadline is stopped at its cell, as Ctrl-C stops it (`notebooks_step`); the GPU
tests are stopped there too. Each cell stops at a limit sized from the estimate (`--cell-timeout` to choose another)
and each GPU test at its part's (`perflab.runner.testguard`). Each part's outcome goes to window.jsonl (ok, failed,
skipped, cut); the exit status is 0, 1 (a part failed) or 3 (the deadline cut one; the next call goes on from there).
The GPU tests' two parts, their logs and REPORT.md's lead: `perflab.runner.gpu_tests`.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..kit.paths import repo_root
from . import estimate, window
from .compile_cache import compile_cache, folder_mib
from .gpu_tests import CUT, commit_label, lead_report, resumable, tests_part_name, tests_step


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


def tests_alone(out: Path | None, redo: bool = False, root: Path | None = None, deadline: float | None = None) -> int:
    """The GPU tests ($PERFLAB_GPU_TESTS's part) into the run folder `out` (default: <root>/<gpu kind>/<commit>/)
    without the notebooks (`perflab gpu-check --tests-only`, as `tools/gpu-session.sh tests` runs it): skipped when
    they passed there at this commit, compile caches in the folder's compile-cache/, REPORT.md led by them. ->
    pytest's exit status (0 when skipped)."""
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
