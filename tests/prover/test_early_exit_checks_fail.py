"""04's correctness checks (`prover.early_exit.checks`), the ones the notebook prints PASS/FAIL for: what each counts
as a disagreement, the counts they print on a small ladder and family workload, and that each fails, naming what
differs, when a strategy loses a proof, moves a score, writes an outcome twice, takes the wrong number of steps or
changes a rank. A check that cannot fail would let every such bug through."""
import dataclasses

import pytest
import torch

from perflab.prover.core.data import family_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy
from perflab.prover.core.ranking import CandidateSet, corruptions
from perflab.prover.core.rollout import RolloutResult
from perflab.prover.core.step import GreedyStep
from perflab.prover.early_exit import checks, study


def _result(steps, proven, score, records):
    return RolloutResult(torch.tensor(score), torch.tensor(proven), torch.tensor(steps),
                         records=torch.tensor(records, dtype=torch.long))


def test_a_disagreement_is_any_of_steps_outcome_score_or_records_per_candidate():
    """Against full: another step count, outcome, a score beyond 1e-5 (not one within it), an outcome written
    0 or 2 times each count their candidate once; full against itself counts none."""
    full = _result([1, 2, 3, 4, 5, 6], [True, False, True, True, True, True], [-1.0, -100.0, -2.0, -3.0, -4.0, -5.0],
                   [1] * 6)
    runs = {"full": full,
            "steps": dataclasses.replace(full, steps=torch.tensor([1, 2, 4, 4, 5, 6])),
            "outcome": dataclasses.replace(full, proven=torch.tensor([True, True, True, True, True, True])),
            "score": dataclasses.replace(full, score=full.score + torch.tensor([0, 0, 0, 1e-3, 5e-6, 0])),
            "records": dataclasses.replace(full, records=torch.tensor([1, 1, 1, 1, 0, 2])),
            "all": dataclasses.replace(full, steps=torch.tensor([2, 2, 3, 4, 5, 6]),
                                       proven=torch.tensor([True, True, True, True, True, True]),
                                       records=torch.tensor([1, 1, 1, 1, 1, 2]))}
    assert checks.disagreements(runs) == {"full": 0, "steps": 1, "outcome": 1, "score": 1, "records": 2, "all": 3}
    assert checks.agreement(runs) == {"full": True, "steps": False, "outcome": False, "score": False,
                                      "records": False, "all": False}
    c = checks.strategies_match("ladder", runs)
    assert (c.name, c.passed) == ("ladder: all strategies agree", False)
    assert c.detail == ("8 of 6 candidates differ in any of 6 strategies (allowed 0): {'full': 0, 'steps': 1, "
                        "'outcome': 1, 'score': 1, 'records': 2, 'all': 3}")


@pytest.fixture(scope="module")
def workloads():
    ladder = study.ladder_workload(24, max_depth=6, max_derived=6, device=torch.device("cpu"), seed=0)
    kg = family_kg(n_families=2, seed=4)
    engine = UnificationEngine(kg, max_derived=12)
    cs = corruptions(kg, kg.queries["test"][:4], 5, "both", seed=0)
    family = study.Workload("family (study 3 candidates)", GreedyStep(engine, make_policy(kg, seed=0), 5), cs.flat(),
                            graph="family")
    return ladder, family, cs


def test_04s_checks_pass_on_todays_strategies_with_the_counts_the_notebook_prints(workloads):
    """Five checks, all passing, over every version IMPLS names, on both workloads."""
    ladder, family, cs = workloads
    got, res = checks.strategies_agree(ladder, family, cs, batch=8, min_bucket=2)
    longest = int(ladder.lengths.max())
    assert [(c.name, c.passed) for c in got] == [
        ("ladder (24 candidates): all strategies agree", True),
        ("ladder: steps equal the designed proof lengths", True),
        (f"recycle: the plain schedule's steps and busy slots, the longest proof ({longest} steps) queued last", True),
        ("family (24 candidates): all strategies agree", True),
        ("family: ranks equal across strategies up to float rounding", True)]
    assert [c.detail for c in got[:2]] + [got[3].detail, got[4].detail] == [
        "0 of 24 candidates differ in any of 5 strategies (allowed 0)", "0 of 24 differ (allowed 0)",
        "0 of 24 candidates differ in any of 5 strategies (allowed 0)",
        "0 of 20 ranks outside their tie bounds (allowed 0)"]                 # 4 queries x 5 strategies
    assert set(res) == {"ladder", "family"} and set(res["ladder"]) == set(res["family"]) == set(study.IMPLS)
    assert all(len(r.trace) == r.steps_executed > 0 for r in res["ladder"].values())   # traced runs


def _broken(monkeypatch, strategy, change):
    """run_strategies with `strategy`'s results changed by change(result, workload)."""
    real = study.run_strategies

    def run(w, batch, min_bucket, *a, **k):
        out = real(w, batch, min_bucket, *a, **k)
        out[strategy] = change(out[strategy], w)
        return out

    monkeypatch.setattr(checks, "run_strategies", run)


def test_a_strategy_that_loses_a_proof_fails_both_agreement_checks(workloads, monkeypatch):
    """masked reporting its first candidate unproved on both workloads: both agreement checks fail, each naming the
    one candidate and the strategy; the lengths and ranks checks judge full's and every strategy's ranks."""
    ladder, family, cs = workloads

    def lose(r, w):
        proven = r.proven.clone()
        proven[0] = ~proven[0]
        return dataclasses.replace(r, proven=proven)

    _broken(monkeypatch, "masked", lose)
    got, _ = checks.strategies_agree(ladder, family, cs, batch=8, min_bucket=2)
    assert [c.passed for c in got] == [False, True, True, False, True]
    want = ("1 of 24 candidates differ in any of 5 strategies (allowed 0): {'full': 0, 'masked': 1, 'compact': 0, "
            "'bucketed': 0, 'recycle': 0}")
    assert got[0].detail == got[3].detail == want


def test_a_strategy_that_changes_a_rank_fails_the_ranks_check(workloads, monkeypatch):
    """compact scoring the first proved positive far below a failed proof on the family's candidates: its rank falls
    below its tie bounds, and the ranks check counts it (the agreement check fails as well)."""
    ladder, family, cs = workloads

    per_query = cs.mask.shape[1]

    def sink(r, w):
        if w is not family:
            return r
        first = next(i for i in range(0, len(r.score), per_query) if r.proven[i])   # a proved positive
        score = r.score.clone()
        score[first] = -1e4
        return dataclasses.replace(r, score=score)

    _broken(monkeypatch, "compact", sink)
    got, _ = checks.strategies_agree(ladder, family, cs, batch=8, min_bucket=2)
    assert [c.passed for c in got] == [True, True, True, False, False]
    assert got[4].detail == "1 of 20 ranks outside their tie bounds (allowed 0)"


def test_steps_that_are_not_the_designed_lengths_fail_the_lengths_check(workloads):
    """A ladder whose full loop takes another number of steps than the designed proof lengths (here: the designed
    lengths said one longer for three candidates) fails the lengths check with the three counted."""
    ladder, family, cs = workloads
    lengths = ladder.lengths.clone()
    lengths[:3] += 1
    off = dataclasses.replace(ladder, lengths=lengths)
    got, _ = checks.strategies_agree(off, family, cs, batch=8, min_bucket=2)
    assert (got[1].passed, got[1].detail) == (False, "3 of 24 differ (allowed 0)")


def test_a_score_within_1e5_of_zero_is_no_disagreement():
    """Scores near 0 (a proof of log-probability ~0) agree within the absolute 1e-5, not only relative to |score|."""
    full = _result([1, 1], [True, True], [0.0, -1.0], [1, 1])
    near = dataclasses.replace(full, score=torch.tensor([5e-6, -1.0]))
    assert checks.disagreements({"full": full, "near": near}) == {"full": 0, "near": 0}


def _schedule(monkeypatch, change):
    """recycle_schedule with its busy slots changed by change(list); returns the list of schedules it gave."""
    plain, given = checks.recycle_schedule, []

    def schedule(lengths, batch):
        given.append(change(plain(lengths, batch)))
        return given[-1]

    monkeypatch.setattr(checks, "recycle_schedule", schedule)
    return given


def test_the_schedule_check_prints_steps_slot_steps_and_wasted_of_both(workloads, monkeypatch):
    """Recycle's steps, slot-steps and wasted slot-steps beside the schedule's, in that order; a schedule one step
    longer is counted as one step's busy slots differing (not minus one), however the counts read."""
    ladder = workloads[0]
    given = _schedule(monkeypatch, lambda busy: busy)
    ok = checks.recycle_follows_the_schedule(ladder, 8)
    n, busy = len(given[0]), sum(given[0])
    assert ok.passed and ok.detail == (f"{n} steps, {8 * n} slot-steps, {8 * n - busy} wasted (the schedule: {n}, "
                                       f"{8 * n}, {8 * n - busy}); 0 of {n} steps' busy slots differ (allowed 0)")
    _schedule(monkeypatch, lambda busy: busy + [1])
    bad = checks.recycle_follows_the_schedule(ladder, 8)
    assert not bad.passed and bad.detail.endswith(f"(the schedule: {n + 1}, {8 * n + 8}, {8 * n + 7 - busy}); 1 of "
                                                  f"{n + 1} steps' busy slots differ (allowed 0)")


def test_the_schedule_check_fails_on_busy_slots_that_differ_step_by_step_with_the_same_totals(workloads, monkeypatch):
    """A schedule with two steps' busy slots swapped has the same steps, slot-steps and wasted slot-steps as recycle's:
    only the step-by-step comparison sees it, and the check fails on it alone."""
    ladder = workloads[0]

    def swap(busy):
        i = next(i for i in range(len(busy) - 1) if busy[i] != busy[i + 1])
        return busy[:i] + [busy[i + 1], busy[i]] + busy[i + 2:]

    _schedule(monkeypatch, swap)
    bad = checks.recycle_follows_the_schedule(ladder, 8)
    assert not bad.passed and bad.detail.split("; ")[1].startswith("2 of ")


def test_the_ranks_check_counts_a_rank_moved_by_a_score_half_a_unit_off(workloads, monkeypatch):
    """A positive scored 0.5 above a corruption by full and 0.5 below it by compact moves from rank 1 to 2: far
    beyond float rounding (1e-5), so it is outside its tie bounds and counted."""
    ladder, _, _ = workloads
    cs = CandidateSet(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, 3, dtype=torch.long),
                      torch.tensor([[True, True, True]]), torch.tensor([[0.5, 0.1, 0.9]]))
    family = study.Workload("toy", None, torch.zeros(3, 3, dtype=torch.long), graph="toy")
    real = study.run_strategies

    def run(w, batch, min_bucket, *a, **k):
        if w is not family:
            return real(w, batch, min_bucket, *a, **k)
        out = {s: _result([1, 1, 1], [True] * 3, [0.0, -0.5, -3.0], [1] * 3) for s in study.IMPLS}
        out["compact"] = _result([1, 1, 1], [True] * 3, [-1.0, -0.5, -3.0], [1] * 3)
        return out

    monkeypatch.setattr(checks, "run_strategies", run)
    got, _ = checks.strategies_agree(ladder, family, cs, batch=8, min_bucket=2)
    assert (got[4].name, got[4].passed, got[4].detail) == (
        "toy: ranks equal across strategies up to float rounding", False,
        "1 of 5 ranks outside their tie bounds (allowed 0)")


@pytest.mark.parametrize("graphs, passed", [
    ({"bucketed": 3, "full": 1, "masked": 1, "recycle": 1, "compact": 9}, True),
    ({"bucketed": 4, "full": 1, "masked": 1, "recycle": 1, "compact": 9}, False),   # a bucket compiled twice
    ({"bucketed": 3, "full": 2, "masked": 1, "recycle": 1, "compact": 9}, False),   # a tail's shape leaked into full
    ({"bucketed": 3, "full": 1, "masked": 2, "recycle": 1, "compact": 9}, False),
    ({"bucketed": 3, "full": 1, "masked": 1, "recycle": 2, "compact": 9}, False),
    ({"bucketed": 3, "full": 0, "masked": 0, "recycle": 0, "compact": 9}, False),   # nothing compiled: not one each
])
def test_one_graph_per_bucket_fails_on_a_recompile_of_any_version(graphs, passed):
    """Bucketed: one graph per bucket it ran (3 here); full, masked and recycle one each; the detail prints them."""
    c = checks.one_graph_per_bucket(graphs, [8, 16, 32])
    assert (c.name, c.passed) == ("bucketed compiles one graph per bucket; full, masked and recycle one each", passed)
    assert c.detail == (f"bucketed {graphs['bucketed']} graphs for 3 buckets; full, masked, recycle {graphs['full']}, "
                        f"{graphs['masked']}, {graphs['recycle']}")
