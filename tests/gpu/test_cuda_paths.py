"""The kit on a GPU, and where each study's GPU tests are (`pytest -m gpu`: skipped without CUDA).

The review of 7e47ac6's CUDA paths (`../shared/research/gpu-review-2026-11-24.md`) found two notebooks that
would stop at their correctness cells on an H100 and a profile that would raise, all green on CPU, because no GPU
test reached them. Each test here runs a notebook's own entry point on CUDA at a size that takes about a second
(a compile more), so a GPU host at hand for a few minutes finds such a bug before a user does. Together with the
other `@pytest.mark.gpu` tests they cover every CUDA-only branch (`test_cuda_branches.py` keeps the list). Each
study's are in its folder: tests/<study>/test_<study>_cuda.py; the kit's are below.
"""

import pytest
import torch

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")



# ---- the kit on CUDA -----------------------------------------------------------------------------------------------

def test_cuda_environment_stamp():
    from perflab.kit.env import device_kind, device_name, fingerprint, pick_device, synchronize
    from perflab.kit.notebook import environment_line
    from perflab.kit.syncs import count_host_syncs

    assert pick_device("auto") == CUDA and pick_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match="CUDA device"):
        pick_device(f"cuda:{torch.cuda.device_count()}")
    with count_host_syncs(CUDA) as s:
        synchronize(CUDA)
    assert s.by_op == {"synchronize": 1}
    fp = fingerprint(CUDA)
    assert fp["device_name"] == device_name(CUDA) == torch.cuda.get_device_name(0)
    assert fp["gpu_count"] >= 1 and fp["gpu_sm_count"] > 0 and fp["device_kind"] == device_kind(CUDA) != "cuda"
    assert f"CUDA {torch.version.cuda}" in environment_line(CUDA)


def test_cuda_a_decision_synchronizes_its_blocks_and_keeps_the_waits():
    """On a GPU each block ends with a synchronize (the queued kernels are the block's) and no run-queue wait is taken
    out (the GPU runs on while the host waits): 4x the matmuls is ~4x the time, decided in its budget."""
    import time

    from perflab.kit.rounds import Stopwatch
    from perflab.kit.syncs import count_host_syncs
    from perflab.kit.verdicts import decide_speedup

    a = torch.randn(2048, 2048, device=CUDA)
    sw = Stopwatch(CUDA)
    assert not sw.corrects
    with count_host_syncs(CUDA) as s:
        sw.time(lambda: a @ a, 3)
    assert s.by_op.get("synchronize") == 2
    t0 = time.perf_counter()
    d = decide_speedup(lambda: [a @ a for _ in range(4)], lambda: a @ a, at_least=2.0, max_run_time=2.0, device=CUDA)
    assert d.verdict == "holds" and 3.0 < d.value < 5.0 and not d.waits_removed
    assert time.perf_counter() - t0 < 2.4


def test_cuda_memory_peak_and_free():
    from perflab.kit.memory import device_memory, peak_memory

    with peak_memory(CUDA) as m:
        x = torch.empty(64 * 2**20, dtype=torch.uint8, device=CUDA)
        del x
    assert m.peak_bytes >= 64 * 2**20 and m.method == "cuda_allocator"
    mem = device_memory(CUDA)
    assert 0 < mem["free_bytes"] <= mem["total_bytes"]


def test_cuda_sizes_of_the_floors():
    from perflab.kit.bench import matmul_peak
    from perflab.probe1d.study import measure_floor

    flops, _ = matmul_peak(CUDA, torch.bfloat16, min_run_time=0.05, max_run_time=0.2)   # 8192^3 on an accelerator
    assert flops > 1e13
    floor = measure_floor(10**6, 64, 8, device=CUDA, min_run_time=0.05, max_run_time=0.2)
    assert 0 < floor["low"] <= floor["high"]
