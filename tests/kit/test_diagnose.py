"""perflab.kit.diagnose on steps written as users write them (tests/kit/diagnose_steps.py): each planted cause is
named with its kind at its line, a clean step gets no host sync or recompile finding, and the Diagnosis shows itself
(text, HTML, JSON, the cause line)."""
import json
import math
from pathlib import Path

import diagnose_steps as steps
import pytest
import torch

from perflab.kit import diagnosis as dg
from perflab.kit.compiles import allow_recompiles
from perflab.kit.diagnosing import StepError, diagnose

FILE = str(Path(steps.__file__).resolve())
QUICK = dict(calls=3, warmup=1, budget=10.0, device="cpu")


def planted(mark: str) -> int:
    """The line of `# PLANT: mark` in diagnose_steps.py."""
    lines = Path(FILE).read_text().splitlines()
    hits = [i for i, line in enumerate(lines, 1) if line.rstrip().endswith(f"# PLANT: {mark}")]
    assert hits, mark
    return hits[0]


def found(d, kind: str, line: int):
    """The findings of `kind` at diagnose_steps.py:line."""
    return [f for f in d.findings if f.kind == kind and f.where is not None and f.where.file == FILE
            and f.where.line == line]


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("name, kind, mark, count", [
    ("sync_step", dg.HOST_SYNC, "host sync", 1),
    ("mask_step", dg.HOST_SYNC, "host sync, mask", 1),
    ("copy_step", dg.COPY, "host-to-device copy", 1),
    ("data_step", dg.DATA, "data loading", 1),
])
def test_a_planted_cause_is_named_at_its_line_with_its_count(name, kind, mark, count):
    line = planted(mark)
    d = diagnose(getattr(steps, name), **QUICK)
    hits = found(d, kind, line)
    assert hits, [(f.kind, f.where) for f in d.findings]
    assert hits[0].count == count, hits[0]
    assert hits[0].fix and hits[0].study and hits[0].evidence


def test_a_loop_of_small_ops_is_named_at_its_for_line():
    d = diagnose(steps.loop_step, **QUICK)
    [f] = found(d, dg.LOOP, planted("Python loop of small ops"))
    assert f.count == 96  # 48 iterations x (mul, add)
    assert f.share is not None and 0 < f.share.value <= 1


def test_many_small_ops_without_a_loop_of_the_users_are_launch_bound():
    d = diagnose(steps.launch_step, **QUICK)
    [f] = found(d, dg.LAUNCH_BOUND, planted("launch-bound"))
    assert f.count >= 41  # 40 linears (one aten::linear each, the CPU's count) and the sum
    assert not [g for g in d.findings if g.kind == dg.LOOP]   # nn.Sequential's loop is torch's, not the user's


@pytest.mark.slow
def test_a_recompile_is_named_at_the_call_with_dynamos_reason():
    allow_recompiles(64)
    d = diagnose(steps.recompile_step, **QUICK)
    [f] = found(d, dg.RECOMPILE, planted("recompile"))
    assert "size mismatch" in f.op, f.op
    assert f.count == 1  # one per step after the warm-up: every call a new size
    assert f.share is not None


def test_a_graph_break_is_named_at_its_line_with_its_reason():
    d = diagnose(steps.graph_break_step, **QUICK)
    [f] = found(d, dg.GRAPH_BREAK, planted("graph break"))
    assert "print" in f.op, f.op   # dynamo's own words: "... builtin operator `print` ..."


def test_waiting_for_the_dataloader_is_data_loading():
    d = diagnose(steps.loader_step, **QUICK)
    [f] = [f for f in d.findings if f.kind == dg.DATA and f.op == "waiting for the DataLoader"]
    assert f.where.file == FILE and f.where.line == planted("data loading, loader")
    assert f.share.value > 0.5   # the dataset sleeps 8 ms per batch: most of the step


@pytest.mark.slow
def test_a_cuda_graph_output_read_after_the_next_replay_is_named_at_the_read():
    d = diagnose(setup=steps.lifetime_setup, **QUICK)
    [f] = [f for f in d.findings if f.kind == dg.LIFETIME]
    assert f.where.file == FILE and f.where.line == planted("CUDA-graph lifetime")
    assert d.findings[0] is f  # wrong numbers first


@pytest.mark.parametrize("name", ["clean_step", "clean_compiled_step"])
def test_a_clean_step_gets_no_sync_copy_or_recompile_finding(name):
    d = diagnose(getattr(steps, name), **QUICK)
    bad = [f for f in d.findings if f.kind in (dg.HOST_SYNC, dg.COPY, dg.RECOMPILE, dg.GRAPH_BREAK, dg.LIFETIME)]
    assert not bad, [(f.kind, f.where, f.op) for f in bad]
    if name == "clean_step":
        assert d.counts["optimizer_host_reads"] > 0   # Adam's step counters: read on the host, kept apart


def test_a_step_that_raises_shows_its_traceback_from_the_users_frame():
    with pytest.raises(StepError) as e:
        diagnose(steps.raising_step, **QUICK)
    first = e.value.traceback.splitlines()[1]
    assert first.startswith(f'  File "{FILE}"') and "raising_step" in first, e.value.traceback
    assert "perflab/kit" not in e.value.traceback.replace("\\", "/")
    assert "planted: (256, 32)" in str(e.value)


@pytest.mark.slow
def test_a_step_longer_than_the_budget_gets_fewer_calls_and_says_so():
    d = diagnose(steps.slow_step, calls=10, warmup=2, budget=2.0, device="cpu")
    assert d.calls < 10
    assert any("fewer calls than asked" in n for n in d.notes), d.notes


def test_diagnose_refuses_bad_arguments_and_a_device_that_is_not_there():
    with pytest.raises(ValueError, match="callable"):
        diagnose(3, **QUICK)
    with pytest.raises(ValueError, match="give the step"):
        diagnose()
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            diagnose(steps.sync_step, calls=3, warmup=1, device="cuda")


def test_the_diagnosis_shows_itself_and_its_json_has_every_field(tmp_path):
    d = diagnose(steps.sync_step, **QUICK)
    text = str(d)
    assert "host sync" in text and f"diagnose_steps.py:{planted('host sync')}" in text
    page = d._repr_html_()
    assert "<table>" in page and "host sync" in page
    summary = page[page.index("<summary>"):page.index("</summary>")]   # folded: the headline and the top cause
    assert page.startswith("<details class='perflab-diagnosis'>") and "<table>" not in summary
    assert d.headline() in summary and d.cause_line() in summary
    shown, folded = page.split("<details>")     # the top findings first, every one with its fix under the fold
    assert "<th style='text-align:left'>fix</th>" not in shown and "<th style='text-align:left'>fix</th>" in folded
    assert shown.count("<tr>") <= 1 + 5 and folded.count("<tr>") == 1 + len(d.findings)
    assert all(r["per step"].endswith(" syncs") for r in d.rows() if r["kind"] == dg.HOST_SYNC)   # a count's unit
    path = d.save(tmp_path / "d.json")
    j = json.loads(path.read_text())
    assert j["schema"] == dg.SCHEMA and j["device"] == "cpu" and j["step"]["calls"] == d.calls
    f = next(f for f in j["findings"] if f["kind"] == dg.HOST_SYNC)
    assert set(f) >= {"rank", "kind", "where", "count_per_step", "share", "evidence", "fix", "study", "stack"}
    assert f["where"]["line"] == planted("host sync") and f["where"]["op"] == "item"
    assert set(j["counts"]) >= {"host_syncs", "host_to_device_copies", "ops", "compiles", "recompiles"}
    assert j["overhead"]["own_s"] >= 0 and math.isfinite(j["overhead"]["wall_s"])
    assert list(tmp_path.iterdir()) == [path]   # no temporary file left


def test_the_cause_line_names_the_top_cause():
    d = diagnose(steps.launch_step, **QUICK)
    line = d.cause_line((dg.LAUNCH_BOUND,))
    assert line.endswith("launch-bound") and " ops per step at " in line, line
    assert dg.cause_line(d, ("no such kind",)) == ""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_diagnose_times_the_gpu_and_names_the_lines():
    """On CUDA: the planted sync and copy at their lines, as on a CPU; kernels counted (the launch count is the
    device's kernels) and the GPU's busy time beside the step's (`_device_busy`); a tiny-op loop is launch-bound with
    the GPU idle most of the step."""
    xs = torch.randn(256, 32, device="cuda")

    def step():
        y = xs
        for _ in range(64):  # the loop
            y = y * 0.99 + 0.01
        host = torch.ones(4)
        host.to("cuda")  # the copy
        return y.sum().item()  # the sync

    d = diagnose(step, calls=5, warmup=2, device="cuda")
    src = Path(__file__).read_text().splitlines()
    line = {m: next(i for i, t in enumerate(src, 1) if t.rstrip().endswith(f"# {m}")) for m in ("the loop", "the copy",
                                                                                                 "the sync")}
    here = str(Path(__file__).resolve())
    kinds = {(f.kind, f.where.line) for f in d.findings if f.where is not None and f.where.file == here}
    assert (dg.HOST_SYNC, line["the sync"]) in kinds and (dg.COPY, line["the copy"]) in kinds, kinds
    busy = d.counts["device_busy"]
    assert busy["kernels"] >= 128 and 0 < busy["busy_s"] <= busy["wall_s"], busy
    [lb] = [f for f in d.findings if f.kind == dg.LAUNCH_BOUND]
    assert lb.count >= 128 and "GPU busy" in lb.evidence
