"""Study 3's link prediction on any graph: every candidate scored (beam-search proofs + ComplEx, fitted on
valid), filtered ranks under three tie rules, the prover's ceiling, and the cost against the greedy loop.

    lp = evaluate_link_prediction(kg, engine, policy, LinkConfig(n_queries=0), rules=bench.mining.rules)
    lp.results["fitted"].metrics["realistic"]      # MRR, Hits@1/3/10 with the mean of the tie bounds
    lp.results["fitted"].tie_share                  # positives whose score equals a failed corruption's
    lp.coverage, lp.cost, lp.candidates_per_s, lp.seconds
    rate = scoring_sampler(kg, lp)                  # rate(): candidates/s of the next batch-sized group of the split

The protocol is `benchmark_eval.filtered_candidates`' (Rocktäschel & Riedel 2017): each test triple against
every corruption of its head, then of its tail, over all entities, known triples of any split left out.
Ranks under the three tie rules (`ranking.ranks`): optimistic (1 + #higher: NTP's code), pessimistic
(1 + #higher + #tied) and realistic (their mean, PyKEEN's default; the expected rank under a random order of
the ties). Scorers, side by side on the same candidates (`SCORERS`): the fitted combination
(`combine.py`), the embedding alone, the prover alone (the search's best proof, fail_score otherwise), and
NTPλ's test-time rule (the larger of the embedding's and the proof's probability).
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ...kit.env import synchronize
from ..core.datasets import test_queries
from ..core.ranking import CandidateSet, metrics, ranks, ties_with
from ..core.rollout import recycle
from ..core.step import GreedyStep
from . import baseline, combine, optimized
from .benchmark_eval import SIDES, filtered_candidates, rules_only
from .embeddings import EmbeddingLog, train_complex
from .params import LinkConfig
from .reference import engine_coverage
from .search import BeamSearch

TIE_RULES = {"realistic": "mean", "optimistic": "optimistic", "pessimistic": "pessimistic"}
FAIL_SCORE = -100.0


# ---- features of one split -------------------------------------------------------------------

@dataclasses.dataclass
class Side:
    cs: CandidateSet
    feats: torch.Tensor        # [Q, C, 4] combine.FEATURES ([Q, C, 6] with the rule table's)
    proven: torch.Tensor       # [Q, C] bool: the search found a proof
    rule_ids: torch.Tensor | None = None   # [Q, C, K] the mined rules that fire (combine.RuleTable.fired)

    def take(self, idx: torch.Tensor) -> Side:
        li = combine.Lists(self.cs, self.feats, self.rule_ids).take(idx)
        return Side(li.cs, li.feats, self.proven[idx], li.rule_ids)


@dataclasses.dataclass
class Scored:
    sides: dict                # "head" / "tail" -> Side
    search_s: float            # the search's time, both sides
    embedding_s: float         # the embedding's scoring time, both sides

    @property
    def candidates(self) -> int:
        return sum(len(s.cs) for s in self.sides.values())

    def lists(self) -> list[combine.Lists]:
        return [combine.Lists(s.cs, s.feats, s.rule_ids) for s in self.sides.values()]

    @property
    def queries(self) -> int:
        return len(next(iter(self.sides.values())).cs.mask)

    def head(self, n: int) -> Scored:
        """The first n queries' lists (n = 0: all), both sides; timings not carried."""
        if n == 0 or n >= self.queries:
            return self
        idx = torch.arange(n)
        return Scored({k: s.take(idx) for k, s in self.sides.items()}, float("nan"), float("nan"))


def score_split(kg, queries: torch.Tensor, search: BeamSearch, model, batch: int, seed: int = 0,
                table: combine.RuleTable | None = None) -> Scored:
    """Both sides' filtered candidates of `queries`, each searched for a proof and scored by the embedding (and, with
    the mined rules' table, the rules that fire on it)."""
    dev = search.engine.device
    sides, search_s, emb_s = {}, 0.0, 0.0
    for side in SIDES:
        cs = filtered_candidates(kg, queries, side, seed)
        res = search.score(cs.flat().to(dev), batch, FAIL_SCORE)
        search_s += res.seconds
        t0 = time.perf_counter()
        le = model.candidate_log_probs(queries, side, cs.cands).cpu()                     # [Q, C]
        emb_s += time.perf_counter() - t0
        proven = cs.unflatten(res.proven, fill=False)
        ids = table.fired(cs.cands) if table is not None else None                       # [Q, C, K]
        extra = table.features(ids) if table is not None else ()
        sides[side] = Side(cs, combine.features(le, proven, cs.unflatten(res.log_weight), cs.unflatten(res.policy_log_prob),
                                                *extra), proven, ids)
    return Scored(sides, search_s, emb_s)


# ---- scorers and ranks -----------------------------------------------------------------------

def prover_scores(feats: torch.Tensor) -> torch.Tensor:
    """The prover alone: the best proof's score (rule log-weights + policy log-probs), fail_score when none."""
    proved = feats[..., 1] > 0
    return torch.where(proved, feats[..., 2] + feats[..., 3], FAIL_SCORE).double()


def max_scores(feats: torch.Tensor) -> torch.Tensor:
    """NTPλ's test-time rule: log max(p_embedding, p_proof), p_proof the product of the proof's rule weights."""
    proved = feats[..., 1] > 0
    return torch.where(proved, torch.maximum(feats[..., 0], feats[..., 2]), feats[..., 0]).double()


@dataclasses.dataclass
class Ranked:
    metrics: dict              # tie rule (TIE_RULES) -> MRR, Hits@1/3/10 over both sides
    ranks: dict                # tie rule -> [2Q] head ranks then tail ranks
    tie_share: float           # positives whose score equals that of a corruption the search did not prove
    tied_any: float            # positives whose score equals any corruption's


def rank(scored: Scored, scorer) -> Ranked:
    """Ranks of each side's positives under `scorer` ([Q, C, 4] -> [Q, C]), three tie rules."""
    out = {r: [] for r in TIE_RULES}
    failed_tie, any_tie = [], []
    for s in scored.sides.values():
        raw = scorer(s.feats, s.rule_ids) if isinstance(scorer, combine.Combination) else scorer(s.feats)
        scores = raw.masked_fill(~s.cs.mask, float("-inf"))
        for r, rule in TIE_RULES.items():
            out[r].append(ranks(scores, s.cs, rule))
        failed_tie.append(ties_with(scores, s.cs, ~s.proven))
        any_tie.append(ties_with(scores, s.cs))
    r = {k: torch.cat(v) for k, v in out.items()}
    return Ranked({k: metrics(v) for k, v in r.items()}, r, float(torch.cat(failed_tie).float().mean()),
                  float(torch.cat(any_tie).float().mean()))


# ---- the whole evaluation --------------------------------------------------------------------

@dataclasses.dataclass
class LinkPrediction:
    results: dict              # scorer -> Ranked ("fitted", "embedding alone", "prover alone", "NTPλ max")
    combination: combine.Combination
    fit_queries: int           # valid triples the combination was fitted on (0: no valid split: embedding alone)
    queries: int               # test triples ranked
    test_size: int             # test triples in the split
    candidates: int            # candidates ranked, both sides
    scoring_s: float           # search + embedding scoring of the test candidates (warm)
    seconds: dict              # embedding training, warm-up, fit, test scoring, coverage, cost, rules alone
    coverage: dict             # positives proved: search, greedy, engine ceiling at the search's depth; rules
    cost: dict                 # "greedy (full)", "greedy (recycle)", "search": ms per candidate, rows per candidate
    rules_only: dict | None    # benchmark_eval.rules_only of the same queries (None without mined rules)
    embedding_log: EmbeddingLog
    config: LinkConfig
    model: object              # the trained ComplEx
    search: BeamSearch
    valid: Scored | None = None   # the valid lists the combination was fitted on (fits_table's data)
    scored: Scored | None = None  # the test lists ranked
    table: combine.RuleTable | None = None   # the mined rules' table (None without mined rules)

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.scoring_s if self.scoring_s else float("nan")

    @property
    def whole_split(self) -> bool:
        return self.queries == self.test_size


def scoring_sampler(kg, lp: LinkPrediction):
    """A callable for `perflab.kit.verdicts.decide_rate`: each call scores the next group of the split's test triples
    whose candidates fill about `search_batch` candidates per side (search_batch // beam chunks of the search: a
    group's padding to whole chunks stays a small share of it; the search and the embedding, warm, as
    `lp.candidates_per_s` counts them: search + embedding seconds) and returns (its candidates, those seconds); the
    groups cycle through the split in a seeded random order. A sample costs a group's time, not a whole pass (a
    verdict's budget holds a few whole passes at most on the larger splits; a small split, Nations', is one group);
    the rate judged is the groups' total candidates over their total seconds, the split's steady throughput, each
    group's padding to whole chunks counted against it."""
    import itertools

    queries = test_queries(kg, lp.config.n_queries)
    per_side = max(1, lp.candidates // max(1, 2 * len(queries)))   # candidates of one test triple, one side
    split = queries.split(max(1, lp.config.search_batch // per_side))
    order = torch.randperm(len(split), generator=torch.Generator().manual_seed(lp.config.seed)).tolist()
    groups = itertools.cycle([split[i] for i in order])  # shuffled (seeded): a verdict that stops early rests on
    # groups from the whole split, not on its first triples

    def once() -> float:
        sc = score_split(kg, next(groups), lp.search, lp.model, lp.config.search_batch, lp.config.seed)
        return sc.candidates, sc.search_s + sc.embedding_s
    return once


SCORERS = {"fitted": None, "embedding alone": combine.EMBEDDING_ONLY, "prover alone": prover_scores,
           "NTPλ max": max_scores}


def evaluate_link_prediction(kg, engine, policy, cfg: LinkConfig, rules=None) -> LinkPrediction:
    """The embedding trained, the combination fitted on valid, the test triples ranked (module doc)."""
    secs = {}
    t = time.perf_counter()
    model, emb_log = train_complex(kg, cfg.emb, cfg.seed, engine.device)
    secs["embedding training"] = time.perf_counter() - t
    search = optimized.Prover(engine, policy, cfg).search   # the search: the optimized version's
    test = test_queries(kg, cfg.n_queries)
    t = time.perf_counter()
    search.score(filtered_candidates(kg, test[:1], "tail").flat().to(engine.device), cfg.search_batch)  # compiles here
    secs["warm-up"] = time.perf_counter() - t
    t = time.perf_counter()
    table = combine.RuleTable(kg, rules) if rules is not None else None
    valid = valid_queries(kg, cfg.n_fit)
    valid_scored = score_split(kg, valid, search, model, cfg.search_batch, cfg.seed, table) if len(valid) else None
    comb = fit_combination(valid_scored, cfg, table)            # before the test split is even scored
    secs["fit on valid"] = time.perf_counter() - t
    scored = score_split(kg, test, search, model, cfg.search_batch, cfg.seed, table)
    secs["test scoring"] = scored.search_s + scored.embedding_s
    results = {name: rank(scored, comb if fn is None else fn) for name, fn in SCORERS.items()}
    t = time.perf_counter()
    coverage = _coverage(scored, engine, policy, test, cfg)
    secs["coverage"] = time.perf_counter() - t
    t = time.perf_counter()
    cost = cost_per_candidate(kg, engine, policy, search, test[: cfg.n_cost], cfg)
    secs["cost comparison"] = time.perf_counter() - t
    t = time.perf_counter()
    alone = rules_only(kg, rules, test, seed=cfg.seed) if rules is not None else None
    if rules is not None:
        from ..core.mining import rule_coverage
        coverage["rules cover"] = float(rule_coverage(kg, rules, test).float().mean())
    secs["rules alone"] = time.perf_counter() - t
    return LinkPrediction(results, comb, len(valid), len(test), len(kg.queries["test"]), scored.candidates,
                          secs["test scoring"], secs, coverage, cost, alone, emb_log, cfg, model, search, valid_scored,
                          scored, table)


# ---- the fit ---------------------------------------------------------------------------------

def valid_queries(kg, n_fit: int) -> torch.Tensor:
    """The first n_fit valid triples (0: the whole valid split; none without one): all the fit may see."""
    valid = kg.queries.get("valid", torch.zeros(0, 3, dtype=torch.long))
    return valid if n_fit == 0 else valid[:n_fit]


def fit_combination(valid: Scored | None, cfg: LinkConfig, table: combine.RuleTable | None) -> combine.Combination:
    """cfg.fit's procedure (`combine.PROCEDURES`) on the valid lists; the embedding alone without a valid split."""
    if valid is None or valid.queries == 0:
        return combine.EMBEDDING_ONLY
    return combine.fit_procedure(combine.PROCEDURES[cfg.fit], valid.lists(), table.n_rules if table else 0, cfg.seed)


FIT_SIZES = (24, 300, 0)   # valid triples per row of the table of fits (0: the whole valid split)


def fits_table(valid: Scored, test: Scored, n_rules: int, seed: int = 0, sizes=FIT_SIZES, oracle: bool = True,
               default: tuple | None = None) -> list[dict]:
    """The table of what was tried: each procedure (`combine.PROCEDURES`) fitted on the first n valid triples (both
    sides), its held-out MRR on valid halves (fitted on one, ranked on the other: a choice that needs no test) and
    its test MRR beside the embedding alone's; with `oracle`, each procedure fitted on the test lists themselves
    (labelled: an upper bound of the family, not a result). `default`: (procedure, n_fit) marked as the run's."""
    alone = rank(test, combine.EMBEDDING_ONLY).metrics["realistic"]["MRR"]
    rows = []
    runs = [(n, valid.head(n)) for n in sizes if n == 0 or n < valid.queries]
    runs += [("test", test)] if oracle else []
    for name, proc in combine.PROCEDURES.items():
        for n, data in runs:
            lists = data.lists()
            comb = combine.fit_procedure(proc, lists, n_rules, seed)
            mrr = rank(test, comb).metrics["realistic"]["MRR"]
            held = (combine.cross_fit_mrr(lists, len(comb.weights), len(comb.rule_weights), comb.l2, seed)
                    if comb.rule_weights is not None else combine.cross_fit_mrr(lists, len(comb.weights), seed=seed))
            rows.append({"procedure": name, "fitted on": "test (oracle)" if n == "test" else f"{data.queries} valid",
                         "features": len(comb.weights) + (len(comb.rule_weights) if comb.rule_weights is not None else 0),
                         "l2 (per rule)": comb.l2, "valid halves MRR": held if n != "test" else float("nan"),
                         "MRR ComplEx alone": alone, "MRR combined": mrr, "gain": mrr - alone,
                         "default": default == (name, n)})
    return rows


def fits_table_of(lp: LinkPrediction, oracle: bool = False) -> list[dict]:
    """`fits_table` of a run's own valid and test lists (the valid rows stop at the lp's n_fit)."""
    if lp.valid is None:
        return []
    n_rules = lp.table.n_rules if lp.table is not None else 0
    return fits_table(lp.valid, lp.scored, n_rules, lp.config.seed, oracle=oracle,
                      default=(lp.config.fit, lp.config.n_fit))


def _coverage(scored: Scored, engine, policy, test: torch.Tensor, cfg: LinkConfig) -> dict:
    """Shares of the ranked positives proved: by the search, by the greedy policy (max_depth steps), and by
    the engine's exhaustive search to the search's depth (the ceiling of any search that deep)."""
    positives = torch.cat([s.proven[:, 0] for s in scored.sides.values()])      # each positive twice: once per side
    step = GreedyStep(engine, policy, cfg.max_depth)
    with torch.inference_mode():
        greedy = recycle(step, test.to(engine.device), cfg.greedy_slots).proven.cpu()
    ceiling = engine_coverage(engine, test.to(engine.device), cfg.search_depth).cpu()
    return {"search proves": float(positives.float().mean()), "greedy proves": float(greedy.float().mean()),
            f"engine proves (depth {cfg.search_depth})": float(ceiling.float().mean())}


def cost_per_candidate(kg, engine, policy, search: BeamSearch, queries: torch.Tensor, cfg: LinkConfig) -> dict:
    """ms per candidate of the search and of the greedy loop (as 03 evaluates: full chunks; and study 4's
    recycle) on both sides' candidates of `queries`, each warm (one untimed run first), each at its own batch
    (`cfg.search_batch` rows per search step, `cfg.greedy_slots` greedy slots), which each entry names."""
    cands = torch.cat([filtered_candidates(kg, queries, s).flat() for s in SIDES]).to(engine.device)
    greedy = baseline.Prover(engine, policy, cfg)     # the baseline version: a step of its own, at cfg.greedy_slots
    B = greedy.batch
    runs = {"greedy (full)": (B, lambda: greedy.score(cands)),
            "greedy (recycle)": (B, lambda: recycle(greedy.step, cands, B)),
            "search": (cfg.search_batch, lambda: search.score(cands, cfg.search_batch))}
    out = {}
    with torch.inference_mode():
        for name, (batch, fn) in runs.items():
            fn()
            t0 = time.perf_counter()
            res = fn()
            synchronize(engine.device)  # the greedy loops end on a host read; the search synchronizes itself
            sec = time.perf_counter() - t0
            rows = res.row_steps if name == "search" else res.slot_steps
            out[name] = dict(ms_per_candidate=1e3 * sec / max(1, len(cands)), rows_per_candidate=rows / max(1, len(cands)),
                             proved=float(res.proven.float().mean()), batch=batch)
    return out
