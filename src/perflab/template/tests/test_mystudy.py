"""mystudy's tests: each version against the float64 oracle on fresh inputs, host syncs counted, bad
parameters refused, the notebook's parameters cell and the GPU preset against Params, and the claims: they import (a
claim mistake fails here, not at the notebook's last cell), and `CLAIMS.judge` takes exactly what the study measures.
Speed is the notebook's to show: no timing and no timed verdict is asserted here."""
import ast
import json
from pathlib import Path

import pytest
import torch
from perflab.kit.notebook import setup
from perflab.kit.params import ParameterError, load_preset, validate
from perflab.kit.syncs import count_host_syncs
from perflab.kit.verdicts import VERDICTS
from perflab.runner.catalog import schema_mismatches

from mystudy import checks, reference, study
from mystudy.claims import CLAIMS
from mystudy.data import blobs, strung
from mystudy.params import Params

HERE = Path(__file__).resolve().parents[1]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
IMPLS = study.IMPLS
# a run small enough for a test: tiny sizes, a few milliseconds of timing, 50 ms for the timed claim's verdict
TINY = {"device": "cpu", "n": 64, "dim": 2, "iters": 2, "sweep_k": [2], "min_run_time": 0.01, "max_run_time": 0.02,
        "verdict_time": 0.05}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", IMPLS)
@pytest.mark.parametrize("n, dim, k", [(1, 1, 1), (50, 3, 4), (300, 8, 40), (5, 2, 8)])
def test_equals_the_oracle_on_fresh_inputs(name, n, dim, k, device):
    points, start = blobs(n, dim, k, seed=100 * n + k, device=device)
    c, assign = IMPLS[name](points, start, 4, tol=0.0)
    ref_c, ref_assign = reference.kmeans(points, start, 4)
    assert torch.equal(assign.cpu(), ref_assign)
    # float32 means of at most 300 points against float64 ones: rounding ~sqrt(300) * 6e-8 of the data's scale
    scale = points.abs().max().item()
    torch.testing.assert_close(c.double().cpu(), ref_c, rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("name", IMPLS)
def test_a_cluster_no_point_picks_keeps_its_centroid(name):
    points, start = blobs(30, 2, 2, seed=1)
    start = torch.cat([start, torch.tensor([[1e3, 1e3]])])
    c, assign = IMPLS[name](points, start, 3, tol=0.0)
    assert torch.equal(c[2], start[2]) and not (assign == 2).any()


@pytest.mark.parametrize("name", IMPLS)
@pytest.mark.parametrize("n, dim, k, seed", [(300, 2, 4, 0), (400, 2, 6, 1), (500, 3, 8, 1)])
def test_stops_where_the_oracle_settles_on_data_that_needs_many_iterations(name, n, dim, k, seed):
    """On `strung` data Lloyd's takes tens of iterations (on `blobs` one or two, where a convergence test that always
    reads 0, stopping after one iteration, would pass): each version runs exactly as many as the oracle needs to move
    less than tol, and ends where the oracle does."""
    points, start = strung(n, dim, k, seed=seed)
    need = reference.iterations_to_settle(points, start, 1e-4, 200)
    assert 10 <= need < 200  # the data needs many iterations, and settles within the budget
    with count_host_syncs(points.device) as syncs:
        c, assign = IMPLS[name](points, start, 200, tol=1e-4)
    assert syncs.by_op["item"] == need  # one convergence read per iteration run: it stopped where the oracle settles
    ref_c, ref_assign = reference.kmeans(points, start, need)
    assert torch.equal(assign, ref_assign)
    # float32 means of at most 500 points against float64 ones (as above), after `need` iterations of them
    torch.testing.assert_close(c.double(), ref_c, rtol=0, atol=1e-5 * points.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_host_syncs_per_iteration(device):
    points, start = blobs(200, 4, 6, seed=3, device=device)
    for name, per_iteration in (("baseline", 6 + 1), ("optimized", 1)):
        with count_host_syncs(device) as syncs:
            IMPLS[name](points, start, 3, tol=0.0)
        assert syncs.total == 3 * per_iteration, syncs.by_op


@pytest.mark.parametrize("bad, message", [({"k": 0}, "need 1 <= k <= n"), ({"n": 8, "k": 9}, "need 1 <= k <= n"),
                                          ({"sweep_k": []}, "sweep_k must list"), ({"iters": 0}, "iters must be"),
                                          ({"kk": 3}, "unknown parameter 'kk'")])
def test_bad_parameters_are_refused(bad, message):
    with pytest.raises(ParameterError, match=message):
        validate(bad, Params)


def test_the_notebook_parameters_cell_agrees_with_params():
    assert schema_mismatches(HERE / "mystudy.ipynb", Params) == []


def test_the_gpu_preset_is_valid():
    cfg = validate(load_preset(HERE / "params" / "gpu" / "mystudy.yaml"), Params)
    assert cfg.device == "cuda"


def test_a_wrong_version_fails_its_check_with_what_was_measured(monkeypatch):
    def shifted(points, centroids, iters, tol=1e-4):  # right assignments, centroids 1e-3 of the scale off
        c, assign = IMPLS["baseline"](points, centroids, iters, tol)
        return c + 1e-3 * max(points.abs().max().item(), 1.0), assign

    monkeypatch.setitem(IMPLS, "optimized", shifted)
    [good, bad] = checks.oracle_checks(seed=0, device="cpu")
    assert good.passed and not bad.passed
    assert "largest centroid error 1.00e-03 of the scale (allowed 1e-05)" in bad.detail, bad.detail


# ---- the claims ---------------------------------------------------------------------------------------------------

def _run(tmp_path, **params):
    """A run as the notebook's setup cell opens it, at TINY sizes, writing into `tmp_path`."""
    return setup("mystudy", {**TINY, **params, "out_dir": str(tmp_path)}, Params)


def test_the_correctness_checks_pass(tmp_path):
    run = _run(tmp_path, k=4)
    failed = [c for c in checks.correctness(run, study.inputs(run)) if not c.passed]
    assert failed == []


def test_the_claims_judge_exactly_what_the_study_measures(tmp_path):
    """The notebook's path at tiny sizes: Findings (inputs, counts) -> evidence -> CLAIMS.judge, at the setup of
    every claim (k=32): every claim gets a verdict, none is 'not tested here'. A claim without evidence, or evidence
    for no claim, fails here (ClaimError), not after the notebook's benchmark."""
    run = _run(tmp_path, k=32)
    found = study.Findings(data=study.inputs(run))
    found.counts = study.counts(run, found.data)
    rows = CLAIMS.judge(study.evidence(run, found), cfg=run.cfg, device=run.device)
    verdicts = {r["key"]: r["verdict"] for r in rows}
    assert verdicts["syncs"] == "holds"  # a count: 33 -> 1 per iteration at k=32, exact
    assert verdicts["speed"] in VERDICTS and verdicts["speed"] != "not tested here"  # timed: shown, not asserted
    CLAIMS.log(run, rows)  # the headline claim is among the rows


def test_a_claim_about_k_32_is_not_tested_at_k_128(tmp_path):
    """`perflab run -p k=128`: the speed claim is about k=32, so it is not timed and reads what was run instead."""
    run = _run(tmp_path, n=256, k=128)
    found = study.Findings(data=study.inputs(run))
    found.counts = study.counts(run, found.data)
    found = study.evidence(run, found)
    assert found["speed"].measured is None
    row = next(r for r in CLAIMS.judge(found, cfg=run.cfg, device=run.device) if r["key"] == "speed")
    assert (row["verdict"], row["why"]) == ("not tested here", "measured at k=128")


def test_the_notebook_imports_the_claims_in_its_first_code_cell():
    """So that a claim mistake stops the notebook before anything is timed."""
    nb = json.loads((HERE / "mystudy.ipynb").read_text())
    first = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    imported = [node.module for node in ast.parse(first).body if isinstance(node, ast.ImportFrom)]
    assert "mystudy.claims" in imported


def test_the_baselines_diagnosis_names_its_host_sync_per_cluster_at_its_line():
    """What `perflab diagnose --setup mystudy.diagnosis:baseline_step` names: the mask's sync at its line, k per
    iteration; the optimized version has none there (its one sync per iteration is the convergence test's)."""
    from perflab.kit import diagnose

    from mystudy import baseline, diagnosis

    source = Path(baseline.__file__).read_text().splitlines()
    line = next(i for i, t in enumerate(source, 1) if "mine = points[assign == j]" in t)
    sizes = {"n": 256, "dim": 4, "k": 8, "iters": 2}
    kw = {"calls": 3, "warmup": 1, "budget": 5.0, "device": "cpu"}
    d = diagnose(setup=lambda: diagnosis.baseline_step(**sizes), **kw)
    [mask] = [f for f in d.findings if f.kind == "host sync" and f.where.line == line]
    assert mask.count == 8 * 2 and "bool mask" in mask.op
    o = diagnose(setup=lambda: diagnosis.optimized_step(**sizes), **kw)
    assert not [f for f in o.findings if f.kind == "host sync" and f.where.file == mask.where.file]
