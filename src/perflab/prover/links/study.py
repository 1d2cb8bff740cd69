"""What notebooks/03_eval calls for link prediction, in its order (issue 23: rank real graphs as the papers do):

    checks.search_checks(...)                       the search against the breadth-first oracle, sync-free
    lp = predict.evaluate_link_prediction(kg, engine, policy, LinkConfig.of(cfg, batch), rules)
    protocols.summary_lines(lp, ...), protocols.comparison(lp, dataset)   the table beside the published rows
    checks.link_ranks_across_batches(kg, lp, ...)   ranks that do not depend on the search's batch
    found = study.evidence(run, kg, lp, dataset)   the kg_* claims' measurements (`claims.CLAIMS`)
    rows = throughput(kg, engine, policy, lp.model, queries, lp.config, rules)   today's search, the new one, the floor

IMPLS names the versions, baseline first: how a candidate gets its proof score, by the greedy policy's one proof
(the seed's way) or by the beam search. Both are built (engine, policy, LinkConfig) and called `.score(candidates)`;
`predict.cost_per_candidate` times them on the same candidates. SEARCHES names the beam search's own versions,
today's first (issue 33; both kit `Versions`): built (engine, policy, width, depth, compile, backend), called `.score(candidates, batch)`;
`throughput` times them side by side with the floor (`rule_table.py`).
"""
from __future__ import annotations

import functools
import time

import torch

from ...kit.env import synchronize
from ...kit.verdicts import Measured, decide_rate
from ...kit.versions import Versions
from ..core.datasets import graph_label
from . import baseline, optimized, predict, rule_table
from .benchmark_eval import published_mrr
from .claims import CLAIMS
from .params import LinkConfig
from .search import BeamSearch, ClosingSearch, SparseClosingSearch

IMPLS = Versions({"baseline": baseline.Prover, "optimized": optimized.Prover})   # baseline first
SEARCHES = Versions({"expand every step": BeamSearch, "last step closes": ClosingSearch,     # today's first
                     "last step closes, policy where a proof closes": SparseClosingSearch}, what="search")
FLOOR = "floor: ComplEx 1-N + rule table"


def compile_mode(cls, device: torch.device, mode: str) -> str:
    """The compile mode a search version is timed in: the run's, except for a version that reads the host every chunk
    (`HOST_READS`: the CPU's) on a device, which runs eager there: under CUDA graphs it would time a setup nobody
    runs, with its own cold compiles."""
    return "off" if getattr(cls, "HOST_READS", False) and torch.device(device).type != "cpu" else mode


def throughput(kg, engine, policy, model, queries: torch.Tensor, cfg: LinkConfig, rules=None, repeats: int = 5,
               searches: dict = SEARCHES) -> list[dict]:
    """Candidates per second of each search version, and of the floor where `rules` (mined) are given, on both
    sides' filtered candidates of `queries`, side by side in one process. A pass is what the evaluation times
    (`predict.score_split`: the search and the embedding's scoring, candidates built beforehand); each version's
    first pass is untimed (it compiles: `first pass s`), then `repeats` rounds run every version once in turn.
    -> one row per version: candidates, cand/s (median over rounds, p20, p80), the candidates it proves, and
    how many differ from the first version's proofs (the floor: from the first version's, its table's "proved").
    Cost: 1 + repeats passes of every version; today's search runs ~2,000 candidates/s on this CPU (Kinship's whole
    split: ~100 s a pass), so a notebook times a slice of the larger splits (tools/link-throughput.py: --queries)."""
    sides = rule_table.side_candidates(kg, queries, cfg.seed)
    dev = engine.device
    flats = {side: flat.to(dev) for side, (_, flat) in sides.items()}
    n = sum(len(f) for f in flats.values())

    def search_pass(search):
        proven = []
        for side, (cs, _) in sides.items():
            proven.append(search.score(flats[side], cfg.batch).proven.cpu())
            model.candidate_log_probs(queries, side, cs.cands)
        return torch.cat(proven)

    modes = {name: compile_mode(cls, dev, cfg.compile) for name, cls in searches.items()}
    built = {name: cls(engine, policy, cfg.beam, cfg.search_depth, modes[name], cfg.backend)
             for name, cls in searches.items()}
    fns = {name: functools.partial(search_pass, s) for name, s in built.items()}
    extra = {}
    if rules is not None:
        t0 = time.perf_counter()
        table = rule_table.rule_table(kg, rules)
        extra["table build s"] = time.perf_counter() - t0
        fns[FLOOR] = lambda: rule_table.floor_pass(model, table, queries, sides)
    first, proved = {}, {}
    with torch.inference_mode():
        for name, fn in fns.items():
            t0 = time.perf_counter()
            proved[name] = fn()
            synchronize(dev)
            first[name] = time.perf_counter() - t0
        secs = {name: [] for name in fns}
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                synchronize(dev)
                secs[name].append(time.perf_counter() - t0)
    ref = proved[next(iter(searches))]
    if rules is not None:
        proved[FLOOR] = rule_table.proved_by_table(table, torch.cat(list(flats.values())))[0].cpu()
    rows = []
    for name, s in secs.items():
        rate = n / torch.tensor(s, dtype=torch.float64)
        p20, p50, p80 = torch.quantile(rate, torch.tensor([0.2, 0.5, 0.8], dtype=torch.float64)).tolist()
        rows.append({"version": name, "candidates": n, "cand/s": p50, "p20": p20, "p80": p80, "repeats": repeats,
                     "first pass s": first[name], "proved": int(proved[name].sum()),
                     "differ from first": int((proved[name] != ref).sum()), "batch": cfg.batch,
                     **(extra if name == FLOOR else {})})
    return rows


# ---- the claims' evidence (`CLAIMS.judge`) ------------------------------------------------------------------

# looked up at import: a misspelt key fails first
KG_SPEED = (CLAIMS["kg_speed"], CLAIMS["kg_speed_gpu"], CLAIMS["kg_speed_5k"])


def evidence(run, kg, lp, dataset: str | None) -> dict:
    """Each link-prediction claim's measurement and its sentence, keyed by claim (what `CLAIMS.judge` takes), from
    `predict`'s result `lp` on graph `kg` (`dataset`: the benchmark's name, None for a graph without mined rules). The
    throughput is decided (`decide_rate`, cfg.verdict_time) over warm samples of the test scoring where the
    run is the target's setup (`links.predict.scoring_sampler`: batch-sized groups of the split, cycled); one pass
    (lp's) is only reported."""
    cfg = run.cfg
    name, dt = graph_label(cfg.kg), run.device.type
    fit = lp.results["fitted"]
    mrr = fit.metrics["realistic"]["MRR"]
    size = "the whole test split" if lp.whole_split else f"the first {lp.queries} of {lp.test_size} test triples"
    here = (f"realistic MRR {mrr:.3f} (optimistic {fit.metrics['optimistic']['MRR']:.3f}, pessimistic "
            f"{fit.metrics['pessimistic']['MRR']:.3f}) on {size} of kg={name}")
    ntp = published_mrr(dataset, "NTPλ") if dataset else None
    out = {"kg_mrr": (None, f"{here}; no published NTPλ figure for this graph") if ntp is None else
           (Measured.exact(mrr - ntp), f"{here} against NTPλ {ntp:.2f} ({mrr - ntp:+.3f})")}
    if lp.rules_only is None:
        out["kg_rules"] = (None, f"kg={name}: no mined rules")
    else:
        r = lp.rules_only["metrics"]["MRR"]
        out["kg_rules"] = (Measured.exact(mrr - r), f"{here}; the mined rules alone {r:.3f} ({mrr - r:+.3f})")
    alone = lp.results["embedding alone"].metrics["realistic"]["MRR"]
    out["kg_proofs"] = ((None, f"kg={name}: no valid split: ComplEx alone is the score") if not lp.fit_queries else
                        (Measured.exact(mrr - alone), f"{here}; ComplEx alone {alone:.3f} ({mrr - alone:+.3f}, fitted on "
                                                      f"{lp.fit_queries} valid triples)"))
    out["kg_ties"] = (Measured.exact(fit.tie_share), f"{fit.tie_share:.1%} of the positives' ranks tie with a failed "
                      f"corruption on {size} (the prover alone: {lp.results['prover alone'].tie_share:.1%})")
    one = f"one pass: {lp.candidates_per_s:,.0f} candidates/s over {lp.candidates:,} candidates ({size}, {dt})"
    for c in KG_SPEED:
        if c.off_setup(cfg, dt):
            out[c.key] = (None, f"{one}; one pass is not judged")
            continue
        d = decide_rate(predict.scoring_sampler(kg, lp), **c.rule, quantity="candidates/s", max_run_time=cfg.verdict_time,
                        warmup=0)                            # lp's passes warmed the search up
        out[c.key] = (d, f"total candidates over total seconds of {d.rounds} batch-sized groups of the test scoring, "
                         f"warm, cycling through {size} ({dt}; {one})")
    return out


def headline(lp, dataset: str | None) -> str:
    """03's headline claim: the MRR against NTPλ on a benchmark (here), else the compiled-vs-eager speedup
    (`evaluation.claims.CLAIMS`' speed_5x)."""
    return "kg_mrr" if lp is not None and dataset and published_mrr(dataset, "NTPλ") is not None else "speed_5x"
