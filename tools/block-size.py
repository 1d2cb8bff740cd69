"""How long a block of paired rounds should be on a shared machine: one 1.5x pair (150 against 100 calls of a 64x64
matmul, one thread) timed in paired rounds for 2 s at several block lengths, under the battery's background load
(`perflab.runner.battery.background_load`, one busy process per core), each block's own time (another process's turns
taken out: `perflab.kit.rounds.Stopwatch`), and the 99% interval of the ratio of mean times each gives (Fieller over
batch means: `perflab.kit.intervals.ratio_interval`), beside the sign test's interval of the median round.

    python tools/block-size.py [--load N] [--seconds S]     # prints a table (markdown)

`perflab.kit.verdicts.BLOCK` (5 ms) comes from this: short blocks give more rounds, long ones average a side's own
slow calls within a block and interleave less finely (a side's caches)."""
import argparse
import os
import random
import time

import torch

from perflab.kit.env import fingerprint
from perflab.kit.intervals import median, median_interval, ratio_interval
from perflab.kit.rounds import Side, Stopwatch, paired_round, size_blocks, warm_up
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
    print("| block | calls per block (a, b) | rounds | ratio of means, 99% interval | median round, 99% interval |\n"
          "|---|---|---|---|---|")
    with background_load(args.load):
        for block in (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02):
            sw, order = Stopwatch("cpu"), random.Random(0)
            sides = [Side("a", loop(150)), Side("b", loop(100))]
            warm_up(sides, sw, block=block, until=time.perf_counter() + 0.3)
            size_blocks(sides, block)
            ta, tb, t0 = [], [], time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                (sa, na), (sb, nb) = paired_round(sides, sw, order)
                ta.append(sa / na)
                tb.append(sb / nb)
            lo, hi = ratio_interval(ta, tb, 0.01)
            r = sorted(x / y for x, y in zip(ta, tb))
            mlo, mhi = median_interval(r, 0.01)
            print(f"| {block * 1e3:g} ms | {sides[0].calls}, {sides[1].calls} | {len(r)} | {sum(ta) / sum(tb):.3f} "
                  f"[{lo:.3f}, {hi:.3f}] | {median(r):.3f} [{mlo:.3f}, {mhi:.3f}] |", flush=True)


if __name__ == "__main__":
    main()
