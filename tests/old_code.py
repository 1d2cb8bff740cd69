"""A module of the project as it was at an earlier commit, read from git, to run old code under today's checks
(tests/kit/test_host_transfers.py, tests/kit/test_cudagraph_lifetimes.py): a check that the old code fails (or, for code
that ran on a GPU, passes) shows what the check can see."""
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def old_module(commit: str, relpath: str, package: str):
    """`relpath` as it was at `commit`, loaded inside `package`: its relative imports see today's modules (or what a
    test has put in sys.modules). Skips without the project's history; a path the commit does not hold is an error."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the project's git history (a clone, not an exported copy)")
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip(f"commit {commit} is not in this clone (a shallow clone?)")
    got = subprocess.run(["git", "show", f"{commit}:{relpath}"], cwd=ROOT, capture_output=True, text=True)
    if got.returncode != 0:
        raise FileNotFoundError(f"{relpath} at {commit}: {got.stderr.strip()}")
    name = f"{package}._at_{commit}_{Path(relpath).stem}"
    mod = types.ModuleType(name)
    mod.__package__, mod.__file__ = package, f"{commit}:{relpath}"
    sys.modules[name] = mod      # kept: dynamo looks the module of a traced function up by name
    exec(compile(got.stdout, mod.__file__, "exec"), mod.__dict__)
    return mod
