"""mystudy: a perflab study, made by `perflab new mystudy`.

Its worked example, to replace with your own code: k-means (Lloyd's algorithm) whose centroid update asks the host
once per cluster (`baseline.py`), and the same update without asking (`optimized.py`). One module per job:

    params.py     the notebook's parameters: one dataclass, the only schema (`perflab run -p` checks against it)
    data.py       seeded inputs
    reference.py  the oracle: the simplest correct version, in float64
    baseline.py   the slow pattern, as it is usually first written
    optimized.py  the fast version, with the baseline's signature
    checks.py     the correctness checks: every version against the oracle, fresh inputs (`checks.correctness`)
    study.py      what the notebook calls, by role: inputs, counts, benchmark, plot, evidence (and IMPLS)
    claims.py     the claims as data (`perflab.kit.claims`), checked when imported
"""
