"""`perflab report`: it leads with one line per study, shows one execution per study with its own status and
plots, fills the speedup for every implementation, and prints numbers to three significant figures."""
import json

from perflab.kit.results import ResultsLog
from perflab.runner.report import build

CPU = {"device_name": "Some CPU", "host": "h", "torch": "2.13", "commit": "abc", "dirty": False}


def _log(out, study, run_id=None, **kw):
    return ResultsLog(out / "results.jsonl", study=study, stamp=CPU, run_id=run_id, **kw)


def _timing(log, label, case, impl, median_s):
    log.append("measurement", metric=label, label=label, sub_label=case, impl=impl, median_s=median_s,
               iqr_s=median_s / 10, p20_s=median_s * 0.95, p80_s=median_s * 1.05, n=5)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _table(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[1:]]


def test_the_report_leads_with_one_line_per_study(tmp_path):
    a = _log(tmp_path, "a_study", run_id="r-a")
    a.append("run", status="started")
    a.append("claim", claim="10x faster", seed="10x", measured="12.3x", verdict="holds")
    a.append("claim", claim="within 3x of the floor", seed="3x", measured="4.1x [2.9, 5.0]", verdict="within noise")
    a.append("claim", claim="tensor cores", seed="2x", measured="not measured on a CPU", verdict="not tested here")
    a.check("equal to the reference", True)
    a.check("no host syncs", False, "13 host syncs per step (allowed 0)")
    a.headline("optimized 12.3x faster than the baseline per step")
    a.append("run", status="ok", seconds=52.345, cell=None, cells=None, error="")
    b = _log(tmp_path, "b_study", run_id="r-b")
    b.append("claim", claim="fewer syncs", seed="0 syncs", measured="0 syncs per step (13 before)", verdict="fixed")
    text = build(tmp_path)
    assert text.index("## Summary") < text.index("## Environment") < text.index("## Notebooks run")
    rows = {r[0]: r for r in _table(_section(text, "Summary"))}
    assert rows["a_study"] == ["a_study", "ok", "optimized 12.3x faster than the baseline per step",
                               "1 holds, 1 within noise, 1 not tested here",
                               "1/2 pass, **1 FAIL**: no host syncs (13 host syncs per step (allowed 0))", "Some CPU",
                               "r-a"]
    # no headline written: the first claim and its measurement; no status row: derived from its rows, and says so
    assert rows["b_study"][1:4] == ["ok (no status row)", "fewer syncs: 0 syncs per step (13 before)", "1 fixed"]
    runs = {r[0]: r for r in _table(_section(text, "Notebooks run"))}
    assert runs["a_study"][1:4] == ["r-a", "ok", "52.3 s"]
    assert "run outside `perflab run`" in runs["b_study"][5] and "judged its 1 claim(s)" in runs["b_study"][5]


def test_speedup_is_filled_for_every_implementation(tmp_path):
    log = _log(tmp_path, "s")
    for impl, t in (("baseline", 0.0073), ("remap", 0.0075), ("metrics", 0.0064)):  # an ablation: case = change
        _timing(log, "step", impl, impl, t)
    for case, base, opt in (("batch 16", 0.0062, 0.0062), ("batch 64", 0.0069, 0.0062)):  # a sweep
        _timing(log, "step", case, "baseline", base)
        _timing(log, "step", case, "optimized", opt)
    for impl, t in (("no compile", 0.56), ("compiled", 0.15)):  # no baseline: the case's first row
        _timing(log, "whole run", "B=512", impl, t)
    for impl, t in (("remap_host", 6.03e-5), ("remap_unique", 8.77e-5)):  # variants, each its own case
        _timing(log, "label remap", impl, impl, t)
    _timing(log, "batch sweep", "batch=1", "optimized", 0.26)  # a sweep point alone: nothing to compare with
    _timing(log, "batch sweep", "batch=4", "optimized", 0.30)
    rows = _table(_section(build(tmp_path), "s").split("### Timings")[1].split("###")[0])
    got = {(r[0], r[1], r[2]): (r[3], r[7]) for r in rows}
    assert got == {
        ("step", "baseline", "baseline"): ("7.30 ms", "ref"),
        ("step", "remap", "remap"): ("7.50 ms", "0.973x"),
        ("step", "metrics", "metrics"): ("6.40 ms", "1.14x"),
        ("step", "batch 16", "baseline"): ("6.20 ms", "ref"),
        ("step", "batch 16", "optimized"): ("6.20 ms", "1.00x"),
        ("step", "batch 64", "baseline"): ("6.90 ms", "ref"),
        ("step", "batch 64", "optimized"): ("6.20 ms", "1.11x"),
        ("whole run", "B=512", "no compile"): ("560 ms", "ref"),
        ("whole run", "B=512", "compiled"): ("150 ms", "3.73x"),
        ("label remap", "remap_host", "remap_host"): ("60.3 us", "ref"),
        ("label remap", "remap_unique", "remap_unique"): ("87.7 us", "0.688x"),
        ("batch sweep", "batch=1", "optimized"): ("260 ms", ""),
        ("batch sweep", "batch=4", "optimized"): ("300 ms", ""),
    }


def test_values_and_their_context_have_three_significant_figures(tmp_path):
    log = _log(tmp_path, "s")
    log.value("speedup vs baseline", 0.9955123, impl="opt", spread=[0.9916623814676818, 1.1691224627817711])
    log.value("fraction of floor", 0.000678312, floor_s=4.94396162471272e-06)
    log.value("host syncs per step", 13, by_op={"item": 400, "cpu": 400})
    rows = _table(_section(build(tmp_path), "s").split("### Values")[1])
    assert [r[:4] for r in rows] == [
        ["speedup vs baseline", "0.996", "", "impl=opt, spread=[0.992, 1.17]"],
        ["fraction of floor", "6.78e-04", "", "floor_s=4.94e-06"],
        ["host syncs per step", "13", "", "by_op={item: 400, cpu: 400}"]]  # counts stay exact; no run id


def test_each_study_shows_its_latest_execution_with_its_own_status_and_plots(tmp_path):
    first = _log(tmp_path, "s", run_id="20261123-090000-aaaa")
    first.append("run", status="started")
    first.value("answer", 1.0)
    (tmp_path / "s" / first.run_id).mkdir(parents=True)
    (tmp_path / "s" / first.run_id / "curve.png").write_bytes(b"first")
    first.append("run", status="ok", seconds=3.0, cell=None, cells=None, error="")
    second = _log(tmp_path, "s", run_id="20261123-100000-bbbb")  # stopped half-way: no plot yet
    second.append("run", status="started")
    second.value("answer", 2.0)
    second.append("run", status="interrupted", seconds=1.0, cell=4, cells=9, error="KeyboardInterrupt")
    other = _log(tmp_path, "t")
    other.value("answer", 7.0)
    text = build(tmp_path)
    assert "| answer | 2.00 |" in text and "| answer | 1.00 |" not in text and "| answer | 7.00 |" in text
    assert "1 earlier execution(s)" in text and "curve.png" not in text  # never the other execution's plot
    assert "| s | **interrupted** |" in _section(text, "Summary")
    assert "cell 4 of 9: KeyboardInterrupt" in _section(text, "Notebooks run")
    everything = build(tmp_path, all_runs=True)
    assert "| answer | 1.00 |" in everything and "![curve](s/20261123-090000-aaaa/curve.png)" in everything


def test_a_runner_killed_mid_run_says_it_did_not_finish(tmp_path):
    log = _log(tmp_path, "s")
    log.append("run", status="started")
    log.value("answer", 1.0)
    assert "| s | **did not finish** |" in _section(build(tmp_path), "Summary")


def test_logs_written_before_shared_run_ids_still_pair_status_and_rows(tmp_path):
    # then, the runner wrote its status row under an id of its own, after the notebook's rows
    for rid, status_id, value, status in (("old1", "st1", 1.0, "ok"), ("old2", "st2", 2.0, "failed")):
        _log(tmp_path, "s", run_id=rid).value("answer", value)
        row = {"study": "s", "kind": "run", "status": status, "seconds": 1.0, "cell": 3, "error": "boom",
               "run_id": status_id, "params": {}, "env": CPU}
        with open(tmp_path / "results.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
    text = build(tmp_path)
    assert "| answer | 2.00 |" in text and "| s | **failed** |" in _section(text, "Summary")
    assert "cell 3 (0-based, papermill's count): boom" in text


def test_claims_show_their_claimed_number_whether_written_as_claimed_or_as_seed(tmp_path):
    log = _log(tmp_path, "s", run_id="r1")
    log.claim("new-style", claimed="10x", measured="12x", verdict="holds")
    log.append("claim", claim="old-style", seed="2x", measured="1x", verdict="does not hold")  # a row before the rename
    rows = _table(_section(build(tmp_path), "s").split("### Claims, measured\n", 1)[1].split("\n\n", 1)[0])
    assert [r[:3] for r in rows] == [["new-style", "10x", "12x"], ["old-style", "2x", "1x"]]


# ---- issue 30: failed checks in view, status without status rows, earlier verdicts kept, claims drawn ----------

def test_a_failed_check_shows_what_was_measured_before_the_tables(tmp_path):
    log = _log(tmp_path, "s", run_id="r1")
    log.check("equal to the reference", True, "largest error 2.1e-06 (allowed 1e-05)")
    log.check("no host syncs", False, "13 host syncs per step (allowed 0)")
    log.check("same ranks", False)  # a check that did not say what it measured
    log.claim("fast", claimed="2x", measured="1.9x", verdict="within noise")
    text = build(tmp_path)
    assert "**2 FAIL**: no host syncs (13 host syncs per step (allowed 0)); same ranks" in _section(text, "Summary")
    section = _section(text, "s")
    assert section.index("**Failed checks**") < section.index("### Claims, measured")
    assert "- **no host syncs**: 13 host syncs per step (allowed 0)" in section
    assert "- **same ranks**: (no detail logged" in section
    assert "| no host syncs | **FAIL** | **13 host syncs per step (allowed 0)** |" in section
    assert "| equal to the reference | pass | largest error 2.1e-06 (allowed 1e-05) |" in section


def test_a_failed_run_keeps_the_last_judged_verdicts_in_view(tmp_path):
    judged = _log(tmp_path, "s", run_id="20261123-090000-aaaa")
    judged.append("run", status="started")
    judged.claim("2x faster", claimed="2x", measured="2.4x", verdict="holds", value=2.4, low=2.3, high=2.5,
                 at_least=2.0, rule=">= 2")
    judged.headline("2x faster: 2.4x [holds]")
    judged.append("run", status="ok", seconds=30.0, cell=None, cells=None, error="")
    failed = _log(tmp_path, "s", run_id="20261123-100000-bbbb")  # `--params gpu` on a CPU host
    failed.append("run", status="started")
    failed.append("run", status="failed", seconds=2.0, cell=3, cells=14, error="RuntimeError: no CUDA device")
    text = build(tmp_path)
    [row] = _table(_section(text, "Summary"))
    assert row[:4] == ["s", "**failed**", "2x faster: 2.4x [holds] (earlier run 20261123-090000-aaaa)",
                       "earlier run 20261123-090000-aaaa: 1 holds"]
    assert row[6] == "20261123-100000-bbbb"
    assert "cell 3 of 14: RuntimeError: no CUDA device" in _section(text, "Notebooks run")
    earlier = _section(text, "s: earlier run 20261123-090000-aaaa, the latest that judged claims")
    assert "run 20261123-100000-bbbb (**failed**), judged no claims" in earlier and "started " in earlier
    claims = _table(earlier.split("### Claims, measured\n", 1)[1].split("\n\n", 1)[0])
    assert claims == [["2x faster", "2x", "2.4x", "2.40 [2.30, 2.50] against >= 2", "Some CPU", "**holds**"]]
    assert "1 of them shown after their study's latest" in text


def _judged_run(out, run_id, value, verdict, seconds=30.0):
    log = _log(out, "s", run_id=run_id)
    log.append("run", status="started")
    log.claim("2x faster", claimed="2x", measured=f"{value}x", verdict=verdict, value=value, low=value - 0.1,
              high=value + 0.1, at_least=2.0, rule=">= 2")
    log.headline(f"2x faster: {value}x [{verdict}]")
    log.append("run", status="ok", seconds=seconds, cell=None, cells=None, error="")


def test_after_two_judged_runs_and_a_failed_one_the_report_shows_the_last_judged_one_never_an_older(tmp_path):
    """Issue 48: one judged run then a failed one cannot tell the last judged run from the first; two can."""
    _judged_run(tmp_path, "20261123-080000-aaaa", 1.5, "does not hold")
    _judged_run(tmp_path, "20261123-090000-bbbb", 2.4, "holds")
    failed = _log(tmp_path, "s", run_id="20261123-100000-cccc")
    failed.append("run", status="started")
    failed.append("run", status="failed", seconds=2.0, cell=3, cells=14, error="RuntimeError: no CUDA device")
    text = build(tmp_path)
    [row] = _table(_section(text, "Summary"))
    assert row[:4] == ["s", "**failed**", "2x faster: 2.4x [holds] (earlier run 20261123-090000-bbbb)",
                       "earlier run 20261123-090000-bbbb: 1 holds"]
    assert row[6] == "20261123-100000-cccc"
    earlier = _section(text, "s: earlier run 20261123-090000-bbbb, the latest that judged claims")
    claims = _table(earlier.split("### Claims, measured\n", 1)[1].split("\n\n", 1)[0])
    assert claims == [["2x faster", "2x", "2.4x", "2.40 [2.30, 2.50] against >= 2", "Some CPU", "**holds**"]]
    assert "aaaa" not in text and "does not hold" not in text and "1.5" not in text   # the older run, nowhere
    assert "2 earlier execution(s) of these studies left out (1 of them shown" in text
    every = build(tmp_path, all_runs=True)           # --all: each run, its own verdict
    assert "## s (run 20261123-080000-aaaa)" in every and "**does not hold**" in every and "**holds**" in every


def test_the_latest_execution_shows_its_own_verdicts_when_it_judged_after_earlier_ones(tmp_path):
    _judged_run(tmp_path, "20261123-080000-aaaa", 2.4, "holds")
    _judged_run(tmp_path, "20261123-090000-bbbb", 1.5, "does not hold")
    text = build(tmp_path)
    [row] = _table(_section(text, "Summary"))
    assert row[:4] == ["s", "ok", "2x faster: 1.5x [does not hold]", "1 does not hold"]
    assert "earlier run" not in text and "aaaa" not in text


def test_an_execution_without_status_rows_gets_a_status_from_what_it_left(tmp_path):
    _log(tmp_path, "judged").claim("fast", claimed="2x", measured="2.1x", verdict="holds")
    stopped = _log(tmp_path, "stopped")
    stopped.check("equal to the reference", False, "largest error 0.3 (allowed 1e-05)")
    checked = _log(tmp_path, "checked")
    checked.check("equal to the reference", True)
    _log(tmp_path, "bare").value("answer", 1.0)
    # a plain papermill run into the run folder: its executed notebook says how it ended
    log = ResultsLog(tmp_path / "results.jsonl", study="pm", stamp={**CPU, "time": "2026-11-23T09:00:05+00:00"})
    log.value("answer", 2.0)
    cells = [{"cell_type": "code", "metadata": {"tags": ["parameters"], "papermill": {"exception": False}},
              "outputs": [], "source": ""},
             {"cell_type": "code", "metadata": {"tags": ["injected-parameters"], "papermill": {}}, "outputs": [],
              "source": ""},
             {"cell_type": "code", "metadata": {"papermill": {"exception": True}}, "source": "",
              "outputs": [{"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}]},
             {"cell_type": "code", "metadata": {"papermill": {"exception": None}}, "outputs": [], "source": ""}]
    meta = {"papermill": {"input_path": "notebooks/pm.ipynb", "start_time": "2026-11-23T09:00:00.5+00:00",
                          "end_time": "2026-11-23T09:01:00+00:00", "exception": True}}
    (tmp_path / "pm-b512.ipynb").write_text(json.dumps({"cells": cells, "metadata": meta}))
    text = build(tmp_path)
    rows = {r[0]: r for r in _table(_section(text, "Notebooks run"))}
    assert rows["judged"][2] == "ok (no status row)"
    assert rows["stopped"][2] == "**failed** (no status row)" and "'equal to the reference' failed" in rows["stopped"][5]
    assert rows["checked"][2] == "no status" and "1 passing check(s) but no claims" in rows["checked"][5]
    assert rows["bare"][2] == "no status" and "run outside `perflab run`" in rows["bare"][5]
    assert rows["pm"][2] == "**failed** (papermill)"
    assert rows["pm"][5].startswith("cell 2 of 3: ValueError: boom (from the papermill metadata of `pm-b512.ipynb`")
    meta["papermill"].update(exception=None)
    cells[2]["metadata"]["papermill"]["exception"] = False
    (tmp_path / "pm-b512.ipynb").write_text(json.dumps({"cells": cells, "metadata": meta}))
    assert {r[0]: r for r in _table(_section(build(tmp_path), "Notebooks run"))}["pm"][2] == "ok (papermill)"
    meta["papermill"].update(start_time="2026-11-23T09:00:07+00:00")  # started after the rows: another execution
    (tmp_path / "pm-b512.ipynb").write_text(json.dumps({"cells": cells, "metadata": meta}))
    assert {r[0]: r for r in _table(_section(build(tmp_path), "Notebooks run"))}["pm"][2] == "no status"


def _judged_rows(batch: int = 16) -> list[dict]:
    import dataclasses

    from perflab.kit.claims import Claim, Claims
    from perflab.kit.verdicts import Measured

    @dataclasses.dataclass
    class P:
        batch: int = 64

    claims = Claims(Claim("speed", "2x faster", ">= 2x", at_least=2.0, partly=1.2),
                    Claim("syncs", "no host syncs", "0", at_most=0.0, fixed=True),
                    Claim("big", "3x faster at batch 64", ">= 3x", at_least=3.0, setup={"batch": 64}),
                    headline="speed", params=P)
    return claims.judge({"speed": (Measured(2.41, 2.30, 2.55), "2.41x per step"),
                         "syncs": (Measured.exact(0), "0 syncs per step"),
                         "big": (Measured(3.2, 3.0, float("inf")), "3.2x")}, cfg=P(batch=batch), device="cpu")


def test_the_claims_show_their_reason_and_judged_interval_and_are_drawn_beside_the_report(tmp_path, capsys):
    from perflab.kit.claims import log_rows
    from perflab.runner.report import write

    log_rows(_log(tmp_path, "s", run_id="r1"), _judged_rows(), headline="speed")  # the upper bound: inf, logged "inf"
    (tmp_path / "s" / "r1").mkdir(parents=True)
    for plot in ("claims", "speed"):  # the notebook's own plots, its copy of the claims figure among them
        (tmp_path / "s" / "r1" / f"{plot}.png").write_bytes(b"png")
    old = _log(tmp_path, "old", run_id="r2")  # a log from before the kit: no numbers to draw
    old.append("claim", claim="fewer syncs", seed="0 syncs", measured="0 per step", verdict="fixed")
    text = write(tmp_path).read_text()
    rows = _table(_section(text, "s").split("### Claims, measured\n", 1)[1].split("\n\n", 1)[0])
    assert [r[3:] for r in rows] == [
        ["2.41 [2.30, 2.55] against >= 2 (partly: >= 1.2)", "Some CPU", "**holds**"],
        ["0 (exact) against <= 0", "Some CPU", "**fixed**"],
        ["3.20 [3.00, inf] against >= 3", "Some CPU", "**not tested here** (measured at batch=16)"]]
    assert "![s: claims of run r1](claims-s.png)" in _section(text, "s")
    assert "![speed](s/r1/speed.png)" in text and "s/r1/claims.png" not in text  # one claims figure, not two
    assert (tmp_path / "claims-s.png").read_bytes()[:4] == b"\x89PNG"
    assert "No figure: no claim here was judged on a measured interval" in _section(text, "old")
    assert not (tmp_path / "claims-old.png").exists()
    assert "claims-s" not in build(tmp_path)  # build alone draws nothing and links nothing


def test_the_run_table_shows_the_parameters_setup_read_not_those_given(tmp_path):
    runner = _log(tmp_path, "a", run_id="r-a", params={"seq": 96})           # what `perflab run -p seq=96` gave
    runner.append("run", status="started")
    nb = _log(tmp_path, "a", run_id="r-a", params={"seq": 128, "batch": 8})   # what the notebook's setup read
    nb.params_set = {"batch": 8}
    nb.check("equal", True)
    runner.append("run", status="ok", seconds=1.0, cell=None, cells=None, error="")
    b = _log(tmp_path, "b", run_id="r-b", params={"seq": 96})                # a runner whose notebook never set up
    b.append("run", status="started")
    b.append("run", status="failed", seconds=1.0, cell=2, cells=9, error="ImportError: x")
    runs = {r[0]: r for r in _table(_section(build(tmp_path), "Notebooks run"))}
    assert runs["a"][4] == "batch=8 (given: seq=96)"
    assert runs["b"][4] == "seq=96 (as given: setup did not record what it read)"


def test_a_run_outside_git_says_so_in_the_environment_table(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl", study="a", run_id="r",
                     stamp={**CPU, "commit": None, "dirty": None})
    log.check("equal", True)
    [row] = _table(_section(build(tmp_path), "Environment"))
    assert row[4:] == ["not a git checkout", "-"]


def _texts(fig) -> str:
    return "\n".join([ax.get_title(loc="left") for ax in fig.axes]
                     + [t.get_text() for ax in fig.axes for t in [ax.xaxis.label, ax.yaxis.label, *ax.texts]])


def test_a_sweeps_claims_figure_reads_alone_and_its_tables_name_each_point(tmp_path):
    from perflab.runner.report import _study_section
    from perflab.runner.sweep_figures import sweep_claims_figure

    long_claim = ("The optimized evaluation is at least 3x faster than the baseline per candidate, at steady state, "
                  "compiled and captured, on the GPU preset's batch")
    rows = []
    for batch, (v, lo, hi, verdict) in {64: (2.1, 1.9, 2.3, "does not hold"), 512: (4.5, 4.1, 4.9, "holds")}.items():
        log = _log(tmp_path, "03_eval", run_id=f"r{batch}", params={"batch": batch})
        rows.append(log.append("claim", key="speed", claim=long_claim, claimed=">= 3x", measured=f"{v}x",
                               verdict=verdict, rule=">= 3", value=v, low=lo, high=hi, at_least=3.0,
                               quantity="times faster", sweep_point=f"batch={batch}"))
        _timing(log, "step", "B", "baseline", 2e-3 * batch / 64)
        _timing(log, "step", "B", "optimized", 1e-3)
    for r in (rows := [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]):
        r.setdefault("sweep_point", f"batch={r['params']['batch']}")
    fig = sweep_claims_figure(rows, "batch", {"batch": [64, 512]})
    text = _texts(fig)
    assert long_claim[:60] in text.replace("\n", " ") and "compiled and captured" in text.replace("\n", " ")  # whole
    assert "2.10 [1.90, 2.30] does not hold" in text and "4.50 [4.10, 4.90] holds" in text and "threshold >= 3" in text
    assert fig.axes[0].get_yscale() == "log" and fig.axes[0].get_xlabel() == "batch"
    fig.savefig(tmp_path / "f.png")  # renders
    timings = _table(_study_section("03_eval", "03_eval", None, rows, tmp_path).split("### Timings", 1)[1])
    # each row names its point, and the speedup compares within the point (2.00x at 64, 16.0x at 512)
    assert [(r[0], r[3], r[8]) for r in timings if r[3] == "optimized"] == [("batch=64", "optimized", "2.00x"),
                                                                              ("batch=512", "optimized", "16.0x")]


def test_the_title_names_the_folder_in_the_project_never_a_path_of_this_machine(tmp_path, monkeypatch):
    # a committed report is read on other machines (issue 47 item 5): its title named /work/main/outputs/... before
    monkeypatch.setenv("PERFLAB_ROOT", str(tmp_path))
    inside = tmp_path / "outputs" / "verdicts" / "abc"
    _timing(_log(inside, "s"), "step", "c", "baseline", 0.5)
    assert build(inside).startswith("# perflab report: `outputs/verdicts/abc`\n")
    assert build(tmp_path).startswith(f"# perflab report: `{tmp_path.name}`\n")   # the project itself: its name
    monkeypatch.setenv("PERFLAB_ROOT", str(tmp_path / "elsewhere"))
    assert build(inside).startswith("# perflab report: `abc`\n")             # outside the project: its name
    rows = inside / "results.jsonl"                                           # committed evidence: rows gzipped
    (inside / "results.jsonl.gz").write_bytes(__import__("gzip").compress(rows.read_bytes()))
    rows.unlink()
    assert "from `results.jsonl.gz` (1 rows" in build(inside)


def test_a_timed_claim_that_does_not_hold_names_the_cause_its_run_diagnosed(tmp_path):
    """`Diagnosis.log(run.log)` in a notebook: REPORT.md names its top cause beside each timed claim of that run that
    does not hold or partly holds (decided in paired rounds), and quotes the diagnosis under the study."""
    import torch

    from perflab.kit import diagnose

    log = _log(tmp_path, "s", run_id="r1")
    log.append("claim", claim="3x faster", claimed=">= 3x", measured="1.1x", verdict="does not hold", value=1.1,
               low=1.0, high=1.2, rule=">= 3", rounds=12)
    log.append("claim", claim="fewer syncs", claimed="0", measured="4 per step", verdict="does not hold", value=4.0,
               low=4.0, high=4.0, rule="<= 0")                                   # a count, not timed: no cause
    log.append("claim", claim="2x faster", claimed=">= 2x", measured="2.5x", verdict="holds", value=2.5, low=2.2,
               high=2.8, rule=">= 2", rounds=12)
    x = torch.ones(16)

    def step():
        y = x
        for _ in range(40):
            y = y + 1
        return y
    d = diagnose(step, calls=3, warmup=1, device="cpu")
    d.log(log)
    cause = d.cause_line()
    assert cause and "ops per step" in cause, cause
    section = _section(build(tmp_path), "s")
    rows = _table(section.split("### Claims, measured\n", 1)[1].split("\n\n", 1)[0])
    assert [r[-1] for r in rows] == [f"**does not hold**: {cause}", "**does not hold**", "**holds**"]
    assert f"top cause: {cause}" in section
