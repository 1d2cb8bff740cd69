import torch

from perflab.memory import device_memory, peak_memory


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
