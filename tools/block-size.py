"""How long a block of paired rounds should be on a shared machine: one 1.5x pair (150 against 100 calls of a 64x64
matmul, one thread) timed in paired rounds for 2 s at several block lengths, under the battery's background load
(`perflab.runner.battery.background_load`, one busy process per core), and the 99.9% interval of the median ratio each gives.

    python tools/block-size.py [--load N] [--seconds S]     # prints a table (markdown)

The README's "short blocks matter" sentence and `perflab.kit.bench.PairedTimer`'s default (1 ms) come from this."""
import argparse
import os
import time

import torch

from perflab.kit.bench import PairedTimer
from perflab.kit.env import fingerprint
from perflab.kit.verdicts import median_interval
from perflab.runner.battery import background_load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    a, b = torch.randn(64, 64), torch.randn(64, 64)

    def loop(n):
        def f():
            for _ in range(n):
                torch.mm(a, b)
        return f
    env = fingerprint("cpu")
    print(f"1.5x pair, {args.seconds:g} s of rounds per block length, {args.load} busy processes, "
          f"{env['device_name']}, torch {env['torch']}, commit {str(env['commit'])[:10]}\n")
    print("| block | calls per block (a, b) | rounds | median ratio | 99.9% interval |\n|---|---|---|---|---|")
    with background_load(args.load):
        for block in (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02):
            pt = PairedTimer(loop(150), loop(100), block=block)
            ratios, t0 = [], time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                x, y = pt.round()
                ratios.append(x / y)
            s = sorted(ratios)
            lo, hi = median_interval(s, 0.001)
            med = s[len(s) // 2]
            print(f"| {block * 1e3:g} ms | {pt.calls} | {len(s)} | {med:.3f} | [{lo:.3f}, {hi:.3f}] |", flush=True)


if __name__ == "__main__":
    main()
