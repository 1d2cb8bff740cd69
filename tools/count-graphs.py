"""Dynamo graphs per cell of a notebook on a preset, counted on this machine's CPU: the basis of the graph counts in
params/gpu-smoke/ESTIMATE.md. The preset runs with device=cpu and threads=1, and backend "eager" in place of inductor
(dynamo's graphs, no code generation: a graph count without inductor's compile time).

    python tools/count-graphs.py 03_eval [--params gpu-smoke] [--out DIR]

Prints one line per code cell: graphs dynamo made in it, seconds on this CPU, the cell's first line. A graph counted
here is one that CUDA compiles as well, except that tensors moved to CUDA make a second graph of a function first
traced on CPU tensors (02's solver), and inductor's reduce-overhead adds CUDA-graph recordings, not graphs.
"""
import argparse
import dataclasses
import json
import os
import tempfile
from pathlib import Path

import nbformat
import papermill

from perflab.runner import catalog as nbs
from perflab.runner.schemas import schema_for

HOOK = """
import json, time
from torch._dynamo.utils import counters  # unique_graphs is cumulative: torch._dynamo.reset() keeps it
_cells, _at = [], dict(t=time.perf_counter(), graphs=counters["stats"]["unique_graphs"])
def _pre(info):
    _at.update(t=time.perf_counter(), graphs=counters["stats"]["unique_graphs"])
def _post(result):
    first = (result.info.raw_cell or "").strip().splitlines()[:1]
    _cells.append([counters["stats"]["unique_graphs"] - _at["graphs"], round(time.perf_counter() - _at["t"], 2),
                   first[0][:70] if first else ""])
    json.dump(_cells, open(%r, "w"))
get_ipython().events.register("pre_run_cell", _pre)
get_ipython().events.register("post_run_cell", _post)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--params", default="gpu-smoke")
    ap.add_argument("--out", type=Path, default=None, help="the run folder (default: a temporary one)")
    args = ap.parse_args()
    [(name, path, params)] = nbs.plan([args.name], preset=args.params)
    fields = {f.name for f in dataclasses.fields(schema_for(name, path))}
    params.update(device="cpu", threads=1)
    if params.get("backend", "inductor" if "backend" in fields else None) == "inductor":
        params["backend"] = "eager"
    with tempfile.TemporaryDirectory(prefix="count-graphs-") as tmp:
        tmp = Path(tmp)
        nb = nbformat.read(path, as_version=4)
        nb.cells.insert(0, nbformat.v4.new_code_cell(HOOK % str(tmp / "cells.json")))
        nbformat.write(nb, tmp / f"{name}.ipynb")
        out = args.out or tmp / "out"
        os.environ["PERFLAB_OUT"] = str(Path(out).resolve())  # the kernel's results and plots, never outputs/local
        papermill.execute_notebook(str(tmp / f"{name}.ipynb"), str(tmp / "executed.ipynb"), parameters=params,
                                   cwd=str(path.parent), kernel_name="perflab", progress_bar=False)
        cells = json.loads((tmp / "cells.json").read_text())[1:]  # the hook's own cell left out
    kept = f", results in {args.out}" if args.out else ""
    print(f"{name} on {args.params} ({', '.join(f'{k}={v}' for k, v in params.items())}){kept}:")
    for graphs, seconds, first in cells:
        print(f"  {graphs:3d} graphs  {seconds:6.2f} s  {first}")
    print(f"  {sum(c[0] for c in cells):3d} graphs in all")


if __name__ == "__main__":
    main()
