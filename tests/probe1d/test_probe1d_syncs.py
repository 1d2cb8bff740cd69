"""Counts, not timings: host syncs per LM iteration (the seed's `.item()` per row vs at most one), graphs
compiled by the optional torch.compile path, and what the iteration hook and debug logging see."""
import logging
import warnings

import pytest
import torch

from perflab.kit.compiles import count_compiles, reset
from perflab.kit.syncs import count_host_syncs
from perflab.probe1d import Sparse1DProbe, make_activations
from perflab.probe1d.study import IMPLS


def _data():
    return make_activations(300, 24, 6, l0=6, seed=9, frac_empty=0.1)


def test_one_host_sync_per_optimized_iteration_even_when_the_work_is_compacted():
    x, y = _data()
    solver = Sparse1DProbe(device="cpu", accum_dtype="float64").solver
    plan = solver.plan(x, y)
    st = solver.init_pass(plan, 0, y.shape[1])
    per_iter = []
    for _ in range(40):
        with count_host_syncs() as syncs:
            done = solver.iterate(plan, st)
        per_iter.append(syncs.total)
        assert syncs.total <= 1, syncs.by_op
        if done:
            break
    assert st.rebuilds >= 1                    # compaction happened inside the counted iterations
    assert per_iter == [1] * len(per_iter)     # exactly the convergence check, nothing else


def test_baseline_syncs_once_per_row_per_pass():
    x, y = _data()
    solver = IMPLS["baseline"](device="cpu").solver
    nnz, qx = solver._latent_scale(x, x.shape[1])
    slab = solver.init_slab(x, y, 0, 6, nnz, qx)
    with warnings.catch_warnings(), count_host_syncs() as syncs:
        warnings.simplefilter("ignore", RuntimeWarning)
        solver.iterate(slab)
    assert syncs.by_op["item"] >= x.shape[0]          # the row walk: one .item() per row
    assert syncs.by_op["repeat_interleave"] >= 1      # per chunk, without output_size


def test_whole_optimized_fit_syncs_are_iterations_plus_a_constant():
    x, y = _data()
    probe = Sparse1DProbe(device="cpu", max_iter=7, tol=0.0)
    with count_host_syncs("cpu") as syncs:
        probe.fit(x, y)
    n_iter = int(probe.n_iter_.max())
    # the inputs' copies to the device (2: blocking on a GPU, counted on every device), input checks (2), the
    # plan's per-latent counts (1), one per iteration, the counters at the end (1)
    assert syncs.by_op["to(device) from host"] == 2 and syncs.total == n_iter + 6, syncs.by_op


@pytest.mark.slow
def test_compiled_fit_compiles_four_graphs_at_most_and_gives_the_same_losses():
    # A whole fit with freezing: the work list shrinks (block, then pair lists) and chunks of every size
    # (chunk_pair_events=500). Dynamic sizes from the first call: the tile kernel compiles once for several
    # columns and once for the pair lists' single column; the LM update once without the lagged rho (first
    # iteration) and once with it. Nothing else may recompile.
    x, y = make_activations(400, 20, 6, l0=5, seed=4)
    kw = dict(device="cpu", max_iter=60, accum_dtype="float64", chunk_pair_events=500)
    reset()
    with count_compiles() as cc, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = Sparse1DProbe(compile="default", backend="eager", **kw).fit(x, y)
    eager = Sparse1DProbe(**kw).fit(x, y)
    assert compiled.counters_["work_rebuilds"] >= 2            # the shrinking really happened
    assert cc.graphs == 4 and cc.recompiles == 2, (cc.as_dict(), cc.compile_ids)
    # the compiled path runs tile_sums, the eager path its workspace twin (kernel tests: both within 1e-6 of
    # float64): the losses agree to float rounding (separable pairs' w may drift apart; their loss does not)
    torch.testing.assert_close(compiled.loss_matrix(x, y), eager.loss_matrix(x, y), rtol=1e-5, atol=1e-6)


def test_hook_and_debug_logging(caplog):
    x, y = _data()
    for impl, probe in IMPLS.items():
        seen = []
        with caplog.at_level(logging.DEBUG, logger="perflab.probe1d"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            probe(device="cpu", max_iter=3, tol=0.0, iteration_hook=seen.append, class_slab_size=4).fit(x, y)
        assert [s["iteration"] for s in seen] == [1, 2, 3] * 2       # two slabs / passes of <= 4 classes
        assert set(seen[0]) >= {"impl", "classes", "iteration", "loss", "max_grad", "max_step", "fallbacks"}
        assert all(s["impl"] == impl and s["loss"] > 0 for s in seen)
        assert sum("iter" in r.getMessage() for r in caplog.records) >= 3
        caplog.clear()


def test_optimized_debug_log_without_a_hook_reads_one_line_per_pass_and_iteration(caplog):
    import re

    x, y = _data()
    with caplog.at_level(logging.DEBUG, logger="perflab.probe1d"):
        IMPLS["optimized"](device="cpu", max_iter=2, tol=0.0, class_slab_size=4).fit(x, y)
    lines = [r.getMessage() for r in caplog.records if r.name == "perflab.probe1d"]
    pattern = r"classes \d+-\d+ iter \d: loss \S+ max\|grad\| \S+ max\|step\| \S+ fallbacks \d+"
    assert len(lines) == 4 and all(re.fullmatch(pattern, line) for line in lines), lines
    assert [line.split(" iter")[0] for line in lines] == ["classes 0-4"] * 2 + [f"classes 4-{y.shape[1]}"] * 2
