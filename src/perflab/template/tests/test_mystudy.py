"""mystudy's tests: both versions against the float64 oracle on fresh inputs, host syncs counted, bad parameters
refused, the notebook's parameters cell and the GPU preset against Params. Speed is the notebook's to show: it is
never asserted here."""
from pathlib import Path

import pytest
import torch
from perflab.notebooks import schema_mismatches
from perflab.params import ParameterError, load_preset, validate
from perflab.syncs import count_host_syncs

from mystudy import baseline, optimized, reference
from mystudy.data import blobs
from mystudy.params import Params

HERE = Path(__file__).resolve().parents[1]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
IMPLS = [baseline.kmeans, optimized.kmeans]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", IMPLS, ids=["baseline", "optimized"])
@pytest.mark.parametrize("n, dim, k", [(1, 1, 1), (50, 3, 4), (300, 8, 40), (5, 2, 8)])
def test_equals_the_oracle_on_fresh_inputs(impl, n, dim, k, device):
    points, start = blobs(n, dim, k, seed=100 * n + k, device=device)
    c, assign = impl(points, start, 4, tol=0.0)
    ref_c, ref_assign = reference.kmeans(points, start, 4)
    assert torch.equal(assign.cpu(), ref_assign)
    # float32 means of at most 300 points against float64 ones: rounding ~sqrt(300) * 6e-8 of the data's scale
    scale = points.abs().max().item()
    torch.testing.assert_close(c.double().cpu(), ref_c, rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("impl", IMPLS, ids=["baseline", "optimized"])
def test_a_cluster_no_point_picks_keeps_its_centroid(impl):
    points, start = blobs(30, 2, 2, seed=1)
    start = torch.cat([start, torch.tensor([[1e3, 1e3]])])
    c, assign = impl(points, start, 3, tol=0.0)
    assert torch.equal(c[2], start[2]) and not (assign == 2).any()


@pytest.mark.parametrize("impl", IMPLS, ids=["baseline", "optimized"])
def test_stops_once_the_centroids_settle(impl):
    points, start = blobs(200, 4, 5, seed=2)
    with count_host_syncs(points.device) as syncs:
        c, _ = impl(points, start, 50, tol=1e-4)
    assert syncs.by_op["item"] < 50  # one convergence read per iteration run: it stopped early
    torch.testing.assert_close(c.double(), reference.kmeans(points, start, 50)[0], rtol=0, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_host_syncs_per_iteration(device):
    points, start = blobs(200, 4, 6, seed=3, device=device)
    for impl, per_iteration in ((baseline.kmeans, 6 + 1), (optimized.kmeans, 1)):
        with count_host_syncs(device) as syncs:
            impl(points, start, 3, tol=0.0)
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
