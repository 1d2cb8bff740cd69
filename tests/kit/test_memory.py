import torch

from perflab.kit.memory import device_memory, peak_memory


def test_cpu_peak_sees_a_temporary_allocation():
    with peak_memory("cpu") as mem:
        t = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
        del t
    assert mem.method.startswith("rss")
    assert mem.delta_bytes >= 48 * 2**20, mem


def test_device_memory_reports_totals():
    d = device_memory("cpu")
    assert 0 < d["free_bytes"] <= d["total_bytes"]


def test_cpu_peak_sees_memory_the_heap_kept_from_earlier_blocks():
    for _ in range(3):  # churn 1 MiB blocks: glibc raises its mmap threshold and keeps freed heap pages
        keep = [torch.ones(2**18) for _ in range(64)]
        del keep
    with peak_memory("cpu") as mem:
        x = [torch.ones(2**18) for _ in range(48)]  # 48 MiB live, reusing the kept pages
        del x
    assert mem.delta_bytes >= 32 * 2**20, mem


# ---- 10: free memory on a GPU counts what torch's allocator holds unused ----------------------------------------

def test_device_memory_counts_the_allocator_cache_as_free(monkeypatch):
    from perflab.kit.memory import device_memory

    # 7e47ac6 read mem_get_info as it was: what the allocator held unused (18 GiB here) counted as taken
    gib, cached = 2**30, [18 * 2**30]
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: cached.__setitem__(0, 0))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (10 * gib + 18 * gib - cached[0], 80 * gib))
    assert device_memory("cuda") == {"free_bytes": 28 * gib, "total_bytes": 80 * gib}
