"""Seed 001's claims and issue 16's targets for study 4's early exit, as data (`perflab.kit.claims`).

`CLAIMS` is checked against notebooks/04_early_exit's parameters when this module is imported (the notebook imports
it in its first cell): a misnamed claim, setup or headline fails before anything is timed. A claim's `setup` says the
device it is about (a GPU target: {"device": "cuda"}, a CPU-default one: {"device": "cpu"}); elsewhere it is "not
tested here". Each names the function of `study` that measures it (`measured_by`), and its text says what is judged
where the seed's words name another quantity (the card shows the text): the recycle and bucketed claims are decided
by `decide_speedup` (paired rounds of two whole ladder runs, warmed up until steady, the ratio of their mean times,
within `verdict_time` seconds of wall time, made only where the run is the claim's setup), flat_step by paired rounds
of single steps, the counts (a share of rows, batch shapes) are exact; intervals at 99%.
"""
from __future__ import annotations

from ...kit.claims import Claim, Claims
from .params import EarlyExitParams

SEED, I16 = "seed 001", "issue 16"
RECYCLE_OVER_FULL = "recycle's time over full's, whole ladder runs in paired rounds"

CLAIMS = Claims(
    Claim("flat_step", "each step takes ~42-45 ms regardless of how many queries are done (judged: a step's time "
          "with <= 10% of its rows active over all active, either way)", "x1.0 (42-45 ms)", at_most=1.33, unit="x",
          source=SEED, measured_by="study.decide_flat_step",
          metric="full's step time at <= 10% of rows active over at 100%, either way (max(r, 1/r)), single steps in "
                 "paired rounds"),
    Claim("wasted", "5.6x slowdown due to wasted computation on done queries (judged: the useful share of the rows "
          "full computes)", "5.6x (1/5.6 = 18% useful)", at_most=0.4, partly=0.7, unit="%", source=SEED,
          measured_by="study.traced_runs",
          metric="useful rows over the rows full computed on the whole ladder (its share of the ideal), counted"),
    Claim("early_exit", "per-query early exit: estimated 2-4x speedup (judged: recycle over full)", "2-4x",
          at_least=2.0, partly=1.05, unit="x", source=SEED, measured_by="study.decide_recycle",
          metric=f"full's time over recycle's: {RECYCLE_OVER_FULL}"),
    Claim("compaction", "dynamic batching (compaction) won't work with CUDA graphs (judged: the batch shapes compact "
          "runs beyond bucketed's, each a CUDA graph to capture)", "breaks CUDA graphs", at_least=1.0, unit="graphs",
          source=SEED, measured_by="study.traced_runs",
          metric="distinct batch shapes compact ran on the whole ladder, minus bucketed's (one graph each under CUDA "
                 "graphs), counted"),
    Claim("target_3x", "target (CPU default): recycle at least 3x faster than full", ">= 3x", at_least=3.0,
          partly=1.05, unit="x", setup={"device": "cpu"}, source=I16, measured_by="study.decide_recycle",
          metric=f"full's time over recycle's: {RECYCLE_OVER_FULL}"),
    Claim("target_4x", "target (GPU preset): recycle at least 4x faster than full", ">= 4x", at_least=4.0,
          partly=1.05, unit="x", setup={"device": "cuda"}, source=I16, measured_by="study.decide_recycle",
          metric=f"full's time over recycle's: {RECYCLE_OVER_FULL}",
          why_not="a target for the GPU preset (B=512, CUDA graphs): a CPU's rollout pays per op what a GPU does not"),
    Claim("target_ideal", "target: recycle reaches at least 70% of the ideal (the useful rows alone, at full's cost "
          "per row)", ">= 70%", at_least=0.70, unit="%", source=I16, measured_by="study.decide_recycle",
          metric="the ideal's time over recycle's: recycle over full (decided) times full's useful share (counted)"),
    Claim("bucketed_masked", "target (CPU default): bucketed keeps one graph per bucket and beats masked", "> masked",
          at_least=1.0, unit="x", setup={"device": "cpu"}, source=I16, measured_by="study.decide_bucketed",
          metric="masked's time over bucketed's, whole ladder runs in paired rounds (0 when a bucket compiled two "
                 "graphs)"),
    Claim("bucketed_full", "target (GPU preset): bucketed at least as fast as full", ">= full", at_least=1.0,
          unit="x", setup={"device": "cuda"}, source=I16, measured_by="study.decide_bucketed",
          metric="full's time over bucketed's, whole ladder runs in paired rounds",
          why_not="a target for the GPU preset: bucketing pays off where each shape is captured once in a CUDA graph"),
    Claim("v10", "slot recycling (V10): 20k candidates at B=256 in 17.7 s, 0.88 ms per candidate", "0.88 ms",
          at_most=0.88, unit="ms", source=SEED, measured_by="study.benchmark", metric="ms per candidate",
          why_not="another engine, policy and graph: the number is not comparable"),
    headline="early_exit", params=EarlyExitParams, shown=("kg", "n_candidates", "batch"))
