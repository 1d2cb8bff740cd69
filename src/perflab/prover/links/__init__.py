"""Link prediction on knowledge graphs (study 3's ranking of real graphs): a sub-room of the prover.

    datasets.py        the graphs: Kinship, Nations, UMLS (vendored in benchmarks/), a TSV or facts folder, the family graph
    mining.py          closed-path rules of length 1-2 mined from the training facts (AMIE's measures); paths3.py: length 3
    embeddings.py      ComplEx with reciprocal relations, trained on the training facts
    search.py          the beam search: every proof of two steps, fixed shapes, no host read
    combine.py         the embedding's score plus a proof bonus, fitted on valid
    ranking.py         corruptions, ranks under three tie rules, MRR and Hits@k (also 03's greedy evaluation's)
    benchmark_eval.py  the filtered protocol of Rocktäschel & Riedel 2017, the published tables, the engine's ceiling
    predict.py         the whole evaluation: evaluate_link_prediction
    protocols.py       the table beside the published rows, and the sentences around it

It stands on the prover's core (`..kg`, `..engine`, `..step`, `..rollout`, `..evaluate`); the core imports only
`ranking` from here.
"""
