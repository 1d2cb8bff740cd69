"""`perflab gpu-check`: the first thing to run when a GPU host is at hand for a short time.

    perflab gpu-check                        # pytest -m gpu, then all six notebooks on params/gpu-smoke/
    perflab gpu-check 03 05 06 --params gpu  # the full GPU presets of some notebooks (no tests: --no-tests)

It writes one folder, `outputs/<gpu kind>/<commit>/` unless `--out` says otherwise: `gpu-tests.txt` and
`gpu-tests.xml` (pytest's output and JUnit file), the notebooks' results, plots and executed copies as
`perflab run` writes them, and `REPORT.md`, which leads with the GPU tests' summary. The commit is the project's
(`perflab.env.git_commit`: $PERFLAB_COMMIT where the tree is a copy without .git). On a host whose commands are cut
at a few minutes, `tools/gpu-session.sh` starts this detached and collects the folder.

Resumable, notebook by notebook: run again on the same folder, it skips each notebook whose latest execution there
with the same parameters at this commit ended ok (`finished`), and the GPU tests when the last run of them there
passed at this commit (`earlier_pass`); a failed or interrupted one runs again, `--redo` runs everything. Only a clean
tree's known commit counts: on a dirty or unknown one nothing is skipped. Inductor's and Triton's compile caches go
to `<folder>/compile-cache/` (TORCHINDUCTOR_CACHE_DIR, unless set already), so a later window that brings the folder
back finds the kernels already compiled.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .paths import repo_root

TESTS_HEADER = "## GPU tests (`pytest -m gpu`)"
CACHE_DIR = "compile-cache"  # in the run folder: inductor's FX graph and AOT caches, Triton's kernels


class NoGPU(RuntimeError):
    pass


def gpu_kind() -> str:
    """`perflab.env.device_kind` of the CUDA device ("h100", ...), asked in a child process so that this one (the
    runner) holds no CUDA context while the notebooks run; NoGPU with the reason on a host without CUDA."""
    code = "from perflab.env import device_kind, pick_device; print(device_kind(pick_device('cuda')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        raise NoGPU(f"needs a GPU host: {(r.stderr.strip().splitlines() or ['no CUDA device'])[-1]}")
    return r.stdout.strip()


def default_out(kind: str, commit: dict) -> Path:
    """outputs/<gpu kind>/<short commit>[-dirty]/ ("unknown-commit" when the commit cannot be told)."""
    sha = (commit["commit"][:7] if commit.get("commit") else "unknown-commit") + ("-dirty" if commit.get("dirty") else "")
    return repo_root() / "outputs" / kind / sha


def commit_label(commit: dict) -> str:
    """"<sha>", "<sha>-dirty" or "unknown": what a folder's runs were made of."""
    return (commit.get("commit") or "unknown") + ("-dirty" if commit.get("commit") and commit.get("dirty") else "")


def resumable(commit: dict) -> bool:
    """Whether earlier runs can stand for this one: a known commit of a clean tree (a dirty tree may differ between
    two runs with the same label)."""
    return bool(commit.get("commit")) and not commit.get("dirty")


def run_gpu_tests(out: Path, commit: dict, tests: Path | None = None) -> tuple[int, str]:
    """`pytest -m gpu` over the project's tests, its output in out/gpu-tests.txt (after a first line naming the
    commit) and out/gpu-tests.xml. -> (pytest's exit status, its summary line)."""
    tests = tests or repo_root() / "tests"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", str(tests), "-p", "no:cacheprovider",
           f"--junitxml={out / 'gpu-tests.xml'}"]
    print("gpu-check:", " ".join(cmd[1:]), flush=True)
    with open(out / "gpu-tests.txt", "w") as log:
        log.write(f"perflab gpu-check: pytest -m gpu at commit {commit_label(commit)}\n")
        log.flush()
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root()).returncode
    return rc, summary_line((out / "gpu-tests.txt").read_text())


def outcome(text: str) -> tuple[int, str]:
    """A test log's outcome: (0, line) only when pytest's summary line is there and names no failure or error (a
    log cut off before its summary counts as failed)."""
    line = summary_line(text)
    found = not line.startswith("no summary line")
    return int(not found or bool(re.search(r"\b(failed|error|errors)\b", line))), line


def earlier_tests(out: Path) -> tuple[int, str]:
    """Without a test run (--no-tests): the outcome of the one an earlier gpu-check left in `out`, if any."""
    log = out / "gpu-tests.txt"
    if not log.exists():
        return 0, "not run (--no-tests)"
    rc, line = outcome(log.read_text())
    return rc, f"{line} (an earlier run, kept in this folder)"


def earlier_pass(out: Path, commit: dict) -> str | None:
    """The summary line of the GPU tests an earlier gpu-check ran in `out` at this commit, if they passed."""
    log = out / "gpu-tests.txt"
    if not resumable(commit) or not log.exists():
        return None
    text = log.read_text()
    if not text.startswith(f"perflab gpu-check: pytest -m gpu at commit {commit_label(commit)}\n"):
        return None
    rc, line = outcome(text)
    return None if rc else line


def finished(out: Path, jobs: list[tuple[str, Path, dict]], commit: dict) -> dict[str, str]:
    """{notebook: run id} for each job (`perflab.notebooks.plan`'s) whose latest execution in out/results.jsonl with
    the same parameters at this commit ended ok. The runner's status rows carry all three: its parameters, its
    environment stamp (`perflab.env.host_stamp`) and how it ended."""
    from .results import executions, read_rows

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
    """Put the GPU tests' outcome at the top of REPORT.md (the notebooks' report follows)."""
    verdict = "passed" if rc == 0 else f"FAILED (exit {rc})"
    head = f"{TESTS_HEADER}\n\n{verdict}: {summary} (`gpu-tests.txt`, `gpu-tests.xml`)\n\n"
    body = report.read_text() if report.exists() else ""
    report.write_text(head + body)
