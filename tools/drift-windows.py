"""How far a machine's speed drifts beyond what a window's own rounds see (`perflab.kit.deciding.DRIFT`): a fixed
block of matmuls (eight 256x256 products, one thread) timed back to back in windows of 2 s and of 8 s, each window's
mean against the others' (the sd of the window means, log scale) and against its own batch-means standard error
(batches of 0.25 s, as `deciding.load_batches` cuts a quantity the load moves). Where the windows' sd exceeds their
own error, the excess is drift no window of rounds can see.

    python tools/drift-windows.py [N2 N8] > windows.jsonl     # one JSON line per window, then a summary on stderr
"""
import json
import math
import statistics
import sys
import time

import torch

from perflab.kit.deciding import load_batches
from perflab.kit.intervals import batch_means


def block(a, b) -> float:
    t0 = time.perf_counter()
    for _ in range(8):
        a @ b
    return time.perf_counter() - t0


def main(n2: int = 40, n8: int = 30) -> None:
    torch.set_num_threads(1)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    for _ in range(200):
        block(a, b)
    rows = []
    for seconds, n in ((2.0, n2), (8.0, n8)):
        for _ in range(n):
            ts, t0 = [], time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                ts.append(block(a, b))
            k = load_batches(len(ts), seconds)   # as a decision cuts a quantity the load moves
            bm = batch_means(ts, k)
            m = sum(bm) / k
            se = math.sqrt(sum((x - m) ** 2 for x in bm) / (k - 1) / k)
            rows.append({"T": seconds, "mean": sum(ts) / len(ts), "se_rel": se / m, "n": len(ts)})
            print(json.dumps(rows[-1]), flush=True)
    for seconds in (2.0, 8.0):
        rs = [r for r in rows if r["T"] == seconds]
        if len(rs) > 2:
            sd = statistics.stdev(math.log(r["mean"]) for r in rs)
            se = math.sqrt(statistics.mean(r["se_rel"] ** 2 for r in rs))
            print(f"{seconds:g} s windows: {len(rs)}, sd between {sd:.2%}, own se {se:.2%}, "
                  f"beyond the rounds {math.sqrt(max(0.0, sd * sd - se * se)):.2%}", file=sys.stderr)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
