"""The GPU tests of `perflab gpu-check`: `pytest -m gpu` in parts, each part's log, whether an earlier run at this
commit stands for this one, and REPORT.md's lead section.

The GPU tests come in two parts on a host lent for minutes ($PERFLAB_GPU_TESTS; unset: all of them in one run):
"quick" (`QUICK_GPU_TESTS`: eager code on CUDA, no inductor compile, no subprocess; `tools/gpu-session.sh smoke`
runs them with the smoke notebooks) and "compiled" (every other `-m gpu` test: inductor's kernels, CUDA graphs,
torchrun, the new study, nbval; `tools/gpu-session.sh tests`, or `full --tests NAME ...`). Each part keeps its own log
(`gpu-tests-quick.txt`, ...), is skipped once it passed at this commit, and REPORT.md leads with every part's outcome
found in the folder (params/gpu-smoke/ESTIMATE.md: why the split, and the windows). Each GPU test stops at its part's
limit (pytest-timeout's signal method: the test fails, the run goes on), the whole run at the call's deadline, and a
run that prints nothing for longer than a test's limit and GRACE_S (a test stuck where no signal reaches Python: a C
call waiting on the device) is stopped there, its threads' stacks in the log first (pytest's faulthandler_timeout).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from ..kit.paths import repo_root
from . import deadline as window
from . import estimate
from .deadline import QUICK_GPU_TESTS  # the quick part

TESTS_HEADER = "## GPU tests (`pytest -m gpu`)"
PART_ENV = "PERFLAB_GPU_TESTS"  # quick, compiled, or all (unset)
PARTS = ("quick", "compiled")


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
STUCK = 125  # their status when a test ran past its limit where the alarm could not stop it
GRACE_S = 30.0  # after a test's limit, for one the alarm cannot reach: its stacks are dumped, then pytest is stopped


def run_gpu_tests(out: Path, commit: dict, tests: Path | None = None, *, test_timeout: float | None = None,
                  deadline: window.Deadline | None = None) -> tuple[int, str]:
    """`pytest -m gpu` over the project's tests (this process's part of them, `test_part`), its output in
    out/gpu-tests[-part].txt (after a first line naming the part and the commit) and the .xml beside it; each test
    stopped at `test_timeout` seconds (pytest-timeout, signal method), the whole run at the deadline (SIGINT, so pytest
    still writes its summary; killed 20 s later), and a run silent for test_timeout + GRACE_S (a test the alarm cannot
    reach) the same way, its stacks dumped into the log first. -> (pytest's exit status, CUT or STUCK; its summary
    line)."""
    import time

    tests = tests or repo_root() / "tests"
    part, log_path = test_part(), test_log(out)
    out.mkdir(parents=True, exist_ok=True)
    # -v: each test's node id as it starts (the log grows at every start: the silence watched is the test's own)
    cmd = [sys.executable, "-m", "pytest", "-v", "-m", "gpu", *pytest_selection(part, tests), "-p", "no:cacheprovider",
           f"--junitxml={log_path.with_suffix('.xml')}"]
    if test_timeout:  # pytest-timeout (the image has it; pyproject's dev extra pins it)
        cmd += [f"--timeout={test_timeout:g}", "--timeout-method=signal",
                "-o", f"faulthandler_timeout={test_timeout + GRACE_S / 2:g}"]
    left = (deadline or window.Deadline(None)).left()
    print("gpu-check:", " ".join(cmd[1:6]), f"({part} part)" if part else "",
          f"each test stopped at {test_timeout:g} s" if test_timeout else "", flush=True)
    silent = test_timeout + GRACE_S if test_timeout else float("inf")
    with open(log_path, "w") as log:
        log.write(_header(commit, part))
        log.flush()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root(),
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})   # each test's mark as it ends: the watch
        end, size, quiet_since, rc = time.monotonic() + left, -1, time.monotonic(), None
        while rc is None:
            try:
                rc = p.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                grown = log_path.stat().st_size
                if grown != size:
                    size, quiet_since = grown, now
                if now >= end or now - quiet_since >= silent:
                    rc = _stop(p, CUT if now >= end else STUCK)
    line = summary_line(log_path.read_text())
    if rc == CUT:
        return rc, f"stopped by the call's deadline: {line}"
    if rc == STUCK:
        return rc, (f"stopped: no output for {silent:g} s (a test past its {test_timeout:g} s limit where the alarm could "
                    f"not stop it; its stacks are in {log_path.name}): {line}")
    return rc, line


def _stop(p: subprocess.Popen, status: int) -> int:
    p.send_signal(signal.SIGINT)  # pytest stops and writes its summary line
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return status


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
    if body.startswith(TESTS_HEADER):  # an earlier lead (`perflab gpu-check --tests-only`): replaced
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
        status = "cut" if tests[0] == CUT else "failed" if tests[0] else "ok"   # STUCK: failed
        window.record(out, tests_part_name(), status, time.perf_counter() - t0, tests[1])
    print(f"gpu-check: GPU tests {tests[1]}", flush=True)
    return tests
