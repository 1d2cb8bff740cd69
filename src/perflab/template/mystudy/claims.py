"""The study's claims as data, each beside the rule that gives its verdict (`perflab.verdicts.judge`).

A claim is a number and a threshold: the measured value must be at least `at_least`. The measurement carries an
interval (a count is exact; a speedup's runs from the baseline's p20 over the optimized p80 to the baseline's p80
over the optimized p20), and the verdict reads the whole interval: "holds" when all of it is at or above the
threshold, "does not hold" when all of it is below, "within noise" when it straddles the threshold. So a claim
does not flip between two runs on a noisy machine: it says that the machine cannot tell."""
from __future__ import annotations

import dataclasses
import math

from perflab.bench import Measurement, speedup, speedup_range
from perflab.verdicts import Measured, judge


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    text: str         # the claim, as you would say it
    claimed: str      # its number, as written
    at_least: float   # the rule: the measured value is at least this


CLAIMS = (
    Claim("syncs", "The optimized k-means makes at least 10x fewer host syncs per iteration", ">= 10x fewer", 10.0),
    Claim("speed", "The optimized k-means is at least 2x faster", ">= 2x", 2.0),
)
HEADLINE = "speed"  # the claim `perflab report` shows first for this study


def measurements(syncs: dict, times: dict[str, Measurement], k: int,
                 device_kind: str) -> dict[str, tuple[Measured, str]]:
    """Each claim's measurement, and the sentence that says what it is: `syncs` from `study.syncs_per_iteration`,
    `times` one Measurement per version at `k` clusters."""
    b, o = syncs["baseline"]["per_iteration"], syncs["optimized"]["per_iteration"]
    fewer = b / o if o else math.inf
    v = speedup(times["baseline"], times["optimized"])
    lo, hi = speedup_range(times["baseline"], times["optimized"])
    return {"syncs": (Measured.exact(fewer), f"{b:g} -> {o:g} host syncs per iteration at k={k}: {fewer:.3g}x fewer"),
            "speed": (Measured(v, min(lo, v), max(hi, v)),
                      f"{v:.2f}x (p20-p80 {lo:.2f}x to {hi:.2f}x) per call at k={k} on {device_kind}")}


def assess(syncs: dict, times: dict[str, Measurement], k: int, device_kind: str) -> list[dict]:
    """One row per claim, as `perflab.verdicts.log_claims` takes it: claim, claimed, measured, verdict, the rule and
    the interval it was judged on."""
    found = measurements(syncs, times, k, device_kind)
    rows = []
    for c in CLAIMS:
        m, sentence = found[c.key]
        rows.append({"claim": c.text, "claimed": c.claimed, "measured": sentence,
                     "verdict": judge(m, at_least=c.at_least), "rule": f"measured >= {c.at_least:g}",
                     "value": m.value, "low": m.low, "high": m.high})
    return rows


def headline() -> str:
    return next(c.text for c in CLAIMS if c.key == HEADLINE)
