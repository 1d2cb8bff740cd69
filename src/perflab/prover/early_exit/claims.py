"""Seed 001's claims and issue 16's targets for study 4's early exit, as data (`perflab.kit.claims`).

`CLAIMS` is checked against notebooks/04_early_exit's parameters when this module is imported (the notebook imports
it in its first cell): a misnamed claim, setup or headline fails before anything is timed. A claim's `setup` says the
device it is about (a GPU target: {"device": "cuda"}, a CPU-default one: {"device": "cpu"}); elsewhere it is "not
tested here". What measures each: `study.evidence` (the recycle and bucketed claims by `decide_speedup`, paired
rounds of two whole ladder runs, warmed up until steady, the ratio of their mean times, within `verdict_time` seconds
of wall time, made only where the run is the claim's setup; flat_step by paired rounds of single steps; counts and
shares by `Measured.exact`; 99% intervals).
"""
from __future__ import annotations

from ...kit.claims import Claim, Claims
from .params import EarlyExitParams

SEED, I16 = "seed 001", "issue 16"

CLAIMS = Claims(
    Claim("flat_step", "each step takes ~42-45 ms regardless of how many queries are done", "x1.0 (42-45 ms)",
          at_most=1.33, source=SEED,
          metric="full's step time at <= 10% of rows active over at 100%, either way (max(r, 1/r)), traced steps"),
    Claim("wasted", "5.6x slowdown due to wasted computation on done queries", "5.6x", at_most=0.4, partly=0.7,
          source=SEED, metric="share of full's computed rows that were useful (its share of the ideal)"),
    Claim("early_exit", "per-query early exit: estimated 2-4x speedup", "2-4x", at_least=2.0, partly=1.05,
          source=SEED, metric="recycle over full, whole ladder runs in paired rounds"),
    Claim("compaction", "dynamic batching (compaction) won't work with CUDA graphs", "breaks CUDA graphs",
          at_least=1.0, source=SEED,
          metric="distinct batch shapes compact ran, minus bucketed's (one graph each under CUDA graphs)"),
    Claim("target_3x", "target (CPU default): recycle at least 3x faster than full", ">= 3x", at_least=3.0,
          partly=1.05, setup={"device": "cpu"}, source=I16, metric="recycle over full, whole ladder runs in paired rounds"),
    Claim("target_4x", "target (GPU preset): recycle at least 4x faster than full", ">= 4x", at_least=4.0,
          partly=1.05, setup={"device": "cuda"}, source=I16, metric="recycle over full, whole ladder runs in paired rounds"),
    Claim("target_ideal", "target: recycle reaches at least 70% of the ideal", ">= 70%", at_least=0.70, source=I16,
          metric="the ideal (useful rows at full's cost per row) over recycle's time: recycle over full x useful share"),
    Claim("bucketed_masked", "target (CPU default): bucketed keeps one graph per bucket and beats masked", "> masked",
          at_least=1.0, setup={"device": "cpu"}, source=I16,
          metric="masked over bucketed, whole ladder runs in paired rounds (0 when a bucket compiled two graphs)"),
    Claim("bucketed_full", "target (GPU preset): bucketed at least as fast as full", ">= full", at_least=1.0,
          setup={"device": "cuda"}, source=I16, metric="full over bucketed, whole ladder runs in paired rounds"),
    Claim("v10", "slot recycling (V10): 20k candidates at B=256 in 17.7 s, 0.88 ms per candidate", "0.88 ms",
          at_most=0.88, source=SEED, metric="ms per candidate",
          why_not="another engine, policy and graph: the number is not comparable"),
    headline="early_exit", params=EarlyExitParams)
