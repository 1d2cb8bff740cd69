"""03's link-prediction checks (`prover.links.checks`), the ones the notebook prints PASS/FAIL for: the counts they
print, and that each fails, naming what differs, when what it checks is broken: a proof BFS does not know, the CPU's
search or today's finding other proofs, a search chunk that reads the host or takes a host tensor, ranks that move
with the search's batch, decoys that a leaky score lifts. A check that cannot fail would let every such bug through."""
import math
import types

import pytest
import torch
from test_prover_links_fit import _tiny_kg  # its small graph with rules to mine

from perflab.prover.core.data import random_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy
from perflab.prover.core.ranking import CandidateSet
from perflab.prover.links import checks, predict
from perflab.prover.links.embeddings import EmbeddingConfig
from perflab.prover.links.params import LinkConfig
from perflab.prover.links.predict import evaluate_link_prediction
from perflab.prover.links.search import BeamSearch, ClosingSearch, SparseClosingSearch


@pytest.fixture(scope="module")
def small():
    kg = random_kg(0)
    engine = UnificationEngine(kg, max_atoms=4, max_derived=6, max_fact_matches=3)
    queries = torch.cat([kg.facts[:3], kg.queries.get("test", kg.facts)[:3]])
    return kg, engine, make_policy(kg, seed=0), queries


def _search_checks(small):
    kg, engine, policy, queries = small
    return checks.search_checks(kg, engine, policy, queries, width=3, depth=3, batch=12)


def test_search_checks_pass_and_name_the_search_and_counts(small):
    """The four checks pass on today's searches, named by the beam and depth they ran at (the complete search at
    the engine's S and depth 2), with counts of candidates and proofs the notebook prints."""
    kg, engine, _, _ = small
    got, info = _search_checks(small)
    n, proved = info["candidates"], info["proved"]
    assert n > 0 and 0 < proved <= info["bfs_proved"] and info["syncs"] == {} and info["host_operands"] == {}
    assert [(c.name, c.passed, c.detail) for c in got] == [
        (f"search (beam 3, depth 3): each of its proofs exists within its depth (BFS, {n} candidates)", True,
         f"0 of {proved} proofs not found by BFS (allowed 0)"),
        (f"search (beam {engine.S}, depth 2) proves exactly what BFS proves within 2 steps", True,
         f"0 of {n} candidates differ (allowed 0)"),
        ("the CPU's search (policy only where a proof closes) and today's BeamSearch find the same proofs", True,
         "0 proven flags or depths differ (allowed 0)"),
        ("a search chunk makes no host sync and takes no host tensor on a device (meta)", True,
         "0 syncs, 0 host tensors (allowed 0)")]


def test_a_proof_bfs_does_not_know_fails_soundness_and_completeness(small, monkeypatch):
    """BFS finding nothing (as if the search made proofs up): every proof the search found is counted unsound,
    and the complete search's proofs all differ from BFS's."""
    monkeypatch.setattr(checks, "prove_exhaustive", lambda engine, cands, depth: torch.zeros(len(cands), dtype=torch.long))
    got, info = _search_checks(small)
    assert [c.passed for c in got] == [False, False, True, True]
    assert got[0].detail == f"{info['proved']} of {info['proved']} proofs not found by BFS (allowed 0)"
    assert got[1].detail.endswith("candidates differ (allowed 0)") and not got[1].detail.startswith("0 ")


def test_a_proof_deeper_than_bfs_says_is_unsound(small, monkeypatch):
    """BFS's shortest proofs one step longer than what the search reports: a proof of depth d that BFS finds only at
    d + 1 is counted; the complete search, at depth 2, then differs where BFS's depth passes 2."""
    prove = checks.prove_exhaustive
    monkeypatch.setattr(checks, "prove_exhaustive", lambda engine, cands, depth: (lambda d: torch.where(d > 0, d + 1, d))(
        prove(engine, cands, depth)))
    got, info = _search_checks(small)
    assert not got[0].passed and got[0].detail.startswith(f"{info['proved']} of {info['proved']} proofs")


@pytest.mark.parametrize("which", ["SparseClosingSearch", "BeamSearch"])
def test_the_cpus_search_or_todays_finding_other_proofs_fails_the_same_proofs_check(small, monkeypatch, which):
    """The CPU's sparse search or the seed-era BeamSearch reporting one candidate's depth one more and another's
    outcome flipped: two differences counted, the check fails."""
    base = {"SparseClosingSearch": SparseClosingSearch, "BeamSearch": BeamSearch}[which]

    class Off(base):
        def score(self, *a, **k):
            r = super().score(*a, **k)
            r.depth[0] += 1
            r.proven[-1] = ~r.proven[-1]
            return r

    monkeypatch.setattr(checks, which, Off)
    got, _ = _search_checks(small)
    assert [c.passed for c in got] == [True, True, False, True]
    assert got[2].detail == "2 proven flags or depths differ (allowed 0)"


def test_a_chunk_that_reads_the_host_or_takes_a_host_tensor_fails_the_sync_check(small, monkeypatch):
    """A search chunk with a `.item()` (a wait per chunk on a GPU) fails with the sync counted; one that feeds a host
    scalar to its device ops (a copy per chunk on a GPU, seen on meta) fails with the host tensor counted."""
    class Reads(ClosingSearch):
        def chunk(self, queries):
            if queries.device.type != "meta":
                queries.max().item()
            return super().chunk(queries)

    monkeypatch.setattr(checks, "ClosingSearch", Reads)
    got, info = _search_checks(small)
    assert [c.passed for c in got] == [True, True, True, False]
    assert got[3].detail == "1 syncs, 0 host tensors (allowed 0)" and sum(info["syncs"].values()) == 1

    class Feeds(ClosingSearch):
        def chunk(self, queries):
            return super().chunk(queries + torch.tensor(0))

    monkeypatch.setattr(checks, "ClosingSearch", Feeds)
    got, info = _search_checks(small)
    assert not got[3].passed and got[3].detail == f"0 syncs, {sum(info['host_operands'].values())} host tensors (allowed 0)"
    assert info["host_operands"]


@pytest.fixture(scope="module")
def linked():
    kg, rules = _tiny_kg()
    engine = UnificationEngine(kg, max_derived=16)
    cfg = LinkConfig(n_queries=0, n_fit=0, search_batch=64, beam=8, emb=EmbeddingConfig(rank=8, epochs=20), n_cost=1,
                     compile="off", greedy_batch=0)
    return kg, evaluate_link_prediction(kg, engine, make_policy(kg, seed=0), cfg, rules=rules)


def test_fitted_ranks_across_batches_pass_and_count_ranks_that_move(linked, monkeypatch):
    """The fitted ranks at search batches 16 and 64 (and 16 again: counted once) agree, 3 tie rules x 2 sides x
    queries x 2 batches counted; ranks that move at one batch are counted outside their tie bounds."""
    kg, lp = linked
    q = kg.queries["test"][:5]
    got = checks.link_ranks_across_batches(kg, lp, q, [64, 16, 16])
    n = 3 * 2 * len(q) * 2
    assert [(c.name, c.passed, c.detail) for c in got] == [
        ("fitted ranks equal with the search at batch sizes [16, 64] up to float rounding (3 tie rules)", True,
         f"0 of {n} ranks outside their tie bounds (allowed 0)")]
    real, calls = predict.rank, []

    def moved(scored, comb):
        r = real(scored, comb)
        calls.append(1)
        if len(calls) == 2:                                           # the second batch's ranks, one place lower
            r.ranks.update({k: v + 1 + 2 * len(scored.sides["head"].cs.mask[0]) for k, v in r.ranks.items()})
        return r

    monkeypatch.setattr(checks, "rank", moved)
    got = checks.link_ranks_across_batches(kg, lp, q, [64, 16])
    assert (got[0].passed, got[0].detail) == (False, f"{n // 2} of {n} ranks outside their tie bounds (allowed 0)")


def test_decoys_are_seeded_false_triples_of_the_test_relations_in_turn(linked):
    """n triples, relation i that of test triple i (cycled), head and tail among the entities, no known triple
    (any split), the same for a seed and not for another."""
    kg, _ = linked
    dec = checks.decoys(kg, 20, seed=3)
    rels = kg.queries["test"][:, 0]
    assert dec.shape == (20, 3) and dec.dtype == torch.long
    assert dec[:, 0].tolist() == [int(rels[i % len(rels)]) for i in range(20)]
    assert int(dec[:, 1:].min()) >= 1 and int(dec[:, 1:].max()) <= kg.n_constants
    assert not {tuple(x) for x in dec.tolist()} & kg.true_set()
    assert torch.equal(checks.decoys(kg, 20, seed=3), dec) and not torch.equal(checks.decoys(kg, 20, seed=4), dec)
    assert len({tuple(x) for x in checks.decoys(kg, 200).tolist()}) > 50          # drawn over all the entities


def test_a_decoys_share_of_the_way_down_is_zero_at_the_top_one_at_the_bottom_and_half_when_tied(linked):
    """(rank - 1) / (real candidates - 1): a score that puts the query first gives 0, last 1, everything tied the
    middle rank, 0.5."""
    _, lp = linked
    sc = lp.scored
    top = lambda f: torch.where(torch.arange(f.shape[1]) == 0, 100.0, 0.0).expand(f.shape[:2]).double()  # noqa: E731
    bottom = lambda f: -top(f)                                                           # noqa: E731
    tied = lambda f: torch.zeros(f.shape[:2], dtype=torch.double)                        # noqa: E731
    assert checks.decoy_ranks(sc, top).tolist() == [0.0] * len(checks.decoy_ranks(sc, top))
    assert checks.decoy_ranks(sc, bottom).tolist() == pytest.approx([1.0] * len(checks.decoy_ranks(sc, top)))
    assert checks.decoy_ranks(sc, tied).tolist() == pytest.approx([0.5] * len(checks.decoy_ranks(sc, top)))


def test_the_decoy_check_fails_on_a_score_that_knows_the_query(linked):
    """Decoys ranked under a score that puts the query's own column first sit at the top (share 0), 4 standard errors
    of a uniform share (4 x sqrt(1/12 / 2n)) from chance: the check fails and says so, with the decoys' MRR (1.0) and
    chance's."""
    kg, lp = linked
    leaky = lambda f: torch.where(torch.arange(f.shape[1]) == 0, 100.0, 0.0).expand(f.shape[:2]).double()  # noqa: E731
    got, info = checks.decoy_check(kg, lp.search, lp.model, leaky, lp.table, n=30, batch=64)
    tol = 4 * math.sqrt(1 / 12 / 60)
    assert (info["decoys"], info["mean share down"], info["decoy MRR"]) == (30, 0.0, 1.0)
    assert info["tolerance"] == pytest.approx(tol) and 0 < info["chance MRR"] < 1
    assert got[0].name == "30 random false triples rank at chance under the fitted score (both sides)"
    assert (got[0].passed, got[0].detail) == (False, f"mean share of the way down 0.000 (chance 0.5 +- {tol:.3f}); "
                                                     f"decoy MRR 1.000, chance {info['chance MRR']:.3f}")


def test_the_meta_search_is_built_like_the_real_one_and_bfs_counts_are_bfs(small, monkeypatch):
    """The meta copy that host tensors are counted on has the real engine's limits and end action and the real
    policy's config; bfs_proved is what BFS proves within the depth over both sides' candidates."""
    kg, engine, policy, queries = small
    built, policies = [], []
    real_engine, real_policy = checks.UnificationEngine, checks.make_policy
    monkeypatch.setattr(checks, "UnificationEngine", lambda *a, **k: built.append((a[1:], k)) or real_engine(*a, **k))
    monkeypatch.setattr(checks, "make_policy", lambda *a, **k: policies.append((a[1:], k)) or real_policy(*a, **k))
    _, info = _search_checks(small)
    assert built == [((engine.A, engine.S, engine.K, engine.end_action), {"device": "meta"})]
    assert policies == [((policy.cfg,), {"device": "meta"})]
    cands = torch.cat([checks.filtered_candidates(kg, queries, s).flat() for s in checks.SIDES])
    assert info["candidates"] == len(cands)
    assert info["bfs_proved"] == int((checks.prove_exhaustive(engine, cands, 3) > 0).sum())


class _Comb:
    """A fitted combination: the first feature times the weights' size, sum |w| (what the check's tolerance scales
    with)."""

    def __init__(self, weights):
        self.weights = torch.tensor(weights)

    def __call__(self, feats, rule_ids):
        return feats[..., 0] * float(self.weights.abs().sum())


def test_the_fitted_ranks_tolerance_is_1e5_times_the_weights_size(monkeypatch):
    """Features within 1e-5 of each other move the fitted score by up to 1e-5 x sum |weights|: a positive 1.5e-4
    above a corruption under weights of size 4 (tolerance 2 x 4e-5 + 1e-4 for the ranks' rounding) may rank second;
    0.5 above it may not. Head and tail sides are judged by their own bounds."""
    def side(gap):
        cs = CandidateSet(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 2, 3, dtype=torch.long),
                                 torch.tensor([[True, True]]), torch.tensor([[0.5, 0.1]]))
        return predict.Side(cs, torch.tensor([[[gap / 4], [0.0]]]), torch.tensor([[True, True]]))

    def run(gap_head, gap_tail, second):
        sides = {"head": side(gap_head), "tail": side(gap_tail)}
        calls = []

        def ranked(scored, comb):
            calls.append(1)
            r = torch.tensor([1.0, 1.0]) if len(calls) == 1 else torch.tensor(second)
            return types.SimpleNamespace(ranks={k: r for k in ("realistic", "optimistic", "pessimistic")})

        monkeypatch.setattr(checks, "score_split", lambda *a: types.SimpleNamespace(sides=sides))
        monkeypatch.setattr(checks, "rank", ranked)
        lp = types.SimpleNamespace(search=None, model=None, table=None, config=types.SimpleNamespace(seed=0),
                                   combination=_Comb([1.0, -3.0, 0.0]))
        return checks.link_ranks_across_batches(None, lp, torch.zeros(1, 3), [8, 4])[0]

    assert run(1.5e-4, 0.5, [2.0, 1.0]).passed                         # head within rounding of a tie
    bad = run(1.5e-4, 0.5, [1.0, 2.0])                                 # tail: 0.5 apart, not a tie
    assert (bad.passed, bad.detail) == (False, "3 of 12 ranks outside their tie bounds (allowed 0)")
    assert not run(0.5, 0.5, [2.0, 1.0]).passed


def test_the_decoy_check_ranks_100_decoys_of_its_seed_against_chance_of_their_own_lists(linked, monkeypatch):
    """By default 100 decoys of seed 0, scored at the search batch 512 (the notebook's), each side's list; the chance
    MRR printed beside theirs is that of a uniform rank in each decoy's own list, H_k / k, averaged."""
    kg, lp = linked
    drawn, scored = [], []
    real_decoys, real_split = checks.decoys, checks.score_split
    monkeypatch.setattr(checks, "decoys", lambda kg, n, seed=0: drawn.append((n, seed)) or real_decoys(kg, n, seed))
    monkeypatch.setattr(checks, "score_split", lambda *a: scored.append(a[4:]) or scored.append(real_split(*a))
                        or scored[-1])
    _, info = checks.decoy_check(kg, lp.search, lp.model, lp.combination, lp.table)
    assert drawn == [(100, 0)] and scored[0] == (512, 0, lp.table) and info["decoys"] == 100
    sizes = [int(k) for s in scored[1].sides.values() for k in s.cs.mask.sum(1)]
    assert len(sizes) == 200
    assert info["chance MRR"] == pytest.approx(sum(sum(1 / i for i in range(1, k + 1)) / k for k in sizes) / 200)
    drawn.clear()
    checks.decoy_check(kg, lp.search, lp.model, lp.combination, lp.table, n=10, seed=7)
    assert drawn == [(10, 7)]


def test_decoys_draw_every_entity_and_default_to_seed_0(linked):
    """Heads and tails are drawn over all the entities, 1 to n_constants (the first and the last included), as int64
    triples; without a seed, seed 0's."""
    kg, _ = linked
    many = checks.decoys(kg, 500)
    assert set(many[:, 1:].flatten().tolist()) == set(range(1, kg.n_constants + 1))
    assert torch.equal(many, checks.decoys(kg, 500, seed=0)) and many.dtype == torch.long


def test_a_short_lists_share_of_the_way_down_divides_by_its_own_length(monkeypatch):
    """A decoy second of two real candidates is at the bottom (share 1), one alone at the top (share 0): the divisor
    is the list's length minus one, at least 1."""
    cs = types.SimpleNamespace(mask=torch.tensor([[True, True, False], [True, False, False]]))
    scored = types.SimpleNamespace(sides={"head": types.SimpleNamespace(cs=cs)})
    monkeypatch.setattr(checks, "rank", lambda sc, comb: types.SimpleNamespace(ranks={"realistic": torch.tensor([2.0, 1.0])}))
    assert checks.decoy_ranks(scored, None).tolist() == [1.0, 0.0]


def test_bfs_runs_over_every_candidate_in_chunks_of_256():
    """Over 256 candidates (a family graph's 8 test triples, both sides) BFS runs in chunks and covers each candidate
    once: its counts are those of one BFS over all of them, and the checks pass."""
    from perflab.prover.core.data import family_kg
    from perflab.prover.core.policy import PolicyConfig

    kg = family_kg(n_families=2, seed=2)
    engine = UnificationEngine(kg, max_derived=12)
    q = kg.queries["test"][:8]
    got, info = checks.search_checks(kg, engine, make_policy(kg, PolicyConfig(embed_dim=8, hidden=16, n_blocks=1)),
                                     q, width=3, depth=2, batch=48)
    cands = torch.cat([checks.filtered_candidates(kg, q, s).flat() for s in checks.SIDES])
    assert info["candidates"] == len(cands) > 300 and all(c.passed for c in got)
    depth = checks.prove_exhaustive(engine, cands, 2)
    assert info["bfs_proved"] == int((depth > 0).sum()) > 0 and (depth == 2).any()     # proofs of 1 and 2 steps
    assert got[1].detail == f"0 of {len(cands)} candidates differ (allowed 0)"


def test_cudas_sync_debug_warnings_fail_the_chunk_check(small, monkeypatch, warned_counter):
    """On a GPU the counter adds CUDA's sync-debug warnings (a second witness): two of them fail the chunk check."""
    monkeypatch.setattr(checks, "count_host_syncs", warned_counter(checks.count_host_syncs, 2))
    got, _ = _search_checks(small)
    assert (got[3].passed, got[3].detail) == (False, "2 syncs, 0 host tensors (allowed 0)")


def test_a_depth_at_near_tied_scores_is_counted_apart_and_a_flag_never(small, monkeypatch):
    """The CPU's search choosing another proof of a near-tied score (a GPU's rounding: a last-step proof within 1e-5
    of an earlier one) passes the same-proofs check, the near tie named; the same depth at an exactly equal score, or a
    proven flag, fails it (gpu-review-2026-12-01 W3)."""
    from perflab.prover.links.search import differences

    class Tied(SparseClosingSearch):
        def score(self, *a, **k):
            r = super().score(*a, **k)
            i = int(r.proven.nonzero()[0])
            r.depth[i] += 1
            r.score[i] += 1e-7 * (1 + abs(float(r.score[i])))   # another proof, scored within rounding
            return r

    monkeypatch.setattr(checks, "SparseClosingSearch", Tied)
    got, info = _search_checks(small)
    assert got[2].passed and info["near_ties"] == 1
    assert got[2].detail == ("0 proven flags or depths differ (allowed 0); 1 depths at near-tied proof scores (within "
                             "1e-05: another proof by float rounding)")
    kg, engine, policy, queries = small
    a = ClosingSearch(engine, policy, 3, 3).score(queries, 12)
    b = ClosingSearch(engine, policy, 3, 3).score(queries, 12)
    i = int(a.proven.nonzero()[0])
    b.depth[i] += 1
    assert differences(a, b) == (1, 0)                  # an exactly equal score: no tie chose that
    b.score[i] += 1e-3
    assert differences(a, b) == (1, 0)                  # far from a tie
    b.depth[i], b.score[i], b.proven[-1] = a.depth[i], a.score[i], ~a.proven[-1]
    assert differences(a, b) == (1, 0)                  # a proven flag: ties cannot reach it
