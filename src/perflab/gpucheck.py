"""`perflab gpu-check`: the first thing to run when a GPU host is at hand for a short time.

    perflab gpu-check                        # pytest -m gpu, then all six notebooks on params/gpu-smoke/
    perflab gpu-check 03 05 06 --params gpu  # the full GPU presets of some notebooks (no tests: --no-tests)

It writes one folder, `outputs/<gpu kind>/<commit>/` unless `--out` says otherwise: `gpu-tests.txt` and
`gpu-tests.xml` (pytest's output and JUnit file), the notebooks' results, plots and executed copies as
`perflab run` writes them, and `REPORT.md`, which leads with the GPU tests' summary. The commit is the project's
(`perflab.env.git_commit`: $PERFLAB_COMMIT where the tree is a copy without .git). On a host whose commands are cut
at a few minutes, `tools/gpu-session.sh` starts this detached and collects the folder.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .paths import repo_root

TESTS_HEADER = "## GPU tests (`pytest -m gpu`)"


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


def run_gpu_tests(out: Path, tests: Path | None = None) -> tuple[int, str]:
    """`pytest -m gpu` over the project's tests, its output in out/gpu-tests.txt and out/gpu-tests.xml.
    -> (pytest's exit status, its summary line)."""
    tests = tests or repo_root() / "tests"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", str(tests), "-p", "no:cacheprovider",
           f"--junitxml={out / 'gpu-tests.xml'}"]
    print("gpu-check:", " ".join(cmd[1:]), flush=True)
    with open(out / "gpu-tests.txt", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root()).returncode
    return rc, summary_line((out / "gpu-tests.txt").read_text())


def earlier_tests(out: Path) -> tuple[int, str]:
    """Without a test run (--no-tests): the outcome of the one an earlier gpu-check left in `out`, if any."""
    log = out / "gpu-tests.txt"
    if not log.exists():
        return 0, "not run (--no-tests)"
    line = summary_line(log.read_text())
    return int(bool(re.search(r"\b(failed|error|errors)\b", line))), f"{line} (an earlier run, kept in this folder)"


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
