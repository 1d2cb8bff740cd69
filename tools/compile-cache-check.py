"""What inductor's compile caches save: 02's compiled 3-iteration fit (the 157-row problem, compile=default, inductor),
each run in a fresh process, one after another:

  cold     an empty TORCHINDUCTOR_CACHE_DIR (the first window on a bare machine)
  warm     the same folder again (a later window that carried the run folder's compile-cache/ in: `perflab gpu-check`)
  mega     an empty folder, after torch.compiler.load_cache_artifacts of the bytes that `cold` saved

    python tools/compile-cache-check.py [--device cpu|cuda]      # prints one line per run, then the sizes

Seconds include dynamo's tracing and the fit itself (0.3 s eager on a CPU); imports are not counted.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, sys, time
import torch
from torch._dynamo.utils import counters
from perflab.kit.compiles import count_compiles
from perflab.probe1d import Sparse1DProbe
from perflab.probe1d.checks import small_problem
device, mega, save = sys.argv[1:4]
if mega:
    torch.compiler.load_cache_artifacts(open(mega, "rb").read())
x, y = small_problem()  # 02 cell 5: 157 rows x 13 latents x 6 classes
with count_compiles() as cc:
    t0 = time.perf_counter()
    Sparse1DProbe("optimized", device=device, max_iter=3, tol=0.0, compile="default").fit(x, y)
    seconds = time.perf_counter() - t0
if save:
    saved = torch.compiler.save_cache_artifacts()
    open(save, "wb").write(saved[0] if saved else b"")
print("RESULT", json.dumps(dict(seconds=seconds, graphs=cc.graphs, torch=torch.__version__,
                                fx_hits=counters["inductor"]["fxgraph_cache_hit"])))
"""


def mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path.is_dir() else path.stat().st_size / 2**20


def child(device: str, cache: Path, mega: str = "", save: str = "") -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", CHILD, device, mega, save], env=env, capture_output=True, text=True)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode or not lines:
        sys.exit(f"compile-cache-check: the child failed:\n{r.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="compile-cache-check-") as tmp:
        tmp = Path(tmp)
        mega = tmp / "mega.bin"
        runs = {"cold": child(args.device, tmp / "a", save=str(mega)), "warm": child(args.device, tmp / "a"),
                "mega": child(args.device, tmp / "b", mega=str(mega))}
        for name, r in runs.items():
            print(f"{name:5s} {r['seconds']:7.2f} s  {r['graphs']} graphs, {r['fx_hits']} FX graph cache hits"
                  f"  (torch {r['torch']}, {args.device})")
        print(f"compile-cache folder after cold: {mib(tmp / 'a'):.2f} MiB; mega-cache bytes: {mib(mega):.2f} MiB")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s in all)")
