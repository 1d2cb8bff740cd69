"""Rule mining: sparse counts against a brute-force count, thresholds, order, cap, the rules.txt round trip,
and the coverage ceiling against the engine's own provability."""
import dataclasses

import pytest
import torch

from perflab.prover.core.data import random_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.kg import FIRST_PRED, KnowledgeGraph
from perflab.prover.core.mining import (
    MiningConfig,
    _decode_body,
    body_statistics,
    brute_force_statistics,
    mine_rules,
    rule_confidence,
    rule_coverage,
    rules_text,
    with_rules,
)
from perflab.prover.links.reference import engine_coverage

ALL = MiningConfig(min_support=1, min_head_coverage=0.0, min_confidence=0.0, max_rules_per_head=None)


def _graph(seed, n_constants=7, n_predicates=3, n_facts=26):
    """A random graph with facts only (the random rules are dropped: mining reads facts)."""
    kg = random_kg(seed, n_constants=n_constants, n_predicates=n_predicates, n_facts=n_facts)
    return KnowledgeGraph(kg.predicates, kg.constants, kg.facts, [], {})


def _sparse_as_dict(kg, chunk):
    sup, size = body_statistics(kg, chunk=chunk)
    R = kg.n_predicates - FIRST_PRED
    out = {}
    for b in range(sup.shape[0]):
        body = _decode_body(b, R)
        for r in range(R):
            if body != ((FIRST_PRED + r, False),):
                out[(FIRST_PRED + r, body)] = (int(sup[b, r]), int(size[b]))
    return out


@pytest.mark.parametrize("seed, chunk", [(0, 16), (1, 1), (2, 3), (3, 4)])
def test_sparse_counts_equal_brute_force(seed, chunk):
    kg = _graph(seed, n_constants=6 + seed, n_predicates=2 + seed % 2)
    want = brute_force_statistics(kg)
    got = _sparse_as_dict(kg, chunk)
    assert got == want
    assert any(s > 0 and len(body) == 2 for (_, body), (s, _) in want.items())  # 2-hop bodies were exercised


def test_mined_rules_are_exactly_those_passing_the_thresholds():
    kg = _graph(5, n_constants=8, n_facts=40)
    stats = brute_force_statistics(kg)
    for cfg in (MiningConfig(min_support=2, min_head_coverage=0.2, min_confidence=0.3, max_rules_per_head=None),
                MiningConfig(min_support=1, min_head_coverage=0.0, min_confidence=0.5, max_length=1,
                             max_rules_per_head=None)):
        want = {(h, body) for (h, body), (s, n) in stats.items() if len(body) <= cfg.max_length and s >= cfg.min_support
                and s >= cfg.min_head_coverage * int((kg.facts[:, 0] == h).sum()) and s >= cfg.min_confidence * n}
        got = mine_rules(kg, cfg)
        assert {(m.head, m.body) for m in got} == want and len(got) == len(want)
        for m in got:
            assert (m.support, m.body_size) == stats[(m.head, m.body)]
            assert m.head_size == int((kg.facts[:, 0] == m.head).sum())


def test_hand_counted_rules():
    # p: a->b, b->c, c->d; q: a->c, b->d, a->d, d->a; r: b->a, c->b
    facts = "p(a,b).\np(b,c).\np(c,d).\nq(a,c).\nq(b,d).\nq(a,d).\nq(d,a).\nr(b,a).\nr(c,b).\n"
    kg = KnowledgeGraph.from_text(facts)
    rules = {m.text(kg): m for m in mine_rules(kg, ALL)}
    two_hop = rules["q(X,Y) :- p(X,Z), p(Z,Y)."]       # body pairs a->c, b->d: both are q facts
    assert (two_hop.support, two_hop.body_size, two_hop.head_size) == (2, 2, 4)
    assert two_hop.confidence == 1.0 and two_hop.head_coverage == 0.5
    inverse = rules["r(X,Y) :- p(Y,X)."]                # body b->a, c->b, d->c: r has b->a and c->b
    assert (inverse.support, inverse.body_size, inverse.head_size) == (2, 3, 2)
    mixed = rules["q(X,Y) :- r(Z,X), q(Z,Y)."]         # X <-r- Z -q-> Y: only Z=b, r(b,a), q(b,d): the pair (a, d)
    assert (mixed.support, mixed.body_size, mixed.confidence) == (1, 1, 1.0)
    assert "p(X,Y) :- r(Z,X), q(Z,Y)." not in rules     # its one body pair (a, d) is no p fact: support 0
    assert "p(X,Y) :- p(X,Y)." not in rules             # never the trivial rule


def test_order_cap_and_rule_objects():
    kg = _graph(7, n_constants=8, n_facts=45)
    everything = mine_rules(kg, ALL).rules
    raw = mine_rules(kg, dataclasses.replace(ALL, prior=0.0)).rules
    assert raw != everything and set(raw) == set(everything)    # the same rules, in another order
    for h in {m.head for m in everything}:
        mine = [m for m in everything if m.head == h]           # shrunk confidence: support / (body pairs + 20)
        keys = [(-m.support / (m.body_size + 20), -m.support, len(m.body), m.body) for m in mine]
        assert keys == sorted(keys)
        by_conf = [m for m in raw if m.head == h]                # prior 0: raw confidence
        keys = [(-m.confidence, -m.support, len(m.body), m.body) for m in by_conf]
        assert keys == sorted(keys)
    capped = mine_rules(kg, dataclasses.replace(ALL, max_rules_per_head=3)).rules
    assert capped == [m for h in sorted({m.head for m in everything}) for m in [x for x in everything if x.head == h][:3]]
    kg2 = with_rules(kg, capped)
    assert len(kg2.rules) == len(capped) and kg2.facts is kg.facts
    two = next(m for m in capped if len(m.body) == 2)
    rule = two.rule(kg)
    assert rule.head == (two.head, -1, -2) and rule.n_vars == 3 and len(rule.body) == 2


def test_rules_text_round_trips_through_the_loader(tmp_path):
    kg = _graph(11, n_constants=8, n_facts=45)
    mined = mine_rules(kg, MiningConfig(min_support=1, min_confidence=0.2, max_rules_per_head=None)).rules
    assert any(len(m.body) == 1 for m in mined) and any(len(m.body) == 2 for m in mined)
    d = kg.save(tmp_path / "g")
    (d / "rules.txt").write_text(rules_text(kg, mined, header="test graph"))
    back = KnowledgeGraph.load(d)
    assert back.predicates == kg.predicates            # facts.txt is sorted by predicate id
    direct = with_rules(kg, mined).rules
    assert [(r.head, r.body, r.n_vars) for r in back.rules] == [(r.head, r.body, r.n_vars) for r in direct]
    assert [back.rule_str(r) for r in back.rules] == [m.text(kg) for m in mined]


def _holds(m, h, t, facts, C):
    """Brute force: the rule's body atoms against the facts, every Z tried."""
    if len(m.body) == 1:
        (p, inv), = m.body
        return ((p, t, h) if inv else (p, h, t)) in facts
    (p, ip), (q, iq) = m.body
    return any(((p, z, h) if ip else (p, h, z)) in facts and ((q, t, z) if iq else (q, z, t)) in facts
               for z in range(1, C + 1))


def test_coverage_is_a_one_rule_proof_and_the_engine_agrees():
    for seed in (3, 4):
        kg = _graph(seed, n_constants=7, n_facts=30)
        rules = mine_rules(kg, MiningConfig(min_support=1, min_head_coverage=0.0, min_confidence=0.2,
                                            max_rules_per_head=None)).rules
        C = kg.n_constants
        queries = torch.tensor([[p, a, b] for p in range(FIRST_PRED, kg.n_predicates) for a in range(1, C + 1)
                                for b in range(1, C + 1)])
        facts = {tuple(f) for f in kg.facts.tolist()}
        queries = queries[torch.tensor([tuple(q) not in facts for q in queries.tolist()])]
        got = rule_coverage(kg, rules, queries)

        want = torch.tensor([any(_holds(m, h, t, facts, C) for m in rules if m.head == r) for r, h, t in queries.tolist()])
        assert torch.equal(got, want) and 0 < int(want.sum()) < len(queries)
        best = [max([m.confidence for m in rules if m.head == r and _holds(m, h, t, facts, C)], default=0.0)
                for r, h, t in queries.tolist()]
        assert rule_confidence(kg, rules, queries).tolist() == best
        # the engine, with limits too wide to cut anything, proves each covered query within 2 steps
        engine = UnificationEngine(with_rules(kg, rules), max_derived=4 * len(rules) + 16, max_atoms=4)
        assert bool(engine_coverage(engine, queries[got], max_depth=2).all())


def test_config_is_validated():
    for bad in (dict(min_support=0), dict(min_confidence=1.5), dict(max_length=3), dict(max_rules_per_head=0)):
        with pytest.raises(ValueError):
            MiningConfig(**bad)


@pytest.mark.gpu
def test_sparse_counts_on_cuda_equal_cpu():
    kg = _graph(2, n_constants=9, n_facts=40)
    cpu = body_statistics(kg)
    gpu = body_statistics(kg, device="cuda")
    assert all(torch.equal(a, b.cpu()) for a, b in zip(cpu, gpu))
