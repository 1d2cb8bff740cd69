"""pytest's settings for this study, for its tests and for nbval: results go to a temporary folder, never to
outputs/local/ (your runs), and nbval compares what the checked cells print, not their stderr (warnings and progress
bars differ between machines)."""
import atexit
import os
import shutil
import tempfile

if not os.environ.get("PERFLAB_OUT"):  # the notebook kernels that nbval starts inherit it
    os.environ["PERFLAB_OUT"] = tempfile.mkdtemp(prefix="perflab-tests-")
    atexit.register(shutil.rmtree, os.environ["PERFLAB_OUT"], ignore_errors=True)


def pytest_collectstart(collector):
    if collector.path.suffix == ".ipynb":  # nbval's notebook
        collector.skip_compare += ("stderr",)
