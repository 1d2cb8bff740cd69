"""The optimized solver's chunk kernel against float64, over both tails of z: eager, in its workspace form,
and compiled by inductor (its C++ must not fold the log1p correction away)."""
import pytest
import torch

from perflab.probe1d.kernels import Z_CLAMP, chunk_terms, chunk_terms_into


def _inputs(n_seg=37, n_cls=5, n_ev=301, seed=0):
    g = torch.Generator().manual_seed(seed)
    # w = 0 makes z = b exactly, so the float64 truth sees the same z as the float32 kernel
    bs = torch.empty(n_seg, n_cls).uniform_(-70, 70, generator=g)
    bs[:3] = torch.tensor([0.0, 1e-7, -1e-7])[:, None]           # z at 0 and around it
    bs[3:6] = torch.tensor([-17.0, -30.0, -50.0])[:, None]       # softplus ~ e^z, far below float32's eps
    ws = torch.zeros(n_seg, n_cls)
    seg = torch.randint(0, n_seg, (n_ev,), generator=g)
    seg[:n_seg] = torch.arange(n_seg)                              # every segment at least once
    v = torch.rand(n_ev, 1, generator=g) * 80
    return bs, ws, seg, v


def _truth(bs, seg):
    z = bs.double().index_select(0, seg)
    zc = z.clamp(-Z_CLAMP, Z_CLAMP)                               # the kernel's clamp (denormals), kept
    return torch.stack([torch.sigmoid(zc), torch.sigmoid(zc) * torch.sigmoid(-zc),
                        z.clamp_min(0) + torch.log1p(torch.exp(-zc.abs()))])


def _check(t, truth):
    # rtol: each plane is a few correctly rounded float32 ops (~8 ulps = 1e-6). atol 1e-18 lets the workspace
    # form's log1p floor (1e-12, see LOG1P_FLOOR) cancel to ~1e-19 absolute, and still catches what matters:
    # a plain log(1 + e) or s = mu (1 - mu) are off by up to 6e-8 in the tails (float32's eps / 2)
    torch.testing.assert_close(t.double(), truth, rtol=1e-6, atol=1e-18)


def test_chunk_terms_eager_and_workspace_match_float64():
    bs, ws, seg, v = _inputs()
    truth = _truth(bs, seg)
    _check(chunk_terms(bs, ws, seg, v), truth)
    buf = torch.empty(7, seg.numel(), bs.shape[1])
    _check(chunk_terms_into(bs, ws, seg, v, buf), truth)


def test_chunk_terms_single_column_tables():
    bs, ws, seg, v = _inputs(n_cls=1)
    _check(chunk_terms(bs, ws, seg, v), _truth(bs, seg))
    _check(chunk_terms_into(bs, ws, seg, v, torch.empty(7, seg.numel(), 1)), _truth(bs, seg))


def test_chunk_terms_compiled_by_inductor_matches_float64():
    pytest.importorskip("torch._inductor")
    compiled = torch.compile(chunk_terms, dynamic=True, backend="inductor")
    for n_ev in (301, 1000):                                      # two sizes, one dynamic graph
        bs, ws, seg, v = _inputs(n_ev=n_ev, seed=n_ev)
        _check(compiled(bs, ws, seg, v), _truth(bs, seg))
