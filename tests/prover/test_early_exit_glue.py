"""04's claim glue (issue 48's planted bugs): in `study.evidence(run, found)` the share of the ideal is the one recycle
decision times the useful share of full's rows (the ideal's speedup is 1 / share). test_prover_early_exit_claims.py
checks every claim on findings of known truth; here only what reads the ideal, on a useful share (76%) and an
asymmetric interval of its own, from findings built of the few fields `evidence` reads (nothing is run or timed)."""
from types import SimpleNamespace

import pytest
import torch

from perflab.kit.bench import from_times
from perflab.kit.verdicts import Decision, Measured, judge
from perflab.prover.early_exit import claims, study
from perflab.prover.early_exit.params import EarlyExitParams

CPU = torch.device("cpu")


def _decision(value: float, low: float, high: float, **rule) -> Decision:
    """A decision of known value made against `rule` (as decide_speedup makes one)."""
    rule = {k: rule.get(k) for k in ("at_least", "at_most", "partly")}
    return Decision(judge(Measured(value, low, high), **rule), value, low, high, 20, 0.4, 0.99, "speedup", *rule.values())


def _findings(recycle: Decision) -> study.Findings:
    """Full ran 400 rows of which 96 were wasted (76% useful); recycle over full decided at `recycle`."""
    def run(slot_steps=0, wasted=0, steps=25, shapes=1):
        return SimpleNamespace(slot_steps=slot_steps, wasted_slot_steps=wasted, steps_executed=steps,
                               trace=[(1e-3, 16 - i % shapes, 8) for i in range(steps)])
    runs = {"full": run(400, 96), "recycle": run(steps=31), "compact": run(shapes=9), "bucketed": run(shapes=3)}
    ms = {s: from_times([t, t, t], label="ladder", description=s) for s, t in (("full", 1.2), ("masked", 1.2),
                                                                            ("bucketed", 0.7), ("recycle", 0.35))}
    return study.Findings(
        workloads=SimpleNamespace(ladder=SimpleNamespace(name="ladder (48 candidates)", candidates=[None] * 48)),
        runs={"ladder": runs}, graphs=SimpleNamespace(one_per_bucket=True), timing={"ladder": study.Timing(ms, {})},
        recycle=recycle, bucketed={"bucketed_masked": _decision(1.7, 1.6, 1.8, **claims.CLAIMS["bucketed_masked"].rule),
                                   "bucketed_full": None},
        flat_step=study.StepRatio(_decision(0.95, 0.9, 1.0, **claims.CLAIMS["flat_step"].rule), 0.08))


def test_the_ideals_share_is_recycle_over_full_times_the_useful_share():
    cfg = EarlyExitParams(batch=16, n_candidates=48, min_bucket=4, max_depth=8, verdict_time=0.3)
    run = SimpleNamespace(cfg=cfg, device=CPU)
    d = _decision(1.07, 0.9, 1.4, **study.lead_claim(cfg, "cpu").rule)
    found = study.evidence(run, _findings(d))
    share = (400 - 96) / 400
    assert found["wasted"].measured == Measured.exact(share)
    ideal = found["target_ideal"].measured
    assert (ideal.value, ideal.low, ideal.high) == pytest.approx((1.07 * share, 0.9 * share, 1.4 * share))
    for c in study.RECYCLE:                         # the one decision, rejudged against each recycle claim's threshold
        assert found[c.key].measured.measured == d.measured, c.key
    rows = {r.key: r for r in claims.CLAIMS.judge(found, cfg=cfg, device=CPU)}
    assert rows["target_ideal"].value == pytest.approx(1.07 * share)     # 81.3% of the ideal: 70% within noise
    assert rows["target_ideal"].verdict == "within noise"
