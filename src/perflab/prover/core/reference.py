"""The oracle: SLD resolution in plain Python (tuples, dicts, loops), and exhaustive provability.

`successors` follows the rules stated in `engine.py`'s module doc one atom at a time, with a
dictionary substitution and Robinson's unification, so the tensor engine can be checked against it
successor by successor. `prove` is a breadth-first search over these successors; `prove_exhaustive`
is the same search over the tensor engine's successors (batched, for many queries), which gives each
query's oracle provability: the ceiling for any policy.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import torch

from .kg import END, FALSE, FIRST_PRED, TRUE, KnowledgeGraph

Atom = tuple[int, int, int]
State = tuple[Atom, ...]


@dataclasses.dataclass(frozen=True)
class Limits:
    max_atoms: int = 6
    max_derived: int = 120
    max_fact_matches: int = 8
    end_action: bool = True

    @classmethod
    def of(cls, engine) -> Limits:
        return cls(engine.A, engine.S, engine.K, engine.end_action)


class ReferenceProver:
    def __init__(self, kg: KnowledgeGraph, limits: Limits):
        self.kg, self.lim = kg, limits
        self.C = kg.n_constants
        self.facts = {tuple(f) for f in kg.facts.tolist()}
        self.by_pred: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for p, a, b in sorted(self.facts):
            self.by_pred[p].append((a, b))
        self.rules = defaultdict(list)
        for r in kg.rules:
            self.rules[r.head[0]].append(r)                      # file order within a predicate

    def is_var(self, t: int) -> bool:
        return t > self.C

    def is_const(self, t: int) -> bool:
        return 1 <= t <= self.C

    # ---- one step -------------------------------------------------------------------------
    def successors(self, state: State, next_var: int) -> list[tuple[State, int]]:
        """Every successor of `state` (atoms without padding) and its variable counter, in order."""
        if not state or state[0][0] < FIRST_PRED:
            return [(state, next_var)]
        goal, rest = state[0], state[1:]
        out = []
        for a, b in self._fact_window(goal):
            theta = self.unify(goal[1:], (a, b))
            if theta is not None:
                out.append(self._resolvent((), rest, theta, next_var))
        for rule in self.rules[goal[0]]:
            head, body = self.rename(rule.head, next_var), tuple(self.rename(x, next_var) for x in rule.body)
            theta = self.unify(goal[1:], head[1:])
            if theta is not None:
                out.append(self._resolvent(body, rest, theta, next_var + rule.n_vars))
        out = [s for s in out if s is not None]
        cap = self.lim.max_derived - (1 if self.lim.end_action else 0)
        out = out[:cap]
        if not out:
            return [(((FALSE, 0, 0),), next_var)]
        if self.lim.end_action:
            out.append((((END, 0, 0),), next_var))
        return out

    def _fact_window(self, goal: Atom) -> list[tuple[int, int]]:
        p, g1, g2 = goal
        facts = self.by_pred.get(p, [])
        if self.is_const(g1):
            facts = [f for f in facts if f[0] == g1 and (not self.is_const(g2) or f[1] == g2)]
        elif self.is_const(g2):
            facts = [f for f in facts if f[1] == g2]
        return facts[: self.lim.max_fact_matches]

    def rename(self, atom: Atom, next_var: int) -> Atom:
        return (atom[0],) + tuple(next_var + (-t - 1) if t < 0 else t for t in atom[1:])

    def unify(self, goal_args, head_args) -> dict | None:
        """Robinson: walk both terms; bind the head's variable, else the goal's; constants must agree."""
        theta: dict[int, int] = {}
        for a, b in zip(goal_args, head_args):
            a, b = self.walk(a, theta), self.walk(b, theta)
            if a == b:
                continue
            if self.is_var(b):
                theta[b] = a
            elif self.is_var(a):
                theta[a] = b
            else:
                return None
        return theta

    @staticmethod
    def walk(t: int, theta: dict) -> int:
        while t in theta:
            t = theta[t]
        return t

    def _resolvent(self, body, rest, theta, next_var):
        atoms = [(p, self.walk(a, theta), self.walk(b, theta)) for p, a, b in (*body, *rest)]
        atoms = [x for x in atoms if not (self.is_const(x[1]) and self.is_const(x[2]) and x in self.facts)]
        if len(atoms) > self.lim.max_atoms:
            return None
        return (tuple(atoms) if atoms else ((TRUE, 0, 0),)), next_var

    # ---- search ---------------------------------------------------------------------------
    def prove(self, query: Atom, max_depth: int, max_states: int = 100_000) -> int:
        """Smallest number of steps after which some path reaches <true> (-1: none within max_depth).
        States equal up to variable names are visited once."""
        frontier = {canonical(((tuple(query),)), self.C + 1)}
        seen = set(frontier)
        for depth in range(1, max_depth + 1):
            nxt = set()
            for state, nv in frontier:
                for s, _ in self.successors(state, nv):
                    if s[0][0] == TRUE:
                        return depth
                    if s[0][0] < FIRST_PRED:
                        continue
                    c = canonical(s, self.C + 1)
                    if c not in seen:
                        seen.add(c)
                        nxt.add(c)
            if len(seen) > max_states:
                raise RuntimeError(f"search for {query} passed {max_states} states at depth {depth}")
            frontier = nxt
            if not frontier:
                return -1
        return -1


def canonical(state: State, var0: int) -> tuple[State, int]:
    """Rename variables in order of first appearance to var0, var0 + 1, ...; next_var follows them."""
    names: dict[int, int] = {}
    out = []
    for p, a, b in state:
        args = []
        for t in (a, b):
            if t >= var0:
                t = names.setdefault(t, var0 + len(names))
            args.append(t)
        out.append((p, *args))
    return tuple(out), var0 + len(names)


def to_tuples(states: torch.Tensor) -> list[State]:
    """[B, A, 3] padded tensor -> list of atom tuples without padding."""
    return [tuple(tuple(a) for a in s if a[0] != 0) for s in states.tolist()]


def prove_exhaustive(engine, queries: torch.Tensor, max_depth: int, max_frontier: int = 200_000) -> torch.Tensor:
    """Breadth-first search over the tensor engine's successors for every query at once.

    Returns [Q] int64: the depth of the shortest proof, -1 when none exists within max_depth.
    Each level derives the whole frontier in one call, keeps non-terminal successors of still-unproved
    queries, and removes duplicates (per query, variables renamed canonically). Host syncs are fine
    here: this is the oracle, not the hot path."""
    dev = engine.device
    states, nv = engine.initial(queries.to(dev))
    owner = torch.arange(len(queries), device=dev)
    depth_found = torch.full((len(queries),), -1, dtype=torch.long)
    seen: set = set()
    for depth in range(1, max_depth + 1):
        if len(states) == 0:
            break
        if len(states) > max_frontier:
            raise RuntimeError(f"prove_exhaustive: frontier of {len(states)} states at depth {depth} "
                               f"exceeds max_frontier={max_frontier}")
        d = engine.derive(states, nv)
        S = d.states.shape[1]
        valid = torch.arange(S, device=dev)[None] < d.counts[:, None]
        first = d.states[:, :, 0, 0]
        proved = (valid & (first == TRUE)).any(1)
        for q in owner[proved].unique().tolist():
            if depth_found[q] < 0:
                depth_found[q] = depth
        keep = valid & (first >= FIRST_PRED) & (depth_found.to(dev)[owner] < 0)[:, None]
        rows, cols = keep.nonzero(as_tuple=True)
        nxt_states, nxt_nv, nxt_owner = [], [], []
        for q, s in zip(owner[rows].tolist(), to_tuples(d.states[rows, cols])):
            c = canonical(s, engine.var0)
            if (q, c) in seen:
                continue
            seen.add((q, c))
            nxt_owner.append(q)
            nxt_states.append(list(c[0]) + [[0, 0, 0]] * (engine.A - len(c[0])))
            nxt_nv.append(c[1])
        states = torch.tensor(nxt_states, dtype=torch.long, device=dev).reshape(-1, engine.A, 3)
        nv = torch.tensor(nxt_nv, dtype=torch.long, device=dev)
        owner = torch.tensor(nxt_owner, dtype=torch.long, device=dev)
    return depth_found
