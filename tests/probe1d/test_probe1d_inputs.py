"""Bad inputs get clear errors; the generator is seeded and looks like the research note's data; the
loader reads the original format (scipy CSR .npz + labels.bin)."""
import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from perflab.kit.params import ParameterError
from perflab.probe1d import Sparse1DProbe, load_dataset, make_activations, save_dataset
from perflab.probe1d.data import DataSource, make_csr
from perflab.probe1d.study import IMPLS


@pytest.fixture(scope="module")
def data():
    return make_activations(40, 7, 3, l0=3, seed=2)


def _probe(**kw):
    return Sparse1DProbe(device="cpu", max_iter=2, **kw)


@pytest.mark.parametrize("impl", IMPLS)
def test_non_csr_x_is_refused(data, impl):
    x, y = data
    p = IMPLS[impl](device="cpu", max_iter=1)
    with pytest.raises(TypeError, match="sparse CSR"):
        p.fit(x.to_dense(), y)
    with pytest.raises(TypeError, match="sparse CSR"):
        p.fit(x.to_dense().to_sparse(), y)                 # COO
    with pytest.raises(TypeError, match="tocsr"):
        p.fit(sp.coo_matrix(x.to_dense().numpy()), y)
    with pytest.raises(TypeError, match="sparse CSR"):
        p.fit([[1.0]], y)


def test_scipy_csr_is_accepted(data):
    x, y = data
    m = sp.csr_matrix(x.to_dense().numpy())
    a, b = _probe().fit(m, y), _probe().fit(x, y)
    torch.testing.assert_close(a.coef_, b.coef_, rtol=0, atol=0)   # same data, same arithmetic


def test_shape_mismatch(data):
    x, y = data
    with pytest.raises(ValueError, match="shape mismatch: x has 40 rows but y has 39"):
        _probe().fit(x, y[:-1])
    with pytest.raises(ValueError, match="2-D"):
        _probe().fit(x, y[:, 0])
    p = _probe().fit(x, y)
    with pytest.raises(ValueError, match="shape mismatch: fitted on"):
        p.loss_matrix(x, y[:, :2])


@pytest.mark.parametrize("bad", (float("nan"), float("inf"), -float("inf")))
def test_nan_inf_values(data, bad):
    x, y = data
    vals = x.values().clone()
    vals[3] = bad
    with pytest.raises(ValueError, match="NaN or inf"):
        _probe().fit(make_csr(x.crow_indices(), x.col_indices(), vals, x.shape), y)


@pytest.mark.parametrize("label", (2, -1, 0.5))
def test_labels_outside_01(data, label):
    x, y = data
    y = y.float()
    y[5, 1] = label
    with pytest.raises(ValueError, match=r"only 0 and 1"):
        _probe().fit(x, y)


def test_bool_and_float_labels_work(data):
    x, y = data
    a, b = _probe().fit(x, y.bool()), _probe().fit(x, y.double())
    torch.testing.assert_close(a.coef_, b.coef_)


def test_bad_options():
    # the notebooks' validator (perflab.kit.params.validate): one ParameterError (a ValueError) naming the option
    def refused(message, impl, **kw):
        with pytest.raises(ParameterError, match=re.escape(message)):
            IMPLS[impl](**kw)
    refused("bad ProbeConfig:\n  unknown parameter 'class_slab' (did you mean 'class_slab_size'?)", "baseline",
            class_slab=8)
    refused("bad ProbeConfig: max_iter must be >= 1, got 0", "baseline", max_iter=0)
    refused("parameter 'accum_dtype' must be 'float32' | 'float64', got str 'float16'", "optimized",
            accum_dtype="float16")
    refused("parameter 'max_iter' must be int, got float 2.5", "optimized", max_iter=2.5)
    refused("bad ProbeConfig: tile_events must be >= 1, got 0", "optimized", tile_events=0)
    # compile is the torch.compile mode and backend the backend, as in every study
    refused("parameter 'compile' must be 'off' | 'default' | 'reduce-overhead' | 'max-autotune', got str 'inductor'",
            "optimized", compile="inductor")
    refused("parameter 'backend' must be 'inductor' | 'eager' | 'aot_eager', got str 'cudagraphs'", "optimized",
            compile="default", backend="cudagraphs")
    with pytest.raises(ValueError, match="no CUDA device"):
        Sparse1DProbe(device="cuda") if not torch.cuda.is_available() else (_ for _ in ()).throw(
            ValueError("no CUDA device (skipped: CUDA present)"))
    with pytest.raises(RuntimeError, match="call fit"):
        Sparse1DProbe().loss_matrix(*make_activations(5, 3, 2, l0=1))
    x, y = make_activations(5, 3, 2, l0=1)
    with pytest.raises(ValueError, match="threshold"):
        _probe().fit(x, y).loss_matrix_with_aux(x, y, threshold=1.5)


def test_a_version_is_picked_by_its_name_in_impls_only():
    # one way to pick: study.IMPLS; the public Sparse1DProbe is the optimized version itself, with no impl switch
    assert list(IMPLS) == ["baseline", "optimized"] and Sparse1DProbe is IMPLS["optimized"]
    with pytest.raises(ValueError, match=re.escape("no version 'fast': expected one of baseline, optimized")):
        IMPLS["fast"]
    with pytest.raises(ParameterError, match=re.escape("unknown parameter 'impl'")):
        Sparse1DProbe(impl="baseline")


def test_generator_is_seeded_and_sae_like():
    x1, y1 = make_activations(2000, 256, 12, l0=24, seed=7)
    x2, y2 = make_activations(2000, 256, 12, l0=24, seed=7)
    assert torch.equal(x1.values(), x2.values()) and torch.equal(x1.col_indices(), x2.col_indices())
    assert torch.equal(y1, y2)
    x3, _ = make_activations(2000, 256, 12, l0=24, seed=8)
    assert not torch.equal(x1.crow_indices(), x3.crow_indices())
    v = x1.values()
    assert 0.6 < v.median().item() < 1.1 and 20 < v.max().item() <= 84     # median ~0.8, max near 80
    per_row = x1.crow_indices().diff().float()
    assert 22 < per_row.mean().item() < 26                                  # ~l0 distinct latents per row
    nnz = torch.bincount(x1.col_indices(), minlength=256)
    assert (nnz == 0).sum().item() >= round(0.05 * 256)                    # empty latents (+ rare ones never drawn)
    assert (y1.sum(1) == 1).all() and y1.dtype == torch.uint8              # one-hot
    assert x1.crow_indices().dtype == torch.int64 and x1.dtype == torch.float32


def test_loader_round_trip(tmp_path):
    x, y = make_activations(50, 9, 4, l0=3, seed=1)
    acts, labels = save_dataset(tmp_path, x, y)
    assert labels.stat().st_size == 50                                      # one uint8 per row
    x2, y2 = load_dataset(acts, labels, n_classes=4)
    assert torch.equal(x2.to_dense(), x.to_dense()) and torch.equal(y2, y)
    np.asarray([9], dtype=np.uint8).tofile(tmp_path / "bad.bin")
    with pytest.raises(ValueError, match="1 labels for 50 activation rows"):
        load_dataset(acts, tmp_path / "bad.bin")
    with pytest.raises(ValueError, match="class 3 >= n_classes=3"):
        load_dataset(acts, labels, n_classes=3)


def test_notebook_data_source_reads_your_files(tmp_path):
    x, y = make_activations(60, 9, 4, l0=3, seed=1)
    acts, labels = save_dataset(tmp_path, x, y)
    src = DataSource("cpu", n_latents=999, l0=1, seed=0, activations=str(acts), labels=str(labels))
    xs, ys = src.get(25, 3)                                           # the first rows and classes
    assert src.kind == "your files" and xs.shape == (25, 9) and ys.shape == (25, 3)
    assert torch.equal(xs.to_dense(), x.to_dense()[:25]) and torch.equal(ys, y[:25, :3])
    assert src.get(1000, 10)[0].shape == (60, 9)                      # capped at the files' size
    with pytest.raises(ValueError, match="both activations"):
        DataSource("cpu", 9, 1, 0, activations=str(acts))


def test_data_source_reads_relative_paths_from_where_the_command_ran(tmp_path, monkeypatch):
    # perflab run executes notebooks in notebooks/; a relative path is the user's, from $PERFLAB_CWD
    x, y = make_activations(30, 5, 3, l0=2, seed=4)
    save_dataset(tmp_path / "mine", x, y)
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path))
    src = DataSource("cpu", 5, 2, 0, activations="mine/activations.npz", labels="mine/labels.bin")
    assert torch.equal(src.get(30, 3)[0].to_dense(), x.to_dense())

