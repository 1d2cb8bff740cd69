"""Issues 23's and 33's targets for link prediction on real graphs, as data (`perflab.kit.claims`), and what judges each. They
are judged in notebooks/03_eval beside study 3's claims (`evaluation.claims.EVAL_CLAIMS`): the notebook joins both
tables' rows, and `headline` picks the run's one-line finding from either.

`LINK_CLAIMS` is checked against the notebook's parameters (`evaluation.params.EvalParams`) when this module is
imported. A whole-split target's setup is {"n_queries": 0}; a run on fewer triples is "not tested here".
How each is measured (`perflab.kit.verdicts`, 99% intervals): the throughput (kg_speed, kg_speed_gpu, kg_speed_5k)
by `decide_rate` over batch-sized groups of the test scoring (warm: their total candidates over their total
seconds); the MRRs, the proofs' gain and the tie share by `Measured.exact`.
"""
from __future__ import annotations

from ...kit.claims import Claim, Claims
from ...kit.verdicts import Measured, decide_rate
from ..core.datasets import graph_label
from ..evaluation.params import EvalParams
from . import predict
from .benchmark_eval import published_mrr

I23, I33 = "issue 23", "issue 33"

LINK_CLAIMS = Claims(
    Claim("kg_mrr", "target: on the whole test split, realistic MRR at or above NTPλ's published figure on at least "
          "two of Kinship (0.80), Nations (0.74) and UMLS (0.93)", ">= NTPλ", at_least=0.0,
          setup={"n_queries": 0}, source=I23, why_not="a graph without a published NTPλ figure",
          metric="realistic filtered MRR on the whole test split minus NTPλ's published MRR of the graph run"),
    Claim("kg_rules", "target: above the mined rules alone on all three graphs", "> rules alone", at_least=0.001,
          source=I23, why_not="a graph without mined rules",
          metric="realistic MRR minus the mined rules' realistic MRR on the same test triples"),
    Claim("kg_ties", "target: at most 5% of the positives' ranks tie with a failed corruption", "<= 5%",
          at_most=0.05, source=I23,
          metric="share of positives whose fitted score equals that of a corruption the search did not prove"),
    Claim("kg_speed", "target: whole-split evaluation on the CPU defaults at 1,000 candidates/s or more", ">= 1,000/s",
          at_least=1e3, setup={"device": "cpu", "n_queries": 0}, source=I23,
          metric="candidates per second of the test scoring (search + embedding), warm: total candidates over total "
                 "seconds of batch-sized groups of the whole split's test triples (a group's padding counted against "
                 "it)"),
    Claim("kg_speed_gpu", "target: whole-split evaluation on the GPU preset at 100k candidates/s or more", ">= 100k/s",
          at_least=1e5, setup={"device": "cuda", "n_queries": 0}, source=I23,
          metric="candidates per second of the test scoring (search + embedding), warm: total candidates over total "
                 "seconds of batch-sized groups of the whole split's test triples (a group's padding counted against "
                 "it)"),
    Claim("kg_speed_5k", "target: whole-split evaluation on this CPU at 5,000 candidates/s or more, near its floor",
          ">= 5,000/s", at_least=5e3, setup={"device": "cpu", "n_queries": 0}, source=I33,
          metric="candidates per second of the test scoring (search + embedding), warm: total candidates over total "
                 "seconds of batch-sized groups of the whole split's test triples (a group's padding counted against "
                 "it)"),
    Claim("kg_proofs", "target: the proofs add at least +0.01 realistic MRR over ComplEx alone (Nations and UMLS; "
          "Kinship as far as honest fitting allows)", ">= +0.01 MRR", at_least=0.01, setup={"n_queries": 0},
          source=I33, why_not="the gain is a whole test split's (a slice of it ranks other triples)",
          metric="realistic MRR of the combination fitted on valid minus ComplEx alone's, on the whole test split"),
    headline="kg_mrr", params=EvalParams)
# looked up at import: a misspelt key fails first
KG_SPEED = (LINK_CLAIMS["kg_speed"], LINK_CLAIMS["kg_speed_gpu"], LINK_CLAIMS["kg_speed_5k"])


def measure_real_graph(kg, lp, dataset: str | None, cfg, device) -> dict:
    """{claim key: (Measured, Decision or None, sentence)} for the link-prediction claims from `links.predict`'s
    result `lp` on graph `kg` (`dataset`: the benchmark's name, None for a graph without mined rules). The
    throughput is decided (`decide_rate`, cfg.verdict_time) over warm samples of the test scoring where the
    run is the target's setup (`links.predict.scoring_sampler`: batch-sized groups of the split, cycled); one pass
    (lp's) is only reported."""
    name, dt = graph_label(cfg.kg), device.type
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
    (`evaluation.claims.EVAL_CLAIMS`' speed_5x)."""
    return "kg_mrr" if lp is not None and dataset and published_mrr(dataset, "NTPλ") is not None else "speed_5x"
