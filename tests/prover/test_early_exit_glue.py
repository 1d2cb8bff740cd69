"""04's claim glue (issue 48's planted bugs): the headline's one decision judges every recycle claim, and the share of
the ideal is that decision times the useful share of full's rows, on a decision of known value (decide_speedup stood
in for: nothing is timed). Written against today's `study.evidence`; the refactor of each study's evidence into typed
findings will move it."""
from types import SimpleNamespace

import pytest
import torch

from perflab.kit.verdicts import Decision, Measured, judge
from perflab.prover.early_exit import claims, study
from perflab.prover.early_exit.params import EarlyExitParams

CPU = torch.device("cpu")


def _ladder():
    """The ladder (built, not run) and stand-ins for what `time_strategies` measured: full ran 400 rows of which 96
    were wasted, each strategy's table median."""
    w = study.ladder_workload(48, max_depth=8, max_derived=6, device=CPU, seed=0)
    ms = {s: SimpleNamespace(median=t) for s, t in (("full", 4e-3), ("recycle", 1.2e-3), ("masked", 3e-3),
                                                    ("compact", 2e-3), ("bucketed", 1.5e-3))}
    full = SimpleNamespace(slot_steps=400, wasted_slot_steps=96, steps_executed=25, score=torch.zeros(48))
    return w, ms, {"full": full, "recycle": SimpleNamespace(steps_executed=31)}


def _decision(value: float, low: float, high: float, **rule) -> Decision:
    """A decision of known value made against `rule` (as decide_speedup makes one)."""
    rule = {k: rule.get(k) for k in ("at_least", "at_most", "partly")}
    return Decision(judge(Measured(value, low, high), **rule), value, low, high, 20, 0.4, 0.99, "speedup", *rule.values())


def test_the_ideals_share_is_recycle_over_full_times_the_useful_share(monkeypatch):
    w, ms, res = _ladder()
    def decide_speedup(a, b, *, max_run_time, device, min_rounds=0, **rule):
        return _decision(3.4, 3.2, 3.6, **rule)
    monkeypatch.setattr(study, "decide_speedup", decide_speedup)
    cfg = EarlyExitParams(batch=16, n_candidates=48, min_bucket=4, max_depth=8, verdict_time=0.3)
    found = study.evidence(SimpleNamespace(cfg=cfg, device=CPU), w, ms=ms, res=res, busy=[], idle=[],
                           n_shapes={"compact": 9, "bucketed": 3}, one_per_bucket=True)
    share = (400 - 96) / 400
    assert found["wasted"][0] == Measured.exact(share)
    ideal = found["target_ideal"][0]
    assert (ideal.value, ideal.low, ideal.high) == pytest.approx((3.4 * share, 3.2 * share, 3.6 * share))
    for c in study.RECYCLE:                         # one decision, rejudged against each recycle claim's threshold
        assert found[c.key][0].measured == Measured(3.4, 3.2, 3.6), c.key
    rows = {r["key"]: r for r in claims.CLAIMS.judge(found, cfg=cfg, device=CPU)}
    assert rows["target_ideal"]["value"] == pytest.approx(3.4 * share)
