"""The flake finder (issue 48): the fast tier run again and again, each run in another random order with another seed
(pytest-randomly: it shuffles the tests and reseeds `random`, numpy and its own before each test), so that a test
that passes only in the order or with the seed it happens to get fails here, with the seed that reproduces it.

    python mutation/flakes.py --runs 20            # outputs/mutation/<short commit>/flakes.json, and a line per run
    python mutation/flakes.py --runs 5 tests/kit   # some folders only

A failed run's tests are named with the seed: `pytest -m "<fast>" -o addopts=--strict-markers -p randomly
-p randomly --randomly-seed=S tests` runs that order again. pyproject.toml turns pytest-randomly off for every other
run (make test, make test-fast, mutmut's runs), so the suite's order stays the one a developer reads.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = "not slow and not gpu and not wheel and not slurm and not browser"


def short_commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def command(seed: int, paths: list[str], workers: int = 1) -> list[str]:
    # -o addopts: the ini's own without its "-p no:randomly"; -p randomly: loaded even without plugin autoload;
    # workers > 1: pytest-xdist, a file per worker (as make test), each worker's tests in the seed's shuffled order
    par = ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else []
    return [sys.executable, "-m", "pytest", "-q", "-m", FAST, "-o", "addopts=--strict-markers", "-p", "randomly",
            "-p", "no:cacheprovider", f"--randomly-seed={seed}", "-rf", "--tb=line", *par, *paths]


def one_run(seed: int, paths: list[str], timeout: float, workers: int = 1) -> dict:
    t0 = time.monotonic()
    env = dict(os.environ)
    env.pop("PERFLAB_OUT", None)
    try:
        r = subprocess.run(["nice", "-n", "19", *command(seed, paths, workers)], cwd=ROOT, capture_output=True, text=True,
                           timeout=timeout, env=env)
        code, out = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        code, out = -1, "timed out"
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED ")]
    errors = [line.split(" ", 1)[1].split(" - ")[0] for line in out.splitlines() if line.startswith("ERROR ")]
    summary = next((line for line in reversed(out.splitlines()) if " in " in line and ("passed" in line or
                                                                                        "failed" in line)), "")
    return {"seed": seed, "exit": code, "failed": failed, "errors": errors, "summary": summary.strip("= "),
            "seconds": round(time.monotonic() - t0, 1), "tail": out[-3000:] if code != 0 else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=["tests"], help="test folders or files (default: tests)")
    parser.add_argument("--runs", type=int, default=20, help="how many runs (default 20: issue 48's bar)")
    parser.add_argument("--seed", type=int, default=None, help="the first run's seed (default: drawn); then +1")
    parser.add_argument("--out", type=Path, help="results folder (default outputs/mutation/<short commit>)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers per run (default 1: one process "
                                                                 "sees every test's order)")
    args = parser.parse_args()
    try:
        import pytest_randomly  # noqa: F401
    except ImportError:
        sys.exit("pytest-randomly is not installed: pip install -e '.[mutation]' (make flakes does it)")
    out = (args.out or ROOT / "outputs" / "mutation" / short_commit()).resolve()
    out.mkdir(parents=True, exist_ok=True)
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(10 ** 9)
    runs = []
    for i in range(args.runs):
        run = one_run(first + i, args.paths, args.timeout, args.workers)
        runs.append(run)
        print(f"run {i + 1}/{args.runs} seed {run['seed']}: exit {run['exit']}, {run['summary']} ({run['seconds']:.0f} s)"
              + "".join(f"\n    FAILED {t}" for t in run["failed"] + run["errors"]), flush=True)
        passed = sum(r["exit"] == 0 for r in runs)
        (out / "flakes.json").write_text(json.dumps({
            "commit": short_commit(), "paths": args.paths, "marker": FAST, "workers": args.workers,
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "runs": len(runs), "passed": passed, "in_a_row": _in_a_row(runs), "detail": runs}, indent=1) + "\n")
    print(f"{sum(r['exit'] == 0 for r in runs)} of {len(runs)} runs passed; results: {out / 'flakes.json'}")
    sys.exit(0 if all(r["exit"] == 0 for r in runs) else 1)


def _in_a_row(runs: list[dict]) -> int:
    """The longest streak of passing runs."""
    best = cur = 0
    for r in runs:
        cur = cur + 1 if r["exit"] == 0 else 0
        best = max(best, cur)
    return best


if __name__ == "__main__":
    main()
