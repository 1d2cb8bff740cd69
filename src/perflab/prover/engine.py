"""The tensorized SLD step: every successor of a batch of proof states in fixed-shape tensor ops.

A state is [A, 3] int64 (atoms of pred, arg, arg; 0 = padding); its leftmost atom is the goal. `derive`
resolves each goal against
  - facts: a window of at most K facts of the goal's predicate that agree with its constant arguments,
    found by binary search in a sorted key array (p,a,b) or, when only the second argument is a constant,
    (p,b,a); in (a, b) order, first K (a wider window is cut and flagged `truncated`);
  - rules: every rule whose head has the goal's predicate (file order), variables renamed apart by
    adding the state's variable counter `next_var` (the rule's k-th variable becomes next_var + k);
and for each unifier builds body + rest of the state, substituted; then removes ground atoms that are
facts, rejects successors of more than A atoms, turns empty ones into <true>, keeps the first
S - 1 (S with end_action off), appends <end> (give up) when any exists, or a lone <false> when none.
Terminal states (<true>, <false>, <end>, all-padding) have themselves as their only successor.

Unification binds a rule variable to the goal's term, else a goal variable to the rule's term, one
argument pair after the other (Robinson's algorithm for two pairs); `reference.py` does the same with
dicts and loops. No step reads a tensor value on the host, so `derive` can sit inside a CUDA graph.

Sizes per row (the memory model in `memory.py` measures them): N = K + R candidates of M = A + 1
atoms, [N, M, 3] int64 several times, then [S, A, 3] out.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .kg import END, FALSE, FIRST_PRED, TRUE, KnowledgeGraph

_SENTINEL = torch.iinfo(torch.int64).max
BODY = 2  # atoms per rule body (1-atom bodies are padded)


class Derived(NamedTuple):
    states: torch.Tensor     # [B, S, A, 3] successors, valid ones first, zero padding after
    counts: torch.Tensor     # [B] number of valid successors (>= 1)
    next_var: torch.Tensor   # [B, S] variable counter of each successor
    truncated: torch.Tensor  # [B] bool: a fact window or the successor list was cut


class UnificationEngine:
    """Fixed-shape SLD resolution over a KnowledgeGraph (see module doc)."""

    def __init__(self, kg: KnowledgeGraph, max_atoms: int = 6, max_derived: int = 120,
                 max_fact_matches: int | None = None, end_action: bool = True,
                 device: torch.device | str = "cpu"):
        if max_atoms < 1 or max_derived < 2:
            raise ValueError(f"need max_atoms >= 1 and max_derived >= 2, got {max_atoms}, {max_derived}")
        self.kg = kg
        self.device = torch.device(device)
        self.A, self.S, self.end_action = max_atoms, max_derived, end_action
        self.C = kg.n_constants
        self.var0 = self.C + 1                       # first variable id
        self.P = kg.n_predicates
        self._build_fact_index(kg.facts)
        self.K = max_fact_matches if max_fact_matches is not None else self.default_fact_matches()
        if self.K < 0:
            raise ValueError(f"max_fact_matches must be >= 0, got {self.K}")
        self._build_rule_index(kg)
        lone = torch.zeros(2, self.A, 3, dtype=torch.long)
        lone[0, 0, 0], lone[1, 0, 0] = END, FALSE
        self._lone = lone.to(self.device)  # the <end> and <false> states, built once on the device

    # ---- indexes ----------------------------------------------------------------------------
    def key(self, p, a, b):
        """(p, a, b) -> one int64 key, ordered like the tuple (a, b in 0..C)."""
        return (p * (self.C + 1) + a) * (self.C + 1) + b

    def _build_fact_index(self, facts: torch.Tensor) -> None:
        f = facts.to(torch.long)
        k_ab = self.key(f[:, 0], f[:, 1], f[:, 2])
        k_ba = self.key(f[:, 0], f[:, 2], f[:, 1]) + self.P * (self.C + 1) ** 2  # second index above the first
        order_ab, order_ba = torch.argsort(k_ab), torch.argsort(k_ba)
        sentinel = torch.tensor([_SENTINEL])
        # one sorted array for both indexes: a single searchsorted serves either lookup
        self.window_keys = torch.cat([k_ab[order_ab], k_ba[order_ba], sentinel]).to(self.device)
        self.window_facts = torch.cat([f[order_ab], f[order_ba], torch.zeros(1, 3, dtype=torch.long)]).to(self.device)
        self.fact_keys = torch.cat([k_ab[order_ab], sentinel]).to(self.device)  # membership test
        self._group_sizes = (self._max_group(f[:, 0] * (self.C + 1) + f[:, 1]),
                             self._max_group(f[:, 0] * (self.C + 1) + f[:, 2]),
                             self._max_group(f[:, 0]))

    @staticmethod
    def _max_group(keys: torch.Tensor) -> int:
        if keys.numel() == 0:
            return 0
        return int(torch.unique(keys, return_counts=True)[1].max())

    def default_fact_matches(self) -> int:
        """Largest window a goal with at least one constant argument can need (facts per (p, a) or (p, b))."""
        return max(1, self._group_sizes[0], self._group_sizes[1])

    def _build_rule_index(self, kg: KnowledgeGraph) -> None:
        rules = sorted(range(len(kg.rules)), key=lambda i: kg.rules[i].head[0])  # stable: file order per predicate
        enc = self._encode_term
        heads = [[kg.rules[i].head[0], enc(kg.rules[i].head[1]), enc(kg.rules[i].head[2])] for i in rules]
        bodies = []
        for i in rules:
            body = [[p, enc(a), enc(b)] for p, a, b in kg.rules[i].body]
            bodies.append(body + [[0, 0, 0]] * (BODY - len(body)))
        nvars = [kg.rules[i].n_vars for i in rules]
        # a dummy row at the end so an empty window still gathers something (masked out)
        self.rule_heads = torch.tensor(heads + [[0, 0, 0]], dtype=torch.long, device=self.device)
        self.rule_bodies = torch.tensor(bodies + [[[0, 0, 0]] * BODY], dtype=torch.long,
                                        device=self.device).reshape(-1, BODY, 3)
        self.rule_nvars = torch.tensor(nvars + [0], dtype=torch.long, device=self.device)
        count = torch.zeros(self.P, dtype=torch.long)
        for i in rules:
            count[kg.rules[i].head[0]] += 1
        self.rule_count = count.to(self.device)
        self.rule_start = (torch.cumsum(count, 0) - count).to(self.device)
        self.R = int(count.max()) if len(rules) else 0

    def _encode_term(self, t: int) -> int:
        return self.var0 + (-t - 1) if t < 0 else t     # rule variable k -> var0 + k

    # ---- the step ---------------------------------------------------------------------------
    def initial(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries [B, 3] -> states [B, A, 3] and next_var [B] (no variables yet)."""
        B = queries.shape[0]
        states = torch.zeros(B, self.A, 3, dtype=torch.long, device=queries.device)
        states[:, 0] = queries
        return states, torch.full((B,), self.var0, dtype=torch.long, device=queries.device)

    def derive(self, states: torch.Tensor, next_var: torch.Tensor) -> Derived:
        """All successors of `states` [B, A, 3] with variable counters `next_var` [B] (module doc)."""
        if states.dim() != 3 or states.shape[1:] != (self.A, 3):
            raise ValueError(f"states must be [B, {self.A}, 3], got {list(states.shape)}")
        B, A = states.shape[0], self.A
        goal = states[:, 0]                                           # [B, 3]
        terminal = goal[:, 0] < FIRST_PRED
        heads, bodies, cand_valid, cand_nv, cut = self._candidates(goal, next_var)  # [B,N,2] [B,N,2,3] [B,N] [B,N] [B]
        cand_valid = cand_valid & ~terminal[:, None]
        N = heads.shape[1]
        v1, t1, v2, t2, ok = self._unify(goal[:, 1:], heads)         # each [B, N]
        rest = states[:, None, 1:].expand(B, N, A - 1, 3)
        atoms = torch.cat([bodies, rest], dim=2)                      # [B, N, M, 3], M = BODY + A - 1
        args = atoms[..., 1:]
        args = torch.where(args == v1[..., None, None], t1[..., None, None], args)
        args = torch.where(args == v2[..., None, None], t2[..., None, None], args)
        atoms = torch.cat([atoms[..., :1], args], dim=-1)
        succ, n_atoms = self._drop_facts_and_compact(atoms)          # [B, N, A, 3], [B, N]
        valid = cand_valid & ok & (n_atoms <= A)                      # successors over A atoms are rejected
        return self._assemble(states, next_var, succ, valid, cand_nv, terminal, cut & ~terminal)

    def _candidates(self, goal, next_var):
        """Fact window and rule window of each goal: heads [B,N,2], bodies [B,N,2,3], valid, next_var, and
        whether the fact window was cut at K."""
        B, C, K, R = goal.shape[0], self.C, self.K, self.R
        p, g1, g2 = goal.unbind(-1)
        g1c, g2c = (g1 >= 1) & (g1 <= C), (g2 >= 1) & (g2 <= C)
        use_ba = ~g1c & g2c                                           # only the 2nd argument is known
        zero, top = torch.zeros_like(g1), torch.full_like(g1, C)
        off = self.P * (C + 1) ** 2
        lo_key = torch.where(use_ba, self.key(p, g2, zero) + off,
                             self.key(p, torch.where(g1c, g1, zero), torch.where(g2c, g2, zero)))
        hi_key = torch.where(use_ba, self.key(p, g2, top) + off,
                             self.key(p, torch.where(g1c, g1, top), torch.where(g2c, g2, top)))
        lo = torch.searchsorted(self.window_keys, lo_key)
        hi = torch.searchsorted(self.window_keys, hi_key, right=True)
        pos = lo[:, None] + torch.arange(K, device=goal.device)       # [B, K]
        f_valid = pos < hi[:, None]
        facts = self.window_facts[pos.clamp(max=self.window_facts.shape[0] - 1)]  # [B, K, 3]

        j = torch.arange(R, device=goal.device)
        r_valid = j < self.rule_count[p][:, None]                     # [B, R]
        ridx = torch.where(r_valid, self.rule_start[p][:, None] + j, self.rule_heads.shape[0] - 1)
        shift = (next_var - self.var0)[:, None, None]                 # rename apart: var k -> next_var + k
        r_heads = self.rule_heads[ridx][..., 1:]                      # [B, R, 2]
        r_heads = torch.where(r_heads > C, r_heads + shift, r_heads)
        r_bodies = self.rule_bodies[ridx]                             # [B, R, 2, 3]
        b_args = r_bodies[..., 1:]
        b_args = torch.where(b_args > C, b_args + shift[..., None], b_args)
        r_bodies = torch.cat([r_bodies[..., :1], b_args], dim=-1)

        heads = torch.cat([facts[..., 1:], r_heads], dim=1)          # [B, N, 2]
        bodies = torch.cat([torch.zeros(B, K, BODY, 3, dtype=goal.dtype, device=goal.device), r_bodies], dim=1)
        valid = torch.cat([f_valid, r_valid], dim=1)
        nv = next_var[:, None] + torch.cat([torch.zeros_like(pos), self.rule_nvars[ridx]], dim=1)
        return heads, bodies, valid, nv, (hi - lo) > K

    def _unify(self, goal_args, heads):
        """Most general unifier of goal (g1, g2) [B, 2] with each head (h1, h2) [B, N, 2], as two
        bindings v1 -> t1 then v2 -> t2 (v = -1: none) and ok [B, N]."""
        C = self.C
        a1 = goal_args[:, None, 0].expand_as(heads[..., 0])
        v1, t1, ok1 = _bind(a1, heads[..., 0], C)
        a2 = goal_args[:, None, 1].expand_as(heads[..., 1])
        a2 = torch.where(a2 == v1, t1, a2)                            # apply the first binding first
        b2 = torch.where(heads[..., 1] == v1, t1, heads[..., 1])
        v2, t2, ok2 = _bind(a2, b2, C)
        return v1, t1, v2, t2, ok1 & ok2

    def _drop_facts_and_compact(self, atoms):
        """Remove padding and ground atoms that are facts; move the rest left. -> [.., A, 3], atom counts."""
        A, C = self.A, self.C
        p, x, y = atoms.unbind(-1)
        ground = (p >= FIRST_PRED) & (x >= 1) & (x <= C) & (y >= 1) & (y <= C)
        k = self.key(p, x, y)
        i = torch.searchsorted(self.fact_keys, k)                     # index <= F (the sentinel)
        is_fact = self.fact_keys[i] == k
        keep = (p != 0) & ~(ground & is_fact)
        n_atoms = keep.sum(-1)
        slot = torch.cumsum(keep, dim=-1) - 1
        slot = torch.where(keep & (slot < A), slot, A)                # A = a dump slot, dropped below
        shape = (*atoms.shape[:-2], A + 1, 3)
        out = torch.zeros(shape, dtype=atoms.dtype, device=atoms.device)
        out = out.scatter(-2, slot[..., None].expand_as(atoms), atoms)[..., :A, :]
        empty = (n_atoms == 0)[..., None]
        out[..., 0, 0] = torch.where(empty[..., 0], TRUE, out[..., 0, 0])  # every goal proved: <true>
        return out, n_atoms

    def _assemble(self, states, next_var, succ, valid, cand_nv, terminal, cut) -> Derived:
        B, A, S = states.shape[0], self.A, self.S
        cap = S - 1 if self.end_action else S
        n_real = valid.sum(-1)
        valid = valid & (torch.cumsum(valid, -1) <= cap)
        any_real = n_real > 0
        # [B, 3, A, 3]: <end>, <false>, the state itself. Built from device constants: a Python scalar
        # assigned into a CUDA slice (s[:, 0, 0] = END) takes a host-tensor path on CUDA only
        extra = torch.cat([self._lone.expand(B, 2, A, 3), states[:, None]], dim=1)
        extra_valid = torch.stack([any_real & ~terminal & self.end_action, ~any_real & ~terminal, terminal], 1)
        all_states = torch.cat([succ, extra], dim=1)                  # [B, N+3, A, 3]
        all_valid = torch.cat([valid, extra_valid], dim=1)
        all_nv = torch.cat([cand_nv, next_var[:, None].expand(B, 3)], dim=1)
        slot = torch.where(all_valid, torch.cumsum(all_valid, -1) - 1, S)  # valid first, in order
        out = torch.zeros(B, S + 1, A, 3, dtype=states.dtype, device=states.device)
        out = out.scatter(1, slot[..., None, None].expand_as(all_states), all_states)[:, :S]
        nv = torch.zeros(B, S + 1, dtype=next_var.dtype, device=states.device).scatter(1, slot, all_nv)[:, :S]
        return Derived(out, all_valid.sum(-1), nv, cut | (n_real > cap))


def _bind(a, b, C):
    """One argument pair: goal term a, rule/fact term b. -> (var, term, ok): bind b if it is a variable,
    else a if it is a variable, else they must be equal."""
    eq = a == b
    b_var, a_var = b > C, a > C
    bind_b = ~eq & b_var
    bind_a = ~eq & ~b_var & a_var
    v = torch.where(bind_b, b, torch.where(bind_a, a, torch.full_like(a, -1)))
    t = torch.where(bind_b, a, b)
    return v, t, eq | b_var | a_var
