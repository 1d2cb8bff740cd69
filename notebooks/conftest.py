# nbval runs the notebooks in this folder (make test). stderr holds warnings, compile logs and
# progress bars that differ between machines: never compare it (checked cells print to stdout).
import atexit
import os
import shutil
import tempfile

# The kernels nbval starts inherit this: the notebooks' results, plots and weights go to a temporary folder
# (removed afterwards), not to outputs/local/ (the user's runs), unless PERFLAB_OUT says where.
if not os.environ.get("PERFLAB_OUT"):
    os.environ["PERFLAB_OUT"] = tempfile.mkdtemp(prefix="perflab-nbval-")
    atexit.register(shutil.rmtree, os.environ["PERFLAB_OUT"], ignore_errors=True)


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
