"""The model pieces against float64 references, and the data generator."""
import math

import pytest
import torch

from perflab.kit.params import ParameterError
from perflab.vae import (
    ComplexLinear,
    ModelConfig,
    build_model,
    count_parameters,
    kl_standard_normal,
    make_batches,
    mixture_nll,
    stream,
)
from perflab.vae.data import bit_pool, integer_pool, is_probable_prime, to_bits
from perflab.vae.reference import complex_linear_reference, kl_reference, mixture_nll_reference


def test_complex_linear_matches_complex_arithmetic():
    torch.manual_seed(0)
    layer = ComplexLinear(7, 5)
    h = torch.randn(3, 14)
    out = layer(h)
    assert out.shape == (3, 10)
    # float32 products of 7 terms against complex128: 1e-5 relative covers the rounding
    torch.testing.assert_close(out.double(), complex_linear_reference(layer, h), rtol=1e-5, atol=1e-6)


def test_mixture_nll_and_kl_match_references():
    gen = torch.Generator().manual_seed(1)
    bits = torch.randint(0, 2, (5, 256), generator=gen).float()
    x = bits + 0.05 * torch.randn(5, 256, generator=gen)
    logits = 3 * torch.randn(5, 256, generator=gen)
    # float32 logaddexp summed over 256 bits vs a direct float64 formula: rtol 1e-5
    assert mixture_nll(x, logits, 0.05).item() == pytest.approx(mixture_nll_reference(x, logits, 0.05), rel=1e-5)
    mu, logvar = torch.randn(5, 36, generator=gen), torch.randn(5, 36, generator=gen)
    assert kl_standard_normal(mu, logvar).item() == pytest.approx(kl_reference(mu, logvar), rel=1e-5)


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_model_shapes_and_seeded_init(kind):
    cfg = ModelConfig(kind=kind)
    a, b = build_model(cfg, seed=3), build_model(cfg, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    torch.manual_seed(0)
    logits, mu, logvar = a(torch.randn(4, 256))
    assert logits.shape == (4, 256) and mu.shape == logvar.shape == (4, 36)
    n = count_parameters(a)
    assert (340_000 < n < 400_000) if kind == "real" else n > 600_000  # "~0.35M params" in the original


def test_model_config_is_checked():
    with pytest.raises(ParameterError, match="model kind"):
        build_model(ModelConfig(kind="quaternion"))
    with pytest.raises(ParameterError, match="dropout"):
        build_model(ModelConfig(dropout=1.0))


def test_integer_pool_kinds():
    primes, hard, easy = integer_pool(5, 6)
    assert all(n.bit_length() == 256 for pool in (primes, hard, easy) for n in pool)
    assert all(pow(2, n - 1, n) == 1 for n in primes)          # Fermat base 2: an independent check
    assert not any(is_probable_prime(n) for n in hard + easy)
    assert all(any(n % p == 0 for p in range(2, 1000)) for n in easy)
    assert all(math.gcd(n, math.prod(range(2, 1000))) == 1 for n in hard)  # no small factor
    assert to_bits(5, 4) == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="does not fit"):
        to_bits(16, 4)


def test_stream_batches():
    a = make_batches(3, batch=64, group=1, seed=2, per_kind=8)
    b = make_batches(3, batch=64, group=1, seed=2, per_kind=8)
    assert all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))
    x, y = a[0]
    assert x.shape == (64, 256) and x.dtype == torch.float32 and y.dtype == torch.long
    assert set(y.tolist()) <= {3, 4, 5}
    # each row is the clean bits of a pool integer of its kind, plus N(0, 0.05) noise
    clean = bit_pool(2, 8)[y - 3]                                   # [64, 8, 256]
    err = (x[:, None, :] - clean).abs().amax(dim=2).amin(dim=1)     # distance to the nearest pool entry
    assert err.max() < 0.5 and 0.02 < (x - x.round()).std() < 0.08
    assert set(make_batches(1, group=0, per_kind=8)[0][1].tolist()) <= {0, 1, 2}
    with pytest.raises(ValueError, match="group"):
        next(stream(1, group=2))
    with pytest.raises(ValueError, match="batch"):
        next(stream(1, batch=0))
