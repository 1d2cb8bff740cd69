"""Seed 001's theorem prover: one engine library and a room per question (studies 3 and 4 of notebooks/).

    core/         the engine library every room stands on: kg, engine (UnificationEngine), step (GreedyStep), policy,
                  rollout (the rollout loops), batching, reference (the reference prover: every room's oracle),
                  ranking (the ranking protocol), data (synthetic graphs), datasets + benchmarks/ (the real graphs),
                  mining (rules), params (the fields the notebooks share), prepared (a graph, its engine, a trained policy)
    evaluation/   03's question, a batched and compiled evaluation: padding, recompiles, batch size (notebooks/03_eval)
    early_exit/   04's question, per-query early exit: five rollouts of one signature (notebooks/04_early_exit)
    links/        link prediction on real graphs as the papers rank them: search, embedding, the published tables
                  (notebooks/03b_links)

Each room has the rooms of every study: params, reference (its oracle), baseline and optimized (one signature; the
room's study.IMPLS names them), checks, claims, study. Rooms import core and the kit; core imports no room; links
builds on evaluation (its greedy baseline) and nothing imports links (tests/project/test_imports.py).
"""
