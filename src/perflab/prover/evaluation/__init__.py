"""Study 3, a batched and compiled prover evaluation (notebooks/03_eval): padding vs recompiles, batch size, where
a step's time goes, the memory model. (Link prediction on the real graphs: `links`, notebooks/03b_links.)

    params      EvalParams: the notebook's parameters
    (oracle)    core.reference's prover: the engine library's, which the checks hold the engine to
    baseline    score_candidates: the seed's loop, each chunk at its own size
    optimized   score_candidates: every chunk padded to the batch, out-of-memory halving
    evaluate    evaluate_with_corruptions: candidates scored by a version, ranked
    checks      the engine, provability, a sync-free step, ranks across batch sizes
    claims      CLAIMS: seed 001's claims and issue 16's targets, as data (each names what measures it)
    study       the notebook's calls in order, Findings and evidence; IMPLS names the versions
    recompiles  padded vs unpadded tail chunks: graphs compiled after warm-up
    sweep       the batch sweep in paired rounds, the ratios its claims judge, its figure
    profiles    where a step's time goes
"""
