"""01/02's GPU path on tiny configs (`pytest -m gpu`: skipped without CUDA)."""

import pytest
import torch

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")



def test_cuda_probe1d_fit_under_cuda_graphs_equals_eager():
    # probe1d/optimized.py's CUDA-graph branches (T3): the tile sums consumed in their generation, the LM state
    # cloned out of the pool before the next iteration's graphs; one recording per shape (several chunks and a
    # compaction: tests/kit/test_cudagraph_lifetimes.py's fit), compared with the eager fit on CUDA (which
    # test_cuda_probe1d_fit_equals_the_reference compares with the float64 reference)
    from torch._dynamo.utils import counters

    from perflab.kit.compiles import count_compiles, reset
    from perflab.probe1d import Sparse1DProbe, make_activations

    x, y = make_activations(300, 12, 5, l0=5, seed=4)
    kw = dict(device="cuda", max_iter=30, accum_dtype="float64", chunk_pair_events=400)
    eager = Sparse1DProbe(**kw).fit(x, y)
    reset()
    graphs = Sparse1DProbe(compile="reduce-overhead", backend="inductor", **kw)
    assert graphs.solver.cudagraphs
    skips0 = counters["inductor"]["cudagraph_skips"]
    with count_compiles() as cc:
        got = graphs.fit(x, y)
    # CUDA graphs recorded and none skipped: inductor skips them silently on a CPU input or a mutated one (review W1),
    # and eager code would pass every check above
    assert cc.cudagraph_recordings >= 1 and counters["inductor"]["cudagraph_skips"] == skips0, cc.as_dict()
    assert got.counters_["work_rebuilds"] >= 1                  # compaction ran: the LM state carried over
    for a, b in ((got.coef_, eager.coef_), (got.intercept_, eager.intercept_)):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.loss_matrix(x, y).cpu(), eager.loss_matrix(x, y).cpu(), rtol=1e-5, atol=1e-6)
    reset()


def test_cuda_probe1d_fit_equals_the_reference():
    # the optimized solver's chunk size on an accelerator (probe1d/optimized.py) and its compiled kernel on CUDA
    from perflab.probe1d import Reference1DProbe, Sparse1DProbe, make_activations

    x, y = make_activations(157, 13, 5, l0=5, seed=3)
    ref = Reference1DProbe(max_iter=3, tol=0.0).fit(x, y)
    for compile in ("off", "default"):
        p = Sparse1DProbe(device="cuda", max_iter=3, tol=0.0, compile=compile).fit(x, y)
        # float32 weights and sums against the float64 oracle, the same iterations (1e-4, as on a CPU:
        # tests/probe1d/test_probe1d_fits_vs_reference.py)
        torch.testing.assert_close(p.coef_.cpu().double(), torch.from_numpy(ref.coef_), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(p.intercept_.cpu().double(), torch.from_numpy(ref.intercept_), rtol=1e-4, atol=1e-4)
