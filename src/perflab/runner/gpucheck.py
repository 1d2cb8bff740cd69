"""`perflab gpu-check`: the first thing to run when a GPU host is at hand for a short time.

    perflab gpu-check                        # pytest -m gpu, then every notebook on params/gpu-smoke/
    perflab gpu-check 03 05 06 --params gpu  # the full GPU presets of some notebooks (no tests: --no-tests)
    perflab gpu-check --tests-only           # the GPU tests alone, $PERFLAB_GPU_TESTS's part (gpu-session.sh tests)

It writes one folder, `<root>/<gpu kind>/<commit>/` (root: `outputs/`, `--root`) unless `--out` says otherwise:
`gpu-tests.txt` and `gpu-tests.xml` (pytest's output and JUnit file), the notebooks' results, plots and executed copies
as `perflab run` writes them, `REPORT.md`, which leads with the GPU tests' summary, and `window.jsonl` (each part's
outcome, call by call: `perflab.runner.deadline`). The commit is the project's (`perflab.kit.env.git_commit`:
$PERFLAB_COMMIT where the tree is a copy without .git). On a host whose commands are cut at 10 minutes,
`tools/gpu-session.sh` runs this in one call to a deadline and packs the folder.

Resumable, notebook by notebook: run again on the same folder, it skips each notebook whose latest execution there
with the same parameters at this commit ended ok (`finished`), and the GPU tests when the last run of them there
passed at this commit (`perflab.runner.gpu_tests.earlier_pass`); a failed or interrupted one runs again, `--redo` runs
everything. Only a clean tree's known commit counts: on a dirty or unknown one nothing is skipped. Inductor's and
Triton's compile caches go to `<folder>/compile-cache/` (`compile_cache`), so a later run there (or a later window
that brings the folder back: tools/gpu-session.sh) finds the kernels already compiled.

Presets by the card: `--params gpu` on a device whose kind has its own folder (`params/gpu-h200/`: the H100's
`params/gpu/` with the sizes an H200's memory fills) runs that one (`catalog.kind_preset`); `--params gpu-h200` names
it on any host.

A hard stop for everything: with `--deadline SECONDS` (tools/gpu-session.sh gives the runner its share of the call)
a notebook starts only if its estimate (`perflab.runner.estimate`) fits in what is left, the first of the call
always, and the one running at the deadline is stopped at its cell, as Ctrl-C stops it (`notebooks_step`); the GPU
tests are stopped there too. Each cell stops at a limit sized from the estimate (`--cell-timeout` to choose another)
and each GPU test at its part's (pytest-timeout). Every child it starts has a limit: `gpu_kind`'s (`GPU_KIND_S`),
the GPU tests' (`perflab.runner.gpu_tests`), each notebook's kernel (papermill's start and its cells' limits). Each
part's outcome goes to window.jsonl (ok, failed, skipped, cut); the exit status is 0, 1 (a part failed) or 3 (the
deadline cut one; the next call goes on from there). The GPU tests' two parts, their logs and REPORT.md's lead: `perflab.runner.gpu_tests`.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from ..kit.paths import repo_root
from . import deadline as window_log
from . import estimate
from .gpu_tests import CUT, commit_label, lead_report, resumable, tests_part_name, tests_step

CACHE_DIR = "compile-cache"  # in the run folder: inductor's FX graph and AOT caches, Triton's kernels
GPU_KIND_S = 120.0  # gpu_kind's child (torch's import and CUDA's start: ~11 s on 1a70d9c's H100), at most


class NoGPU(RuntimeError):
    pass


def gpu_kind(timeout: float = GPU_KIND_S) -> str:
    """`perflab.kit.env.device_kind` of the CUDA device ("h100", "h200", ...), asked in a child process so that this
    one (the runner) holds no CUDA context while the notebooks run; NoGPU with the reason on a host without CUDA, and
    when the child has not answered in `timeout` seconds (a CUDA start that hangs: killed, the window goes on)."""
    code = "from perflab.kit.env import device_kind, pick_device; print(device_kind(pick_device('cuda')))"
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NoGPU(f"needs a GPU host: CUDA did not start in {timeout:g} s (torch's import and the device's first "
                    "context, asked in a child process, which was killed)") from None
    if r.returncode != 0:
        raise NoGPU(f"needs a GPU host: {(r.stderr.strip().splitlines() or ['no CUDA device'])[-1]}")
    return r.stdout.strip()


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
    window_log.plan(out, [tests_part_name()])
    with compile_cache(out) as cache:
        print(f"gpu-check: compile caches in {cache} ({folder_mib(cache):.1f} MiB already there)", flush=True)
        tests = tests_step(out, commit, redo, no_tests=False, deadline=window_log.Deadline(deadline))
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

    clock = window_log.Deadline(deadline)
    # names, presets and parameters refused before CUDA is asked for (a rehearsal without a GPU gets this far)
    jobs = catalog.plan(names, preset=preset, overrides=overrides, nb_dir=nb_dir, p_dir=p_dir)
    print(f"gpu-check: {len(jobs)} notebook(s) planned on {preset or 'their defaults'}: "
          + ", ".join(name for name, _, _ in jobs), flush=True)
    kind = gpu_kind()  # in a child process: no CUDA context held here while the notebooks run
    chosen = catalog.kind_preset(preset, kind, p_dir=p_dir, nb_dir=nb_dir)
    if chosen != preset:  # params/gpu-<kind>/: this card's sizes
        print(f"gpu-check: a {kind}: preset {chosen!r} (params/{chosen}/) for {preset!r}", flush=True)
        preset = chosen
        jobs = catalog.plan(names, preset=preset, overrides=overrides, nb_dir=nb_dir, p_dir=p_dir)
    commit = git_commit()
    # absolute: the notebooks' kernels start in their own folder
    out = check_writable(out or default_out(kind, commit, root), "the results", "" if out else " (give --out DIR)")
    done = {} if redo else finished(out, jobs, commit)
    if not resumable(commit):
        print(f"gpu-check: commit {commit_label(commit)}: nothing earlier is taken as done", flush=True)
    window_log.plan(out, ([] if no_tests else [tests_part_name()]) + [name for name, _, _ in jobs])
    with compile_cache(out) as cache:
        print(f"gpu-check: compile caches in {cache} ({folder_mib(cache):.1f} MiB already there)", flush=True)
        tests = tests_step(out, commit, redo, no_tests, clock)
        for name, run_id in done.items():
            window_log.record(out, name, "skipped", 0.0, f"ok earlier at this commit (run {run_id}); --redo runs it")
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


def notebooks_step(jobs: list, out: Path, clock: window_log.Deadline, *, cell_timeout: float | None,
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
            window_log.record(out, name, "cut", 0.0, why)
            cut.append(name)
            continue
        print(f"gpu-check: {name}, each cell stopped at {clock.cap(cell_timeout)} s", flush=True)
        with clock.alarm():
            done, stop = catalog.run_all([(name, path, params)], out, cell_timeout=clock.cap(cell_timeout), **run)
        o = done[-1]
        # cut at the deadline: by its alarm (Ctrl-C's path), or, where a signal did not reach the cell in time, by the
        # cell limit `cap` sets just after the deadline
        if stop is not None or (not o.ok and "CellTimeoutError" in o.error and clock.left() <= 0):
            window_log.record(out, name, "cut", o.seconds, f"stopped at the deadline, {o.where()}")
            cut.append(name)
            continue
        window_log.record(out, name, "ok" if o.ok else "failed", o.seconds, "" if o.ok else o.describe().split(": ", 1)[1])
        outcomes.append(o)
    return outcomes, cut
