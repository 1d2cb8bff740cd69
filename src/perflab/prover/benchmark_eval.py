"""Link prediction as the papers evaluate it, on the existing engine and policy, and the published tables.

    res = evaluate_filtered(kg, engine, policy, kg.queries["test"][:50], batch=128, max_depth=20)
    res.metrics            # MRR, Hits@1/3/10 over head and tail ranks together (tie_break="mean")
    res.bounds             # the same metrics with optimistic and pessimistic ties
    res.ms_per_candidate, res.candidates_per_s

Protocol, as Rocktäschel & Riedel 2017 state it (section 5) and their code runs it (ntp/experiments/eval.py in
github.com/uclnlp/ntp): each test triple (h, r, t) is ranked twice, once against every (e, r, t) and once against
every (h, r, e) over all entities e, leaving out every corruption that is a known triple of any split (train,
valid or test: `KnowledgeGraph.true_set`; NTP filters against the whole KB file). MRR and Hits@k are means over
the 2Q ranks. A candidate's score is the sum of the log-probabilities of the greedy proof the policy finds plus
log(confidence) of each mined rule the proof applies (`step.GreedyStep`: a proof through confident rules ranks
above one through weak rules; on Kinship, 24 test triples at the CPU defaults, MRR 0.416 -> 0.452, 100 triples
0.361 -> 0.387; UMLS and Nations unchanged), and `fail_score` (-100) when the proof fails (the existing
`evaluate_with_corruptions`, given these candidates).

Ties. A symbolic prover ties a lot: every candidate it cannot prove gets the same fail_score, so a positive
the prover cannot prove ties with most negatives. The rank reported is the mean of the optimistic and the
pessimistic rank (1 + #higher + #tied / 2): the expected rank under a uniformly random order of the ties
(the "realistic" rank of Berrendorf et al. 2020), deterministic, and free of the seed noise a random
tie-break adds. Both bounds are reported beside it. NTP's code ranks optimistically (1 + #higher: "we calculate
the rank from only those corrupted triples that have a higher score"), harmless for its continuous scores; here
an optimistic rank would give rank 1 to a positive the prover fails on whenever every corruption fails too, so
the optimistic numbers are an upper bound, not the comparable ones.
"""
from __future__ import annotations

import dataclasses

import torch

from .evaluate import EvalResult, evaluate_with_corruptions
from .ranking import CandidateSet, metrics, ranks
from .reference import prove_exhaustive
from .step import GreedyStep

SIDES = ("head", "tail")


def filtered_candidates(kg, queries: torch.Tensor, side: str, seed: int = 0) -> CandidateSet:
    """Every corruption of `side` (head: position 1, tail: position 2) of each query over all entities, the
    positive at 0; corruptions that are known triples (any split) are masked out. [Q, C, 3]."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    pos = 1 if side == "head" else 2
    Q, C = len(queries), kg.n_constants
    q = queries.long().cpu()
    j = torch.arange(C - 1)
    ents = j[None] + 1 + (j[None] + 1 >= q[:, pos:pos + 1]).long()   # [Q, C-1]: 1..C without the query's own
    neg = q[:, None, :].repeat(1, C - 1, 1)
    neg[..., pos] = ents
    cands = torch.cat([q[:, None, :], neg], dim=1)                    # [Q, C, 3]
    n = C + 1                                                         # one int64 key per triple, as the engine's
    key = lambda t: (t[..., 0] * n + t[..., 1]) * n + t[..., 2]      # noqa: E731
    known = key(torch.tensor(sorted(kg.true_set()), dtype=torch.long).reshape(-1, 3))
    mask = torch.ones(Q, C, dtype=torch.bool)
    mask[:, 1:] = ~torch.isin(key(neg), known)
    g = torch.Generator().manual_seed(seed)
    return CandidateSet(q.clone(), cands, mask, torch.rand(mask.shape, generator=g))


@dataclasses.dataclass
class FilteredResult:
    metrics: dict             # MRR, Hits@1/3/10 over both sides, tie_break as asked ("mean" by default)
    per_side: dict            # side -> metrics
    bounds: dict              # "optimistic" / "pessimistic" -> metrics over both sides
    ranks: torch.Tensor       # [2Q] head ranks then tail ranks
    proven: dict              # side -> [Q] positive proved
    results: dict             # side -> EvalResult
    candidates: int           # real candidates scored, both sides
    seconds: float            # scoring time (rollouts), both sides

    @property
    def ms_per_candidate(self) -> float:
        return 1e3 * self.seconds / max(1, self.candidates)

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.seconds if self.seconds else float("nan")


def evaluate_filtered(kg, engine, policy, queries: torch.Tensor, *, batch: int = 128, max_depth: int = 20,
                      compile: str = "off", step: GreedyStep | None = None, tie_break: str = "mean",
                      fail_score: float = -100.0, seed: int = 0) -> FilteredResult:
    """Head and tail ranks of `queries` among all filtered corruptions (module doc)."""
    step = step if step is not None else GreedyStep(engine, policy, max_depth, compile)
    results, all_ranks, bounds, proven = {}, {}, {"optimistic": [], "pessimistic": []}, {}
    for side in SIDES:
        cs = filtered_candidates(kg, queries, side, seed)
        res: EvalResult = evaluate_with_corruptions(kg, engine, policy, queries, candidates=cs, batch=batch,
                                                    max_depth=max_depth, step=step, tie_break=tie_break,
                                                    fail_score=fail_score, seed=seed)
        results[side], all_ranks[side], proven[side] = res, res.ranks, res.proven[:, 0]
        for b in bounds:
            bounds[b].append(ranks(res.scores, cs, b))
    r = torch.cat([all_ranks[s] for s in SIDES])
    return FilteredResult(metrics(r), {s: metrics(all_ranks[s]) for s in SIDES},
                          {b: metrics(torch.cat(v)) for b, v in bounds.items()}, r, proven, results,
                          sum(len(res.candidates) for res in results.values()),
                          sum(res.rollout.seconds for res in results.values()))


def rules_only(kg, rules, queries: torch.Tensor, tie_break: str = "mean", seed: int = 0) -> dict:
    """Metrics of the same filtered ranking when a candidate's score is the highest confidence of a mined rule
    that proves it in one application (mining.rule_confidence; 0 when none does): what the rules alone rank,
    with no prover and no policy. {"metrics", "optimistic", "pessimistic"}."""
    from .mining import rule_confidence

    out = {b: [] for b in ("mean", "optimistic", "pessimistic")}
    for side in SIDES:
        cs = filtered_candidates(kg, queries, side, seed)
        scores = cs.unflatten(rule_confidence(kg, rules, cs.flat()).float(), fill=float("-inf"))
        for b in out:
            out[b].append(ranks(scores, cs, tie_break if b == "mean" else b))
    return {("metrics" if b == "mean" else b): metrics(torch.cat(v)) for b, v in out.items()}


def engine_coverage(engine, queries: torch.Tensor, max_depth: int = 2, chunk: int = 64) -> torch.Tensor:
    """[Q] bool: a proof of the query exists within max_depth steps through the engine's successors (its
    limits included: fact window K, successor list S, atoms A). The ceiling for any policy at that depth.
    Breadth-first (reference.prove_exhaustive), `chunk` queries at a time to bound the frontier's memory."""
    return torch.cat([prove_exhaustive(engine, queries[i:i + chunk], max_depth) > 0
                      for i in range(0, len(queries), chunk)] or [torch.zeros(0, dtype=torch.bool)])


@dataclasses.dataclass
class BenchmarkEval:
    """Study 3 on a graph with mined rules: the filtered evaluation and what explains its MRR."""
    name: str
    result: FilteredResult
    batch: int                # the batch it ran with (0 asked: the memory model's pick)
    warmup_s: float           # the first chunk at that batch (compiles included for a compiled mode)
    rules_only: dict          # rules_only(): what the mined rules rank alone
    coverage: dict            # rule_coverage, engine_coverage_d2 (whole test split), positives_proved (evaluated)
    mode: str                 # "compile/backend" of the step, padded

    @property
    def best(self) -> dict | None:
        """The best published row of the dataset over every model (None: no published results)."""
        return best_published_mrr(self.name, models=None)


def evaluate_benchmark(name: str, kg, rules, engine, policy, *, n_queries: int, batch: int, max_depth: int,
                       compile: str = "off", backend: str = "inductor", seed: int = 0) -> BenchmarkEval:
    """Filtered ranks of the first `n_queries` test triples with the run's compile mode and backend, every
    chunk padded to the batch (batch=0: the memory model picks for one side's candidates), after one
    warm-up chunk; the rules-only ranking and the coverage ceilings (module doc of `engine_coverage`)."""
    import time

    from . import optimized
    from .batching import resolve_batch
    from .mining import rule_coverage
    from .study import fill

    queries = kg.queries["test"][:n_queries]
    one_side = filtered_candidates(kg, queries, "tail", seed).flat().to(engine.device)
    batch = resolve_batch(batch, engine, policy, one_side, max_depth)
    step = GreedyStep(engine, policy, max_depth, compile, backend)
    with torch.inference_mode():
        t0 = time.perf_counter()
        optimized.score_candidates(step, fill(one_side, batch), batch)    # compiles here, not in the timed run
        warm = time.perf_counter() - t0
    res = evaluate_filtered(kg, engine, policy, queries.to(engine.device), batch=batch, max_depth=max_depth,
                            step=step, seed=seed)
    test = kg.queries["test"]
    cov = dict(rule_coverage=float(rule_coverage(kg, rules, test).float().mean()),
               engine_coverage_d2=float(engine_coverage(engine, test.to(engine.device), max_depth=2).float().mean()),
               positives_proved=float(torch.cat(list(res.proven.values())).float().mean()))
    return BenchmarkEval(name, res, batch, warm, rules_only(kg, rules, queries, seed=seed), cov,
                         f"{compile}/{backend}, padded")


def comparison(ev: BenchmarkEval) -> list[dict]:
    """Rows for the notebook's table: this prover (mean-of-bounds ties, then each bound), the mined rules
    alone, then the published rows of the dataset with their source."""
    keys = ("MRR", "Hits@1", "Hits@3", "Hits@10")
    here = lambda m: {k: round(m[k], 3) for k in keys}  # noqa: E731
    rows = [dict(model="this prover (ties: mean of bounds)", **here(ev.result.metrics), source="this run"),
            *(dict(model=f"this prover ({b} ties)", **here(m), source="this run") for b, m in ev.result.bounds.items()),
            dict(model="mined rules alone (one application, confidence)", **here(ev.rules_only["metrics"]),
                 source="this run")]
    return rows + [dict(model=r["model"], **{k: r[k] for k in keys}, source=r["source"]) for r in published(ev.name)]


def summary_lines(ev: BenchmarkEval, device_type: str) -> list[str]:
    """The run-dependent sentences beside the table: size, ties, coverage, speed."""
    r, c = ev.result, ev.coverage
    unproved_ties = sum(int((~p).sum()) for p in r.proven.values())
    sources = sorted({row["source"] for row in published(ev.name)})
    return [
        *(f"published rows: {src}" for src in sources),
        f"{ev.name}: {len(r.ranks) // 2} test triples ranked against all filtered corruptions of head and tail: "
        f"{r.candidates:,} candidates",
        f"positives proved by the greedy policy: {c['positives_proved']:.0%} ({unproved_ties} of {len(r.ranks)} ranks "
        f"tie with every failed corruption); ties move the MRR from {r.bounds['pessimistic']['MRR']:.3f} "
        f"(pessimistic) to {r.bounds['optimistic']['MRR']:.3f} (optimistic)",
        f"ceilings on the whole test split: mined rules cover {c['rule_coverage']:.0%} in one application; the engine "
        f"proves {c['engine_coverage_d2']:.0%} within 2 steps",
        f"speed ({ev.mode}, B={ev.batch}, {device_type}): {r.ms_per_candidate:.3f} ms per candidate, "
        f"{r.candidates_per_s:,.0f} candidates/s over {r.seconds:.2f} s (warm; the first chunk took {ev.warmup_s:.2f} s)",
    ]


def run_benchmark(name: str, *, mining=None, max_derived: int = 16, train_updates: int = 30, n_queries: int = 24,
                  batch: int = 128, max_depth: int = 20, compile: str = "off", seed: int = 0, device="cpu") -> dict:
    """One dataset end to end, as study 3 runs it (`evaluate_benchmark`): load and mine, a short policy
    training on valid, then filtered ranks of the first `n_queries` test triples and the coverage ceilings
    of the whole test split. Returns the numbers as a flat dict."""
    import time

    from .data import training_queries
    from .datasets import load_benchmark
    from .engine import UnificationEngine
    from .mining import MiningConfig
    from .policy import make_policy, train_policy

    t0 = time.perf_counter()
    bench = load_benchmark(name, mining if mining is not None else MiningConfig(max_rules_per_head=max_derived - 1),
                           device=device)
    load_s = time.perf_counter() - t0
    kg = bench.kg
    engine = UnificationEngine(kg, max_derived=max_derived, device=device)
    policy = make_policy(kg, seed=seed, device=device)
    log = train_policy(policy, engine, training_queries(kg), updates=train_updates, batch=64,
                       max_depth=min(max_depth, 10), seed=seed)
    ev = evaluate_benchmark(name, kg, bench.mining.rules, engine, policy, n_queries=n_queries, batch=batch,
                            max_depth=max_depth, compile=compile, seed=seed)
    res = ev.result
    rate = lambda xs: sum(xs) / max(1, len(xs))  # noqa: E731
    best = best_published_mrr(name)
    return dict(dataset=name, rules=len(bench.mining.rules), mining_s=bench.mining.seconds, load_s=load_s,
                K=engine.K, R=engine.R, S=engine.S, test=len(kg.queries["test"]), **ev.coverage,
                train_s=log.seconds, train_success_first=rate(log.success[:5]), train_success_last=rate(log.success[-5:]),
                n_queries=len(kg.queries["test"][:n_queries]), **{k: v for k, v in res.metrics.items()},
                **{f"{k}_{b}": v for b, m in res.bounds.items() for k, v in m.items()},
                **{f"rules_only_{k}": v for k, v in ev.rules_only["metrics"].items()},
                candidates=res.candidates, eval_s=res.seconds, ms_per_candidate=res.ms_per_candidate,
                candidates_per_s=res.candidates_per_s,
                best_published=f"{best['model']} {best['MRR']:.2f}" if best else "")


# ---- published results ------------------------------------------------------------------------
# Filtered MRR and Hits@k on the test split, copied from the tables named in `source`. Rocktäschel & Riedel's
# splits are the ones vendored here: the first test triples of each vendored file equal those of
# data/{kinship,nations,umls}/test.nl in github.com/uclnlp/ntp, in the same order (checked when vendoring).
# GNTP (Minervini et al., AAAI 2020) and CTP (Minervini et al., ICML 2020) report these datasets too, but no
# copy of their tables could be read while writing this, so their rows are left out rather than recalled.
_NTP = ("Rocktäschel & Riedel 2017, End-to-end Differentiable Proving, NeurIPS, Table 1 "
        "(AUC-PR results on Countries and MRR and HITS@m on Kinship, Nations, and UMLS)")
PUBLISHED = [
    dict(dataset="kinship", model="ComplEx", MRR=0.81, **{"Hits@1": 0.70, "Hits@3": 0.89, "Hits@10": 0.98}, source=_NTP),
    dict(dataset="kinship", model="NTP", MRR=0.60, **{"Hits@1": 0.48, "Hits@3": 0.70, "Hits@10": 0.78}, source=_NTP),
    dict(dataset="kinship", model="NTPλ", MRR=0.80, **{"Hits@1": 0.76, "Hits@3": 0.82, "Hits@10": 0.89}, source=_NTP),
    dict(dataset="nations", model="ComplEx", MRR=0.75, **{"Hits@1": 0.62, "Hits@3": 0.84, "Hits@10": 0.99}, source=_NTP),
    dict(dataset="nations", model="NTP", MRR=0.75, **{"Hits@1": 0.62, "Hits@3": 0.86, "Hits@10": 0.99}, source=_NTP),
    dict(dataset="nations", model="NTPλ", MRR=0.74, **{"Hits@1": 0.59, "Hits@3": 0.89, "Hits@10": 0.99}, source=_NTP),
    dict(dataset="umls", model="ComplEx", MRR=0.89, **{"Hits@1": 0.82, "Hits@3": 0.96, "Hits@10": 1.00}, source=_NTP),
    dict(dataset="umls", model="NTP", MRR=0.88, **{"Hits@1": 0.82, "Hits@3": 0.92, "Hits@10": 0.97}, source=_NTP),
    dict(dataset="umls", model="NTPλ", MRR=0.93, **{"Hits@1": 0.87, "Hits@3": 0.98, "Hits@10": 1.00}, source=_NTP),
]
SYMBOLIC = ("NTP", "NTPλ")   # the (neuro-)symbolic provers among the rows; ComplEx is a neural link predictor


def published(dataset: str) -> list[dict]:
    """The published rows for one dataset (empty for a graph without any)."""
    return [row for row in PUBLISHED if row["dataset"] == dataset]


def best_published_mrr(dataset: str, models=SYMBOLIC) -> dict | None:
    """The published row with the highest MRR among `models` (None: every model)."""
    rows = [r for r in published(dataset) if models is None or r["model"] in models]
    return max(rows, key=lambda r: r["MRR"]) if rows else None
