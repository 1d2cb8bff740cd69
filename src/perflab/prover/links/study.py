"""What notebooks/03_eval calls for link prediction, in its order (issue 23: rank real graphs as the papers do):

    checks.search_checks(...)                       the search against the breadth-first oracle, sync-free
    lp = predict.evaluate_link_prediction(kg, engine, policy, LinkConfig.of(cfg, batch), rules)
    protocols.summary_lines(lp, ...), protocols.comparison(lp, dataset)   the table beside the published rows
    checks.link_ranks_across_batches(kg, lp, ...)   ranks that do not depend on the search's batch
    claims.measure_real_graph(kg, lp, dataset, cfg, device)   the kg_* claims (`claims.LINK_CLAIMS`)

IMPLS names the versions, baseline first: how a candidate gets its proof score, by the greedy policy's one proof
(the seed's way) or by the beam search. Both are built (engine, policy, LinkConfig) and called `.score(candidates)`;
`predict.cost_per_candidate` times them on the same candidates.
"""
from __future__ import annotations

from . import baseline, optimized

IMPLS = {"baseline": baseline.Prover, "optimized": optimized.Prover}   # baseline first
