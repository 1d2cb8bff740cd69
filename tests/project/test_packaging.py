"""pyproject.toml and environment.yml must install the same packages at the same pins."""
import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _norm(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_lists_the_same_packages_as_pyproject():
    pp = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_norm(r) for r in pp["dependencies"] + pp["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {_norm(r) for r in pip if not r.startswith("-")}
    assert listed == wanted, {"only in environment.yml": listed - wanted, "only in pyproject": wanted - listed}
    assert "-e ." in pip  # the package itself, editable, as make installs it


def test_the_study_extra_pins_what_dev_pins():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dev = dict(_norm(r) for r in extras["dev"])
    assert {name: pin for name, pin in map(_norm, extras["study"])} == {n: dev[n] for n in ("pytest", "nbval", "ruff")}


def test_makefile_pins_the_torch_that_ci_installs():
    assert "TORCH       ?= torch==2.13.0" in (ROOT / "Makefile").read_text()


def test_ci_tests_the_torch_floor_that_pyproject_declares():
    pp = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = next(r for r in pp["dependencies"] if _norm(r)[0] == "torch")
    assert floor == "torch>=2.11"
    assert "MIN_TORCH ?= torch==2.11.0" in (ROOT / "Makefile").read_text()   # `make test-min`
    assert "\nmake test-min" in (ROOT / ".ci" / "run").read_text()
    assert "\nmake test-wheel" in (ROOT / ".ci" / "run").read_text()   # the wheel test, left out of make test


def test_the_other_kernels_leg_compiles_into_its_own_inductor_cache():
    """Inductor's cache key does not hold ATEN_CPU_CAPABILITY: `make nbval-kernels` sharing the user's cache wrote
    scalar kernels that every later compile of the same graph read back (02's compiled LM iteration went from 2.9x
    faster than eager to 1.7x slower in the next refresh). The leg runs with a cache of its own."""
    import subprocess

    out = subprocess.run(["make", "-n", "--no-print-directory", "nbval-kernels"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout.replace("\\\n", " ")
    line = next(ln for ln in out.splitlines() if ln.startswith("ATEN_CPU_CAPABILITY=default"))
    assert "TORCHINDUCTOR_CACHE_DIR=" in line and "perflab-inductor-aten-default" in line and "nbval" in line, line
