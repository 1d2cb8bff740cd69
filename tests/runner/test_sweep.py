import json

import pytest

from perflab.kit.results import ResultsLog
from perflab.runner.cli import main
from perflab.runner.compare import compare, load, to_markdown
from perflab.runner.report import build
from perflab.runner.sweep import SweepError, make_executor, parse_grid


def _sweep(nb_dir, out, *extra):
    # two points at a time: each is mostly interpreter and kernel start-up, which two cores overlap
    return main(["sweep", "tiny", "--grid", "n=1,2", "--grid", "scale=1,3", "--executor", "local",
                 "--max-parallel", "2", "--out", str(out), "--notebooks", str(nb_dir), "--no-progress", *extra])


@pytest.mark.slow
def test_a_2x2_local_sweep_then_resume_skips_finished_points(nb_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "sweep"
    monkeypatch.setenv("TINY_FAIL_ON", "2")           # the n=2 points fail this time
    assert _sweep(nb_dir, out, "-p", "label=s") == 1
    text = capsys.readouterr()
    assert "2 finished, 0 already done (skipped), 2 failed" in text.out
    assert "FAILED n-2__scale-1" in text.err and "planted failure at n=2" in text.err
    status = {p.parent.name: json.loads(p.read_text())["ok"] for p in out.glob("points/*/status.json")}
    assert status == {"n-1__scale-1": True, "n-1__scale-3": True, "n-2__scale-1": False, "n-2__scale-3": False}
    first_mtime = (out / "points" / "n-1__scale-1" / "status.json").stat().st_mtime

    (out / "points" / "n-1__scale-3" / "status.json").write_bytes(b'{"ok": tr\xff')  # cut off mid-write
    assert "| n-1__scale-3 | **no status** |" in build(out)  # the report says so instead of crashing

    monkeypatch.delenv("TINY_FAIL_ON")                # re-run: finished points skipped, the others retried
    assert _sweep(nb_dir, out, "-p", "label=s") == 0
    assert "3 finished, 1 already done (skipped), 0 failed" in capsys.readouterr().out
    assert (out / "points" / "n-1__scale-1" / "status.json").stat().st_mtime == first_mtime

    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    values = sorted((r["params"]["n"], r["params"]["scale"], r["value"]) for r in rows if r["kind"] == "value")
    assert values == [(1, 1.0, 0.0), (1, 3.0, 0.0), (2, 1.0, 1.0), (2, 3.0, 3.0)]  # merged, one per point
    report = (out / "REPORT.md").read_text()
    assert "## Sweep" in report and (out / "sweep_n.png").is_file() and (out / "sweep_scale.png").is_file()

    assert main(["sweep", "tiny", "--grid", "n=1,2,3", "--out", str(out), "--notebooks", str(nb_dir)]) == 2
    assert "holds a different sweep" in capsys.readouterr().err


@pytest.mark.parametrize("grid, message", [
    (["n"], "expected key=v1,v2"),
    (["n=1,,2"], "empty value"),
    (["n="], "empty value"),
    (["n=1,1"], "a value is repeated"),
    (["n=1", "n=2"], "given twice"),
    (["9n=1"], "not a parameter name"),
])
def test_bad_grid_syntax_is_refused(grid, message):
    with pytest.raises(SweepError, match=message):
        parse_grid(grid)


def test_unknown_or_clashing_parameters_are_refused_before_submitting(nb_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "tiny", "--grid", "btach=1,2", "--out", str(out), "--notebooks", str(nb_dir)]) == 2
    assert "unknown parameter 'btach'" in capsys.readouterr().err
    assert main(["sweep", "tiny", "--grid", "n=1,x", "--out", str(out), "--notebooks", str(nb_dir)]) == 2
    assert "parameter 'n' must be int, got str 'x'" in capsys.readouterr().err
    assert main(["sweep", "tiny", "--grid", "n=1,2", "-p", "n=3", "--out", str(out), "--notebooks", str(nb_dir)]) == 2
    assert "both swept" in capsys.readouterr().err
    assert not (out / "submitit").exists()  # nothing was submitted


def test_slurm_executor_carries_the_cluster_options(tmp_path, monkeypatch):
    from submitit.slurm.slurm import _make_sbatch_string

    # PATH set by the test, so the result is the same on a laptop and on a Slurm login node
    no_slurm, fake_slurm = tmp_path / "no-slurm", tmp_path / "fake-slurm"
    no_slurm.mkdir()
    fake_slurm.mkdir()
    monkeypatch.setenv("PATH", str(no_slurm))
    with pytest.raises(SweepError, match="not usable here"):  # a host with no Slurm
        make_executor("slurm", tmp_path, name="x", timeout_min=1, max_parallel=1)
    (fake_slurm / "srun").write_text("#!/bin/sh\nexit 0\n")   # one that has: submitit only looks for srun
    (fake_slurm / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake_slurm))
    ex = make_executor("slurm", tmp_path, name="perflab-03_eval", timeout_min=30, max_parallel=4,
                       slurm_partition="gpu", gpus_per_node=1, cpus_per_task=16)
    sbatch = _make_sbatch_string(command="true", folder=tmp_path, **ex._executor.parameters)
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=16",
                 "#SBATCH --time=30", "#SBATCH --job-name=perflab-03_eval"):
        assert line in sbatch


def _rows(path, device, median, *, extra=None):
    log = ResultsLog(path, study="03_eval", params={"batch": 64, "out_dir": str(path.parent)},
                     stamp={"device_name": device, "torch": "2.13", "commit": "abc"})
    for impl, t in median.items():
        log.append("measurement", metric="step", label="step", sub_label="B=64", impl=impl, median_s=t,
                   iqr_s=0.0, p20_s=t, p80_s=t, n=5)
    log.value("peak memory", 100.0, unit="MiB")
    if extra:
        log.value(extra, 1.0)
    return load(path)


def test_compare_pairs_rows_and_lists_the_unpaired(tmp_path):
    a = _rows(tmp_path / "a" / "results.jsonl", "H100", {"baseline": 0.040, "optimized": 0.010}, extra="only-a")
    b = _rows(tmp_path / "b" / "results.jsonl", "H200", {"baseline": 0.030, "recycle": 0.005})
    c = compare(a, b)
    paired = {k[5] or k[2]: (ra, rb) for k, ra, rb in c.paired}
    assert set(paired) == {"baseline", "peak memory"}  # out_dir differs but does not count
    assert [r.get("impl") or r["metric"] for r in c.only_a] == ["optimized", "only-a"]
    assert [r.get("impl") for r in c.only_b] == ["recycle"]
    md = to_markdown(c, a, b, "a", "b")
    assert "Parameters of every row: batch=64" in md
    assert "| step / B=64 / baseline | 40.0 ms | 30.0 ms | 0.750 | 0.750-0.750 |" in md
    assert "Only in A" in md and "optimized" in md and "Only in B" in md and "recycle" in md


def test_compare_cli_writes_markdown_and_plot(tmp_path, capsys):
    _rows(tmp_path / "a" / "results.jsonl", "H100", {"baseline": 0.04})
    _rows(tmp_path / "b" / "results.jsonl", "H200", {"baseline": 0.02})
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "compare.png").is_file() and "0.5" in (tmp_path / "cmp" / "COMPARE.md").read_text()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "nope")]) == 2
    assert "no results at" in capsys.readouterr().err
