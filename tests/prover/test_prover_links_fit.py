"""Issue 33, part 2: the combination fitted on valid only (never test), its per-rule weights' l2 picked on valid
halves, the per-rule form reducing to the global one, the rule table against the miner's oracle, and random false
triples ranked at chance under the fitted score."""
import math
import random

import pytest
import torch

from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.kg import FIRST_PRED, KnowledgeGraph
from perflab.prover.core.mining import MiningConfig, mine_rules, rule_confidence, with_rules
from perflab.prover.core.policy import make_policy
from perflab.prover.links import checks, combine
from perflab.prover.links.embeddings import EmbeddingConfig
from perflab.prover.links.params import LinkConfig
from perflab.prover.links.predict import evaluate_link_prediction, fits_table_of


def _tiny_kg(seed: int = 0, n: int = 14):
    """p random; q(x, y) holds for every p(y, x) and s(x, y) for most p(x, z), p(z, y): rules q :- p^-1 and
    s :- p, p to mine. 8 q facts held out as valid, 8 as test."""
    rng = random.Random(seed)
    ents = [f"e{i}" for i in range(n)]
    p = sorted({(rng.choice(ents), rng.choice(ents)) for _ in range(30)})
    q = [(b, a) for a, b in p]
    rng.shuffle(q)
    valid, test, q_train = q[:8], q[8:16], q[16:]
    s = sorted({(a, c) for a, b in p for b2, c in p if b == b2 and rng.random() < 0.8})
    atoms = lambda name, pairs: "".join(f"{name}({a},{b}).\n" for a, b in pairs)   # noqa: E731
    kg = KnowledgeGraph.from_text(atoms("p", p) + atoms("q", q_train) + atoms("s", s), "",
                                  {"valid": atoms("q", valid), "test": atoms("q", test)})
    rules = mine_rules(kg, MiningConfig(min_support=1, min_head_coverage=0.0, min_confidence=0.05)).rules
    return with_rules(kg, rules), rules


@pytest.fixture(scope="module")
def tiny():
    kg, rules = _tiny_kg()
    engine = UnificationEngine(kg, max_derived=16)
    return kg, rules, engine, make_policy(kg, seed=0)


def _cfg(**kw):
    return LinkConfig(**{"n_queries": 0, "n_fit": 0, "search_batch": 64, "beam": 8, "emb": EmbeddingConfig(rank=8, epochs=20),
                         "n_cost": 1, "compile": "off", "greedy_batch": 0, **kw})


def test_the_rule_table_agrees_with_the_miners_rule_confidence(tiny):
    kg, rules, _, _ = tiny
    table = combine.RuleTable(kg, rules)
    assert table.n_rules == len(rules) >= 2
    C = kg.n_constants
    r, h, t = torch.meshgrid(torch.arange(FIRST_PRED, kg.n_predicates), torch.arange(1, C + 1), torch.arange(1, C + 1),
                             indexing="ij")
    triples = torch.stack([r, h, t], -1).reshape(-1, 3)             # every triple of every relation
    log_max, fires = table.features(table.fired(triples))
    want = rule_confidence(kg, rules, triples)                       # the miner's loop over (triple, rule) pairs
    assert torch.equal(fires > 0, want > 0) and int((fires > 0).sum()) > 0
    torch.testing.assert_close(log_max[fires > 0].double().exp(), want[want > 0], rtol=1e-6, atol=0)  # float32 log


def test_per_rule_weights_all_equal_are_the_global_count_term():
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(5, 7, 6, generator=g)
    n_rules = 9
    ids = torch.randint(0, n_rules + 1, (5, 7, 4), generator=g)     # n_rules is the pad: never fires
    feats[..., 5] = (ids < n_rules).sum(-1).float()                 # the count feature, as RuleTable.features gives it
    w = torch.randn(6, generator=g, dtype=torch.float64)
    c = 0.7
    global_form = combine.Combination(torch.cat([w[:5], torch.tensor([c], dtype=torch.float64)]))
    per_rule = combine.Combination(torch.cat([w[:5], torch.zeros(1, dtype=torch.float64)]),
                                   rule_weights=torch.full((n_rules,), c, dtype=torch.float64))
    torch.testing.assert_close(per_rule(feats, ids), global_form(feats), rtol=0, atol=1e-12)
    different = per_rule.rule_weights.clone()
    different[0] += 1.0                                              # one rule apart: the scores move where it fires
    moved = combine.Combination(per_rule.weights, rule_weights=different)(feats, ids) - global_form(feats)
    torch.testing.assert_close(moved, (ids == 0).sum(-1).double(), rtol=0, atol=1e-12)
    with pytest.raises(ValueError):
        per_rule(feats)                                              # a per-rule score without the fired ids


def test_the_global_procedure_is_todays_fit():
    g = torch.Generator().manual_seed(1)
    Q, C = 30, 10
    f = combine.features(torch.randn(Q, C, generator=g), torch.rand(Q, C, generator=g) < 0.3,
                         -torch.rand(Q, C, generator=g), -torch.rand(Q, C, generator=g))
    mask = torch.ones(Q, C, dtype=torch.bool)
    old = combine.fit([(mask, f)])
    new = combine.fit_procedure(combine.PROCEDURES["global"], [(mask, f)])
    assert torch.equal(old.weights, new.weights) and new.rule_weights is None
    rules = combine.fit_procedure(combine.PROCEDURES["per rule"], [(mask, f)], n_rules=0)   # no rules: the same
    assert torch.equal(rules.weights, old.weights)


def _spy(monkeypatch, name):
    """Records the lists every call of combine.<name> gets (fit(lists, ...), realistic_mrr(comb, lists))."""
    seen = []
    real = getattr(combine, name)

    def spy(*a, **kw):
        seen.append(combine._as_lists(a[0] if name == "fit" else a[1]))
        return real(*a, **kw)
    monkeypatch.setattr(combine, name, spy)
    return seen


def _triples(lists) -> set:
    out = set()
    for li in lists:
        out |= {tuple(x) for x in li.cs.cands[li.cs.mask].tolist()}
    return out


def test_the_fit_never_sees_a_test_triple_and_picks_l2_on_valid_halves(tiny, monkeypatch):
    kg, rules, engine, policy = tiny
    fits, held_out = _spy(monkeypatch, "fit"), _spy(monkeypatch, "realistic_mrr")
    lp = evaluate_link_prediction(kg, engine, policy, _cfg(fit="per rule"), rules=rules)
    test = {tuple(x) for x in kg.queries["test"].tolist()}
    valid = {tuple(x) for x in kg.queries["valid"].tolist()}
    assert fits and held_out and lp.combination.rule_weights is not None
    for lists in fits + held_out:
        assert not (_triples(lists) & test)                          # no test triple, not even as a corruption
        assert {tuple(x) for li in lists for x in li.cs.queries.tolist()} <= valid   # positives: valid triples only
    # the l2 search: each held-out ranking follows a fit on the other half (disjoint queries), 2 per grid value
    assert len(held_out) == 2 * len(combine.L2_GRID) and len(fits) == len(held_out) + 1
    for f, h in zip(fits, held_out):
        fq = {tuple(x) for li in f for x in li.cs.queries.tolist()}
        hq = {tuple(x) for li in h for x in li.cs.queries.tolist()}
        assert fq and hq and not (fq & hq) and fq | hq == valid
    assert {tuple(x) for li in fits[-1] for x in li.cs.queries.tolist()} == valid   # the last fit: all of valid
    assert lp.fit_queries == len(valid) and lp.combination.l2 in combine.L2_GRID


def test_the_leak_check_would_catch_test_lists_in_the_fit(tiny, monkeypatch):
    # the spy of the test above is not blind: hand the fit the test lists and it sees test triples
    kg, rules, engine, policy = tiny
    fits = _spy(monkeypatch, "fit")
    lp = evaluate_link_prediction(kg, engine, policy, _cfg(fit="global"), rules=rules)
    combine.fit_procedure(combine.PROCEDURES["global"], lp.scored.lists())
    test = {tuple(x) for x in kg.queries["test"].tolist()}
    assert not (_triples(fits[0]) & test) and (_triples(fits[-1]) & test)


def test_random_false_triples_rank_at_chance_with_the_per_rule_fit(tiny):
    kg, rules, engine, policy = tiny
    lp = evaluate_link_prediction(kg, engine, policy, _cfg(fit="per rule"), rules=rules)
    ok, info = checks.decoy_check(kg, lp.search, lp.model, lp.combination, lp.table, n=60, batch=64)
    assert ok[0].passed, ok[0].detail
    assert ok[0].detail == f"mean share of the way down within tolerance of chance (0.5 +- {info['tolerance']:.3f})"
    assert ok[0].value == info["mean share down"]                  # logged, not printed: it moves with the kernels
    assert info["decoy MRR"] < 2 * info["chance MRR"]
    leaky = lambda feats: torch.where(torch.arange(feats.shape[1]) == 0, 100.0, feats[..., 0].double())  # noqa: E731
    sc = lp.scored
    assert float(checks.decoy_ranks(sc, leaky).mean()) == 0.0       # a score that knows column 0 puts it on top
    dec = checks.decoys(kg, 60)
    assert not ({tuple(x) for x in dec.tolist()} & kg.true_set()) and len(dec) == 60


def test_the_table_of_fits_has_a_row_per_procedure_and_size(tiny):
    kg, rules, engine, policy = tiny
    lp = evaluate_link_prediction(kg, engine, policy, _cfg(), rules=rules)
    rows = fits_table_of(lp, oracle=True)
    assert [r["procedure"] for r in rows] == [p for p in combine.PROCEDURES for _ in range(2)]   # all valid, oracle
    assert [r["fitted on"] for r in rows[:2]] == ["8 valid", "test (oracle)"]
    assert sum(r["default"] for r in rows) == 1
    default = next(r for r in rows if r["default"])
    assert default["MRR combined"] == pytest.approx(lp.results["fitted"].metrics["realistic"]["MRR"])
    assert all(math.isnan(r["valid halves MRR"]) == (r["fitted on"] == "test (oracle)") for r in rows)
    with pytest.raises(ValueError):
        LinkConfig(fit="best on test")
