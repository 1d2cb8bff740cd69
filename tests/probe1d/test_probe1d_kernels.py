"""The optimized solver's kernels against float64: the per-slot terms over both tails of z, the log1p series,
the six tile sums (pure form, eager workspace form, and compiled by inductor: its C++ must keep the tails),
and the batched LM tries against the serial rule they replace."""
import pytest
import torch

from perflab.probe1d.config import LM_TRIES
from perflab.probe1d.kernels import (
    Z_CLAMP,
    lm_tries,
    log1p_unit,
    slot_terms,
    tile_sums,
    tile_sums_into,
    trust_region_step,
)


def _z(n=2000, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.empty(n).uniform_(-70, 70, generator=g)
    z[:9] = torch.tensor([0.0, 1e-7, -1e-7, -17.0, -30.0, -50.0, 17.0, 30.0, 50.0])  # 0, and far tails
    return z


def _truth(z):
    zd = z.double()
    zc = zd.clamp(-Z_CLAMP, Z_CLAMP)                     # the kernel's clamp (denormals), kept
    mu = torch.sigmoid(zc)
    return mu, mu * torch.sigmoid(-zc), zd.clamp_min(0) + torch.log1p(torch.exp(-zc.abs()))


def _close(got, want):
    # rtol 1e-6: each term is a few correctly rounded float32 ops (the series: <= 4 ulps = 2.4e-7). Relative
    # in the tails too (atol ~0): a plain log(1 + e) or s = mu (1 - mu) are off by up to 6e-8 absolute there,
    # which is 100% of a term of 1e-9
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-30)


def test_log1p_series_over_the_unit_interval():
    e = torch.cat([torch.zeros(1), torch.logspace(-30, 0, 20001), torch.rand(20000)]).float()
    got = log1p_unit(e)
    assert got[0] == 0 and torch.equal(got[1:50], e[1:50])    # e tiny: e itself, exactly
    torch.testing.assert_close(got.double(), torch.log1p(e.double()), rtol=3e-7, atol=0)


def test_slot_terms_match_float64_in_both_tails():
    z = _z()
    for got, want in zip(slot_terms(z), _truth(z)):
        _close(got, want)


def _tiles(n_seg=7, n_col=5, n_tiles=23, tile=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    bs = torch.empty(n_seg, n_col).uniform_(-40, 10, generator=g)
    bs[0, 0] = -30.0                                         # a rare class: terms ~1e-13
    ws = torch.randn(n_seg, n_col, generator=g)
    seg = torch.randint(0, n_seg, (n_tiles,), generator=g).sort().values
    v = torch.rand(n_tiles, tile, generator=g) * 80
    v[:, -3:] = 0.0                                          # padding slots
    return bs, ws, seg, v


def _tile_truth(bs, ws, seg, v):
    z = ws[seg][:, None, :] * v[:, :, None] + bs[seg][:, None, :]    # float32 z, as the kernels round it
    mu, s, sp = _truth(z)
    vv = v.double()[:, :, None]
    return torch.stack([mu.sum(1), (mu * vv).sum(1), s.sum(1), (s * vv).sum(1), (s * vv * vv).sum(1), sp.sum(1)], 1)


@pytest.mark.parametrize("acc", (torch.float32, torch.float64))
def test_tile_sums_pure_and_workspace_forms(acc):
    bs, ws, seg, v = _tiles()
    want = _tile_truth(bs, ws, seg, v)
    # sums of 8 terms, each within 1e-6: 2e-6 relative (float32 accumulation adds ~8 ulps)
    torch.testing.assert_close(tile_sums(bs, ws, seg, v, acc).double(), want, rtol=2e-6, atol=1e-30)
    buf, vpow = torch.empty(6, v.numel() * bs.shape[1]), torch.ones(v.shape[0], 3, v.shape[1], dtype=acc)
    torch.testing.assert_close(tile_sums_into(bs, ws, seg, v, buf, vpow, acc).double(), want, rtol=2e-6, atol=1e-30)


def test_tile_sums_single_column():
    bs, ws, seg, v = _tiles(n_col=1)
    torch.testing.assert_close(tile_sums(bs, ws, seg, v, torch.float32).double(), _tile_truth(bs, ws, seg, v),
                               rtol=2e-6, atol=1e-30)


def test_tile_sums_compiled_by_inductor_match_float64():
    pytest.importorskip("torch._inductor")
    compiled = torch.compile(tile_sums, backend="inductor")
    for n_tiles in (23, 40):                                   # two sizes, one graph (dynamic tile count)
        bs, ws, seg, v = _tiles(n_tiles=n_tiles, seed=n_tiles)
        torch._dynamo.decorators.mark_unbacked(seg, 0)
        torch._dynamo.decorators.mark_unbacked(v, 0)
        torch.testing.assert_close(compiled(bs, ws, seg, v, torch.float32).double(), _tile_truth(bs, ws, seg, v),
                                   rtol=2e-6, atol=1e-30)


def test_lm_tries_pick_the_first_acceptable_try():
    # the rule the baseline runs try by try with host checks: lam x 10^t, the first finite step with a
    # positive predicted decrease; none: a zero step and lam x 10^6
    g = torch.Generator().manual_seed(2)
    k = 3000
    g0, g1, h1 = (torch.randn(k, generator=g, dtype=torch.float64) * 10 for _ in range(3))
    h0, h2 = (torch.randn(k, generator=g, dtype=torch.float64) * 50 for _ in range(2))   # indefinite too
    g0[:10] = 0.0
    g1[:10] = 0.0                                            # zero gradient: no try is acceptable
    lam = 10 ** (torch.rand(k, generator=g, dtype=torch.float64) * 8 - 6)
    qx = torch.rand(k, generator=g, dtype=torch.float64) * 3 + 0.1
    db, dw, pred, clip, lam_new, accepted = lm_tries(g0, g1, h0, h1, h2, lam, qx)
    assert not accepted[:10].any() and accepted.any() and not accepted.all()
    for i in range(k):
        for t in range(LM_TRIES):
            lt = lam[i:i + 1] * 10.0 ** t
            d_b, d_w, p, c, ok = trust_region_step(g0[i:i + 1], g1[i:i + 1], h0[i:i + 1], h1[i:i + 1], h2[i:i + 1], lt, qx[i:i + 1])
            if ok.item():
                assert accepted[i] and lam_new[i] == lt.clamp(1e-12, 1e12) and db[i] == d_b and dw[i] == d_w
                assert pred[i] == p and clip[i] == c
                break
        else:
            assert not accepted[i] and db[i] == 0 and dw[i] == 0 and lam_new[i] == (lam[i] * 1e6).clamp(1e-12, 1e12)


def test_float64_tile_sums_are_summed_in_float64():
    # w = b = 0: every slot's terms are exact (mu = 1/2, s = 1/4, softplus = log 2 rounded to float32) in both
    # kernels, so the sums are known to float64 rounding. 2048 slots of values up to 80: a float32 sum of them
    # is off by ~1e-7 relative (its last bits), 1e5 times the 1e-12 allowed here
    g = torch.Generator().manual_seed(5)
    n_tiles, tile, n_col = 3, 2048, 2
    v = torch.rand(n_tiles, tile, generator=g) * 80
    bs = ws = torch.zeros(1, n_col)
    seg = torch.zeros(n_tiles, dtype=torch.long)
    vd = v.double()[:, :, None].expand(n_tiles, tile, n_col)
    sp = torch.log(torch.tensor(2.0)).double()
    want = torch.stack([0.5 * torch.ones_like(vd).sum(1), (0.5 * vd).sum(1), (0.25 * torch.ones_like(vd)).sum(1),
                        (0.25 * vd).sum(1), (0.25 * vd * vd).sum(1), (sp * torch.ones_like(vd)).sum(1)], 1)
    buf = torch.empty(6, v.numel() * n_col)

    def into(acc):
        return tile_sums_into(bs, ws, seg, v, buf, torch.ones(n_tiles, 3, tile, dtype=acc), acc)

    for got in (tile_sums(bs, ws, seg, v, torch.float64), into(torch.float64)):
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    # the input shows the difference: float32 sums miss the tolerance
    for got in (tile_sums(bs, ws, seg, v, torch.float32), into(torch.float32)):
        assert not torch.allclose(got.double(), want, rtol=1e-12, atol=0)
