"""The tensor engine against the plain-Python reference: successors, provability, syncs, compiles."""
import pytest
import torch

from perflab.kit.compiles import count_compiles, reset
from perflab.kit.syncs import count_host_operands, count_host_syncs
from perflab.prover.core.data import family_kg, random_kg, random_states
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.kg import END, FALSE, TRUE, KnowledgeGraph
from perflab.prover.core.reference import Limits, ReferenceProver, prove_exhaustive, to_tuples


@pytest.fixture(scope="module")
def fam():
    return family_kg(n_families=3, seed=1)


def engine_successors(engine, states, nv):
    d = engine.derive(states, nv)
    return [list(zip(to_tuples(d.states[i, :c]), d.next_var[i, :c].tolist()))
            for i, c in enumerate(d.counts.tolist())], d


def assert_same_successors(kg, engine, states, nv):
    ref = ReferenceProver(kg, Limits.of(engine))
    got, d = engine_successors(engine, states, nv)
    for i, s in enumerate(to_tuples(states)):
        want = ref.successors(s, int(nv[i]))
        assert got[i] == want, f"state {s}: engine {got[i]} != reference {want}"
    assert (d.counts >= 1).all()
    return d


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("limits", [dict(max_atoms=4, max_derived=8), dict(max_atoms=3, max_derived=3, max_fact_matches=1),
                                    dict(max_atoms=5, max_derived=6, max_fact_matches=2, end_action=False)])
def test_engine_equals_reference_on_random_kgs(seed, limits):
    # random KGs mix repeated variables (r(X,X)), constants in rules and 1-2 atom bodies; random states
    # share variables across atoms; tight limits force window cuts, list cuts and over-long rejections
    kg = random_kg(seed)
    engine = UnificationEngine(kg, **limits)
    states, nv = random_states(kg, 48, engine.A, seed)
    assert_same_successors(kg, engine, states, nv)


def test_engine_equals_reference_on_the_family_kg(fam):
    engine = UnificationEngine(fam, max_derived=16)
    states, nv = random_states(fam, 300, engine.A, seed=5, p_var=0.5)
    queries, qnv = engine.initial(fam.queries["test"][:100])
    assert_same_successors(fam, engine, torch.cat([states, queries]), torch.cat([nv, qnv]))


def test_truncation_is_flagged():
    kg = KnowledgeGraph.from_text("p(a,b).\np(a,c).\np(a,d).\n", "")
    engine = UnificationEngine(kg, max_atoms=2, max_derived=8, max_fact_matches=2)
    d = engine.derive(*engine.initial(torch.stack([kg.atom("p(a,b)"), kg.atom("p(a,b)")])))
    assert not d.truncated.any()                                         # exact lookup: one match
    states = torch.tensor([[[kg.pred_id("p"), kg.const_id("a"), engine.var0], [0, 0, 0]]])
    d = engine.derive(states, torch.tensor([engine.var0 + 1]))
    assert d.truncated.tolist() == [True] and d.counts.tolist() == [3]  # 2 facts of 3 + <end>


def _kg(rules, facts="p(a,b).\np(b,c).\nq(c,c).\n"):
    return KnowledgeGraph.from_text(facts, rules)


def _one(kg, engine, goals, nv=None):
    states = torch.tensor([[list(g) for g in goals] + [[0, 0, 0]] * (engine.A - len(goals))])
    nv = torch.tensor([nv or engine.var0 + 5])
    got, _ = engine_successors(engine, states, nv)
    return got[0]


def test_hand_cases():
    kg = _kg("r(X,Y) :- p(X,Z), p(Z,Y).\ns(X,X) :- q(X,X).\nt(X,c) :- p(X,b).")
    e = UnificationEngine(kg, max_atoms=3, max_derived=6)
    P, C, v = kg.pred_id, kg.const_id, e.var0
    # 2-atom body, rule variables renamed from next_var: X,Y bound to the goal, Z -> next_var + 2
    got = _one(kg, e, [(P("r"), C("a"), C("c"))], nv=v + 5)
    assert got[0] == (((P("p"), C("a"), v + 7), (P("p"), v + 7, C("c"))), v + 8)
    assert got[-1][0] == ((END, 0, 0),)
    # shared variable in the head: s(c, c) unifies, s(a, c) clashes -> dead end
    assert _one(kg, e, [(P("s"), C("c"), C("c"))])[0][0] == ((TRUE, 0, 0),)  # q(c,c) is a fact
    assert _one(kg, e, [(P("s"), C("a"), C("c"))]) == [(((FALSE, 0, 0),), v + 5)]
    # constant in the head: t(X, c) against goal t(a, Y) binds Y := c; p(a,b) is a fact -> proved
    assert _one(kg, e, [(P("t"), C("a"), v)])[0][0] == ((TRUE, 0, 0),)
    # goal variable shared with the rest of the state: p(X, b) binds X := a everywhere
    got = _one(kg, e, [(P("p"), v, C("b")), (P("q"), v, v)])
    assert got[0][0] == ((P("q"), C("a"), C("a")),)
    # terminal states are their own only successor
    assert _one(kg, e, [(TRUE, 0, 0)]) == [(((TRUE, 0, 0),), v + 5)]


def test_s_rule_unifies_shared_variables():
    kg = _kg("s(X,X) :- q(X,X).")
    e = UnificationEngine(kg, max_atoms=2, max_derived=4)
    P, C = kg.pred_id, kg.const_id
    # s(c,c) -> q(c,c), a fact: removed, proof
    assert _one(kg, e, [(P("s"), C("c"), C("c"))])[0][0] == ((TRUE, 0, 0),)
    # s(Y, c) with Y a goal variable: binds Y := c through the rule's X
    assert _one(kg, e, [(P("s"), e.var0, C("c"))])[0][0] == ((TRUE, 0, 0),)


def test_derive_and_step_are_sync_free(fam):
    from perflab.prover.core.policy import make_policy
    from perflab.prover.core.step import GreedyStep

    engine = UnificationEngine(fam, max_derived=16)
    states, nv = random_states(fam, 64, engine.A, seed=3)
    step = GreedyStep(engine, make_policy(fam), max_depth=5)
    slots = step.init(fam.queries["test"][:64])
    with torch.inference_mode(), count_host_syncs() as syncs:
        engine.derive(states, nv)
        step(*slots)
    assert syncs.total == 0, syncs.by_op
    # the same on a device that is not the host (meta: no data, a value read back raises): no op takes a
    # host tensor, i.e. no copy from the host that CUDA would run as memcpy + synchronize
    meta = UnificationEngine(fam, max_derived=16, device="meta")
    meta_step = GreedyStep(meta, make_policy(fam, device="meta"), max_depth=5)
    with torch.inference_mode(), count_host_operands() as host, count_host_syncs() as syncs:
        meta.derive(states.to("meta"), nv.to("meta"))
        meta_step(*meta_step.init(fam.queries["test"][:64].to("meta")))
    assert host.total == 0 and syncs.total == 0, (host, syncs)


def test_derive_compiles_to_one_graph(fam):
    reset()
    engine = UnificationEngine(fam, max_derived=16)
    f = torch.compile(engine.derive, backend="eager", fullgraph=True, dynamic=False)
    states, nv = random_states(fam, 32, engine.A, seed=4)
    with count_compiles() as cc:
        got = f(states, nv)
        f(*random_states(fam, 32, engine.A, seed=5))          # same shape, new values: no recompile
    assert (cc.graphs, cc.recompiles) == (1, 0)
    want = engine.derive(states, nv)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)      # integer outputs: exactly equal


@pytest.mark.parametrize("seed", range(6))
def test_bfs_provability_equals_reference(seed):
    kg = random_kg(seed, n_rules=5)
    engine = UnificationEngine(kg, max_atoms=4, max_derived=8)
    ref = ReferenceProver(kg, Limits.of(engine))
    g = torch.Generator().manual_seed(seed)
    queries = torch.stack([torch.randint(4, kg.n_predicates, (20,), generator=g),
                           torch.randint(1, kg.n_constants + 1, (20,), generator=g),
                           torch.randint(1, kg.n_constants + 1, (20,), generator=g)], 1)
    for depth in (1, 2, 4):
        got = prove_exhaustive(engine, queries, depth).tolist()
        want = [ref.prove(tuple(q), depth) for q in queries.tolist()]
        assert got == want, f"depth {depth}"


def test_bfs_on_family_queries_and_depth_limit(fam):
    engine = UnificationEngine(fam, max_derived=16)
    ref = ReferenceProver(fam, Limits.of(engine))
    q = fam.queries["test"][:30]
    deep = prove_exhaustive(engine, q, 8)
    assert deep.tolist() == [ref.prove(tuple(x), 8) for x in q.tolist()]
    assert (deep > 0).all()                                  # held-out family facts are all provable
    shallow = prove_exhaustive(engine, q, 2)
    assert shallow.tolist() == [d if d <= 2 else -1 for d in deep.tolist()]
    assert (deep > 2).any()                                  # some need more than two steps
