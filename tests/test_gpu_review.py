"""The findings of the static review of the CUDA paths at 7e47ac6 (`../shared/research/gpu-review-2026-11-24.md`),
each tested where a CPU can reach it; every test here fails on 7e47ac6's code. Findings 1 and 2 (the sync checks
of 03 and 06) are in test_host_transfers.py; finding 9 (`bench.measure_cuda_events`: an unused CUDA-only timer
with a wrong docstring) was fixed by removing the function. What only a GPU can run is in the `-m gpu` tests
listed in test_cuda_branches.py.
"""
import collections
import types

import pytest
import torch
from torch.autograd import DeviceType

# ---- 3: profiler keys that exist on every device ------------------------------------------------------------


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_self_time_key_is_an_attribute_of_key_averages(device):
    # 7e47ac6 read `self_cuda_time_total` from key_averages() on CUDA: FunctionEventAvg has only
    # `self_device_time_total` (renamed in torch 2.4), so 03's step profile raised AttributeError there
    from perflab.launches import self_time_key

    with torch.profiler.profile() as prof:
        torch.ones(8).sum()
    for e in prof.key_averages():
        assert isinstance(getattr(e, self_time_key(device)), (int, float))
    assert prof.key_averages().table(sort_by=self_time_key(device), row_limit=2)


def test_profiler_activities_name_the_device_own_activity():
    from torch.profiler import ProfilerActivity

    from perflab.launches import profiler_activities

    assert profiler_activities("cpu") == [ProfilerActivity.CPU]
    assert profiler_activities("cuda") == [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    assert profiler_activities("meta") == [ProfilerActivity.CPU]


# ---- 4: the torch the captured step runs on ------------------------------------------------------------------

def test_this_torch_traces_backward_into_one_graph():
    from perflab.vae.captured import traced_backward_problem

    assert traced_backward_problem() is None  # the pinned CPU torch: the captured step compiles (tests below)


def test_a_torch_that_cannot_trace_backward_gets_a_clear_error_or_the_eager_form(monkeypatch):
    from perflab.vae import ModelConfig, TrainConfig, step_config
    from perflab.vae import captured as cap
    from perflab.vae.study import trainer

    problem = "torch 2.10.0 has no torch._dynamo.config.trace_autograd_ops"
    monkeypatch.setattr(cap, "traced_backward_problem", lambda: problem)
    impl = cap.Captured(step_config("optimized", log_every=2), compile="default")
    kw = dict(model_cfg=ModelConfig(hidden=(8,), latent=4), train_cfg=TrainConfig(), seed=0, device="cpu")
    with pytest.raises(RuntimeError, match=rf"{problem}\. Install torch >= {cap.TESTED_TORCH}.*compile=off"):
        trainer(impl, **kw)
    eager, note = cap.runnable(impl)
    assert eager.compile == "off" and note == f"compile=default replaced by off: {problem}"
    assert trainer(eager, **kw).compiled is None                     # the fallback runs
    assert cap.runnable(cap.Captured(impl.step, compile="off")) == (cap.Captured(impl.step, compile="off"), "")


# ---- 5: compiled vs eager curves over a long run ------------------------------------------------------------

def test_curves_are_checked_over_their_first_steps_and_the_whole_gap_reported():
    from perflab.vae.checks import CHECKED_STEPS, curve_gap, curves_agree

    a = types.SimpleNamespace(values={"loss": [1.0] * 500})
    drift = [1.0 + 2e-4 * (i >= CHECKED_STEPS) for i in range(500)]   # rounding carried past the checked steps
    b = types.SimpleNamespace(values={"loss": drift})
    assert curves_agree(a, b, rtol=1e-4, steps=CHECKED_STEPS) == {"loss": True}
    assert curves_agree(a, b, rtol=1e-4) == {"loss": False}
    assert curve_gap(a, b) == pytest.approx(2e-4)


# ---- 6, 7: what the launch counter counts ---------------------------------------------------------------------

def _ev(name, device_type=DeviceType.CPU):
    return types.SimpleNamespace(name=name, device_type=device_type, cpu_parent=None)


def test_launch_calls_are_split_by_what_they_start():
    from perflab.launches import LaunchCounter

    # one replay of a captured step that draws random numbers, as CUPTI reports it: two input copies, the two
    # RNG-state fills of replay_prologue (PyTorch PR #143777), the graph launch, and the graph's kernels; then
    # one inductor kernel launched by Triton's launcher (cuLaunchKernelEx, which 7e47ac6 did not count)
    # (CUDA 13 names its <<<>>> launches __cudaLaunchKernel); a synchronize is kept apart by name
    events = ([_ev("cudaMemcpyAsync")] * 2 + [_ev("cudaLaunchKernel"), _ev("__cudaLaunchKernel")]
              + [_ev("cudaGraphLaunch")] + [_ev("cuLaunchKernelEx")] + [_ev("cudaStreamSynchronize")]
              + [_ev("aten::cumsum"), _ev("curve_fit")]
              + [_ev("Memcpy DtoD (Device -> Device)", DeviceType.CUDA)] * 2
              + [_ev("void at::native::fill_kernel", DeviceType.CUDA)] * 2
              + [_ev("triton_poi_fused_add_0", DeviceType.CUDA)] * 41
              + [_ev("Memset (Device)", DeviceType.CUDA)])
    c = LaunchCounter("cuda")
    c._read(events)
    assert (c.graph_launches, c.kernel_launches, c.copy_calls, c.memset_calls) == (1, 3, 2, 0)
    assert c.runtime_launches == 6 and c.other_calls == {"cudaStreamSynchronize": 1} and c.aten_ops == 1
    assert (c.kernels, c.copies, c.memsets) == (43, 2, 1) and c.total == 43      # copies are not kernels
    assert c.by_op == collections.Counter({"triton_poi_fused_add_0": 41, "void at::native::fill_kernel": 2})


# ---- 8: one static graph per captured batch size -------------------------------------------------------------

def test_the_captured_step_compiles_a_static_graph(monkeypatch):
    from perflab.vae import ModelConfig, TrainConfig, step_config
    from perflab.vae import captured as cap
    from perflab.vae.study import trainer

    seen = {}
    monkeypatch.setattr(cap, "traced_backward_problem", lambda: None)  # the probe is not what this test compiles
    monkeypatch.setattr(cap.torch, "compile", lambda fn, **kw: seen.update(kw) or fn)
    trainer(cap.Captured(step_config("optimized", log_every=2), compile="default", backend="eager"),
            model_cfg=ModelConfig(hidden=(8,), latent=4), train_cfg=TrainConfig(), seed=0, device="cpu")
    # 7e47ac6 let dynamo mark the batch dynamic at the second CapturedStep of a process (05's sweep): another
    # program than the headline's static step, its kernels tuned at the first size
    assert seen["dynamic"] is False and seen["fullgraph"] is True


# ---- 10: free memory on a GPU counts what torch's allocator holds unused ----------------------------------------

def test_device_memory_counts_the_allocator_cache_as_free(monkeypatch):
    from perflab.memory import device_memory

    # 7e47ac6 read mem_get_info as it was: what the allocator held unused (18 GiB here) counted as taken
    gib, cached = 2**30, [18 * 2**30]
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: cached.__setitem__(0, 0))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (10 * gib + 18 * gib - cached[0], 80 * gib))
    assert device_memory("cuda") == {"free_bytes": 28 * gib, "total_bytes": 80 * gib}
