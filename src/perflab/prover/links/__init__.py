"""Link prediction on knowledge graphs as the papers rank them (issue 23; notebooks/03_eval, after the evaluation).

    params          LinkConfig: what the evaluation runs with, from the notebook's EvalParams
    reference       the oracle: exhaustive provability (core.reference), the engine's ceiling
    baseline        Prover: one greedy proof per candidate (study 3's loop)
    optimized       Prover: the beam search whose last step is a membership test (search.py)
    checks          the search against the oracle, sync-free; ranks across search batches
    claims          CLAIMS (kg_*), as data (study.evidence measures them)
    study           the notebook's calls in order; IMPLS names the versions
    search          the beam search: every proof of two steps (BeamSearch: today's, fixed shapes, no host read;
                    ClosingSearch: the last step a membership test; SparseClosingSearch: its CPU form)
    rule_table      the floor: 1-N embedding scores and the mined rules' table, proved for all candidates at once
    embeddings      ComplEx with reciprocal relations, trained on the training facts
    combine         the embedding's score plus a proof bonus, fitted on valid
    benchmark_eval  the filtered protocol of Rocktäschel & Riedel 2017, the greedy prover's ranks, the published tables
    predict         the whole evaluation: evaluate_link_prediction
    protocols       the table beside the published rows, and the sentences around it

It stands on the engine library (`..core`) and on study 3's greedy evaluation (`..evaluation`); nothing imports it.
"""
