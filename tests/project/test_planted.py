"""mutation/planted.py's realistic bugs stay plantable: each one's old text occurs exactly once in its file (a bug
the code has moved away from says so here, not hours into `make planted`), it changes something, and the tests
written to kill it exist. Whether they kill it is `make planted`'s to say (mutation/plant.py)."""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mutation"))
from planted import AREAS, PLANTED  # noqa: E402


def _tests_in(path: Path) -> dict[str, bool]:
    """{test function: whether it is marked slow} of a test file."""
    return {n.name: any("slow" in ast.unparse(d) for d in n.decorator_list)
            for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_the_bugs_have_unique_names_and_cover_every_area():
    assert len({b.name for b in PLANTED}) == len(PLANTED)
    assert {b.area for b in PLANTED} == set(AREAS)


@pytest.mark.parametrize("bug", PLANTED, ids=[b.name for b in PLANTED])
def test_each_bug_applies_once_and_names_tests_that_exist(bug):
    text = (ROOT / bug.file).read_text()
    assert text.count(bug.old) == 1, f"{bug.name}: its old text occurs {text.count(bug.old)} times in {bug.file}"
    assert bug.new != bug.old and bug.why and bug.kills
    compile(text.replace(bug.old, bug.new), bug.file, "exec")    # a bug, not a syntax error: its tests must run
    assert (ROOT / bug.folder).is_dir() and all(k.startswith(bug.folder + "/") or k.startswith("tests/")
                                                for k in bug.kills)
    for node in bug.kills:   # of the fast tier, as the report says: a bug's own test runs in every edit loop
        path, _, name = node.partition("::")
        tests = _tests_in(ROOT / path) if (ROOT / path).is_file() else {}
        assert name.split("[")[0] in tests and not tests[name.split("[")[0]], node
