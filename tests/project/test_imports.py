"""perflab's layers on disk, and its modules import one another without circles, downward only: the kit
(perflab.kit) imports no study and no runner module, a study no runner module, and the runner's modules import
downward only.

The graph is read from the source (an AST walk), so it holds imports inside functions too: a lazy import that
closes a loop is still a loop (it only hides it until the function runs)."""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# the runner, bottom to top: each may import the modules before it (and the kit), never one after it
RUNNER = ["execute", "schemas", "catalog", "new", "sweep_dir", "slurm", "sweep", "report_rows",
          "report_claims", "sweep_figures", "report", "compare", "pages", "battery", "simulate", "deadline",
          "estimate", "gpu_tests", "gpucheck", "diagnose", "reports", "cli"]


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs (those under `if TYPE_CHECKING:` only serve the type checker)."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            todo.append(child)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """{module: the perflab modules it imports}, for every module under src/perflab (not the template of
    `perflab new`, src/perflab/template/: a study of the user's, which imports perflab from outside)."""
    files = {_module_name(p, src): p for p in sorted((src / "perflab").rglob("*.py"))
             if "template" not in p.relative_to(src / "perflab").parts[:1]}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
                continue
            base = package.split(".")
            base = base[:len(base) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in files}
            # `from . import x` names a module; `from .m import f` names m (and any submodule of m it names)
            targets |= subs if subs and len(subs) == len(node.names) else subs | {mod}
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_direct_and_longer_loops():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "perflab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b as bb\nfrom .sub.c import f\n")
    (pkg / "b.py").write_text("def g():\n    from .a import x\n")
    (pkg / "d.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import y\nimport perflab.d\n")
    graph = import_graph(tmp_path)
    assert graph["perflab.a"] == {"perflab.b", "perflab.sub.c"}
    assert graph["perflab.b"] == {"perflab.a"}                  # inside a function: still an edge
    assert graph["perflab.sub.c"] == {"perflab.d"}              # the TYPE_CHECKING import is no edge
    assert cycles(graph) == [["perflab.a", "perflab.b"]]


def test_no_module_of_perflab_imports_itself_around_a_loop():
    found = cycles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("module", RUNNER)
def test_the_runner_imports_downward_only(module):
    graph = import_graph()
    name = f"perflab.runner.{module}"
    above = {f"perflab.runner.{m}" for m in RUNNER[RUNNER.index(module) + 1:]}
    assert name in graph, f"{name} is in RUNNER but not in src/perflab/runner"
    assert not graph[name] & above, f"{name} imports {sorted(graph[name] & above)}, which sit above it"


def test_every_runner_module_is_in_the_order():
    on_disk = {m.rpartition(".")[2] for m in import_graph() if m.startswith("perflab.runner.")}
    assert on_disk == set(RUNNER), f"RUNNER and src/perflab/runner differ: {sorted(on_disk ^ set(RUNNER))}"


def test_the_kit_and_the_studies_import_no_runner_module():
    wrong = {m: sorted(t for t in ts if t.startswith("perflab.runner")) for m, ts in import_graph().items()
             if not m.startswith("perflab.runner") and any(t.startswith("perflab.runner") for t in ts)}
    assert not wrong, f"these import the runner (which sits on top of them): {wrong}"


def test_the_kit_imports_no_study():
    wrong = {m: sorted(t for t in ts if not t.startswith("perflab.kit") and t != "perflab")
             for m, ts in import_graph().items() if m.startswith("perflab.kit")}
    wrong = {m: ts for m, ts in wrong.items() if ts}
    assert not wrong, f"the kit sits under the studies, but these kit modules import above it: {wrong}"


def test_the_top_level_is_the_map_and_the_layers():
    top = sorted(p.name for p in (SRC / "perflab").iterdir() if not p.name.startswith(("_", ".")) or
                 p.name == "__init__.py")
    assert top == ["__init__.py", "kit", "latentwire", "probe1d", "prover", "runner", "template", "vae"], top


def test_the_prover_is_one_engine_library_and_rooms_that_import_it_downward():
    """perflab.prover: core (the engine library) imports no room; a room imports core, the kit and at most rooms that
    do not import it back (the rooms' graph has no circle); no room imports another's private name."""
    graph = import_graph()
    rooms = {p.name for p in (SRC / "perflab" / "prover").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert "core" in rooms and len(rooms) >= 3, rooms

    def room(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[:2] == ["perflab", "prover"] and parts[2] in rooms else None

    up = {m: sorted(t for t in ts if room(t) not in (None, "core")) for m, ts in graph.items() if room(m) == "core"}
    up = {m: ts for m, ts in up.items() if ts}
    assert not up, f"the engine library imports a room: {up}"
    between = {r: set() for r in rooms - {"core"}}
    for m, ts in graph.items():
        if room(m) in between:
            between[room(m)] |= {room(t) for t in ts if room(t) not in (None, "core", room(m))}
    circles = cycles(between)
    assert not circles, f"rooms that import each other: {circles} ({between})"
    assert not [m for m in graph if m.startswith("perflab.prover.") and room(m) is None and m != "perflab.prover"], \
        "a prover module outside core and the rooms"
    private = []
    for path in sorted((SRC / "perflab" / "prover").rglob("*.py")):
        name = _module_name(path, SRC)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                if room(target) != room(name):
                    private += [f"{name}: {target}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not private, f"private names imported across rooms: {private}"


def test_every_module_imports():
    """Each module of perflab imports (the template's excepted: it imports `mystudy`, the package a user's copy is):
    a name moved out of a module that another still imports fails here, not in a notebook's first cell."""
    import importlib

    failed = {}
    for path in sorted((SRC / "perflab").rglob("*.py")):
        name = _module_name(path, SRC)
        if name.startswith("perflab.template") or name == "perflab.__main__":
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 (every failure is reported, named)
            failed[name] = f"{type(e).__name__}: {e}"
    assert not failed, failed


def test_a_rooms_claims_are_data_below_its_study():
    """The template's direction: a room's claims.py imports the kit and the parameters (and config) it checks its
    setups against, nothing that measures; its study.py imports it and measures the claims (`evidence(run, ...)`),
    with every table a kit `Claims` named CLAIMS (probe1d's two notebooks: PROFILE_CLAIMS and SLAB_CLAIMS)."""
    import importlib

    from perflab.kit.claims import Claims

    graph = import_graph()
    rooms = sorted(m for m in graph if m.endswith(".claims") and not m.startswith("perflab.kit"))
    assert len(rooms) == 6, rooms
    wrong = {m: sorted(t for t in graph[m] if not t.startswith("perflab.kit") and not t.endswith((".params", ".config")))
             for m in rooms}
    assert not any(wrong.values()), f"claims modules that import what measures: {wrong}"
    for m in rooms:
        study = m.removesuffix(".claims") + ".study"
        assert m in graph[study], f"{study} does not import {m}"
        tables = [n for n, v in vars(importlib.import_module(m)).items() if isinstance(v, Claims)]
        assert tables == (["PROFILE_CLAIMS", "SLAB_CLAIMS"] if m == "perflab.probe1d.claims" else ["CLAIMS"]), (m, tables)
        assert callable(getattr(importlib.import_module(study), "evidence", None)), f"{study} has no evidence()"
