"""04_early_exit's claims (`early_exit.claims`) and their glue (`study.evidence(run, found)`): every claim has a unit and
a function that measures it; on findings of known truth every claim is decided at the injected value, in its unit,
with the verdict that value gives (on a CPU and on a GPU run); the decisions time the right pair, baseline first; the
figures and the table show the decided numbers; what the real measuring code produces is what `Claims.judge` takes.
No timing or timed verdict is asserted."""
import dataclasses
import math
from types import SimpleNamespace

import matplotlib
import pytest
import torch

from perflab.kit.bench import from_times
from perflab.kit.card import measured_cell
from perflab.kit.claims import Claims
from perflab.kit.verdicts import Decision, Measured, decide_speedup, judge
from perflab.prover.core.data import family_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy
from perflab.prover.core.ranking import corruptions
from perflab.prover.core.rollout import RolloutResult
from perflab.prover.core.step import GreedyStep
from perflab.prover.early_exit import checks, claims, figures, profiles, study
from perflab.prover.early_exit.params import EarlyExitParams

matplotlib.use("Agg")
CPU = torch.device("cpu")
CUDA = SimpleNamespace(type="cuda")  # a device type only: nothing runs on it
CLAIMS = claims.CLAIMS


class _Log:
    """A results log that keeps nothing."""
    def __getattr__(self, name):
        return lambda *a, **k: None


def _run(device=CPU, **params):
    cfg = EarlyExitParams(**{"batch": 16, "n_candidates": 48, "min_bucket": 4, "max_depth": 8, "verdict_time": 0.3,
                             "rounds": 3, **params})
    return SimpleNamespace(cfg=cfg, device=device, log=_Log())


def test_the_claims_are_kit_claims_checked_against_the_notebooks_parameters():
    assert isinstance(CLAIMS, Claims) and CLAIMS.headline == "early_exit"
    assert dict(CLAIMS["target_4x"].setup) == {"device": "cuda"}
    assert all(c.metric for c in CLAIMS)     # what is measured, in words


@pytest.mark.parametrize("key", CLAIMS.keys)
def test_every_claim_has_a_unit_and_names_the_function_that_measures_it(key):
    c = CLAIMS[key]
    assert c.unit in ("x", "%", "graphs", "ms"), key   # a count names what it counts
    fn = CLAIMS.measurer(key)
    assert callable(fn) and fn.__module__ == "perflab.prover.early_exit.study", (key, c.measured_by)
    assert fn.__name__ == c.measured_by.removeprefix("study.")


def test_either_way():
    e = study.either_way(Measured(0.8, 0.7, 0.9))
    assert (e.value, e.low, e.high) == pytest.approx((1.25, 1 / 0.9, 1 / 0.7))
    assert study.either_way(Measured(1.1, 0.95, 1.2)).low == 1.0     # the interval holds 1
    assert study.either_way(Measured(1.0, -math.inf, math.inf)).high == math.inf


# ---- findings of known truth ---------------------------------------------------------------------------------

def _decision(value: float, low: float, high: float, **rule) -> Decision:
    """A decision of known value made against `rule`, as decide_speedup makes one."""
    rule = {k: rule.get(k) for k in ("at_least", "at_most", "partly")}
    return Decision(judge(Measured(value, low, high), **rule), value, low, high, 20, 0.4, 0.99, "speedup",
                    *rule.values(), calls=(1, 4))


def _result(slot_steps, wasted, steps, shapes=1, n=48):
    """A traced run's counts: `slot_steps` rows over `steps` steps, `wasted` of them, `shapes` distinct batch sizes."""
    trace = [(1e-3 * (1 + i % 3), 16 - i % shapes, 8) for i in range(steps)]
    return RolloutResult(torch.zeros(n), torch.ones(n, dtype=torch.bool), torch.ones(n, dtype=torch.long),
                         steps_executed=steps, slot_steps=slot_steps, wasted_slot_steps=wasted, batch=16,
                         records=torch.ones(n, dtype=torch.long), trace=trace)


def _timing(seconds: dict):
    """Three rounds per version at the given mean time (full's +-10% a round, the others' +-5%)."""
    ms = {s: from_times([t * f for f in ((0.9, 1.0, 1.1) if s == "full" else (1.0, 0.95, 1.05))], label="ladder",
                        description=s) for s, t in seconds.items()}
    return study.Timing(ms, dict.fromkeys(seconds, 1.0))


SECONDS = {"full": 1.2, "masked": 1.2, "compact": 0.6, "bucketed": 0.7, "recycle": 0.35}


@pytest.fixture(scope="module")
def workloads():
    ladder = study.ladder_workload(48, max_depth=8, max_derived=6, device=CPU, seed=0)
    kg = family_kg(n_families=2, seed=4)
    cs = corruptions(kg, kg.queries["test"][:4], 5, "both", seed=0)
    family = study.Workload("family (study 3 candidates)", GreedyStep(UnificationEngine(kg, max_derived=12),
                                                                     make_policy(kg, seed=0), 5), cs.flat(),
                            graph="family")
    return study.Workloads(ladder, family, cs)


def _known(workloads, device) -> study.Findings:
    """Findings of known truth: full computed 400 rows of which 100 useful (25%); compact ran 9 batch shapes and
    bucketed 3; recycle over full 3.40x [3.20, 3.60] decided against the run's lead claim; masked over bucketed
    1.70x [1.60, 1.80] (CPU) or full over bucketed 1.20x [1.10, 1.30] (GPU); an idle step over a busy one 0.95x
    [0.90, 1.00]; one graph per bucket."""
    cpu = device.type == "cpu"
    lead = CLAIMS["target_3x" if cpu else "target_4x"]
    per = {"full": (400, 300, 25, 1), "masked": (400, 300, 25, 1), "compact": (100, 0, 25, 9),
           "bucketed": (160, 60, 25, 3), "recycle": (128, 28, 8, 1)}
    runs = {s: _result(*v) for s, v in per.items()}
    bucketed = ({"bucketed_masked": _decision(1.7, 1.6, 1.8, **CLAIMS["bucketed_masked"].rule), "bucketed_full": None}
                if cpu else
                {"bucketed_masked": None, "bucketed_full": _decision(1.2, 1.1, 1.3, **CLAIMS["bucketed_full"].rule)})
    return study.Findings(
        workloads=workloads, runs={"ladder": runs, "kg": dict(runs)},
        graphs=study.Graphs({"full": 1, "masked": 1, "compact": 3, "bucketed": 3, "recycle": 1}, [16, 8, 4],
                            "default", "eager", 16),
        launches={k: {s: {"launches_per_step": 300.0} for s in per} for k in ("ladder", "kg")},
        timing={"ladder": _timing(SECONDS), "kg": _timing(SECONDS)},
        recycle=_decision(3.4, 3.2, 3.6, **lead.rule), bucketed=bucketed,
        flat_step=study.StepRatio(_decision(0.95, 0.9, 1.0, **CLAIMS["flat_step"].rule), 0.08))


# {claim: (value, low, high, verdict)} on the CPU default and on a GPU run: the truth the injected findings give
TRUTH = {
    "cpu": {"flat_step": (1 / 0.95, 1.0, 1 / 0.9, "holds"), "wasted": (0.25, 0.25, 0.25, "holds"),
            "early_exit": (3.4, 3.2, 3.6, "holds"), "compaction": (6, 6, 6, "holds"),
            "target_3x": (3.4, 3.2, 3.6, "holds"), "target_4x": (3.4, 3.2, 3.6, "not tested here"),
            "target_ideal": (0.85, 0.8, 0.9, "holds"), "bucketed_masked": (1.7, 1.6, 1.8, "holds"),
            "bucketed_full": (None, None, None, "not tested here"), "v10": (None, None, None, "not tested here")},
    "cuda": {"flat_step": (1 / 0.95, 1.0, 1 / 0.9, "holds"), "wasted": (0.25, 0.25, 0.25, "holds"),
             "early_exit": (3.4, 3.2, 3.6, "holds"), "compaction": (6, 6, 6, "holds"),
             "target_3x": (3.4, 3.2, 3.6, "not tested here"), "target_4x": (3.4, 3.2, 3.6, "partly holds"),
             "target_ideal": (0.85, 0.8, 0.9, "holds"), "bucketed_masked": (None, None, None, "not tested here"),
             "bucketed_full": (1.2, 1.1, 1.3, "holds"), "v10": (None, None, None, "not tested here")},
}


@pytest.mark.parametrize("device", [CPU, CUDA], ids=["cpu", "cuda"])
def test_every_claim_is_decided_at_the_injected_value_in_its_unit(workloads, device):
    truth = TRUTH[device.type]
    assert set(truth) == set(CLAIMS.keys)          # a claim added later needs its truth here
    run = _run(device)
    rows = {r.key: r for r in CLAIMS.judge(study.evidence(run, _known(workloads, device)), cfg=run.cfg, device=device)}
    for c in CLAIMS:
        r, (value, low, high, verdict) = rows[c.key], truth[c.key]
        assert r.unit == c.unit and r.measured_by == c.measured_by, c.key
        assert r.verdict == verdict, (c.key, r.verdict, r.measured)
        if value is None:
            assert r.value is None, c.key
        else:
            assert (r.value, r.low, r.high) == pytest.approx((value, low, high)), c.key
    # the card reads each in its unit: a share as a percentage, a ratio with an x, a count bare
    assert measured_cell(rows["wasted"]) == "25%" and measured_cell(rows["target_ideal"]) == "85.0% [80.0, 90.0]"
    assert measured_cell(rows["early_exit"]) == "3.40x [3.20, 3.60]" and measured_cell(rows["compaction"]) == "6 graphs"
    assert "100 useful of the 400 rows full computed (25.0%)" in rows["wasted"].measured
    assert "compact ran 9 distinct batch shapes" in rows["compaction"].measured and "bucketed 3" in rows["compaction"].measured
    lead = "target_3x" if device is CPU else "target_4x"
    assert "judged against this claim's threshold" in rows["early_exit"].measured
    assert "judged against" not in rows[lead].measured


def test_a_bucket_compiled_twice_fails_bucketed_against_masked_untimed(workloads):
    found = _known(workloads, CPU)
    found.graphs = found.graphs._replace(graphs={**found.graphs.graphs, "bucketed": 4})
    found.bucketed = {"bucketed_masked": None, "bucketed_full": None}     # decide_bucketed timed nothing
    ev = study.evidence(_run(), found)
    assert ev["bucketed_masked"].measured == Measured.exact(0.0)
    rows = {r.key: r for r in CLAIMS.judge(ev, cfg=_run().cfg, device=CPU)}
    assert rows["bucketed_masked"].verdict == "does not hold"


@pytest.mark.parametrize("device", [CPU, CUDA], ids=["cpu", "cuda"])
def test_the_decisions_time_the_right_pair_baseline_first(workloads, device, monkeypatch):
    """Each decision times (baseline, optimized) as its claim reads them, against the claim's rule: full then recycle,
    masked (CPU) or full (GPU) then bucketed, the idle step then the busy one (a swap would invert every ratio)."""
    made = []

    def decide(a, b, *, max_run_time, device, min_rounds=1, **rule):
        made.append((a(), b(), rule))
        return _decision(2.0, 1.9, 2.1, **rule)

    monkeypatch.setattr(study, "decide_speedup", decide)
    monkeypatch.setattr(study, "strategy_fn", lambda w, batch, s, mb: lambda: s)
    monkeypatch.setattr(study, "step_fns", lambda w, batch, at_most: (lambda: "busy", lambda: "idle", 0.08))
    found, run = _known(workloads, device), _run(device)
    study.decide_recycle(run, found)
    study.decide_bucketed(run, found)
    study.decide_flat_step(run, found)
    lead = CLAIMS["target_3x" if device is CPU else "target_4x"]
    bucketed = (("masked", "bucketed", CLAIMS["bucketed_masked"].rule) if device is CPU else
                ("full", "bucketed", CLAIMS["bucketed_full"].rule))
    assert made == [("full", "recycle", lead.rule), bucketed, ("idle", "busy", CLAIMS["flat_step"].rule)]


def test_the_figures_and_the_table_show_the_decided_numbers(workloads):
    """One number per comparison: the main figure's title and recycle's bar are the decision's 3.40x [3.20, 3.60] and
    85.0% [80.0, 90.0] of the ideal (not the rounds' 1.2 / 0.35 = 3.43x); the other bars are the rounds' ratios and
    say so; the slot-steps figure labels full's useful share as the claim has it; the table's note names the
    decided value."""
    import matplotlib.pyplot as plt

    found, run = _known(workloads, CPU), _run()
    fig = figures.strategies(run, found)
    ax = fig.axes[0]
    assert "recycle 3.40x [3.20, 3.60] faster than full: 85.0% [80.0, 90.0] of the ideal" in ax.get_title()
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([1.0, 1.0, 2.0, 1.2 / 0.7, 3.4])
    texts = [t.get_text() for t in ax.texts]
    assert "3.40x [3.20, 3.60]\n85.0% [80.0, 90.0]\nof the ideal" in texts and "2.00x\n50% of\nthe ideal" in texts
    assert "ideal\n4.00x\n(only the\nuseful rows:\n25.0%)" in texts and "target\n>= 3x" in texts
    assert "indicative" in ax.get_xlabel() and "over 3 interleaved rounds" in ax.get_xlabel()
    slots = figures.slot_steps(run, found)
    assert "25 steps\n25.0% useful" in [t.get_text() for t in slots.axes[0].texts]
    step = figures.step_time(run, found)
    assert "0.950x [0.900, 1.00]" in step.axes[0].texts[0].get_text()
    table = figures.strategy_table(run, found)
    assert table.loc[("ladder", "compact"), "vs full (mean of 3 rounds)"].startswith("2.00x [")
    assert "3.40x [3.20, 3.60]" in figures.table_note(run, found) and "Indicative" in figures.table_note(run, found)
    plt.close("all")


def test_a_finding_not_yet_measured_names_the_function_that_measures_it(workloads):
    found = study.Findings(workloads=workloads)
    with pytest.raises(ValueError, match=r"found.runs = study.traced_runs\(run, found\) first"):
        found.useful_share()
    with pytest.raises(ValueError, match=r"found.launches = profiles.launch_counts\(run, found\) first"):
        study.benchmark(_run(), dataclasses.replace(found, runs={}, launches=None))


# ---- the real measuring code --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", [CPU, CUDA], ids=["cpu", "cuda"])
def test_judge_takes_what_04s_measuring_code_produces(workloads, device, monkeypatch):
    if device is CUDA:                                                 # the decisions run on this CPU all the same
        monkeypatch.setattr(study, "decide_speedup", lambda *a, device, **kw: decide_speedup(*a, **kw))
    run = _run(device, rounds=1)
    found = study.Findings(workloads=workloads)
    found.runs = study.traced_runs(run, found)
    assert all(c.passed for c in checks.whole_runs_agree(found))
    found.graphs = study.Graphs({"full": 1, "masked": 1, "compact": 3, "bucketed": 3, "recycle": 1}, [16, 8, 4],
                                "default", "eager", 16)               # count_graphs compiles: its own test
    found.launches = profiles.launch_counts(run, found)
    found.timing = study.benchmark(run, found)
    found.recycle = study.decide_recycle(run, found)
    found.bucketed = study.decide_bucketed(run, found)
    found.flat_step = study.decide_flat_step(run, found)
    ev = study.evidence(run, found)
    rows = {r.key: r for r in CLAIMS.judge(ev, cfg=run.cfg, device=device)}
    assert set(rows) == set(CLAIMS.keys)
    lead = "target_3x" if device is CPU else "target_4x"
    assert isinstance(ev[lead].measured, Decision) and isinstance(ev["early_exit"].measured, Decision)
    assert ev["early_exit"].measured.measured == ev[lead].measured.measured  # one decision's interval judges both
    # the row carries the decision's rounds (how many fit in the budget is the load's to say: under a load of 8 on
    # two cores none did, mutation/flakes.py's seed 4822)
    assert ev["early_exit"].measured.rounds == ev[lead].measured.rounds == rows["early_exit"].rounds
    off = "target_4x" if device is CPU else "target_3x"
    assert rows[off].verdict == "not tested here" and rows[off].why == f"measured on {device.type}"
    decided, skipped = ("bucketed_masked", "bucketed_full") if device is CPU else ("bucketed_full", "bucketed_masked")
    assert isinstance(ev[decided].measured, Decision) and ev[skipped].measured is None
    assert rows["compaction"].verdict == "holds" and rows["v10"].verdict == "not tested here"
    m = ev["flat_step"].measured                                       # a step's cost, either way: >= 1
    assert isinstance(m, Measured) and 1.0 <= m.low <= m.value and "of its rows active" in ev["flat_step"].sentence
    share = found.useful_share()
    assert rows["wasted"].value == share and rows["target_ideal"].value == pytest.approx(found.recycle.value * share)


@dataclasses.dataclass
class _Result:                  # the fields of a RolloutResult that the agreement check reads
    steps: torch.Tensor
    proven: torch.Tensor
    score: torch.Tensor
    records: torch.Tensor


def test_the_idle_step_has_few_rows_active_and_both_steps_leave_their_inputs(workloads):
    w = workloads.ladder
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


def test_the_committed_gpu_run_is_read_from_its_results_log():
    t = figures.gpu_run()
    assert list(t.index) == list(study.IMPLS)
    assert t.loc["full", "vs full"] == "1.00x" and t.loc["recycle", "steps"] == 110 and t.loc["full", "rounds"] == 5
    assert figures.gpu_run("outputs/no-such-run") is None
