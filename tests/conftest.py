import atexit
import os
import shutil
import sys
import tempfile

import pytest
import torch

# Tests write only to temporary folders: whatever a test (or a notebook kernel it starts) opens with
# perflab.kit.paths.run_dir() lands here, never in the user's outputs/local/ (the folder `make run` reports on).
os.environ["PERFLAB_OUT"] = tempfile.mkdtemp(prefix="perflab-tests-")
atexit.register(shutil.rmtree, os.environ["PERFLAB_OUT"], ignore_errors=True)


@pytest.fixture(autouse=True)
def one_thread():
    # Tests run tiny ops: two OpenMP threads on a shared 2-core box (CI) spend more time waiting at
    # barriers than working, and swing 10-100x with the machine's load. One intra-op thread per test.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def forget_imports_from_temporary_folders(tmp_path_factory):
    # perflab.runner.schemas imports a study's parameters class as its notebook's kernel would, the notebook's folder
    # first on sys.path, and keeps both (a command is one process). A test's temporary study would then stay
    # importable: a later test writing a study of the same name (`perflab new spmv`) is refused ("would shadow the
    # module spmv"), in whichever order the tests run (mutation/flakes.py found it). Each test forgets them.
    path = set(sys.path)
    yield
    base = str(tmp_path_factory.getbasetemp())
    sys.path[:] = [p for p in sys.path if p in path or not str(p).startswith(base)]
    for name in [n for n, m in sys.modules.items() if (getattr(m, "__file__", None) or "").startswith(base)]:
        del sys.modules[name]


@pytest.hookimpl(trylast=True)   # after any reordering (pytest-randomly's, in mutation/flakes.py): `last` stays last
def pytest_collection_modifyitems(config, items):
    # a test marked `last` checks the end of something an earlier test started that takes wall-clock time (a Slurm
    # point past its one-minute limit): run after every other test, its wait overlaps theirs
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
