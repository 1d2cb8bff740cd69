"""diagnose against the four reports (perflab.runner.reports): how a report's finding is looked up among diagnose's,
and, on each study's baseline at small sizes, that every mechanism finding of its report is named at its line and that
the optimized version shows no kind its code lacks (docs/diagnose.md records the full-size runs)."""
import pytest
import torch

from perflab.kit.compiles import reset
from perflab.kit.diagnosing import diagnose
from perflab.runner import reports


def _finding(kind, path, line, count=1.0, share=0.1, op="op"):
    return {"kind": kind, "where": {"file": path.split("/")[-1], "path": path, "line": line, "function": "f", "op": op},
            "count_per_step": count, "share": {"value": share, "low": share, "high": share}}


def _diagnosis(*findings, **counts):
    return {"findings": list(findings), "counts": {"ops": 0.0, "host_syncs": 0.0, "host_to_device_copies": 0.0,
                                                   **counts}, "step": {"mean_s": 0.01}}


BASE = str(reports.PACKAGE / "vae" / "step_ops.py")
LINE = reports.resolve("vae/step_ops.py:y_host = y.detach().tolist()")[1]


def test_a_reports_finding_is_found_only_at_its_kind_and_line():
    rows = [dict(key="k", words="w", mechanism=True, kind="host sync", where="vae/step_ops.py:y_host = y.detach()")]
    assert reports.check_rows(rows, _diagnosis(_finding("host sync", BASE, LINE)))[0]["found"]
    assert not reports.check_rows(rows, _diagnosis(_finding("host sync", BASE, LINE + 1)))[0]["found"]
    assert not reports.check_rows(rows, _diagnosis(_finding("host-to-device copy", BASE, LINE)))[0]["found"]
    assert not reports.check_rows(rows, _diagnosis(_finding("host sync", "/elsewhere/step_ops.py", LINE)))[0]["found"]
    hot = [{**rows[0], "hot": "tokeniz"}]
    assert not reports.check_rows(hot, _diagnosis(_finding("host sync", BASE, LINE, op="collate x2")))[0]["found"]
    assert reports.check_rows(hot, _diagnosis(_finding("host sync", BASE, LINE, op="Tokenizer.encode x6")))[0]["found"]
    step = [dict(key="b", words="w", mechanism=True, kind="launch-bound", where=None)]
    assert reports.check_rows(step, _diagnosis(_finding("launch-bound", "/any.py", 3)))[0]["found"]
    out = [dict(key="a", words="w", mechanism=False, kind=None, where=None, why="the algorithm")]
    assert reports.check_rows(out, _diagnosis())[0]["found"] is None    # not counted either way


def test_resolve_finds_the_line_of_code_not_a_docstrings_mention():
    file, line, fn = reports.resolve("template/mystudy/baseline.py:[assign == j]")
    text = (reports.PACKAGE / file).read_text().splitlines()[line - 1]
    assert "mine = points[assign == j]" in text and fn is None    # the docstring quotes it first
    assert reports.resolve("probe1d/baseline.py:compute_slab_stats") == ("probe1d/baseline.py", None,
                                                                         "compute_slab_stats")
    with pytest.raises(ValueError, match="no line"):
        reports.resolve("probe1d/baseline.py:no such code here")


def test_an_optimized_version_is_compared_kind_by_kind_and_what_it_lacks_must_be_absent():
    base = _diagnosis(_finding("host sync", BASE, LINE, count=12), host_syncs=12.0, ops=248.0)
    clean = _diagnosis(ops=31.0)
    rows = {r["kind"]: r["status"] for r in reports.compare(base, clean, ("host sync",), ("host sync",))}
    assert rows["host sync"] == "absent, as it should be" and rows["ops per step (the launch count)"] == "fewer"
    dirty = _diagnosis(_finding("host sync", "/o.py", 3, count=1), host_syncs=1.0)
    assert reports.compare(base, dirty, ("host sync",))[0]["status"].startswith("**PRESENT")
    row = {"finding": base["findings"][0], "where": "vae/step_ops.py:y_host"}
    assert reports.on_optimized(row, clean) == "gone"
    assert reports.on_optimized(row, _diagnosis(_finding("host sync", BASE, LINE, count=3))).startswith("smaller")
    assert reports.on_optimized(row, _diagnosis(_finding("host sync", BASE, LINE, count=30))).startswith("**not")


def _check(study: str, baseline, optimized, lacks, library=(), **diag):
    """Diagnose the baseline and (unless None) the optimized step; every mechanism row of the study's report found,
    no kind the optimized code lacks present."""
    st = next(s for s in reports.STUDIES if s.key == study)
    kw = dict(calls=3, warmup=1, budget=10.0, device="cpu", library_modules=library) | diag
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reset()
        base = diagnose(setup=baseline, **kw).as_dict()
        reset()
        opt = diagnose(setup=optimized, **kw).as_dict() if optimized is not None else None
    finally:
        torch.set_num_threads(n)
    rows = reports.check_rows(reports._load(st.report), base)
    missed = [(r["key"], r["kind"], r.get("line")) for r in rows if r["mechanism"] and not r["found"]]
    assert not missed, (missed, [(f["kind"], f["where"]) for f in base["findings"]])
    present = [f for f in (opt or {"findings": []})["findings"] if f["kind"] in lacks]
    assert not present, present
    return base, opt


@pytest.mark.slow
def test_vae_the_reports_findings_on_the_baseline_none_on_the_optimized_step():
    from perflab.vae import diagnosis as d

    _, opt = _check("vae", d.baseline_step, d.optimized_step, ("host sync", "host-to-device copy", "data loading"))
    assert opt["counts"]["host_syncs"] == 0


@pytest.mark.slow
def test_probe1d_the_reports_findings_at_small_sizes():
    from perflab.probe1d import diagnosis as d

    sizes = dict(n_rows=2048, n_latents=64, n_classes=16)   # two slabs of two chunks: every loop of the seed runs
    base, opt = _check("probe1d", lambda: d.baseline_step(**sizes), lambda: d.optimized_step(**sizes),
                       ("host-to-device copy", "recompile", "data loading"))
    assert opt["counts"]["host_syncs"] < base["counts"]["host_syncs"] / 100


@pytest.mark.slow
def test_prover_evaluation_recompiles_at_the_baselines_chunking():
    """The fewest calls (each a recompile, ~2 s here): the padded loop's absence of recompiles is docs/diagnose.md's
    and tests/prover/'s (compiles counted after warm-up)."""
    from perflab.prover.evaluation import diagnosis as d

    base, _ = _check("prover", lambda: d.baseline_step(batch=16, n_queries=4, n_corruptions=8), None, (),
                     library=("perflab.prover.core",), calls=2, budget=2.0)
    assert base["counts"]["recompiles"] >= 2


@pytest.mark.slow
def test_latentwire_the_reports_findings_and_the_optimized_steps_copies_and_syncs_gone():
    from perflab.latentwire import diagnosis as d

    _check("latentwire", lambda: d.baseline_step(n_examples=64), lambda: d.optimized_step(n_examples=64, num_workers=0),
           ("host sync", "host-to-device copy"), calls=2)


@pytest.mark.slow
def test_every_builder_takes_its_notebooks_run():
    """`baseline_step(run)` and `optimized_step(run)` as a notebook calls them: the run's parameters (its dataclass's
    CPU defaults here) and device, each step called once."""
    import types

    from perflab.latentwire import diagnosis as lw
    from perflab.latentwire.params import LatentWireParams
    from perflab.probe1d import diagnosis as p1
    from perflab.probe1d.params import ProfileParams, SlabStatsParams
    from perflab.prover.early_exit import diagnosis as ee
    from perflab.prover.early_exit.params import EarlyExitParams
    from perflab.prover.evaluation import diagnosis as ev
    from perflab.prover.evaluation.params import EvalParams
    from perflab.vae import diagnosis as va
    from perflab.vae.params import VAEParams

    cases = [(p1, ProfileParams(), {}), (p1, SlabStatsParams(), {}), (ev, EvalParams(), {"batch": 16}),
             (ee, EarlyExitParams(n_candidates=64, batch=16), {}), (va, VAEParams(), {}),
             (lw, LatentWireParams(n_examples=32), {})]
    for module, cfg, kw in cases:
        run = types.SimpleNamespace(cfg=cfg, device=torch.device("cpu"))
        for build in (module.baseline_step, module.optimized_step):
            build(run, **kw)()
