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
