"""Seed 001's claims and issue 16's targets for study 3's batched evaluation (notebooks/03_eval), as data
(`perflab.kit.claims`; link prediction's are `links.claims`, notebooks/03b_links).

`CLAIMS` is checked against the notebook's parameters when this module is imported (the notebook imports it in its
first cell): a misnamed claim, setup or headline fails before anything is timed. A claim's `metric` says what is
judged, in its `unit`; its `setup` the parameters and device it is about (a GPU target: {"device": "cuda"}), else
"not tested here"; `measured_by` the function that measures it (in this package). How (`perflab.kit.verdicts`, 99%
intervals): speed_5x by `decide_speedup` in paired rounds of the two whole evaluations; the ratios across batch sizes
from the sweep's paired rounds (each round one chunk at every size: the ratio of two sizes' mean costs over the
rounds, `Measured.paired_ratio`; the largest of k ratios takes each at alpha / k); counts by `Measured.exact`.
"""
from __future__ import annotations

from ...kit.claims import Claim, Claims
from .params import EvalParams

SEED, I16 = "seed 001", "issue 16"

# the seed's batch-size findings are its GPU's (a 40-50 MB L2 and HBM behind it, kernels queued asynchronously): a
# CPU's sweep (a 1 MiB L2, per-step overhead spread over more rows) measures something else; its table still shows it
ON_SEEDS_GPU = dict(setup={"device": "cuda"}, why_not="the seed's batch-size and L2 behaviour is a GPU's (its L2, HBM "
                                                      "and queued kernels); a CPU's sweep measures another machine")
SWEEP = "sweep.sweep_claims"   # the ratios of the sweep's paired rounds (sweep.batch_sweep times them)
SWEPT = ("kg", "batch_sizes")  # what a sweep claim's card row names: the batch sizes it ran
CLAIMS = Claims(
    Claim("memory", "10,100 candidates in one batch allocate [10100, 120, 26, 3]: ~12 GB, exceeds an 8 GB GPU",
          "~12 GB", at_least=8.0, unit="GiB", source=SEED, measured_by="study.memory",
          why_not="another engine's states (26 atoms per candidate, this engine's 7): not comparable",
          metric="GiB for 10,100 rows at S=120, predicted by the memory model (bytes per row measured at two sizes)"),
    Claim("recompiles", "CUDA Graph recompilation, ~20-30 s per unique batch size; unpadded 110: 2.97 s vs 0.27 s",
          "a recompile per new size", at_least=1.0, fixed=True, unit="graphs per new tail", source=SEED,
          measured_by="study.count_recompiles", shown=("kg", "batch_sizes", "tail_sizes"),
          metric="graphs compiled per new tail size after warm-up, unpadded (padded: none, checked: 'fixed')"),
    Claim("batch_1024", "batch 1024 is pathologically slow: 3.37 vs 0.41 ms per query at 512", "8.2x",
          at_least=4.0, partly=2.0, unit="x", source=SEED, measured_by=SWEEP, shown=SWEPT, **ON_SEEDS_GPU,
          metric="ms per candidate at B=1024 over B=512, the ratio of the sweep's mean costs, round by round"),
    Claim("l2", "the slowdown comes from tensors exceeding L2 (memory thrashing)", "~75 MB tensors at 1024",
          at_least=2.0, unit="x", source=SEED, measured_by=SWEEP, shown=SWEPT, **ON_SEEDS_GPU,
          metric="cost per candidate-step after over before the step's bytes pass L2, round by round"),
    Claim("cap_512", "capping the batch at 512 gives the best throughput", "cap at 512", at_most=1.0, unit="x",
          source=SEED, measured_by=SWEEP, shown=SWEPT, **ON_SEEDS_GPU,
          metric="ms per candidate at 512 over that at each other swept size, the largest ratio, round by round"),
    Claim("flat", "target: per-candidate cost flat or falling up to the largest batch that fits", "<= +10% per step up",
          at_most=1.10, unit="x", source=I16, measured_by=SWEEP, shown=SWEPT,
          metric="largest rise of ms per candidate from one swept batch size to the next, round by round"),
    Claim("flat_step", "target, stragglers removed: cost per candidate-step flat or falling", "<= +10% per step up",
          at_most=1.10, unit="x", source=I16, measured_by=SWEEP, shown=SWEPT,
          metric="largest rise of us per candidate-step from one swept batch size to the next, round by round"),
    Claim("speed_5x", "target: compiled and padded at least 5x the same code eager and unpadded", ">= 5x",
          at_least=5.0, partly=1.05, unit="x", setup={"device": "cuda"}, source=I16, measured_by="study.decide_speed",
          metric="whole evaluation, eager unpadded over compiled padded, in paired rounds"),
    Claim("floor_20", "target: at least 20% of the bandwidth floor", ">= 20%", at_least=0.20, unit="%",
          setup={"device": "cuda"}, source=I16, measured_by="study.floor",
          metric="the floor (predicted bytes per candidate-step over the copy bandwidth) over the best swept time"),
    Claim("seed_run", "the fixed 100 x 100 'both' run: 18.19 s + 5.49 s warm-up = 1.80 ms per candidate", "1.80 ms",
          at_most=1.80, unit="ms", source=SEED, metric="ms per candidate", measured_by="study.evaluation_runs",
          why_not="another engine, policy and graph: the number is not comparable"),
    headline="speed_5x", params=EvalParams, shown=("kg", "batch"))
