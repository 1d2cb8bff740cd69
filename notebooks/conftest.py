# nbval runs the notebooks in this folder (make test). stderr holds warnings, compile logs and
# progress bars that differ between machines: never compare it (checked cells print to stdout).
def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
