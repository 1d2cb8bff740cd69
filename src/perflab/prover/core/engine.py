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
dicts and loops. No step reads a tensor value on the host, and none takes a host tensor (every constant
lives on the device: the rule table, the fact windows, the <end>/<false> states), so `derive` can sit
inside a CUDA graph. Few ops on purpose (each is a kernel in eager CUDA, a fusion barrier for some in
inductor): one gather of a goal's whole rule window from a per-predicate table, one search for both ends
of its fact window, one scatter for the successors and their variable counters.

Sizes per row (the memory model in `batching.py` measures them): N = K + R candidates of M = A + 1
atoms, [N, M, 3] int64 several times, then [S, A, 3] out.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn import functional as F

from .kg import END, FALSE, FIRST_PRED, TRUE, KnowledgeGraph

_SENTINEL = torch.iinfo(torch.int64).max
BODY = 2  # atoms per rule body (1-atom bodies are padded)
DENSE_FACT_KEYS = 2**24  # up to this many (p, a, b) keys, `is_fact` reads a dense table (16 MB of bool at most)


class Derived(NamedTuple):
    states: torch.Tensor     # [B, S, A, 3] successors, valid ones first, zero padding after
    counts: torch.Tensor     # [B] number of valid successors (>= 1)
    next_var: torch.Tensor   # [B, S] variable counter of each successor
    truncated: torch.Tensor  # [B] bool: a fact window or the successor list was cut
    log_weight: torch.Tensor  # [B, S] float: log of the weight of the rule that made each successor (0: a fact, <end>, ...)


class Closing(NamedTuple):
    pred: torch.Tensor       # [B, M, N] each candidate's atoms in place (body, then the rest): predicates,
    arg1: torch.Tensor       # [B, M, N]   first arguments (substituted),
    arg2: torch.Tensor       # [B, M, N]   second arguments (substituted)
    keep: torch.Tensor       # [B, M, N] bool: the atoms its successor keeps (not padding, not a fact)
    n_atoms: torch.Tensor    # [B, N] atoms each keeps (0: <true>)
    listed: torch.Tensor     # [B, N] bool: the candidate is one of derive's successors
    closes: torch.Tensor     # [B, N] bool: listed and <true>
    log_weight: torch.Tensor  # [B, N] float: log of the weight of the rule that makes it (0: a fact)
    end: torch.Tensor        # [B] bool: derive's list ends with <end>

    @property
    def atoms(self) -> torch.Tensor:
        """[B, N, M, 3] the candidates' atoms (pred, arg1, arg2)."""
        return torch.stack([self.pred, self.arg1, self.arg2], dim=-1).transpose(1, 2)


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
        self._arange_k = torch.arange(self.K, device=self.device)
        self._ba_offset = self.P * (self.C + 1) ** 2                 # the (p,b,a) keys sit above the (p,a,b) keys
        self._lo_hi = torch.tensor([[0], [1]], device=self.device)    # hi: the first key above (p, hi args)
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
        self.fact_keys = torch.cat([k_ab[order_ab], sentinel]).to(self.device)  # membership test
        # the same test as one dense bool per possible key where that is small (Kinship 0.3 MB, UMLS 0.9 MB)
        n_keys = self.P * (self.C + 1) ** 2
        self.fact_table = None
        if n_keys <= DENSE_FACT_KEYS:
            self.fact_table = torch.zeros(n_keys, dtype=torch.bool).index_fill_(0, k_ab, True).to(self.device)
        # the windows' facts as candidate rows of the rule table's layout: [1, a, b], no body, no variables
        window_facts = torch.cat([f[order_ab], f[order_ba], torch.zeros(1, 3, dtype=torch.long)])
        rows = torch.zeros(window_facts.shape[0], 4 + 3 * BODY, dtype=torch.long)
        rows[:, 0], rows[:, 1:3] = 1, window_facts[:, 1:]
        self.window_rows = rows.to(self.device)
        self._group_sizes = (self._max_group(f[:, 0] * (self.C + 1) + f[:, 1]),
                             self._max_group(f[:, 0] * (self.C + 1) + f[:, 2]),
                             self._max_group(f[:, 0]))

    @staticmethod
    def _max_group(keys: torch.Tensor) -> int:
        if keys.numel() == 0:
            return 0
        return int(torch.unique(keys, return_counts=True)[1].max())

    def default_fact_matches(self) -> int:
        """Largest window a goal with at least one constant argument can need (facts per (p, a) or (p, b)),
        capped at the successor list: facts come first in it and a fact that matches a goal's constants
        unifies with it unless the goal repeats a variable, so a wider window adds no successor to a proof of
        a ground query through closed-path rules; it only costs (UMLS: 115 facts per window, 15 kept)."""
        return max(1, min(max(self._group_sizes[0], self._group_sizes[1]), self.S - 1 if self.end_action else self.S))

    def _build_rule_index(self, kg: KnowledgeGraph) -> None:
        """rule_table [P, R, 10]: per predicate, its rules in file order as rows [1, h1, h2, body atom 1,
        body atom 2, n_vars] (a 1-atom body padded with zeros, absent rules all zeros); a rule variable k
        stays -(k+1) until `derive` renames it apart (next_var + k). One gather by the goal's predicate
        fetches a goal's whole rule window."""
        by_pred: dict[int, list] = {}
        weights: dict[int, list] = {}
        for r in kg.rules:
            weights.setdefault(r.head[0], []).append(r.weight)
            body = [list(a) for a in r.body] + [[0, 0, 0]] * (BODY - len(r.body))
            by_pred.setdefault(r.head[0], []).append([1, r.head[1], r.head[2], *body[0], *body[1], r.n_vars])
        self.R = max((len(v) for v in by_pred.values()), default=0)
        table = torch.zeros(self.P, self.R, 4 + 3 * BODY, dtype=torch.long)
        for pred, rows in by_pred.items():
            table[pred, : len(rows)] = torch.tensor(rows, dtype=torch.long)
        self.rule_table = table.to(self.device)
        # [P, R] log rule weights (mined rules: their confidence; unweighted rules 1 -> 0), gathered with the rows
        logw = torch.zeros(self.P, self.R)
        for pred, ws in weights.items():
            logw[pred, : len(ws)] = torch.log(torch.tensor(ws, dtype=torch.float64)).float()
        self.rule_log_weight = logw.to(self.device)

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
        rows, cand_valid, cut = self._candidates(goal, next_var)     # [B, N, 10], [B, N], [B]
        cand_valid = cand_valid & ~terminal[:, None]
        N = rows.shape[1]
        v1, t1, v2, t2, ok = self._unify(goal[:, 1:], rows[..., 1:3])  # each [B, N]
        rest = states[:, None, 1:].expand(B, N, A - 1, 3)
        atoms = torch.cat([rows[..., 3:3 + 3 * BODY].reshape(B, N, BODY, 3), rest], dim=2)  # [B, N, M, 3]
        args = atoms[..., 1:]
        args = torch.where(args == v1[..., None, None], t1[..., None, None], args)
        args = torch.where(args == v2[..., None, None], t2[..., None, None], args)
        atoms = torch.cat([atoms[..., :1], args], dim=-1)
        succ, n_atoms = self._drop_facts_and_compact(atoms)          # [B, N, A, 3], [B, N]
        valid = cand_valid & ok & (n_atoms <= A)                      # successors over A atoms are rejected
        cand_nv = next_var[:, None] + rows[..., -1]                   # a rule's n_vars fresh variables
        cand_lw = F.pad(self.rule_log_weight[goal[:, 0]], (self.K, 0))  # [B, N]: facts 0, then the rules'
        return self._assemble(states, next_var, succ, valid, cand_nv, cand_lw, terminal, cut & ~terminal)

    def closing(self, states: torch.Tensor, next_var: torch.Tensor) -> Closing:
        """What a search's last step needs of `derive`'s successors, without building them: which are <true>
        (closes) among those in the list (listed), the log-weight of each, and their atoms in place with what each
        keeps (for the policy), and whether <end> ends the list. `states` [B, m, 3] may hold fewer atom columns
        than A (m <= A) when the caller knows the others are padding (a state t steps from a one-atom query has at
        most 1 + t atoms): the candidates then carry M = BODY + m - 1 atoms, not A + 1. A terminal state gets no
        candidate (derive's successor: itself). The same candidates, unifiers and fact test as `derive`, with
        no compaction and no scatter, on planes: predicates, first and second arguments as [B, M, N] tensors, the
        candidates innermost (derive's [.., 2] argument views, its [B, N, 10] renaming and any broadcast along a
        last dimension of 2-3 take torch's slow strided paths: 5 of the 7 ms it took at 512 Kinship rows)."""
        if states.dim() != 3 or not 1 <= states.shape[1] <= self.A or states.shape[2] != 3:
            raise ValueError(f"states must be [B, m <= {self.A}, 3], got {list(states.shape)}")
        B, m = states.shape[0], states.shape[1]
        raw, cand_valid, _ = self._candidate_rows(states[:, 0])      # [B, N, 10] (rule variables -(k+1))
        # int32 from here (ids and keys fit: `fact_table` exists only below 2**24 keys): AVX2 has no int64 multiply
        raw, states, next_var = raw.to(torch.int32), states.to(torch.int32), next_var.to(torch.int32)
        goal = states[:, 0]                                           # [B, 3]
        N = raw.shape[1]
        shift = (next_var - 1)[:, None, None]

        def renamed(x):                                               # var k -> next_var + k, as _candidates
            return torch.where(x < 0, shift - x, x)
        v1, t1, v2, t2, ok = self._unify(goal[:, 1:], renamed(raw[..., 1:3]))   # each [B, N]
        body = raw[..., 3:3 + 3 * BODY].reshape(B, N, BODY, 3)

        def plane(j):                                                 # [B, M, N]: column j of body, then rest
            return torch.cat([body[..., j].transpose(1, 2), states[:, 1:, j, None].expand(B, m - 1, N)], dim=1)
        pred = plane(0)
        arg1, arg2 = (renamed(plane(j)) for j in (1, 2))
        v1, t1, v2, t2 = (x[:, None] for x in (v1, t1, v2, t2))      # [B, 1, N]: one unifier per candidate
        arg1, arg2 = (torch.where(x == v1, t1, x) for x in (arg1, arg2))   # v1 -> t1, then
        arg1, arg2 = (torch.where(x == v2, t2, x) for x in (arg1, arg2))   # v2 -> t2
        keep = (pred != 0) & ~self.is_fact(pred, arg1, arg2)          # [B, M, N]: what each successor keeps
        n_atoms = keep.sum(1)                                         # [B, N]
        valid = cand_valid & (goal[:, :1] >= FIRST_PRED) & ok & (n_atoms <= self.A)
        cap = self.S - 1 if self.end_action else self.S
        listed = valid & (torch.cumsum(valid, -1) <= cap)             # derive keeps the first cap valid ones
        end = listed.any(-1) & self.end_action                        # terminal rows: nothing valid, no <end>
        cand_lw = F.pad(self.rule_log_weight[goal[:, 0]], (self.K, 0))  # [B, N]: facts 0, then the rules'
        return Closing(pred, arg1, arg2, keep, n_atoms, listed, listed & (n_atoms == 0), cand_lw, end)

    def is_fact(self, pred: torch.Tensor, arg1: torch.Tensor, arg2: torch.Tensor) -> torch.Tensor:
        """Atoms as three planes [...] -> [...] bool: the atom is ground and a fact (padding and atoms with a
        variable are not). A dense table lookup where the graph is small enough (`fact_table`), else a binary
        search in the sorted keys."""
        a, b = (torch.where(x <= self.C, x, 0) for x in (arg1, arg2))  # a variable becomes 0: no fact has 0
        if self.fact_table is not None:
            return self.fact_table[self.key(pred, a, b)]             # one load per atom, no log2(F) probes
        k = self.key(pred.long(), a.long(), b.long())                # int64: past the dense table's size
        return self.fact_keys[torch.searchsorted(self.fact_keys, k)] == k

    def _candidates(self, goal, next_var):
        """Each goal's fact window (at most K facts agreeing with its constant arguments) and rule window,
        as candidate rows [B, N, 10] (the rule table's layout, variables renamed apart), whether each
        is valid [B, N], and whether the fact window was cut at K [B]."""
        rows, valid, cut = self._candidate_rows(goal)
        rows = torch.where(rows < 0, (next_var - 1)[:, None, None] - rows, rows)  # var k -> next_var + k
        return rows, valid, cut

    def _candidate_rows(self, goal):
        """`_candidates` before the renaming: a rule's variable k is still -(k+1)."""
        C, K = self.C, self.K
        p = goal[:, 0]
        args = goal[:, 1:]                                            # [B, 2]
        const = args <= C                                             # constants 1..C (padding goals: masked)
        use_ba = ~const[:, 0] & const[:, 1]                           # only the 2nd argument is known: (p,b,a)
        args = torch.where(use_ba[:, None], args.flip(-1), args)     # (b, a): b is known, a is not
        const = args <= C
        bounds = torch.stack([torch.where(const, args, 0), torch.where(const, args, C)])  # [2, B, 2]
        # window [lo, hi]: lo = first key >= (p, lo args); hi = first key > (p, hi args), i.e. >= its key + 1
        keys = self.key(p, bounds[..., 0], bounds[..., 1]) + self._ba_offset * use_ba + self._lo_hi
        lo, hi = torch.searchsorted(self.window_keys, keys)           # one search for both ends
        pos = lo[:, None] + self._arange_k                            # [B, K]
        f_valid = pos < hi[:, None]
        rows = torch.cat([self.window_rows[pos.clamp(max=self.window_rows.shape[0] - 1)],
                          self.rule_table[p]], dim=1)                  # [B, K + R, 10]
        valid = torch.cat([f_valid, rows[:, K:, 0] > 0], dim=1)
        return rows, valid, (hi - lo) > K

    def _unify(self, goal_args, heads):
        """Most general unifier of goal (g1, g2) [B, 2] with each head (h1, h2) [B, N, 2], as two
        bindings v1 -> t1 then v2 -> t2 (v = -1: none) and ok [B, N]."""
        C = self.C
        v1, t1, ok1 = _bind(goal_args[:, None, 0], heads[..., 0], C)
        a2 = goal_args[:, None, 1]
        a2 = torch.where(a2 == v1, t1, a2)                            # apply the first binding first
        b2 = torch.where(heads[..., 1] == v1, t1, heads[..., 1])
        v2, t2, ok2 = _bind(a2, b2, C)
        return v1, t1, v2, t2, ok1 & ok2

    def _drop_facts_and_compact(self, atoms):
        """Remove padding and ground atoms that are facts; move the rest left. -> [.., A, 3], atom counts."""
        A, C = self.A, self.C
        p = atoms[..., 0]
        args = atoms[..., 1:]
        args = torch.where(args <= C, args, 0)     # a variable becomes 0: no fact has a 0 argument, so a
        k = self.key(p, args[..., 0], args[..., 1])  # non-ground atom (and padding, p = 0) is never a fact
        is_fact = self.fact_keys[torch.searchsorted(self.fact_keys, k)] == k   # index <= F (the sentinel)
        keep = (p != 0) & ~is_fact
        n_atoms = keep.sum(-1)
        slot = torch.cumsum(keep, dim=-1) - 1
        slot = torch.where(keep & (slot < A), slot, A)                # A = a dump slot, dropped below
        shape = (*atoms.shape[:-2], A + 1, 3)
        out = torch.zeros(shape, dtype=atoms.dtype, device=atoms.device)
        out = out.scatter(-2, slot[..., None].expand_as(atoms), atoms)[..., :A, :]
        out[..., 0, 0] = torch.where(n_atoms == 0, TRUE, out[..., 0, 0])  # every goal proved: <true>
        return out, n_atoms

    def _assemble(self, states, next_var, succ, valid, cand_nv, cand_lw, terminal, cut) -> Derived:
        """Valid successors first (at most S - 1 with end_action, S without), then <end> when any exists,
        a lone <false> when none does, or the terminal state itself; variable counters alongside."""
        B, A, S = states.shape[0], self.A, self.S
        cap = S - 1 if self.end_action else S
        rank = torch.cumsum(valid, -1)                                # 1-based position among valid ones
        n_real = rank[:, -1] if rank.shape[1] else torch.zeros_like(next_var)
        kept = torch.clamp(n_real, max=cap)                           # the slot of the one extra state
        any_real = n_real > 0
        # [B, 3, A, 3]: <end>, <false>, the state itself (device constants: a Python scalar assigned into a
        # CUDA slice, s[:, 0, 0] = END, takes a host-tensor path on CUDA only)
        extra = torch.cat([self._lone.expand(B, 2, A, 3), states[:, None]], dim=1)
        extra_valid = torch.stack([any_real & ~terminal & self.end_action, ~any_real & ~terminal, terminal], 1)
        slot = torch.cat([torch.where(valid & (rank <= cap), rank - 1, S),
                          torch.where(extra_valid, kept[:, None], S)], dim=1)  # [B, N + 3]; S: dropped
        # states and variable counters scattered together: the counter rides as one more atom row
        nv = torch.cat([cand_nv, next_var[:, None].expand(B, 3)], dim=1)
        rows = torch.cat([torch.cat([succ, extra], dim=1), F.pad(nv[..., None, None], (0, 2))], dim=2)  # [B, N+3, A+1, 3]
        out = torch.zeros(B, S + 1, A + 1, 3, dtype=states.dtype, device=states.device)
        out = out.scatter(1, slot[..., None, None].expand_as(rows), rows)[:, :S]
        counts = kept + extra_valid.any(-1)
        lw = torch.cat([cand_lw, cand_lw.new_zeros(B, 3)], dim=1)     # <end>, <false>, the state itself: 0
        lw = lw.new_zeros(B, S + 1).scatter(1, slot, lw)[:, :S]
        return Derived(out[:, :, :A], counts, out[:, :, A, 0], cut | (n_real > cap), lw)


def _bind(a, b, C):
    """One argument pair: goal term a, rule/fact term b (broadcast). -> (var, term, ok): bind b if it is a
    variable, else a if it is a variable (a == b binds a variable to itself: no change), else they must
    be equal (no binding: var -1, which no term is)."""
    b_var, a_var = b > C, a > C
    v = torch.where(b_var, b, torch.where(a_var, a, -1))
    t = torch.where(b_var, a, b)
    return v, t, (a == b) | b_var | a_var
