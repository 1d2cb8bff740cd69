"""Issue 23: the beam search, the learned score every candidate gets, ranks under three tie rules."""
import math

import pytest
import torch

from perflab.kit.syncs import count_host_syncs
from perflab.prover.core.data import random_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.kg import KnowledgeGraph
from perflab.prover.core.policy import make_policy
from perflab.prover.core.ranking import CandidateSet, rank_bounds, ranks, within_bounds
from perflab.prover.core.step import GreedyStep
from perflab.prover.early_exit.baseline import rollout
from perflab.prover.links import checks
from perflab.prover.links.combine import EMBEDDING_ONLY, Combination, features, fit
from perflab.prover.links.embeddings import EmbeddingConfig, train_complex
from perflab.prover.links.predict import Scored, Side, prover_scores, rank
from perflab.prover.links.search import BeamSearch


def _zero_policy(kg):
    policy = make_policy(kg, seed=0)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()          # every logit 0: greedy takes the first successor, each choice -log(#successors)
    return policy


# ---- the search --------------------------------------------------------------------------------

def test_the_search_finds_a_proof_the_greedy_policy_misses():
    # q(a,c) offers two rules in file order: q :- p (p(a,c) is no fact and p has no rule: a dead end) and
    # q :- r, s (r(a,b), s(b,c) are facts). The greedy policy takes the first successor and fails; a beam of 2
    # keeps both and proves q(a,c) through the second in two steps.
    kg = KnowledgeGraph.from_text("r(a,b).\ns(b,c).\np(c,a).\n", "q(X,Y) :- p(X,Y).\nq(X,Y) :- r(X,Z), s(Z,Y).\n",
                                  {"test": "q(a,c).\n"})
    engine, policy = UnificationEngine(kg), _zero_policy(kg)
    query = kg.queries["test"]
    with torch.inference_mode():
        greedy = rollout(GreedyStep(engine, policy, max_depth=6), query, 1)
    assert not bool(greedy.proven[0])
    found = BeamSearch(engine, policy, width=2, depth=2).score(query, batch=2)
    assert bool(found.proven[0]) and int(found.depth[0]) == 2
    # step 1: {p(a,c), r(a,Z),s(Z,c), <end>}: log 1/3; step 2: {<true> through r(a,b), <end>}: log 1/2
    assert found.score[0].item() == pytest.approx(-math.log(3) - math.log(2), abs=1e-5)
    assert found.log_weight[0].item() == 0.0                          # rules.txt rules weigh 1
    narrow = BeamSearch(engine, policy, width=1, depth=2).score(query, batch=1)
    assert not bool(narrow.proven[0])                                 # width 1 keeps the dead end (first in a tie)
    assert not bool(BeamSearch(engine, policy, width=2, depth=1).score(query, batch=2).proven[0])  # too shallow


@pytest.mark.parametrize("seed", [0, 3])
def test_the_search_against_the_breadth_first_oracle(seed):
    kg = random_kg(seed)
    engine = UnificationEngine(kg, max_atoms=4, max_derived=6, max_fact_matches=3)
    queries = torch.cat([kg.facts[:3], kg.queries.get("test", kg.facts)[:3]])
    ok, info = checks.search_checks(kg, engine, make_policy(kg, seed=seed), queries, width=3, depth=3, batch=12)
    assert all(c.passed for c in ok), (ok, info)
    assert info["bfs_proved"] >= 1                                    # the comparison is not empty


def test_search_results_do_not_depend_on_the_batch():
    kg = random_kg(1)
    engine = UnificationEngine(kg, max_atoms=4, max_derived=6, max_fact_matches=3)
    search = BeamSearch(engine, make_policy(kg, seed=1), width=4, depth=3)
    cands = torch.cat([kg.facts, kg.facts.flip(0)])[:37]
    a, b = search.score(cands, batch=4), search.score(cands, batch=64)  # 1 candidate per chunk vs 16, padded
    assert torch.equal(a.proven, b.proven) and torch.equal(a.depth, b.depth) and int(a.proven.sum()) >= 1
    torch.testing.assert_close(a.score, b.score, rtol=0, atol=1e-5)   # float32 sums of a few log-probs


# ---- the combined score ------------------------------------------------------------------------

def test_the_combined_score_orders_a_proved_candidate_as_designed():
    #            log p_emb, proved, rule log-weight, policy log-prob
    f = features(torch.tensor([[-2.0, -2.0, -2.0, -1.0]]), torch.tensor([[True, False, True, False]]),
                 torch.tensor([[-0.1, -9.0, -2.0, 0.0]]), torch.tensor([[-1.0, -9.0, -1.0, 0.0]]))
    assert f[0, 1, 2:].tolist() == [0.0, 0.0]                        # no proof: its sums do not count
    comb = Combination(torch.tensor([1.0, 1.5, 0.5, 0.1], dtype=torch.float64))
    s = comb(f)[0].tolist()
    # equal embedding scores: proved (bonus 1.5 - 0.05 - 0.1 = 1.35) above unproved; the more confident proof
    # higher; an unproved candidate whose embedding leads by 1 nat stays below the better proof (1 < 1.35) and
    # above the weaker one (bonus 1.5 - 1 - 0.1 = 0.4 < 1)
    assert s[0] > s[3] > s[2] > s[1]
    assert s[0] - s[1] == pytest.approx(comb.bonus(-0.1, -1.0)) == pytest.approx(1.35)
    negative = Combination(torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=torch.float64))   # proofs as bad news
    assert negative(f)[0, 0] < negative(f)[0, 1]
    assert EMBEDDING_ONLY(f)[0, 0] == EMBEDDING_ONLY(f)[0, 1]            # the embedding alone ignores proofs


def test_the_fit_learns_what_a_proof_is_worth_and_is_deterministic():
    g = torch.Generator().manual_seed(0)
    Q, C = 40, 12
    emb = torch.randn(Q, C, generator=g)                              # an embedding that knows nothing
    proven = torch.rand(Q, C, generator=g) < 0.2
    proven[:, 0] = True                                               # every positive proved
    f = features(emb, proven, torch.zeros(Q, C), torch.zeros(Q, C))
    mask = torch.ones(Q, C, dtype=torch.bool)
    comb = fit([(mask, f)])
    assert comb.bonus() > 1.0 and comb.loss < fit([(mask, f)], max_iter=0).loss
    assert torch.equal(comb.weights, fit([(mask, f)]).weights)
    s = comb(f)
    unproved = s.masked_fill(proven, float("inf")).min(1).values
    assert bool((s[:, 0] > unproved).all())                          # a proved positive above every unproved


# ---- ranks with three tie rules, by hand ---------------------------------------------------------

def test_filtered_ranks_with_three_tie_rules_on_a_hand_computed_case():
    # one query per side; the positive at 0; scores from the embedding alone (the feature's first column).
    # head: negatives 0.5 (higher), 0.2 (tied, proved), 0.2 (tied, failed), 9.0 (masked: a known triple);
    # tail: negatives 0.1, 0.3, 0.3 (two tied, both failed) -> positive 0.3.
    def side(emb, proved, mask):
        cs = CandidateSet(torch.zeros(1, 3), torch.zeros(1, len(emb), 3), torch.tensor([mask]), torch.zeros(1, len(emb)))
        p = torch.tensor([proved])
        return Side(cs, features(torch.tensor([emb]), p, torch.zeros(1, len(emb)), torch.zeros(1, len(emb))), p)

    scored = Scored({"head": side([0.2, 0.5, 0.2, 0.2, 9.0], [True, False, True, False, False], [True] * 4 + [False]),
                     "tail": side([0.3, 0.1, 0.3, 0.3], [False] * 4, [True] * 4)}, 0.0, 0.0)
    r = rank(scored, EMBEDDING_ONLY)
    # head: 1 higher, 2 tied -> optimistic 2, pessimistic 4, realistic 3; tail: 0 higher, 2 tied -> 1, 3, 2
    assert r.ranks["optimistic"].tolist() == [2.0, 1.0]
    assert r.ranks["pessimistic"].tolist() == [4.0, 3.0]
    assert r.ranks["realistic"].tolist() == [3.0, 2.0]
    assert r.metrics["realistic"]["MRR"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert r.metrics["optimistic"]["Hits@1"] == 0.5 and r.metrics["pessimistic"]["Hits@3"] == 0.5
    assert r.tie_share == 1.0 and r.tied_any == 1.0                  # both positives tie with a failed corruption
    alone = rank(scored, prover_scores)                               # head positive proved (score 0), tail failed
    # head: proved negative at 0 ties, the rest fail below -> 1 tie: 1 / 2 / 1.5; tail: 3 failed ties -> 1 / 4 / 2.5
    assert alone.ranks["realistic"].tolist() == [1.5, 2.5] and alone.tie_share == 0.5


# ---- the embedding -----------------------------------------------------------------------------

def test_the_embedding_training_is_seeded_and_reproducible_on_cpu():
    kg = random_kg(2)
    cfg = EmbeddingConfig(rank=8, epochs=15, batch=16)
    a, log_a = train_complex(kg, cfg, seed=5)
    b, log_b = train_complex(kg, cfg, seed=5)
    c, _ = train_complex(kg, cfg, seed=6)
    assert torch.equal(a.ent, b.ent) and torch.equal(a.rel, b.rel) and log_a.loss == log_b.loss
    assert not torch.equal(a.ent, c.ent)
    assert log_a.loss[-1] < 0.8 * log_a.loss[0]                      # it learns the training facts
    f = kg.facts
    lp = a.side_log_probs(f, "tail")
    assert lp.shape == (len(f), kg.n_constants + 1) and torch.isinf(lp[:, 0]).all()   # padding is never an answer
    torch.testing.assert_close(lp[:, 1:].exp().sum(1), torch.ones(len(f)))           # a distribution per query
    # a training fact's tail ranks above the median entity (it was trained to)
    assert float((lp.gather(1, f[:, 2:3]) > lp[:, 1:].median(1, keepdim=True).values).float().mean()) > 0.9


def test_the_greedy_loop_is_not_timed_at_the_search_batch():
    import dataclasses

    from perflab.prover.links.embeddings import EmbeddingConfig
    from perflab.prover.links.params import LinkConfig, LinkParams
    from perflab.prover.links.predict import cost_per_candidate

    cfg = LinkConfig.of(LinkParams(search_batch=4096, greedy_batch=64))
    assert (cfg.search_batch, cfg.greedy_slots) == (4096, 64)     # b62ef7a ran the greedy loops at 4096 too
    assert LinkConfig(search_batch=96, greedy_batch=0).greedy_slots == 96   # no greedy batch: the search's
    assert LinkConfig() == LinkConfig.of(LinkParams())            # its defaults are the notebook's
    # every field of LinkParams that LinkConfig has is carried under its own name (no batch meaning two things)
    p = LinkParams(search_batch=3, greedy_batch=5, beam=7, search_depth=1, n_fit=11, n_queries=13, max_depth=17,
                   compile="off", backend="inductor", emb_rank=19, emb_epochs=23, seed=29)
    got = LinkConfig.of(p)
    same = [f.name for f in dataclasses.fields(LinkConfig) if f.name in LinkParams.__dataclass_fields__]
    assert same and all(getattr(got, k) == getattr(p, k) for k in same), same
    assert (got.emb.rank, got.emb.epochs) == (19, 23)

    from perflab.prover.core.data import family_kg
    from perflab.prover.core.engine import UnificationEngine
    from perflab.prover.core.policy import PolicyConfig, make_policy
    from perflab.prover.links.search import BeamSearch

    kg = family_kg(n_families=2, seed=1)
    engine = UnificationEngine(kg, max_derived=8)
    policy = make_policy(kg, PolicyConfig(embed_dim=16, hidden=32, n_blocks=1), seed=0)
    cfg = LinkConfig(search_batch=256, greedy_batch=16, beam=4, max_depth=4, emb=EmbeddingConfig(rank=4, epochs=1),
                     compile="off")
    cost = cost_per_candidate(kg, engine, policy, BeamSearch(engine, policy, 4, 2), kg.queries["test"][:1], cfg)
    assert {k: v["batch"] for k, v in cost.items()} == {"greedy (full)": 16, "greedy (recycle)": 16, "search": 256}


# ---- N7: ranks across batch sizes equal up to float rounding -------------------------------------------------

def _cs(q: int, k: int) -> CandidateSet:
    return CandidateSet(torch.zeros(q, 3, dtype=torch.long), torch.zeros(q, 1 + k, 3, dtype=torch.long),
                        torch.ones(q, 1 + k, dtype=torch.bool), torch.rand(q, 1 + k, generator=torch.Generator().manual_seed(0)))


def test_rank_bounds_allow_rounding_flips_and_nothing_more():
    cs = _cs(3, 4)
    ref = torch.tensor([[0.50000, 0.90, 0.1, 0.500004, 0.2],      # a near-tie just above the positive
                        [0.30000, 0.29999, 0.1, 0.2, 0.4],          # rounding puts it level with the positive
                        [-1.0000, 0.5, -2.0, -3.0, -1.0]])          # an exact tie
    bounds = rank_bounds(ref, cs, atol=1e-5)
    flipped = ref.clone()
    flipped[0, 3], flipped[1, 1] = 0.499996, 0.300002               # each moved by < 1e-5: the order flips
    for rule in ("optimistic", "pessimistic", "mean", "random"):
        assert within_bounds(ranks(ref, cs, rule), bounds) and within_bounds(ranks(flipped, cs, rule), bounds), rule
    wrong = ref.clone()
    wrong[0, 2] = wrong[0, 4] = 0.6                                  # a real reorder: outside the bounds
    assert not within_bounds(ranks(wrong, cs, "optimistic"), bounds)
    lo, hi = bounds
    assert lo.tolist() == [2, 2, 2] and hi.tolist() == [3, 3, 3]


# ---- N8: ComplEx scores build no index from host data --------------------------------------------------------

def test_complex_scores_make_no_host_copy():
    from perflab.prover.links.embeddings import ComplEx

    model = ComplEx(n_constants=7, n_relations=3, rank=4, generator=torch.Generator().manual_seed(0))
    h, r = torch.tensor([1, 2, 3]), torch.tensor([0, 1, 5])
    with count_host_syncs("cpu") as syncs:
        s = model.scores(h, r)
    assert syncs.total == 0, syncs.by_op                              # b62ef7a: 1 (a device tensor from [0])
    assert torch.isneginf(s[:, 0]).all() and torch.isfinite(s[:, 1:]).all() and s.shape == (3, 8)
    s.sum().backward()                                                # still differentiable (the training loss)
    assert model.ent.grad is not None


@pytest.mark.parametrize("side", ["head", "tail"])
def test_complex_side_log_probs_normalize(side):
    from perflab.prover.links.embeddings import ComplEx

    model = ComplEx(n_constants=5, n_relations=2, rank=3, generator=torch.Generator().manual_seed(1))
    lp = model.side_log_probs(torch.tensor([[4, 1, 2], [5, 3, 3]]), side)   # (pred, h, t); preds from FIRST_PRED
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, dtype=lp.dtype))  # padding column: probability 0
