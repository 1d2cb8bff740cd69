"""04_early_exit's claims (`early_exit.claims`) on the one claims kit: what the measuring code produces is what
`Claims.judge` takes (the keys match), each claim is about the setup it names, the either-way ratio, and the
agreement check's detail. No timing or timed verdict is asserted."""
import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from perflab.kit.claims import Claims
from perflab.kit.verdicts import Decision, Measured, decide_speedup
from perflab.prover.early_exit import checks, claims, study
from perflab.prover.early_exit.params import EarlyExitParams

CPU = torch.device("cpu")
CUDA = SimpleNamespace(type="cuda")  # a device type only: nothing runs on it


def test_the_claims_are_kit_claims_checked_against_the_notebooks_parameters():
    assert isinstance(claims.CLAIMS, Claims) and claims.CLAIMS.headline == "early_exit"
    assert dict(claims.CLAIMS["target_4x"].setup) == {"device": "cuda"}
    assert all(c.metric for c in claims.CLAIMS)     # what is measured, in words


def test_either_way():
    e = study.either_way(Measured(0.8, 0.7, 0.9))
    assert (e.value, e.low, e.high) == pytest.approx((1.25, 1 / 0.9, 1 / 0.7))
    assert study.either_way(Measured(1.1, 0.95, 1.2)).low == 1.0     # the interval holds 1
    assert study.either_way(Measured(1.0, -math.inf, math.inf)).high == math.inf


@pytest.fixture(scope="module")
def ladder():
    w = study.ladder_workload(48, max_depth=8, max_derived=6, device=CPU, seed=0)
    ms, res, _ = study.time_strategies(w, 16, 4, rounds=1)
    return w, ms, res


@pytest.mark.parametrize("device", [CPU, CUDA], ids=["cpu", "cuda"])
def test_judge_takes_what_04s_measuring_code_produces(ladder, device, monkeypatch):
    w, ms, res = ladder
    if device is CUDA:                                                 # the decisions run on this CPU all the same
        monkeypatch.setattr(study, "decide_speedup", lambda *a, device, **kw: decide_speedup(*a, **kw))
    cfg = EarlyExitParams(batch=16, n_candidates=48, min_bucket=4, max_depth=8, verdict_time=0.3)
    busy, idle = [0.002] * 12, [0.0021] * 30
    run = SimpleNamespace(cfg=cfg, device=device)
    found = study.evidence(run, w, ms=ms, res=res, busy=busy, idle=idle, n_shapes={"compact": 9, "bucketed": 3},
                           one_per_bucket=True)
    rows = {r["key"]: r for r in claims.CLAIMS.judge(found, cfg=cfg, device=device)}
    assert set(rows) == set(claims.CLAIMS.keys)
    lead = "target_3x" if device is CPU else "target_4x"
    assert isinstance(found[lead][0], Decision) and isinstance(found["early_exit"][0], Decision)
    assert found["early_exit"][0].measured == found[lead][0].measured  # one decision's interval judges both
    # the row carries the decision's rounds (how many fit in 0.3 s is the load's to say: under a load of 8 on two
    # cores none did, mutation/flakes.py's seed 4822)
    assert found["early_exit"][0].rounds == found[lead][0].rounds == rows["early_exit"]["rounds"]
    off = "target_4x" if device is CPU else "target_3x"
    assert rows[off]["verdict"] == "not tested here" and rows[off]["why"] == f"measured on {device.type}"
    decided, skipped = ("bucketed_masked", "bucketed_full") if device is CPU else ("bucketed_full", "bucketed_masked")
    assert isinstance(found[decided][0], Decision) and found[skipped][0] is None
    assert rows["compaction"]["verdict"] == "holds" and rows["v10"]["verdict"] == "not tested here"
    m = found["flat_step"][0]                                          # a step's cost, either way: >= 1
    assert isinstance(m, Measured) and 1.0 <= m.low <= m.value and "of its rows active" in found["flat_step"][1]


@dataclasses.dataclass
class _Result:                  # the fields of a RolloutResult that the agreement check reads
    steps: torch.Tensor
    proven: torch.Tensor
    score: torch.Tensor
    records: torch.Tensor


def test_the_idle_step_has_few_rows_active_and_both_steps_leave_their_inputs(ladder):
    w = ladder[0]
    busy, idle, share = study.step_fns(w, 16, 0.1)
    assert share <= 0.1
    a, b = idle(), idle()                                              # the same input: the same step, twice
    assert torch.equal(a.depth, b.depth) and float((~busy().done).float().mean()) < 1.0   # the ladder: 1-step proofs


def test_a_failed_check_says_what_was_measured():
    full = _Result(torch.tensor([1, 2, 3]), torch.tensor([True, False, True]), torch.tensor([0.0, -1.0, -2.0]),
                   torch.ones(3, dtype=torch.long))
    c = checks.strategies_match("ladder", {"full": full, "recycle": dataclasses.replace(full, steps=torch.tensor([1, 2, 4]))})
    assert not c.passed and c.detail.startswith("1 of 3 candidates differ") and "'recycle': 1" in c.detail
    assert checks.strategies_match("ladder", {"full": full}).detail == \
        "0 of 3 candidates differ in any of 1 strategies (allowed 0)"


def test_one_graph_per_bucket_fails_on_a_bucket_compiled_twice_or_a_version_that_recompiles():
    ok = {"full": 1, "masked": 1, "compact": 5, "bucketed": 3, "recycle": 1}
    assert checks.one_graph_per_bucket(ok, [16, 8, 4]).passed
    twice = checks.one_graph_per_bucket({**ok, "bucketed": 4}, [16, 8, 4])
    assert not twice.passed and twice.detail == "bucketed 4 graphs for 3 buckets; full, masked, recycle 1, 1, 1"
    assert not checks.one_graph_per_bucket({**ok, "recycle": 2}, [16, 8, 4]).passed
    assert not checks.one_graph_per_bucket({**ok, "masked": 0}, [16, 8, 4]).passed
