"""The vectorized separability tr(S_B)/tr(S_W) equals the per-class loop and the float64 reference,
in value and gradient, with zero host syncs."""
import pytest
import torch

from perflab.kit.syncs import assert_no_host_syncs, count_host_syncs
from perflab.vae import fisher_ratio_loop, fisher_ratio_vectorized, remap_presence
from perflab.vae.reference import fisher_ratio_reference

K = 6


def _case(seed, n, z_dim, present, bad=0):
    gen = torch.Generator().manual_seed(seed)
    y = torch.tensor(present)[torch.randint(0, len(present), (n,), generator=gen)]
    if bad:
        y[:bad] = 9  # outside [0, K): no class
    z = torch.randn(n, z_dim, generator=gen, dtype=torch.float64) * 2 + y[:, None] * 0.5
    return z, y


CASES = [  # (seed, rows, Z, labels present, rows with a bad label)
    (0, 64, 36, [0, 1, 2], 0),
    (1, 64, 36, [3, 4, 5], 0),
    (2, 17, 5, [5, 1], 0),          # awkward sizes, unsorted, a gap
    (3, 8, 3, [2], 0),              # a single class: tr(S_B) = 0
    (4, 33, 7, [0, 2, 4, 5], 3),    # bad labels are left out of both
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c[0]}")
def test_vectorized_equals_loop_and_reference(case):
    z, y = _case(*case)
    r = remap_presence(y, K)
    loop = fisher_ratio_loop(z, r.labels, r.n_classes)
    vec = fisher_ratio_vectorized(z, r.labels, r.n_classes, num_labels=K)
    ref = fisher_ratio_reference(z, r.labels)
    # float64 inputs: the two orders of summation agree to ~1e-15 relative; 1e-10 leaves room
    torch.testing.assert_close(vec, loop, rtol=1e-10, atol=1e-12)
    assert vec.item() == pytest.approx(ref, rel=1e-10, abs=1e-12)
    if len(case[3]) == 1:
        assert vec.item() == 0.0


def test_float32_agreement_and_gradients():
    z, y = _case(5, 64, 36, [3, 4, 5])
    r = remap_presence(y, K)
    z1 = z.float().requires_grad_()
    z2 = z.float().requires_grad_()
    loop = fisher_ratio_loop(z1, r.labels, r.n_classes)
    vec = fisher_ratio_vectorized(z2, r.labels, r.n_classes, num_labels=K)
    # float32 sums of 64 x 36 terms in a different order: agree to a few ulps (rtol 1e-5)
    torch.testing.assert_close(vec, loop, rtol=1e-5, atol=1e-7)
    loop.backward()
    vec.backward()
    torch.testing.assert_close(z2.grad, z1.grad, rtol=1e-4, atol=1e-6)
    assert z1.grad.abs().sum() > 0  # the ratio does depend on z


def test_vectorized_has_zero_host_syncs_and_loop_counts_one_per_class():
    z, y = _case(6, 64, 36, [3, 4, 5])
    r = remap_presence(y, K)
    with assert_no_host_syncs():
        fisher_ratio_vectorized(z, r.labels, r.n_classes, num_labels=K)
    with count_host_syncs() as c:
        fisher_ratio_loop(z, r.labels, r.n_classes)
    # the device count of classes must come to the host (int), then one masked gather per class
    assert c.by_op == {"__int__": 1, "__getitem__[bool mask]": 3}
    with count_host_syncs() as c:
        fisher_ratio_loop(z, r.labels, 3)  # a host count (the host remap's): only the gathers
    assert c.by_op == {"__getitem__[bool mask]": 3}


def test_no_labelled_rows_gives_zero():
    z = torch.randn(4, 3)
    labels = torch.full((4,), -1)
    assert fisher_ratio_loop(z, labels, 0).item() == 0.0
    assert fisher_ratio_vectorized(z, labels, 0, num_labels=K).item() == 0.0
