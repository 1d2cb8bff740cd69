"""Early-exit strategies: identical per-candidate results, exact bookkeeping, one graph per bucket."""
import pytest
import torch

from perflab.kit.compiles import count_compiles, reset
from perflab.prover.core.data import family_kg, ladder_kg, ladder_queries, seed_like_lengths
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import PolicyConfig, make_policy, train_policy
from perflab.prover.core.ranking import corruptions
from perflab.prover.core.step import GreedyStep
from perflab.prover.early_exit.study import IMPLS, variant

SMALL = PolicyConfig(embed_dim=16, hidden=32, n_blocks=1)


def run(step, cands, batch, name, min_bucket=8, trace=None):
    """The version IMPLS names, bucketed with its smallest bucket."""
    return variant(name, min_bucket)(step, cands, batch, trace=trace)


@pytest.fixture(scope="module")
def ladder():
    kg = ladder_kg(levels=12, n_pairs=16, n_constants=64)
    engine = UnificationEngine(kg, max_derived=6, end_action=False)
    return kg, GreedyStep(engine, make_policy(kg, SMALL, seed=3), max_depth=12)


@pytest.fixture(scope="module")
def family():
    kg = family_kg(n_families=3, seed=4)
    engine = UnificationEngine(kg, max_derived=12)
    policy = make_policy(kg, SMALL, seed=0)
    train_policy(policy, engine, kg.queries["train"], updates=4, batch=32, max_depth=6)
    cands = corruptions(kg, kg.queries["test"][:6], 7, "both", seed=0).flat()  # 48: proofs, failures
    return GreedyStep(engine, policy, max_depth=5), cands                    # and depth-limit cuts


def run_all(step, cands, batch, **kw):
    with torch.inference_mode():
        return {s: run(step, cands, batch, s, **kw) for s in IMPLS}


def assert_identical(results, n):
    ref = results["full"]
    for name, r in results.items():
        assert r.score.shape == (n,) and r.records.tolist() == [1] * n, name   # each candidate once
        assert torch.equal(r.steps, ref.steps) and torch.equal(r.proven, ref.proven), name
        # a row computed in batches of different sizes: float32 rounding may differ in the last bits
        torch.testing.assert_close(r.score, ref.score, rtol=1e-5, atol=1e-5, msg=name)
        assert r.slot_steps - r.wasted_slot_steps == int(r.steps.sum()), name  # every useful row-step counted


def _ladder_case(kg, lengths):
    g = torch.Generator().manual_seed(1)
    return ladder_queries(kg, torch.tensor(lengths), g)


@pytest.mark.parametrize("case, batch", [
    ("seed-like", 16),          # varied lengths, several chunks, a partial last chunk
    ("all at once", 8),         # every proof takes 4 steps
    ("one straggler", 16),      # all 1 step but one 12-step proof
    ("fewer than slots", 32),   # 5 candidates, 32 slots
])
def test_strategies_agree_on_ladder_workloads(ladder, case, batch):
    kg, step = ladder
    lengths = {"seed-like": seed_like_lengths(50, 12, torch.Generator().manual_seed(2)).tolist(),
               "all at once": [4] * 24, "one straggler": [1] * 20 + [12] + [1] * 19,
               "fewer than slots": [3, 1, 7, 2, 5]}[case]
    cands = _ladder_case(kg, lengths)
    res = run_all(step, cands, batch)
    assert_identical(res, len(cands))
    assert res["full"].steps.tolist() == lengths and res["full"].proven.all()   # a ladder proof takes its level
    assert res["compact"].wasted_slot_steps == 0
    if case == "one straggler":  # the straggler's 15 chunk mates wait 11 steps each in full and masked
        assert res["full"].wasted_slot_steps >= 15 * 11 and res["masked"].wasted_slot_steps >= 15 * 11


def test_strategies_agree_on_family_candidates(family):
    step, cands = family
    res = run_all(step, cands, 16)
    assert_identical(res, len(cands))
    full = res["full"]
    assert full.proven.any() and (~full.proven).any() and (full.steps == step.max_depth).any()


def test_empty_queue(ladder):
    _, step = ladder
    empty = torch.zeros(0, 3, dtype=torch.long)
    for name, r in run_all(step, empty, 8).items():
        assert r.score.shape == (0,) and r.steps_executed == 0, name


def test_recycle_never_drops_or_duplicates(ladder):
    kg, step = ladder
    lengths = seed_like_lengths(200, 12, torch.Generator().manual_seed(5))
    cands = _ladder_case(kg, lengths.tolist())
    with torch.inference_mode():
        r = run(step, cands, 8, "recycle")
    assert r.records.tolist() == [1] * 200
    assert torch.equal(r.steps, lengths)                   # each candidate got its own proof, from step 0
    # the batch stays full until the queue drains: idle slot-steps only in the last max-length steps
    assert r.wasted_slot_steps <= 8 * int(lengths.max())
    assert r.steps_executed <= int(lengths.sum()) // 8 + int(lengths.max()) + 1



def _schedule(lengths, batch):
    """Continuous batching, simply: each of `batch` slots holds a candidate until its proof's last step, and in that
    step takes the next one in queue order (which starts in the step after). -> (steps, busy slots per step)."""
    queue, busy = list(lengths), []
    slots = [queue.pop(0) if queue else 0 for _ in range(batch)]   # steps left per slot; 0: idle
    while any(slots):
        busy.append(sum(left > 0 for left in slots))
        slots = [left - 1 if left > 1 else (queue.pop(0) if left == 1 and queue else 0) for left in slots]
    return len(busy), busy


@pytest.mark.parametrize("lengths, batch", [
    ([1] * 20 + [12], 8),                        # the longest proof queued last: it starts when the queue drains
    ([1] * 15 + [12], 8),                        # the same, with the queue a multiple of the slots before it
    (sorted([2, 9, 1, 1, 5, 3, 12, 1, 7, 4, 1, 2, 6, 1, 11, 3, 1, 8]), 4),   # ascending: the longest last
    ([12] + [1] * 20, 8),                        # the longest first
    ([3, 1, 7], 8),                              # fewer candidates than slots
])
def test_recycle_runs_the_steps_of_a_simple_schedule(ladder, lengths, batch):
    # steps and slot counts are what recycle's claimed speedup rests on: equal to the simple schedule's, with the
    # step-by-step reads (trace) and with the skipped reads (no trace), not just bounded
    kg, step = ladder
    cands = _ladder_case(kg, lengths)
    steps, busy = _schedule(lengths, batch)
    for trace in ([], None):
        with torch.inference_mode():
            r = run(step, cands, batch, "recycle", trace=trace)
        assert r.steps.tolist() == lengths and r.records.tolist() == [1] * len(lengths)
        assert (r.steps_executed, r.slot_steps, r.wasted_slot_steps) == (steps, steps * batch, steps * batch - sum(lengths))
        if trace is not None:
            assert [active for _, _, active in trace] == busy

@pytest.mark.slow
def test_compiled_loops_one_graph_per_shape_nothing_after_warmup(ladder):
    kg, eager = ladder
    step = GreedyStep(eager.engine, eager.policy, eager.max_depth, compile="default", backend="eager")
    cands = _ladder_case(kg, [1] * 12 + [2] * 10 + [6] * 2)            # 24 active, then 12, then 2
    reset()
    trace = []
    with count_compiles() as cc:
        res = run(step, cands, 24, "bucketed", min_bucket=8, trace=trace)
    buckets = [rows for _, rows, _ in trace]
    assert sorted(set(buckets)) == [8, 16, 24]                           # 24 is the batch itself
    assert cc.graphs == 3                                                # one graph per bucket, no more
    with count_compiles() as first:
        compiled = {s: run(step, cands, 24, s, min_bucket=8) for s in IMPLS}
    with count_compiles() as again:                                      # same shapes, same buffers: cached
        for s in IMPLS:
            run(step, cands, 24, s, min_bucket=8)
    assert first.graphs >= 4 and (again.graphs, again.recompiles) == (0, 0), (first.as_dict(), again.as_dict())
    compiled["bucketed"] = res
    assert_identical(compiled, len(cands))
    want = run(eager, cands, 24, "full")
    assert torch.equal(compiled["recycle"].steps, want.steps)
    torch.testing.assert_close(compiled["recycle"].score, want.score, rtol=1e-5, atol=1e-5)
    reset()


def test_host_reads_are_counted_and_recycle_skips_most(ladder):
    from perflab.kit.syncs import count_host_syncs

    kg, step = ladder
    cands = _ladder_case(kg, seed_like_lengths(160, 12, torch.Generator().manual_seed(7)).tolist())
    for s in IMPLS:
        with count_host_syncs() as syncs:
            r = run(step, cands, 8, s)
        assert r.host_reads == syncs.total, (s, r.host_reads, dict(syncs.by_op))
        if s in ("full", "masked"):
            assert r.host_reads == r.steps_executed + 1                  # "all done?" each step, one total
    # recycle: a read, then ceil(queued / B) steps without one while the queue holds candidates
    assert r.host_reads < r.steps_executed / 2, (r.host_reads, r.steps_executed)


def test_unknown_strategy_is_refused(ladder):
    _, step = ladder
    with pytest.raises(ValueError, match="no version 'sideways': expected one of full, masked, compact, bucketed, recycle"):
        run(step, torch.zeros(1, 3, dtype=torch.long), 4, "sideways")


def test_bucketed_runs_with_its_smallest_bucket_and_no_other_version_takes_it():
    assert variant("bucketed", 3).knobs == {"min_bucket": 3} and variant("bucketed", 3).name == "bucketed"
    assert all(variant(name, 3).knobs == {} for name in IMPLS if name != "bucketed")


@pytest.mark.slow
def test_notebook_helpers_time_and_count(ladder):
    from perflab.kit.bench import summary
    from perflab.prover.early_exit.profiles import per_step_counts
    from perflab.prover.early_exit.study import Workload, graphs_per_strategy, time_strategies, trace_table

    kg, step = ladder
    w = Workload("ladder", step, _ladder_case(kg, [1, 3, 2, 5, 1, 1, 4, 2]))
    ms, res, reads = time_strategies(w, 4, 2, rounds=2)
    assert reads["full"] > 1 and reads["recycle"] <= reads["full"]
    assert set(ms) == set(IMPLS) and all(summary(m)["n"] == 2 for m in ms.values())
    assert res["recycle"].steps.tolist() == [1, 3, 2, 5, 1, 1, 4, 2]
    t = trace_table(res)
    assert (t.computed >= t.active).all() and set(t.strategy) == set(IMPLS)
    assert graphs_per_strategy(w, 4, 2) == dict.fromkeys(IMPLS, 0)  # nothing compiled when off
    counts = per_step_counts(w, 4, 2)
    assert counts["full"]["host_reads_per_step"] > 1 and all(c["launches_per_step"] > 0 for c in counts.values())


def test_the_notebooks_schedule_check_passes_and_names_a_phantom_step(ladder, monkeypatch):
    from perflab.prover.early_exit import checks
    from perflab.prover.early_exit.study import Workload

    kg, step = ladder
    lengths = [3, 1, 12, 2, 1, 5, 1, 1, 4, 2, 1, 1]  # the 12-step proof is moved to the back of the queue
    w = Workload("ladder", step, _ladder_case(kg, lengths), torch.tensor(lengths))
    with torch.inference_mode():
        c = checks.recycle_follows_the_schedule(w, 4)
    assert c.passed and c.name.endswith("the longest proof (12 steps) queued last"), c
    assert c.detail.endswith("0 of 17 steps' busy slots differ (allowed 0)"), c.detail
    plain = checks.recycle_schedule
    monkeypatch.setattr(checks, "recycle_schedule", lambda ls, b: plain(ls, b) + [1])  # a step the schedule lacks
    with torch.inference_mode():
        c = checks.recycle_follows_the_schedule(w, 4)
    assert not c.passed and "(the schedule: 18, 72," in c.detail and "1 of 18 steps' busy slots differ" in c.detail
