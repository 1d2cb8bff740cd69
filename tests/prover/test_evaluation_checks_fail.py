"""03's correctness checks (`prover.evaluation.checks`), the ones the notebook prints PASS/FAIL for: each passes on
today's engine with the counts a user reads, and each fails, naming what differs, when the thing it checks is broken
(a successor dropped, a proof depth off by one, a host read in the step, a host tensor fed to a device op, scores or
ranks that move with the batch). A check that cannot fail would let every such bug through."""
import dataclasses
import types

import pytest
import torch

from perflab.prover.core.data import family_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import PolicyConfig, make_policy
from perflab.prover.core.ranking import CandidateSet, corruptions
from perflab.prover.evaluation import checks


@pytest.fixture(scope="module")
def setup():
    kg = family_kg(n_families=2, seed=2)
    engine = UnificationEngine(kg, max_derived=12)
    policy = make_policy(kg, PolicyConfig(embed_dim=8, hidden=16, n_blocks=1), seed=0)
    return kg, engine, policy, kg.queries["test"][:8]


def test_03s_checks_pass_on_todays_engine_and_name_what_they_compared(setup):
    """All four pass, with the counts the notebook prints: 400 states of the graph and 48 of each of 10 random
    graphs (880), the lists cut by the tight limits, the queries compared at the BFS depth asked for."""
    kg, engine, policy, queries = setup
    got, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4)
    assert [(c.name, c.passed, c.detail) for c in got] == [
        ("engine successors equal the reference on 880 states (107 with cut lists)", True,
         "0 of 880 successor lists differ (allowed 0)"),
        ("BFS provability equals the reference on 8 queries (depth <= 4)", True,
         "0 of 8 shortest-proof depths differ (allowed 0)"),
        ("derive and a policy step make no host sync (counted calls; CUDA's sync-debug warnings on a GPU)", True,
         "0 counted (allowed 0)"),
        ("derive and a policy step take no host tensor on a device (meta)", True, "0 host tensors fed (allowed 0)")]
    assert info["engine"] == {"states": 880, "mismatches": 0, "truncated": 107}
    assert info["bfs"]["queries"] == 8 and info["bfs"]["agree"] and info["bfs"]["differ"] == 0
    assert info["bfs"]["provable"] == int((info["bfs"]["depth"] > 0).sum()) >= 1
    assert info["syncs"] == {"syncs": 0, "by_op": {}, "host_operands": 0, "host_by_op": {}}


def test_the_bfs_check_runs_at_the_depth_asked_for_and_the_reference_at_the_same(setup):
    """bfs_depth (study.bfs_depth) sets the depth of both searches, and the check's name says it; without it the
    rollout's max_depth. A shallower BFS than the reference (or the other way) would fail a correct engine."""
    kg, engine, policy, queries = setup
    deep = checks.bfs_vs_reference(kg, engine, queries, max_depth=4)
    shallow = checks.bfs_vs_reference(kg, engine, queries, max_depth=1)
    assert deep["agree"] and shallow["agree"]
    assert shallow["provable"] < deep["provable"]                   # some proofs need more than one step
    assert int(shallow["depth"].max()) <= 1
    got, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4, bfs_depth=1)
    assert got[1].name == "BFS provability equals the reference on 8 queries (depth <= 1)" and got[1].passed
    assert torch.equal(info["bfs"]["depth"], shallow["depth"])


def test_the_engine_check_fails_on_an_engine_that_drops_a_successor(setup, monkeypatch):
    """A derive that loses the last successor of every list (a cut one too early): the lists differ from the
    reference's, the check fails and counts them."""
    kg, engine, policy, queries = setup
    derive = UnificationEngine.derive

    def short(self, states, next_var):
        d = derive(self, states, next_var)
        return d._replace(counts=(d.counts - 1).clamp(min=0))

    monkeypatch.setattr(UnificationEngine, "derive", short)
    eq = checks.engine_vs_reference(kg, engine, n_states=40, n_random_kgs=2)
    assert eq["states"] == 40 + 2 * 48 and eq["mismatches"] > 0
    got, _ = checks.correctness_03(kg, engine, policy, queries, max_depth=4)
    assert not got[0].passed
    assert got[0].detail.startswith(f"{int(got[0].detail.split()[0])} of 880 successor lists differ")
    assert int(got[0].detail.split()[0]) > 0


def test_the_bfs_check_fails_on_a_depth_off_by_one(setup, monkeypatch):
    """The batched BFS giving one query a proof one step longer than the reference's: the check fails and says
    1 of 8 depths differ."""
    kg, engine, policy, queries = setup
    prove = checks.prove_exhaustive

    def off(engine, queries, max_depth):
        d = prove(engine, queries, max_depth).clone()
        d[int((d > 0).nonzero()[0])] += 1
        return d

    monkeypatch.setattr(checks, "prove_exhaustive", off)
    got, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4)
    assert (got[1].passed, got[1].detail) == (False, "1 of 8 shortest-proof depths differ (allowed 0)")
    assert info["bfs"]["differ"] == 1 and not info["bfs"]["agree"]


def test_the_sync_checks_fail_on_a_host_read_and_a_host_tensor_in_derive(setup, monkeypatch):
    """A derive that reads a value back (`.item()`: a wait per step on a GPU) fails the sync check, which names the
    op; one that feeds a host tensor to a device op (a copy per step on a GPU, seen on meta) fails the operand check,
    which names it too."""
    kg, engine, policy, queries = setup
    derive = UnificationEngine.derive

    def reads(self, states, next_var):
        if next_var.device.type != "meta":
            next_var.max().item()
        return derive(self, states, next_var)

    monkeypatch.setattr(UnificationEngine, "derive", reads)
    got, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4)
    assert not got[2].passed and got[3].passed
    assert info["syncs"]["syncs"] >= 1 and got[2].detail == (f"{info['syncs']['syncs']} counted (allowed 0): "
                                                             f"{info['syncs']['by_op']}")
    assert "item" in str(info["syncs"]["by_op"])

    def feeds(self, states, next_var):
        return derive(self, states, next_var + torch.tensor(0))     # a host scalar: copied to a GPU each step

    monkeypatch.setattr(UnificationEngine, "derive", feeds)
    got, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4)
    assert got[2].passed and not got[3].passed
    n = info["syncs"]["host_operands"]
    assert n >= 1 and got[3].detail == f"{n} host tensors fed (allowed 0): {info['syncs']['host_by_op']}"


def test_ranks_across_batches_passes_on_todays_loop_and_counts_what_moves(setup, monkeypatch):
    """The same candidates at batches 5, 8 and 24 rank alike (12 ranks: 4 queries x 3 batches). A batch whose scores
    move by 0.1 (every finite one) fails the check with them counted against the largest batch's; ranks that move
    too (4 of them) are counted as outside their tie bounds."""
    kg, engine, policy, _ = setup
    q = kg.queries["test"][:4]
    cs = corruptions(kg, q, 5, "both", seed=0)
    got, evals = checks.ranks_across_batches(kg, engine, policy, q, cs, [8, 24, 5, 8], max_depth=4)
    assert sorted(evals) == [5, 8, 24] and all(e.batch == b for b, e in evals.items())
    assert [(c.name, c.passed, c.detail) for c in got] == [
        ("ranks equal at batch sizes [5, 8, 24] up to float rounding, scores within 1e-5", True,
         "0 of 12 ranks outside their tie bounds, 0 scores off by more than 1e-5 (allowed 0)")]
    real = checks.evaluate_with_corruptions

    def moved(*a, batch, **k):
        r = real(*a, batch=batch, **k)
        if batch == 5:
            r = dataclasses.replace(r, scores=r.scores + 0.1)
        if batch == 8:
            r = dataclasses.replace(r, ranks=r.ranks + len(cs.mask[0]))
        return r

    monkeypatch.setattr(checks, "evaluate_with_corruptions", moved)
    got, _ = checks.ranks_across_batches(kg, engine, policy, q, cs, [8, 24, 5], max_depth=4)
    finite = int(evals[5].scores.isfinite().sum())                   # the masked -inf stay -inf
    assert (got[0].passed, got[0].detail) == (
        False, f"4 of 12 ranks outside their tie bounds, {finite} scores off by more than 1e-5 (allowed 0)")
    assert finite > 4


def test_the_engine_check_compares_400_states_of_the_graph_and_48_of_each_of_10_random_graphs(setup):
    """engine_vs_reference's defaults are the notebook's: 400 + 10 x 48 = 880 states, of seed 0's graphs (random graphs
    seed, seed + 1, ...: their cut lists counted, 107), the random engines' limits varied (fact matches 2-4, the end
    action on every other one) so that cuts happen."""
    kg, engine, _, _ = setup
    assert checks.engine_vs_reference(kg, engine) == {"states": 880, "mismatches": 0, "truncated": 107}



def test_the_engine_check_covers_random_graphs_of_consecutive_seeds_with_and_without_the_end_action(setup, monkeypatch):
    """The random graphs are seed, seed + 1, ... (each a new graph), their engines alternate the end action (04's
    ladder runs without it) and cycle the fact-match limit 2, 3, 4 (so lists are cut at each): a check that only ever
    compared engines with the end action would pass an engine broken without it."""
    kg, engine, _, _ = setup
    seeds, built = [], []
    real_kg, real_engine = checks.random_kg, checks.UnificationEngine
    monkeypatch.setattr(checks, "random_kg", lambda s: seeds.append(s) or real_kg(s))
    monkeypatch.setattr(checks, "UnificationEngine", lambda *a, **k: built.append(k) or real_engine(*a, **k))
    checks.engine_vs_reference(kg, engine, n_states=8, n_random_kgs=4, seed=5)
    assert seeds == [5, 6, 7, 8]
    assert [(k["max_fact_matches"], k["end_action"], k["max_atoms"], k["max_derived"]) for k in built] == [
        (2, True, 4, 6), (3, False, 4, 6), (4, True, 4, 6), (2, False, 4, 6)]


def _evals(monkeypatch, by_batch):
    """evaluate_with_corruptions replaced: batch -> (ranks, scores) of one query's three candidates."""
    cs = CandidateSet(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, 3, dtype=torch.long),
                      torch.tensor([[True, True, True]]), torch.tensor([[0.5, 0.1, 0.9]]))

    def fake(kg, engine, policy, queries, *, batch, **kw):
        r, s = by_batch[batch]
        return types.SimpleNamespace(ranks=torch.tensor(r), scores=torch.tensor(s), candidates=cs, batch=batch)

    monkeypatch.setattr(checks, "evaluate_with_corruptions", fake)


def test_ranks_across_batches_judges_ranks_and_scores_each_at_float_rounding(setup, monkeypatch):
    """Against the largest batch's: a rank one place lower where the scores part by half a unit is outside its tie
    bounds (rounding allows 1e-5, not 1); a score 5e-6 from 0 is within 1e-5 (absolute), one 0.1 off is not, and
    either alone fails the check."""
    kg, engine, policy, q = setup
    s = [[0.0, -0.5, -3.0]]
    _evals(monkeypatch, {8: ([1.0], s), 4: ([2.0], s)})
    got, _ = checks.ranks_across_batches(kg, engine, policy, q, None, [8, 4], max_depth=4)
    assert (got[0].passed, got[0].detail) == (
        False, "1 of 2 ranks outside their tie bounds, 0 scores off by more than 1e-5 (allowed 0)")
    _evals(monkeypatch, {8: ([1.0], s), 4: ([1.0], [[5e-6, -0.5, -3.0]])})
    got, _ = checks.ranks_across_batches(kg, engine, policy, q, None, [8, 4], max_depth=4)
    assert (got[0].passed, got[0].detail) == (
        True, "0 of 2 ranks outside their tie bounds, 0 scores off by more than 1e-5 (allowed 0)")
    _evals(monkeypatch, {8: ([1.0], s), 4: ([1.0], [[0.1, -0.4, -2.9]])})
    got, _ = checks.ranks_across_batches(kg, engine, policy, q, None, [8, 4], max_depth=4)
    assert (got[0].passed, got[0].detail) == (
        False, "0 of 2 ranks outside their tie bounds, 3 scores off by more than 1e-5 (allowed 0)")


def test_the_host_tensor_check_builds_its_meta_step_like_the_real_one(setup, monkeypatch):
    """The meta copy of the step that host tensors are counted on has the real engine's limits and end action and
    the real policy's config: a host tensor fed only on a path of the real configuration (here: an engine without
    the end action, as 04's ladder) is seen; a meta copy built with defaults would pass it."""
    kg, _, policy, queries = setup
    engine = UnificationEngine(kg, max_atoms=5, max_derived=10, max_fact_matches=3, end_action=False)
    built, policies = [], []
    real_engine, real_policy = checks.UnificationEngine, checks.make_policy
    monkeypatch.setattr(checks, "UnificationEngine", lambda *a, **k: built.append((a[1:], k)) or real_engine(*a, **k))
    monkeypatch.setattr(checks, "make_policy", lambda *a, **k: policies.append((a[1:], k)) or real_policy(*a, **k))
    checks.step_syncs(kg, engine, policy, queries, max_depth=4)
    assert built == [((engine.A, engine.S, engine.K, False), {"device": "meta"})]
    assert policies == [((policy.cfg,), {"device": "meta"})]
    derive = UnificationEngine.derive

    def feeds(self, states, next_var):
        extra = torch.tensor(0) if not self.end_action else 0      # a host scalar, without the end action only
        return derive(self, states, next_var + extra)

    monkeypatch.setattr(UnificationEngine, "derive", feeds)
    assert checks.step_syncs(kg, engine, policy, queries, max_depth=4)["host_operands"] >= 1


def test_cudas_sync_debug_warnings_count_as_syncs(setup, monkeypatch, warned_counter):
    """On a GPU the counter adds CUDA's sync-debug warnings (a second witness): they count with the counted calls,
    and a step with two of them fails the check, '2 counted'."""
    kg, engine, policy, queries = setup
    monkeypatch.setattr(checks, "count_host_syncs", warned_counter(checks.count_host_syncs, 2))
    got, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4)
    assert info["syncs"]["syncs"] == 2 and (got[2].passed, got[2].detail) == (False, "2 counted (allowed 0): {}")


def test_03s_checks_take_the_seed_of_their_random_states(setup):
    """correctness_03(seed=s) compares the engine on the random states of seed s (not always seed 0's)."""
    kg, engine, policy, queries = setup
    _, info = checks.correctness_03(kg, engine, policy, queries, max_depth=4, seed=3)
    assert info["engine"] == checks.engine_vs_reference(kg, engine, n_states=400, seed=3)
    assert info["engine"] != checks.engine_vs_reference(kg, engine, n_states=400, seed=0)


@pytest.mark.parametrize("graphs, passed", [(0, True), (1, False), (3, False)])
def test_the_padding_check_fails_on_any_graph_compiled_after_warm_up(graphs, passed):
    """Padded chunks all have the batch's shape: one graph compiled after warm-up is a recompile per tail size."""
    c = checks.no_recompiles_with_padding(graphs)
    assert (c.name, c.passed, c.detail) == ("zero recompiles after warm-up with padding", passed,
                                            f"{graphs} graphs compiled after warm-up, padded (allowed 0)")
