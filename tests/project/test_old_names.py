"""perflab 0.1's module names (perflab/__init__.py's OLD_NAMES): the same module objects as the new names, each
import warned once, naming the new name and the version that removes the old one."""
import importlib
import subprocess
import sys
import warnings

import pytest

import perflab


def _forget(monkeypatch, old: str) -> None:
    """As if this process had never imported the old name (restored after the test)."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delattr(perflab, old.rpartition(".")[2], raising=False)


@pytest.mark.parametrize("old", sorted(perflab.OLD_NAMES))
def test_an_old_name_is_the_new_module_and_warns_once_with_both_names(old, monkeypatch):
    new = perflab.OLD_NAMES[old]
    _forget(monkeypatch, old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning raised is recorded: once is the finder's doing, not a filter's
        first = importlib.import_module(old)
        again = importlib.import_module(old)
    assert first is again is importlib.import_module(new)
    assert first.__spec__.name == new  # the module keeps its own spec
    [w] = [w for w in caught if old in str(w.message)]
    assert w.category is FutureWarning
    assert str(w.message) == f"{old} is perflab 0.1's name for {new}: import {new} instead (perflab 0.4 removes {old})"


def test_from_perflab_import_an_old_name_warns_too(monkeypatch):
    _forget(monkeypatch, "perflab.bench")
    with pytest.warns(FutureWarning, match=r"perflab\.bench is perflab 0\.1's name for perflab\.kit\.bench") as w:
        from perflab import bench
    assert bench is importlib.import_module("perflab.kit.bench")
    assert w[0].filename == __file__  # the line to change, not importlib's


def test_a_study_module_importing_an_old_name_shows_the_warning_under_pythons_default_filters(tmp_path):
    """What a user sees: a 0.1 study imports the old names from its own package (not __main__), where Python's
    default filters would hide a DeprecationWarning. A fresh interpreter, no pytest filters."""
    (tmp_path / "oldstudy.py").write_text("from perflab.paths import repo_root\nimport perflab.paths\n")
    r = subprocess.run([sys.executable, "-c", "import oldstudy"], cwd=tmp_path, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}, check=True)
    assert r.stderr.count("FutureWarning") == 1, r.stderr
    assert f"{tmp_path / 'oldstudy.py'}:1: FutureWarning: perflab.paths is perflab 0.1's name for perflab.kit.paths" \
           in r.stderr, r.stderr
