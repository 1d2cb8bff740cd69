"""The study's claims, as data (`perflab.kit.claims`): each with its number as claimed and its rule, and the setup it is
about where its text names one. Checked here, when this module is imported (the notebook's first cell, and the
tests): an unknown field, a setup key that is not a parameter of Params, or a headline that is no claim raises a
ClaimError that names the claim and what is allowed, before anything is timed.

The notebook judges them with `card.judge(study.evidence(run, found))`: the whole measured interval on the claim's side
of its threshold "holds", the whole of it on the other side "does not hold", an interval across the threshold
"within noise" (the machine could not tell in `verdict_time` seconds); a run at another setup than the claim's
reads "not tested here (measured at k=128)". `perflab report` shows the verdicts beside what was measured."""
from __future__ import annotations

from perflab.kit.claims import Claim, Claims

from .params import Params

CLAIMS = Claims(
    Claim("syncs", "The optimized k-means makes at least 10x fewer host syncs per iteration", ">= 10x fewer",
          at_least=10, unit="x", measured_by="study.counts",
          metric="host syncs per iteration, baseline over optimized, counted"),
    Claim("speed", "The optimized k-means is at least 2x faster at k=32 clusters", ">= 2x", at_least=2, unit="x",
          setup={"k": 32}, measured_by="study.decide_speed",
          metric="time per call, baseline over optimized, in paired rounds"),
    headline="speed",  # the claim `perflab report` shows first for this study
    params=Params,
)
