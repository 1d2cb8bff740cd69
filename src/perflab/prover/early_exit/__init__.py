"""Study 4, per-query early exit (notebooks/04_early_exit): stop paying for finished proofs.

    params      EarlyExitParams: the notebook's parameters
    reference   the oracle: the seed's loop's proofs (and the ladder's designed lengths)
    baseline    rollout: the seed's loop (core.rollout.full)
    optimized   rollout: recycled slots fed from a device queue (core.rollout.recycle)
    checks      every version gives every candidate the same proof
    claims      CLAIMS: seed 001's claims and issue 16's targets, as data
    study       the workloads and measurements, each filling the notebook's `Findings`, and `evidence(run, found)`
                for card.judge; IMPLS names the five versions (masked, compact, bucketed between)
    workloads   the ladder (designed, seed-like proof lengths) and study 3's candidates
    profiles    launches and host reads per step of each version
    figures     the notebook's figures and tables, from its findings
"""
