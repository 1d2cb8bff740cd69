"""Issues 23's and 33's targets for link prediction on real graphs, as data (`perflab.kit.claims`). They are judged
in notebooks/03_eval beside study 3's claims (`evaluation.claims.CLAIMS`): the notebook joins both tables' rows, and
`study.headline` picks the run's one-line finding from either.

`CLAIMS` is checked against the notebook's parameters (`evaluation.params.EvalParams`) when this module is imported.
A whole-split target's setup is {"n_queries": 0}; a run on fewer triples is "not tested here". How each is measured
(`study.evidence`; `perflab.kit.verdicts`, 99% intervals): the throughput (kg_speed, kg_speed_gpu, kg_speed_5k)
by `decide_rate` over batch-sized groups of the test scoring (warm: their total candidates over their total
seconds); the MRRs, the proofs' gain and the tie share by `Measured.exact`.
"""
from __future__ import annotations

from ...kit.claims import Claim, Claims
from ..evaluation.params import EvalParams

I23, I33 = "issue 23", "issue 33"

CLAIMS = Claims(
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
