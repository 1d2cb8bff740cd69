"""Seeded knowledge graphs and workloads.

    family_kg(n_families, generations, seed)  a synthetic family tree with its rules; held-out queries need
                                              1 to ~8 proof steps
    ladder_kg(levels, n_pairs)                a KG where a query's proof takes exactly its level in steps
                                              (study 4's controlled proof-length workload)
    seed_like_lengths(n, max_len, gen)        proof lengths shaped like the seed's (mean ~5, max 20)
    random_kg(seed, ...) / random_states(...)  small random graphs and states for the engine's tests
"""
from __future__ import annotations

import random
from collections import defaultdict

import torch

from .kg import FIRST_PRED, KnowledgeGraph

FAMILY_RULES = """\
parent(X,Y) :- father(X,Y).
parent(X,Y) :- mother(X,Y).
sibling(X,Y) :- brother(X,Y).
sibling(X,Y) :- sister(X,Y).
child(X,Y) :- parent(Y,X).
grandfather(X,Y) :- father(X,Z), parent(Z,Y).
grandmother(X,Y) :- mother(X,Z), parent(Z,Y).
grandparent(X,Y) :- grandfather(X,Y).
grandparent(X,Y) :- grandmother(X,Y).
uncle(X,Y) :- brother(X,Z), parent(Z,Y).
aunt(X,Y) :- sister(X,Z), parent(Z,Y).
pibling(X,Y) :- uncle(X,Y).
pibling(X,Y) :- aunt(X,Y).
cousin(X,Y) :- child(X,Z), pibling(Z,Y).
greatgrandparent(X,Y) :- grandparent(X,Z), parent(Z,Y).
"""
FAMILY_BASE = ("father", "mother", "brother", "sister")


def _family_base_facts(n_families: int, generations: int, max_children: int, rng: random.Random):
    facts, n = set(), [0]

    def person(sex):
        n[0] += 1
        return f"{sex}{n[0]}", sex

    for _ in range(n_families):
        couples = [(person("m"), person("f"))]
        for g in range(generations - 1):
            nxt = []
            for (h, _), (w, _) in couples:
                kids = [person(rng.choice("mf")) for _ in range(rng.randint(1, max_children))]
                for k, sex in kids:
                    facts.add(("father", h, k))
                    facts.add(("mother", w, k))
                    for k2, _ in kids:
                        if k2 != k:
                            facts.add(("brother" if sex == "m" else "sister", k, k2))
                    if g < generations - 2 and rng.random() < 0.85:       # marries an outsider
                        spouse = person("f" if sex == "m" else "m")
                        nxt.append(((k, sex), spouse) if sex == "m" else (spouse, (k, sex)))
            couples = nxt
    return facts


def forward_closure(facts: set, rules_text: str) -> set:
    """Every ground fact the rules derive from `facts` ({(pred, a, b)} of names): a naive fixpoint."""
    kg = KnowledgeGraph.from_text("", rules_text)
    rules = []
    for r in kg.rules:
        def dec(atom):
            return (kg.predicates[atom[0]], *(t if t < 0 else kg.constants[t] for t in atom[1:]))
        rules.append((dec(r.head), [dec(b) for b in r.body]))
    known = set(facts)
    while True:
        index = defaultdict(list)      # (pred,), (pred, 1, a) and (pred, 2, b) -> facts
        for f in known:
            index[(f[0],)].append(f)
            index[(f[0], 1, f[1])].append(f)
            index[(f[0], 2, f[2])].append(f)
        new = set()
        for head, body in rules:
            for theta in _match_body(body, index, {}):
                new.add((head[0], *(theta.get(t, t) for t in head[1:])))
        if new <= known:
            return known
        known |= new


def _match_body(body, index, theta):
    if not body:
        yield theta
        return
    p, x, y = body[0]
    bx, by = theta.get(x, x), theta.get(y, y)
    bound_x, bound_y = not isinstance(bx, int), not isinstance(by, int)  # variables are negative ints
    key = (p, 1, bx) if bound_x else (p, 2, by) if bound_y else (p,)
    for _, a, b in index.get(key, ()):
        t = dict(theta)
        if all(t.setdefault(v, c) == c if isinstance(v, int) else v == c for v, c in ((x, a), (y, b))):
            yield from _match_body(body[1:], index, t)


def family_kg(n_families: int = 6, generations: int = 4, max_children: int = 3, known_fraction: float = 0.3,
              split: tuple[float, float] = (0.5, 0.2), seed: int = 0) -> KnowledgeGraph:
    """A seeded family-tree KG. Base relations (father, mother, brother, sister) are all facts; of the
    derived ones (parent, grandparent, uncle, cousin, ...) a `known_fraction` are facts too and the rest
    are held out as queries: `split` = (train, valid) fractions of them, test the remainder.
    `true_facts` holds the full closure, so corruptions can be filtered against everything true."""
    rng = random.Random(seed)
    base = _family_base_facts(n_families, generations, max_children, rng)
    closure = forward_closure(base, FAMILY_RULES)
    derived = sorted(closure - base)
    rng.shuffle(derived)
    n_known = int(known_fraction * len(derived))
    held = derived[n_known:]
    n_train, n_valid = int(split[0] * len(held)), int(split[1] * len(held))
    parts = {"train": held[:n_train], "valid": held[n_train:n_train + n_valid], "test": held[n_train + n_valid:]}

    def text(atoms):
        return "".join(f"{p}({a},{b}).\n" for p, a, b in atoms)
    return KnowledgeGraph.from_text(text(sorted(base) + sorted(derived[:n_known])), FAMILY_RULES,
                                    {k: text(v) for k, v in parts.items()}, true_facts=text(sorted(closure)))


# ---- study 4: controlled proof lengths --------------------------------------------------------

def ladder_kg(levels: int = 20, n_pairs: int = 64, n_constants: int = 256, seed: int = 0) -> KnowledgeGraph:
    """Predicates p0..pL and q0..qL; pk and qk each have two rules, down to p(k-1) or q(k-1); p0 and q0
    hold the same `n_pairs` facts. With end_action off, a query pk(a,b) whose pair is a fact is proved in
    exactly k steps whatever the policy picks (every branch goes down one level), and a pair that is not
    a fact fails at step k+1; the policy's scores still differ by branch."""
    rng = random.Random(seed)
    pairs = set()
    while len(pairs) < n_pairs:
        a, b = rng.randrange(n_constants), rng.randrange(n_constants)
        if a != b:
            pairs.add((f"e{a}", f"e{b}"))
    facts = "".join(f"{p}0({a},{b}).\n" for a, b in sorted(pairs) for p in "pq")
    rules = "".join(f"{h}{k}(X,Y) :- {b}{k - 1}(X,Y).\n" for k in range(1, levels + 1) for h in "pq" for b in "pq")
    return KnowledgeGraph.from_text(facts, rules)


def seed_like_lengths(n: int, max_len: int = 20, generator: torch.Generator | None = None) -> torch.Tensor:
    """[n] proof lengths shaped after the seed's batch (half done after 1 step, most by ~11, a tail to
    max_len; mean ~5): 50% 1 step, 45% uniform on 2..13, 5% uniform on 14..max_len. The longest
    candidate always takes max_len, as in the seed's 512-query batch."""
    u = torch.rand(n, generator=generator)
    mid = torch.randint(2, min(13, max_len) + 1, (n,), generator=generator)
    tail = torch.randint(min(14, max_len), max_len + 1, (n,), generator=generator)
    out = torch.where(u < 0.5, torch.ones_like(mid), torch.where(u < 0.95, mid, tail))
    out[torch.randint(n, (1,), generator=generator)] = max_len
    return out


def ladder_queries(kg: KnowledgeGraph, lengths: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """[n, 3] queries p_k(a, b) with k = lengths[i] and (a, b) a fact pair (so the proof takes k steps)."""
    p0 = kg.pred_id("p0")
    pairs = kg.facts[kg.facts[:, 0] == p0][:, 1:]
    pick = pairs[torch.randint(len(pairs), (len(lengths),), generator=generator)]
    preds = torch.tensor([kg.pred_id(f"p{int(k)}") for k in lengths])
    return torch.cat([preds[:, None], pick], dim=1)


# ---- tests: small random graphs and states ----------------------------------------------------

def random_kg(seed: int, n_constants: int = 6, n_predicates: int = 3, n_facts: int = 14, n_rules: int = 6,
              const_in_rules: float = 0.15) -> KnowledgeGraph:
    """A small random KG whose rules mix variables, repeated variables, constants and 1-2 body atoms."""
    rng = random.Random(seed)
    preds = [f"r{i}" for i in range(n_predicates)]
    consts = [f"c{i}" for i in range(n_constants)]
    facts = {(rng.choice(preds), rng.choice(consts), rng.choice(consts)) for _ in range(n_facts)}
    facts |= {(p, consts[0], consts[1]) for p in preds}  # every predicate has a fact

    def term(pool):
        return rng.choice(consts) if rng.random() < const_in_rules else rng.choice(pool)
    rules = []
    for _ in range(n_rules):
        head = (rng.choice(preds), term("XY"), term("XY" if rng.random() < 0.15 else "Y"))
        body = [(rng.choice(preds), term("XYZ"), term("XYZ")) for _ in range(rng.randint(1, 2))]
        rules.append(f"{head[0]}({head[1]},{head[2]}) :- " + ", ".join(f"{p}({a},{b})" for p, a, b in body) + ".")
    return KnowledgeGraph.from_text("".join(f"{p}({a},{b}).\n" for p, a, b in sorted(facts)), "\n".join(rules))


def random_states(kg: KnowledgeGraph, n: int, max_atoms: int, seed: int, n_vars: int = 3,
                  p_var: float = 0.4, p_terminal: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """[n, A, 3] random states (1..A atoms; variables shared across atoms; a few terminal rows) and next_var [n]."""
    g = torch.Generator().manual_seed(seed)
    C = kg.n_constants
    preds = torch.randint(FIRST_PRED, kg.n_predicates, (n, max_atoms), generator=g)
    consts = torch.randint(1, C + 1, (n, max_atoms, 2), generator=g)
    vars_ = torch.randint(C + 1, C + 1 + n_vars, (n, max_atoms, 2), generator=g)
    args = torch.where(torch.rand(n, max_atoms, 2, generator=g) < p_var, vars_, consts)
    states = torch.cat([preds[..., None], args], dim=-1)
    n_atoms = torch.randint(1, max_atoms + 1, (n,), generator=g)
    states[torch.arange(max_atoms)[None] >= n_atoms[:, None]] = 0
    term = torch.rand(n, generator=g) < p_terminal
    states[term] = 0
    states[term, 0, 0] = torch.randint(0, 4, (int(term.sum()),), generator=g)
    return states, torch.full((n,), C + 1 + n_vars + 2, dtype=torch.long)


def training_queries(kg: KnowledgeGraph) -> torch.Tensor:
    """The queries the policy trains on: the train split, else valid (never test)."""
    for split in ("train", "valid"):
        if len(kg.queries.get(split, ())):
            return kg.queries[split]
    raise ValueError("the knowledge graph has no training queries: add train_queries.txt or valid.txt "
                     "(test.txt is only evaluated)")
