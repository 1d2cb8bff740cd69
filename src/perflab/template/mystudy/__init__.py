"""mystudy: a perflab study, made by `perflab new mystudy`.

Its worked example, to replace with your own code: k-means (Lloyd's algorithm) whose centroid update asks the host
once per cluster (`baseline.py`), and the same update without asking (`optimized.py`). One module per job:

    params.py     the notebook's parameters: one dataclass, the only schema (`perflab run -p` checks against it)
    data.py       seeded inputs
    reference.py  the oracle: the simplest correct version, in float64
    baseline.py   the slow pattern, as it is usually first written
    optimized.py  the fast version, with the baseline's signature
    checks.py     the notebook's correctness checks: baseline and optimized against the oracle, fresh inputs
    study.py      the notebook's measurements: host syncs counted, timings declared as data
    claims.py     the claims as data, beside the rule that gives each its verdict
"""
