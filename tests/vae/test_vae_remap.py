"""Label remaps: all three give each label its rank among the labels present; the presence-table
remap does it with zero host syncs; bad labels and empty batches give clear errors."""
import pytest
import torch

from perflab.kit.syncs import assert_no_host_syncs, count_host_syncs
from perflab.vae import remap_host, remap_presence, remap_unique
from perflab.vae.reference import remap_reference

K = 6  # declared label range [0, 6): both groups
CASES = {
    "labels 0-2": [0, 1, 2, 2, 1, 0, 0],
    "labels 3-5": [3, 4, 5, 5, 3, 4, 4],
    "single class": [4, 4, 4, 4],
    "unsorted with a gap": [5, 0, 5, 2, 0, 2, 5],
    "one sample": [3],
}
REMAPS = {"host": remap_host, "unique": remap_unique, "presence": remap_presence}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", REMAPS)
def test_remap_matches_reference(name, case):
    y = torch.tensor(CASES[case])
    out = REMAPS[name](y, K)
    assert out.labels.tolist() == remap_reference(CASES[case])
    assert int(out.n_classes) == len(set(CASES[case]))
    assert int(out.n_bad) == 0


def test_remap_random_batches_agree():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = int(torch.randint(1, 80, (1,), generator=gen))
        present = torch.randperm(K, generator=gen)[: int(torch.randint(1, K + 1, (1,), generator=gen))]
        y = present[torch.randint(0, len(present), (n,), generator=gen)]
        ref = remap_reference(y.tolist())
        for f in REMAPS.values():
            assert f(y, K).labels.tolist() == ref


@pytest.mark.parametrize("case", CASES)
def test_presence_remap_has_zero_host_syncs(case):
    y = torch.tensor(CASES[case])
    with assert_no_host_syncs():
        out = remap_presence(y, K)
    assert out.labels.tolist() == remap_reference(CASES[case])


def test_baseline_remaps_sync_as_counted():
    y = torch.tensor([3, 4, 5, 3])
    with count_host_syncs() as host:
        remap_host(y, K)
    assert host.by_op == {"tolist": 1, "tensor(host list) -> device": 1}
    with count_host_syncs() as uniq:  # the seed's "GPU-side" remap: unique + one masked write per class
        remap_unique(y, K)
    assert uniq.by_op == {"unique": 1, "__setitem__[bool mask]": 3}


def test_labels_outside_the_declared_range():
    y = torch.tensor([0, 1, 7, 2, -1])
    with pytest.raises(ValueError, match=r"outside the declared range \[0, 6\).*-1, 7"):
        remap_host(y, K)
    with pytest.raises(ValueError, match=r"outside the declared range \[0, 6\)"):
        remap_presence(y, K, check=True)  # validation mode: one sync, then a clear error
    out = remap_presence(y, K)  # hot-loop mode: no sync, bad labels get no class and are counted
    assert out.labels.tolist() == [0, 1, -1, 2, -1]
    assert int(out.n_bad) == 2 and int(out.n_classes) == 3
    assert int(remap_unique(y, K).n_bad) == 2


@pytest.mark.parametrize("name", REMAPS)
def test_bad_label_tensors(name):
    f = REMAPS[name]
    with pytest.raises(ValueError, match="empty batch"):
        f(torch.tensor([], dtype=torch.long), K)
    with pytest.raises(ValueError, match="integer tensor"):
        f(torch.tensor([0.0, 1.0]), K)
    with pytest.raises(ValueError, match="1-D"):
        f(torch.zeros(2, 2, dtype=torch.long), K)
    with pytest.raises(ValueError, match="num_labels"):
        f(torch.tensor([0]), 0)


@pytest.mark.gpu
def test_presence_remap_on_cuda_is_sync_free_and_correct():
    y = torch.tensor(CASES["unsorted with a gap"], device="cuda")
    with assert_no_host_syncs(cuda_debug=True) as c:
        out = remap_presence(y, K)
    assert c.cuda_debug_warnings == 0
    assert out.labels.cpu().tolist() == remap_reference(CASES["unsorted with a gap"])
