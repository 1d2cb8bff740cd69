import pytest
import torch

from perflab.env import synchronize
from perflab.syncs import HostSyncError, assert_no_host_syncs, count_host_syncs


def test_counts_a_known_sequence_exactly():
    x = torch.randn(16)
    mask = x > 0
    y = x.clone()
    with count_host_syncs() as c:
        x.sum().item()                        # item
        bool(x[0] > 0)                        # __bool__
        float(x[1])                           # __float__
        int(x[2] > 0)                         # __int__
        x.tolist()                            # tolist
        x.cpu()                               # cpu
        torch.unique(x)                       # unique
        x.nonzero()                           # nonzero
        x[mask]                               # __getitem__[bool mask]
        y[mask] = 0.0                         # __setitem__[bool mask]
        torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 3]))  # repeat_interleave
        synchronize("cpu")                    # synchronize (counted on CPU too)
    assert c.by_op == {
        "item": 1, "__bool__": 1, "__float__": 1, "__int__": 1, "tolist": 1, "cpu": 1, "unique": 1,
        "nonzero": 1, "__getitem__[bool mask]": 1, "__setitem__[bool mask]": 1, "repeat_interleave": 1,
        "synchronize": 1,
    }
    assert c.total == 12


def test_sync_free_code_counts_zero():
    x = torch.randn(64, 8)
    idx = torch.randint(0, 64, (100,))
    with count_host_syncs() as c:
        for _ in range(3):
            y = x[idx] * 2                     # integer-index gather: no sync
            y = torch.where(y > 0, y, 0.0)     # three-argument where: no sync
            acc = torch.zeros(64, 8).index_add_(0, idx, y)
            torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 3]), output_size=6)
            acc.sum(dim=0).max()
    assert c.total == 0, c.by_op


def test_counts_each_call_in_a_loop():
    x = torch.randn(10)
    with count_host_syncs() as c:
        for i in range(10):
            x[i].item()
    assert c.by_op["item"] == 10 and c.total == 10


def test_nested_counters_both_count():
    x = torch.randn(3)
    with count_host_syncs() as outer:
        x.sum().item()
        with count_host_syncs() as inner:
            x.tolist()
    assert inner.total == 1 and outer.total == 2


def test_assert_no_host_syncs_raises_with_the_ops_named():
    with pytest.raises(HostSyncError, match="item"):
        with assert_no_host_syncs():
            torch.ones(2).sum().item()
    with assert_no_host_syncs():
        torch.ones(2).sum()


def test_counter_is_removed_after_the_block():
    with count_host_syncs() as c:
        pass
    torch.ones(1).item()
    assert c.total == 0
