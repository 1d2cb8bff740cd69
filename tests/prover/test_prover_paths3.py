"""tools/paths3.py, the experiment with closed-path rules of length 3 (docs/knowledge-graphs.md): mined
with the measures of `perflab.prover.core.mining` and fired as counted by hand, so the tool keeps running."""
import importlib.util
from pathlib import Path

import torch

from perflab.prover.core.kg import KnowledgeGraph
from perflab.prover.core.mining import MiningConfig

_spec = importlib.util.spec_from_file_location("paths3", Path(__file__).resolve().parents[2] / "tools" / "paths3.py")
paths3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paths3)


def test_length3_rules_are_mined_and_fire_as_counted_by_hand():


    # r(X,Y) :- p(X,Z), q(Z,W), s(W,Y): the chain a-b-c-d holds for (a, d) and (e, h); r holds for both, and r
    # also for (a, h), which no body reaches. support 2, body pairs 2 (confidence 1), head coverage 2/3
    facts = "p(a,b).\nq(b,c).\ns(c,d).\np(e,f).\nq(f,g).\ns(g,h).\nr(a,d).\nr(e,h).\nr(a,h).\n"
    kg = KnowledgeGraph.from_text(facts)
    cfg = MiningConfig(min_support=2, min_head_coverage=0.5, min_confidence=0.5, max_rules_per_head=None, prior=0.0)
    rules = paths3.mine_length3(kg, cfg).rules
    p, q, s, r = (kg.pred_id(n) for n in "pqsr")
    stats = {m.body: (m.support, m.body_size) for m in rules if m.head == r}
    assert stats[((p, False), (q, False), (s, False))] == (2, 2)
    # r(X,Y) :- p(X,Z), p(W,Z), r(W,Y) (there and back, then r): pairs (a,d), (a,h), (e,h): all true
    assert stats[((p, False), (p, True), (r, False))] == (3, 3)
    chain = [m for m in rules if m.head == r and m.body == ((p, False), (q, False), (s, False))]
    conf = paths3.rule_confidence3(kg, chain, torch.stack([kg.atom("r(a,d)"), kg.atom("r(a,h)"), kg.atom("r(e,h)")]))
    assert conf.tolist() == [1.0, 0.0, 1.0]
