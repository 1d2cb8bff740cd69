"""One score for every candidate: the embedding's log-probability, plus what a proof and the mined rules add,
weighed as the valid split says.

    table = RuleTable(kg, rules)                                   # per mined rule, the pairs its body holds for
    feats = features(emb_log_prob, proven, log_w, policy_lp, *table.features(rule_ids))   # [Q, C, 6]
    comb = fit_procedure(PROCEDURES["per rule"], valid_lists, table.n_rules)   # valid only, never test
    scores = comb(feats_test, rule_ids_test)                       # [Q, C]

score(c) = a * log p_emb(c) + proved(c) * (b + c_w * sum of log rule weights of its proof
                                              + c_p * sum of the policy's log-probabilities of its proof)
           + c_m * log max confidence of the mined rules whose body holds for c + c_f * #those rules
           + sum over those rules k of v_k                         (per-rule weights; "per rule" only)

Every candidate has the embedding term, so an unproved positive no longer ties with every failed corruption
(the symbolic prover alone gives them all fail_score). A proof adds a bonus: with equal embedding scores a
proved candidate ranks above an unproved one exactly when its bonus is positive, and among proved ones a
proof through more confident rules (or choices the policy likes more) ranks higher when c_w (c_p) > 0. The
per-rule weights v_k let a rule that fires mostly on false triples count less than one that fires on true
ones; with every v_k equal to c_f they are the global count term (`Combination.__call__`).

Why this form. NTPλ trains NTP and ComplEx on one loss with shared embeddings, and its code can score a
triple at test time by the larger of the two success probabilities (`test_time_neural_link_prediction`,
off in the Kinship/Nations/UMLS configs). A max of a proof's probability (the product of its rules'
confidences) and the embedding's softmax probability assumes both are calibrated on one scale; they are
not: mined rules of confidence 0.1-0.5 prove many corruptions, and the max ranks them above positives the
embedding is sure of (`predict.max_scores` is that rule; 03 prints it beside the fit). So the weights are
learned: the listwise softmax loss of each positive against its own filtered corruptions (convex: L-BFGS in
float64, deterministic), on the valid split, never on test. The embedding alone (all but a zero) is one point
of the family, so the fit cannot do worse on its own loss. Fitted on 24 valid triples the four global weights
left UMLS's proofs unused (../shared/research/kg-2026-11-26.md, section 3); the procedures here fit on the
whole valid split, and the per-rule weights' l2 is picked on valid halves (`choose_l2`).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ..core.mining import body_holds
from ..core.ranking import CandidateSet, metrics, ranks

FEATURES = ("embedding log-prob", "proved", "rule log-weight", "policy log-prob",
            "rules' log max confidence", "rules firing")
L2_GRID = tuple(10.0 ** k for k in range(-5, 2))   # per-rule weights' l2 candidates (1e-5 .. 10)
BASE_L2 = 1e-3                                     # the global weights' penalty: keeps them finite when separable


# ---- the mined rules as a table ------------------------------------------------------------------

class RuleTable:
    """Per mined rule, the (h, t) pairs its body holds for on kg's facts (what `mining.rule_confidence` tests
    triple by triple), as one [n_rules + 1, N, N] bool table (the last rule: a pad that never fires), and per
    head relation the ids of its rules ([n_predicates, K], the pad where a head has fewer than K)."""

    def __init__(self, kg, rules, max_bytes: int = 2**28):
        rules = list(rules)
        N = kg.n_constants + 1
        if (len(rules) + 1) * N * N > max_bytes:
            raise ValueError(f"RuleTable: {len(rules)} rules x {N}^2 pairs need {(len(rules) + 1) * N * N:,} bytes > "
                             f"max_bytes={max_bytes:,}")
        holds = torch.zeros(len(rules) + 1, N, N, dtype=torch.bool)
        for i, (_, h) in enumerate(body_holds(kg, rules, max_bytes)):
            holds[i] = h
        by_head: dict[int, list] = {}
        for i, m in enumerate(rules):
            by_head.setdefault(m.head, []).append(i)
        K = max((len(v) for v in by_head.values()), default=1)
        self.n_rules = len(rules)
        self.slots = torch.full((kg.n_predicates, K), self.n_rules, dtype=torch.long)
        for r, ids in by_head.items():
            self.slots[r, :len(ids)] = torch.tensor(ids)
        self.holds = holds
        self.log_conf = torch.tensor([math.log(m.confidence) for m in rules] + [0.0], dtype=torch.float64)

    def fired(self, triples: torch.Tensor) -> torch.Tensor:
        """[..., 3] -> [..., K] ids of the rules with head r whose body holds for (h, t); n_rules (the pad) elsewhere."""
        t = triples.long().cpu()
        ids = self.slots[t[..., 0]]                                  # [..., K]
        hit = self.holds[ids, t[..., 1:2], t[..., 2:3]]
        return torch.where(hit, ids, self.n_rules)

    def features(self, rule_ids: torch.Tensor):
        """[..., K] fired ids -> (log max confidence of the rules that fire (0 where none), #rules that fire)."""
        fires = rule_ids < self.n_rules
        lc = self.log_conf[rule_ids].masked_fill(~fires, float("-inf")).amax(-1)
        return torch.where(fires.any(-1), lc, 0.0).float(), fires.sum(-1).float()


def features(emb_log_prob: torch.Tensor, proven: torch.Tensor, log_weight: torch.Tensor,
             policy_log_prob: torch.Tensor, rule_log_max: torch.Tensor | None = None,
             rule_fires: torch.Tensor | None = None) -> torch.Tensor:
    """[Q, C] each -> [Q, C, 4] in FEATURES order (the proof's terms are 0 where nothing was proved), [Q, C, 6]
    with the rule table's two."""
    p = proven.to(emb_log_prob.dtype)
    cols = [emb_log_prob, p, log_weight * p, policy_log_prob * p]
    if rule_log_max is not None:
        cols += [rule_log_max.to(emb_log_prob.dtype), rule_fires.to(emb_log_prob.dtype)]
    return torch.stack(cols, -1)


# ---- the combination -----------------------------------------------------------------------------

@dataclasses.dataclass
class Combination:
    weights: torch.Tensor                     # [F] over FEATURES[:F]
    loss: float = float("nan")                # mean listwise loss per positive on the data it was fitted on
    rule_weights: torch.Tensor | None = None  # [n_rules]: added for each mined rule that fires (None: global)
    l2: float = float("nan")                  # the per-rule weights' penalty it was fitted with

    def __call__(self, feats: torch.Tensor, rule_ids: torch.Tensor | None = None) -> torch.Tensor:
        """[Q, C, >= F] (and [Q, C, K] fired rule ids) -> [Q, C] scores (float64: the ranks round them to 4 decimals)."""
        s = feats[..., :len(self.weights)].double() @ self.weights.double()
        if self.rule_weights is None:
            return s
        if rule_ids is None:
            raise ValueError("a per-rule combination needs the fired rules' ids (RuleTable.fired)")
        v = torch.cat([self.rule_weights.double(), torch.zeros(1, dtype=torch.float64)])   # the pad weighs 0
        return s + v[rule_ids].sum(-1)

    def bonus(self, log_weight: float = 0.0, policy_log_prob: float = 0.0) -> float:
        """What a proof with these sums adds to a candidate's score (the search's terms)."""
        w = self.weights.tolist()
        return w[1] + w[2] * log_weight + w[3] * policy_log_prob

    def describe(self) -> str:
        text = ", ".join(f"{n} {w:+.3f}" for n, w in zip(FEATURES, self.weights.tolist()))
        if self.rule_weights is not None and len(self.rule_weights):
            v = self.rule_weights
            text += (f"; {len(v)} per-rule weights (l2 {self.l2:g}) from {v.min():+.2f} to {v.max():+.2f}, "
                     f"median {v.median():+.2f}")
        return text


EMBEDDING_ONLY = Combination(torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64))


# ---- the data a fit sees -------------------------------------------------------------------------

@dataclasses.dataclass
class Lists:
    """One side's ranking lists: each query's positive at column 0 among its filtered corruptions."""
    cs: CandidateSet                       # the queries (the positives) and candidates [Q, C, 3], mask [Q, C]
    feats: torch.Tensor                    # [Q, C, F] FEATURES
    rule_ids: torch.Tensor | None = None   # [Q, C, K] fired mined rules (RuleTable.fired), None: no rules

    def take(self, idx: torch.Tensor) -> Lists:
        cs = self.cs
        return Lists(CandidateSet(cs.queries[idx], cs.cands[idx], cs.mask[idx], cs.tie_key[idx]), self.feats[idx],
                     None if self.rule_ids is None else self.rule_ids[idx])


def _as_lists(lists) -> list[Lists]:
    """Lists, or (mask, feats) pairs (the positive at column 0)."""
    out = []
    for x in lists:
        if isinstance(x, Lists):
            out.append(x)
        else:
            mask, feats = x
            Q, C = mask.shape
            out.append(Lists(CandidateSet(torch.zeros(Q, 3, dtype=torch.long), torch.zeros(Q, C, 3, dtype=torch.long),
                                          mask, torch.zeros(Q, C)), feats))
    return out


def listwise_loss(weights: torch.Tensor, lists, rule_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over positives of -log softmax(score)[positive] among its real candidates."""
    comb = Combination(weights, rule_weights=rule_weights)
    total, n = 0.0, 0
    for li in _as_lists(lists):
        ids = li.rule_ids if rule_weights is not None else None
        s = comb(li.feats, ids).masked_fill(~li.cs.mask, float("-inf"))
        total = total - torch.log_softmax(s, -1)[:, 0].sum()
        n += len(li.cs.mask)
    return total / max(1, n)


def fit(lists, l2: float = BASE_L2, max_iter: int = 100, n_features: int = 4, n_rules: int = 0,
        rule_l2: float = 1e-2) -> Combination:
    """The weights of the first `n_features` FEATURES (and, with n_rules > 0, one per mined rule) minimizing the
    listwise loss plus l2 * |w|^2 + rule_l2 * |v|^2 (the penalties keep them finite when the lists are
    separable), from the embedding alone; L-BFGS in float64, so the fit is deterministic."""
    lists = _as_lists(lists)
    w = torch.zeros(n_features, dtype=torch.float64)
    w[0] = 1.0
    w.requires_grad_(True)
    v = torch.zeros(n_rules, dtype=torch.float64, requires_grad=True) if n_rules else None
    params = [w] + ([v] if v is not None else [])
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = listwise_loss(w, lists, v) + l2 * (w ** 2).sum()
        if v is not None:
            loss = loss + rule_l2 * (v ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    w = w.detach()
    v = v.detach() if v is not None else None
    return Combination(w, float(listwise_loss(w, lists, v)), v, rule_l2 if v is not None else float("nan"))


def realistic_mrr(comb: Combination, lists) -> float:
    """Realistic MRR (`ranking.ranks`, mean of the tie bounds) of the lists' positives under `comb`."""
    r = [ranks(comb(li.feats, li.rule_ids).masked_fill(~li.cs.mask, float("-inf")), li.cs, "mean")
         for li in _as_lists(lists)]
    return metrics(torch.cat(r))["MRR"]


# ---- the procedures --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Procedure:
    """How the combination is fitted on the valid lists it is given."""
    n_features: int = 4        # the first FEATURES fitted (4: the search's; 6: + the rule table's two)
    per_rule: bool = False     # one more weight per mined rule, its l2 picked on valid halves (`choose_l2`)
    doc: str = ""


PROCEDURES = {
    "global": Procedure(4, doc="four global weights: embedding, proved, rule log-weight, policy log-prob"),
    "global + rules": Procedure(6, doc="six global weights: + the rules' log max confidence and how many fire"),
    "per rule": Procedure(6, True, doc="six global weights + one per mined rule, l2 picked on valid halves"),
}


def halves(lists, seed: int = 0):
    """Two disjoint halves of the lists' queries (seeded; a query's sides stay together: the sides' rows are the
    same queries in the same order) -> (first, second), each a list of Lists."""
    lists = _as_lists(lists)
    Q = len(lists[0].cs.mask)
    perm = torch.randperm(Q, generator=torch.Generator().manual_seed(seed))
    a, b = perm[: Q // 2].sort().values, perm[Q // 2:].sort().values
    return [li.take(a) for li in lists], [li.take(b) for li in lists]


def cross_fit_mrr(lists, n_features: int, n_rules: int = 0, rule_l2: float = 1e-2, seed: int = 0) -> float:
    """Held-out MRR on the valid split alone: fitted on one half, ranked on the other, both ways, the mean."""
    a, b = halves(lists, seed)
    return 0.5 * sum(realistic_mrr(fit(x, n_features=n_features, n_rules=n_rules, rule_l2=rule_l2), y)
                     for x, y in ((a, b), (b, a)))


def choose_l2(lists, n_features: int, n_rules: int, grid=L2_GRID, seed: int = 0) -> tuple[float, dict]:
    """The per-rule weights' l2 with the best `cross_fit_mrr` on halves of `lists` (the larger l2 on a tie:
    the simpler model) -> (l2, {l2: held-out MRR})."""
    got = {l2: cross_fit_mrr(lists, n_features, n_rules, l2, seed) for l2 in grid}
    return max(got, key=lambda k: (round(got[k], 6), k)), got


def fit_procedure(proc: Procedure, lists, n_rules: int = 0, seed: int = 0) -> Combination:
    """The combination `proc` fits on `lists` (valid lists: the caller's promise; nothing here sees test). Without
    mined rules (n_rules == 0, or lists without the rule table's features) it fits the four search features."""
    lists = _as_lists(lists)
    have_rules = n_rules > 0 and all(li.rule_ids is not None and li.feats.shape[-1] >= 6 for li in lists)
    nf = proc.n_features if have_rules else 4
    if not (proc.per_rule and have_rules):
        return fit(lists, n_features=nf)
    # halves of fewer than 2 queries rank nothing worth choosing on: the grid's middle then
    l2 = choose_l2(lists, nf, n_rules, seed=seed)[0] if len(lists[0].cs.mask) >= 4 else L2_GRID[len(L2_GRID) // 2]
    return fit(lists, n_features=nf, n_rules=n_rules, rule_l2=l2)
