"""The battery of claims of known truth (perflab.runner.battery), short: the verdict rule under a load the test starts.

`perflab battery` runs the full one (README: "How far a verdict can be trusted"); here four cases, twice each, with
two busy processes on the machine: the A/A pair never "holds" and no verdict is wrong. Speed is not asserted: a
verdict may be "within noise" on a slow machine, never the opposite of the truth."""
import os

import psutil
import pytest

from perflab.runner import battery as bt


def test_the_background_load_runs_inside_the_block_and_is_gone_after_it_even_on_an_error():
    with pytest.raises(RuntimeError):
        with bt.background_load(2) as procs:
            pids = [p.pid for p in procs]
            assert all(psutil.Process(pid).is_running() for pid in pids)
            raise RuntimeError("inside")
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(ValueError, match="n must be >= 0"):
        with bt.background_load(-1):
            pass


def test_the_cases_know_their_truth():
    aa, fast = bt.CASES[0], bt.CASES[2]
    assert (aa.true_speedup, aa.truth, round(aa.distance, 3)) == (1.0, "does not hold", 0.1)
    assert (fast.true_speedup, fast.truth, round(fast.distance, 3)) == (1.5, "holds", 0.25)
    assert bt.Case(75, 100, at_most=0.9).truth == "holds"


@pytest.mark.slow
def test_paired_verdicts_under_load_are_never_wrong():
    with bt.background_load(2):
        rows = bt.run_battery(bt.SHORT, reps=2, budget=1.0, rules=("paired",))
    assert len(rows) == 8
    wrong = [r for r in rows if r["outcome"] == "wrong"]
    assert not wrong, wrong
    assert all(r["verdict"] != "holds" for r in rows if r["case"] == bt.CASES[0].name)
    table = bt.summary_table(rows)
    assert table[0]["rule"] == "paired" and table[0]["verdicts"] == 8 and table[0]["wrong"] == 0.0
    assert "| paired | 8 |" in bt.markdown(table)


def test_the_other_two_rules_run_and_unknown_ones_are_refused():
    rows = [bt.judge_case(bt.CASES[7], rule, budget=0.4) for rule in ("criterion", "old")]
    assert [r["rule"] for r in rows] == ["criterion", "old"]
    assert all(r["verdict"] in ("holds", "does not hold", "within noise") for r in rows)
    with pytest.raises(ValueError, match="unknown rule 'new'"):
        bt.judge_case(bt.CASES[0], "new")
    assert bt.upper_bound(0, 300) == pytest.approx(0.00994, abs=1e-4)   # rule of three: ~3/n


def test_the_command_refuses_bad_arguments(tmp_path, capsys):
    from perflab.runner.cli import main

    assert main(["battery", "--rules", "paired,nope", "--out", str(tmp_path)]) == 2
    assert "unknown rule(s) ['nope']" in capsys.readouterr().err
    assert main(["battery", "--reps", "0", "--out", str(tmp_path)]) == 2


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_the_command_writes_its_table(tmp_path, capsys):
    from perflab.runner.cli import main

    assert main(["battery", "--short", "--reps", "1", "--budget", "0.5", "--load", "1", "--rules", "paired",
                 "--out", str(tmp_path)]) == 0
    md = (tmp_path / "BATTERY.md").read_text()
    assert "| paired | 4 |" in md and (tmp_path / "battery.jsonl").read_text().count("\n") == 4
