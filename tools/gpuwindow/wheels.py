"""The wheels a GPU call installs, for whichever CPython the host has, and the start's import check.

The host has no network and its own Python (3.12.3 in November; KINDS.md). `tools/gpu-wheels.txt` pins what the call
needs beyond the image (`tools/gpu-image.txt`); `fetch` brings each pin's wheel for every Python of PYTHONS into .whl/:
a pure wheel (`-none-any`) once into .whl/, a binary one into .whl/cp311/, .whl/cp312/, .whl/cp313/, so the call
installs .whl/*.whl and the folder of `python3 -V` (`tools/gpu-session.sh`). `check` refuses a set that would stop
the call there: a pin missing for a Python, two versions of one project (pip refuses the whole install), a wheel that
shadows an image package, or a requirement (its markers read for that Python on x86-64 Linux) that neither the set nor
the image meets (an image package whose version nobody here read is taken as meeting it, and named).

`modules` lists every module the notebooks, the package and the test files (their module level: pytest collects
every file of tests/ on the host) import that is not the standard library's or the project's, with the runner's own
(papermill, the kernel, nbval, pytest-timeout); `import_all` imports them one by one on the host before anything
runs, torch and the image's packages included, and fails within seconds naming the first that does not import.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PYTHONS = ("3.11", "3.12", "3.13")
PINS = Path("tools") / "gpu-wheels.txt"
IMAGE = Path("tools") / "gpu-image.txt"
LOCK = Path("tools") / "gpu-wheels.lock"   # each file fetched: its folder, name, bytes and sha256
# manylinux tags pip matches exactly: the host's glibc is 2.39 (the last GPU run's platform string)
PLATFORMS = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64", "linux_x86_64",
             *(f"manylinux_2_{n}_x86_64" for n in range(5, 40))]
RUNTIME = ("papermill", "nbclient", "nbformat", "jupyter_client", "ipykernel", "nbval", "pytest", "pytest_timeout")
WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pin_lines(path: Path) -> list[str]:
    lines = [line.split("#")[0].strip() for line in Path(path).read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("!")]


def left_out(path: Path = PINS) -> dict[str, str]:
    """{project: why} of tools/gpu-wheels.txt's `!NAME  # why` lines: required by a wheel of the set, imported only
    for what a call never does, so not carried."""
    found = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("!"):
            name, _, why = line[1:].partition("#")
            found[norm(name.strip())] = why.strip()
    return found


def read_pins(path: Path = PINS) -> dict[str, str]:
    """{project: version} of tools/gpu-wheels.txt: one `name==version` a line."""
    pins = {}
    for line in _pin_lines(path):
        name, sep, version = line.partition("==")
        if not sep or not version.strip():
            raise ValueError(f"{path}: {line!r} is not pinned (name==version)")
        if norm(name) in pins:
            raise ValueError(f"{path}: {name} pinned twice")
        pins[norm(name)] = version.strip()
    return pins


def read_image(path: Path = IMAGE) -> dict[str, str | None]:
    """{project: version or None (not read)} of tools/gpu-image.txt."""
    return {norm(n.partition("==")[0]): (n.partition("==")[2] or None) for n in _pin_lines(path)}


def python_tag(version: str) -> str:
    return "cp" + version.replace(".", "")


def fetch(dest: Path, pins: dict[str, str], pythons=PYTHONS, pip: list[str] | None = None) -> dict[str, int]:
    """Empty `dest` and bring every pin's wheel for each Python in `pythons` (binary only, CPython, x86-64 Linux):
    pure wheels into dest/, the others into dest/cpXY/. -> {folder: wheels}. Raises with pip's message if one is
    missing."""
    dest = Path(dest)
    pip = pip or [sys.executable, "-m", "pip"]
    if dest.exists():
        shutil.rmtree(dest)  # exactly one version of each wheel: nothing left from an earlier prepare
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        got = {}
        for py in pythons:
            d = Path(tmp) / python_tag(py)
            cmd = [*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", py,
                   "--implementation", "cp", *(a for p in PLATFORMS for a in ("--platform", p)), "--platform", "any",
                   "-d", str(d), *(f"{n}=={v}" for n, v in pins.items())]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"pip download for Python {py} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
            got[py] = {f.name: f for f in d.glob("*.whl")}
        # one file for every Python (a pure wheel, or an abi3 one all of them take): .whl/; the others: .whl/cpXY/
        common = set.intersection(*(set(files) for files in got.values()))
        for py, files in got.items():
            (dest / python_tag(py)).mkdir(exist_ok=True)   # the host's Python finds its folder, empty or not
            for name, f in sorted(files.items()):
                to = dest / name if name in common else dest / python_tag(py) / name
                to.parent.mkdir(exist_ok=True)
                if not to.exists():
                    shutil.move(str(f), to)
    return {str(d.relative_to(dest)) or ".": len(list(d.glob("*.whl"))) for d in [dest, *sorted(dest.glob("cp*"))]}


def lock_lines(dest: Path) -> list[str]:
    """`folder/file bytes sha256` of every wheel in `dest` (the lock: what `fetch` must bring again, byte for byte)."""
    import hashlib

    dest = Path(dest)
    return [f"{f.relative_to(dest).as_posix()} {f.stat().st_size} {hashlib.sha256(f.read_bytes()).hexdigest()}"
            for f in sorted(dest.rglob("*.whl"))]


def read_lock(path: Path = LOCK) -> dict[str, tuple[int, str]]:
    """{folder/file: (bytes, sha256)} of tools/gpu-wheels.lock."""
    found = {}
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, size, sha = line.split()
            found[name] = (int(size), sha)
    return found


def lock_problems(dest: Path, lock: dict[str, tuple[int, str]]) -> list[str]:
    """How the wheels in `dest` differ from the lock (a release replaced, a file the lock does not know)."""
    got = {n: (int(s), h) for n, s, h in (line.split() for line in lock_lines(dest))}
    bad = [f"{n}: not the locked file (sha256 {got[n][1][:12]}..., locked {lock[n][1][:12]}...)"
           for n in sorted(set(got) & set(lock)) if got[n] != lock[n]]
    bad += [f"{n}: fetched, not in {LOCK}" for n in sorted(set(got) - set(lock))]
    bad += [f"{n}: in {LOCK}, not fetched" for n in sorted(set(lock) - set(got))]
    return bad


def wheel_set(dest: Path, python: str) -> list[Path]:
    """The wheels a call on Python `python` installs: the common ones and its folder's."""
    dest = Path(dest)
    return sorted(dest.glob("*.whl")) + sorted((dest / python_tag(python)).glob("*.whl"))


def metadata(wheel: Path) -> tuple[str, str, list[str]]:
    """(project, version, Requires-Dist lines) of a wheel, from its METADATA."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        text = z.read(name).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]
    field = lambda key: [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith(key + ":")]  # noqa: E731
    return norm(field("Name")[0]), field("Version")[0], field("Requires-Dist")


def _packaging():
    try:
        from packaging.markers import Marker  # noqa: F401
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:  # pip's own copy
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import Version
    return Requirement, Version


def environment(python: str) -> dict[str, str]:
    """PEP 508 marker values of the host: CPython `python` on x86-64 Linux."""
    return {"python_version": python, "python_full_version": python + ".0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def check(dest: Path, pins: dict[str, str], image: dict[str, str | None], pythons=PYTHONS,
          leave_out: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """What would stop a call on each Python, and the requirements taken on trust (an image package at a version
    not read). -> (problems, assumed), one line each; no problem: the set installs offline and is closed."""
    Requirement, Version = _packaging()
    problems, assumed = [], set()
    leave_out = leave_out or {}
    for py in pythons:
        found: dict[str, list[tuple[str, Path]]] = {}
        for w in wheel_set(dest, py):
            name, version, _ = metadata(w)
            found.setdefault(name, []).append((version, w))
        for name, got in found.items():
            if len(got) > 1:
                problems.append(f"cp{py}: two versions of {name}: {', '.join(w.name for _, w in got)} (pip refuses the install)")
            if name in image:
                problems.append(f"cp{py}: {got[0][1].name} shadows the image's {name}: leave it out of {PINS}")
            if name not in pins:
                problems.append(f"cp{py}: {got[0][1].name} is not pinned in {PINS}")
            elif got[0][0] != pins[name]:
                problems.append(f"cp{py}: {got[0][1].name} is not the pinned {name}=={pins[name]}")
        problems += [f"cp{py}: no wheel of {name}=={v} (prepare fetches it)" for name, v in pins.items() if name not in found]
        env = environment(py)
        for name, got in found.items():
            for line in metadata(got[0][1])[2]:
                req = Requirement(line)
                if req.marker is not None and not req.marker.evaluate(env):
                    continue
                dep = norm(req.name)
                if dep in leave_out and dep not in found:
                    continue
                if dep in found:
                    have = found[dep][0][0]
                elif dep in image:
                    have = image[dep]
                    if have is None:
                        assumed.add(f"{dep} (for {name}: {req.specifier or 'any version'})")
                        continue
                else:
                    problems.append(f"cp{py}: {name} requires {req}: neither in the set nor in the image")
                    continue
                if req.specifier and not req.specifier.contains(Version(have), prereleases=True):
                    problems.append(f"cp{py}: {name} requires {req}, the {'set' if dep in found else 'image'} has {have}")
    return problems, sorted(assumed)


# ---- the start's import check ---------------------------------------------------------------------------------

def _optional(node: ast.Try) -> bool:
    """A `try:` whose handler catches ImportError: what it imports is optional (an extra, a fallback)."""
    names = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
    return any(n in ("ImportError", "ModuleNotFoundError") or "ImportError" in n for n in names)


def _imports(tree: ast.AST, module_level: bool) -> set[str]:
    """The top-level modules `tree` imports: at module level only (with what its if/try/with blocks import), or at any
    level; an import inside a try that catches ImportError is optional and left out."""
    out: set[str] = set()

    def visit(nodes):
        for n in nodes:
            if isinstance(n, ast.Import):
                out.update(a.name.split(".")[0] for a in n.names)
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                out.add(n.module.split(".")[0])
            elif isinstance(n, ast.Try) and _optional(n):
                visit(n.handlers)   # the fallback's imports are not optional
            elif module_level and not isinstance(n, (ast.If, ast.Try, ast.With, ast.ExceptHandler)):
                continue
            else:
                visit(ast.iter_child_nodes(n))
    visit(tree.body)
    return out


def modules(root: Path) -> dict[str, list[str]]:
    """{module: [files importing it]}: every import of the notebooks and of src/perflab (any level: a function's
    import runs when the notebook calls it; the template is a user's study), the module-level imports of tests/ (each
    file is collected there), and RUNTIME; less the standard library's and the project's own modules."""
    root = Path(root)
    found: dict[str, set[str]] = {m: {"the runner"} for m in RUNTIME}

    def add(names, f):
        for m in names:
            found.setdefault(m, set()).add(f.relative_to(root).as_posix())

    for f in sorted((root / "src" / "perflab").rglob("*.py")):
        if "template" not in f.relative_to(root).parts:
            add(_imports(ast.parse(f.read_text()), False), f)
    for f in sorted((root / "tests").rglob("*.py")):
        add(_imports(ast.parse(f.read_text()), True), f)
    for f in sorted((root / "notebooks").glob("*.ipynb")):
        cells = [c for c in json.loads(f.read_text())["cells"] if c["cell_type"] == "code"]
        code = "\n".join(line for c in cells for line in "".join(c["source"]).splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        add(_imports(ast.parse(code), False), f)
    local = {"perflab"} | {p.stem for p in (root / "tests").rglob("*.py")} | \
        {p.stem for p in (root / "mutation").glob("*.py")} | \
        {p.name for p in (root / "tools").iterdir() if p.is_dir()}   # the tests' own helpers (mutation/'s too), the tooling
    return {m: sorted(fs) for m, fs in sorted(found.items())
            if m not in sys.stdlib_module_names and m not in local and not m.startswith("_")}


def import_all(names: list[str], where: dict[str, list[str]] | None = None) -> tuple[list[str], str]:
    """Import each module (torch first); -> (the ones that imported, "" or the first failure with who imports it)."""
    import importlib

    done = []
    for m in sorted(names, key=lambda m: (m != "torch", m)):
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 - any failure of an import stops the call here, named
            who = (where or {}).get(m, [])
            return done, (f"{m}: {type(e).__name__}: {e}".splitlines()[0]
                          + (f" (imported by {who[0]}{f' and {len(who) - 1} more' if len(who) > 1 else ''})" if who else ""))
        done.append(m)
    return done, ""
