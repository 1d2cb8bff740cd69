import collections
import types

import pytest
import torch
from torch.autograd import DeviceType

from perflab.kit.launches import LaunchCounter, count_launches


def _step(x, w):
    return torch.relu(x @ w).sum(1).softmax(0)     # four ops: matmul, relu, sum, softmax


def test_eager_ops_are_counted_once_each_not_their_internals():
    x, w = torch.randn(8, 4), torch.randn(4, 3)
    with count_launches("cpu") as launches:
        _step(x, w)
    # aten::matmul calls aten::mm inside, aten::softmax calls aten::_softmax: those are not counted again
    assert launches.total == 4 and launches.aten_ops == 4 and launches.graph_calls == 0
    assert set(launches.by_op) == {"aten::matmul", "aten::relu", "aten::sum", "aten::softmax"}
    with count_launches("cpu") as twice:
        _step(x, w)
        _step(x, w)
    assert twice.total == 8


def test_a_python_loop_of_small_ops_counts_every_op():
    x = torch.zeros(4)
    with count_launches("cpu") as launches:
        for _ in range(10):
            x = x + 1
    assert launches.total == 10 and launches.by_op["aten::add"] == 10


def test_a_compiled_region_counts_as_a_graph_call():
    x, w = torch.randn(8, 4), torch.randn(4, 3)
    f = torch.compile(_step, backend="eager", fullgraph=True)
    f(x, w)                                          # compile outside the count
    with count_launches("cpu") as launches:
        f(x, w)
    assert launches.total >= 1 and launches.kernels == 0


@pytest.mark.gpu
def test_cuda_kernels_are_counted_and_a_graph_replay_is_one_launch():
    x, w = torch.randn(64, 32, device="cuda"), torch.randn(32, 16, device="cuda")
    _step(x, w)
    with count_launches() as eager:
        _step(x, w)
    assert eager.kernels >= 4 and eager.total == eager.kernels
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        _step(x, w)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        _step(x, w)
    with count_launches() as replay:
        g.replay()
    assert replay.kernels >= 4 and replay.runtime_launches == replay.graph_launches == 1


# ---- the profiler's keys and activities on every device

@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_self_time_key_is_an_attribute_of_key_averages(device):
    # 7e47ac6 read `self_cuda_time_total` from key_averages() on CUDA: FunctionEventAvg has only
    # `self_device_time_total` (renamed in torch 2.4), so 03's step profile raised AttributeError there
    from perflab.kit.launches import self_time_key

    with torch.profiler.profile() as prof:
        torch.ones(8).sum()
    for e in prof.key_averages():
        assert isinstance(getattr(e, self_time_key(device)), (int, float))
    assert prof.key_averages().table(sort_by=self_time_key(device), row_limit=2)


def test_profiler_activities_name_the_device_own_activity():
    from torch.profiler import ProfilerActivity

    from perflab.kit.launches import profiler_activities

    assert profiler_activities("cpu") == [ProfilerActivity.CPU]
    assert profiler_activities("cuda") == [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    assert profiler_activities("meta") == [ProfilerActivity.CPU]


# ---- 6, 7: what the launch counter counts ---------------------------------------------------------------------

def _event(name, device_type=DeviceType.CPU):
    return types.SimpleNamespace(name=name, device_type=device_type, cpu_parent=None)


def test_launch_calls_are_split_by_what_they_start():
    from perflab.kit.launches import LaunchCounter

    # one replay of a captured step that draws random numbers, as CUPTI reports it: two input copies, the two
    # RNG-state fills of replay_prologue (PyTorch PR #143777), the graph launch, and the graph's kernels; then
    # one inductor kernel launched by Triton's launcher (cuLaunchKernelEx, which 7e47ac6 did not count)
    # (CUDA 13 names its <<<>>> launches __cudaLaunchKernel); a synchronize is kept apart by name
    events = ([_event("cudaMemcpyAsync")] * 2 + [_event("cudaLaunchKernel"), _event("__cudaLaunchKernel")]
              + [_event("cudaGraphLaunch")] + [_event("cuLaunchKernelEx")] + [_event("cudaStreamSynchronize")]
              + [_event("aten::cumsum"), _event("curve_fit")]
              + [_event("Memcpy DtoD (Device -> Device)", DeviceType.CUDA)] * 2
              + [_event("void at::native::fill_kernel", DeviceType.CUDA)] * 2
              + [_event("triton_poi_fused_add_0", DeviceType.CUDA)] * 41
              + [_event("Memset (Device)", DeviceType.CUDA)])
    c = LaunchCounter("cuda")
    c._read(events)
    assert (c.graph_launches, c.kernel_launches, c.copy_calls, c.memset_calls) == (1, 3, 2, 0)
    assert c.runtime_launches == 6 and c.other_calls == {"cudaStreamSynchronize": 1} and c.aten_ops == 1
    assert (c.kernels, c.copies, c.memsets) == (43, 2, 1) and c.total == 43      # copies are not kernels
    assert c.by_op == collections.Counter({"triton_poi_fused_add_0": 41, "void at::native::fill_kernel": 2})


# ---- N6: one launch is counted once, whatever entry points it passes through ----------------------------------

def _nested_event(name, parent=None, device_type=DeviceType.CPU):
    return types.SimpleNamespace(name=name, device_type=device_type, cpu_parent=parent)


def test_a_launch_reported_by_two_nested_entry_points_counts_once():
    outer = _nested_event("__cudaLaunchKernel")                    # CUDA 13's <<<>>> entry, if CUPTI reports both
    graph, runtime = _nested_event("cudaGraphLaunch"), _nested_event("cudaLaunchKernel")
    events = [outer, _nested_event("cudaLaunchKernel", outer), runtime, _nested_event("cuLaunchKernel", runtime),
              graph, _nested_event("cuGraphLaunch", graph), _nested_event("cuLaunchKernelEx", _nested_event("triton_poi_fused_0"))]
    c = LaunchCounter("cuda")
    c._read(events)
    # 3 kernel launches (the <<<>>> one, the runtime call whose driver call nests in it, Triton's), 1 graph launch
    assert (c.kernel_launches, c.graph_launches, c.other_calls) == (3, 1, {}), (c.kernel_launches, c.graph_launches)


# ---- the counter's own bookkeeping (issue 39: survivors of its mutation run) ------------------------------------

def test_the_self_time_key_is_the_hosts_on_a_cpu_and_the_devices_elsewhere():
    from perflab.kit.launches import self_time_key

    assert [self_time_key(d) for d in ("cpu", "cuda", torch.device("cuda", 0))] == [
        "self_cpu_time_total", "self_device_time_total", "self_device_time_total"]


def test_the_counter_counts_on_the_device_asked_for_or_the_runs_default(monkeypatch):
    from perflab.kit.env import pick_device

    assert count_launches().device == pick_device("auto") and count_launches("cuda").device == torch.device("cuda")
    assert (count_launches("cuda").on_device, count_launches("cpu").on_device) == (True, False)
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    with count_launches("cpu"):
        import os

        assert os.environ["KINETO_LOG_LEVEL"] == "6"          # kineto's start/stop lines kept out of the cells


def test_compiled_graph_calls_each_count_and_read_as_one_op_on_a_cpu():
    calls = [_event("## Call CompiledFxGraph fx1 ##"), _event("## Call CompiledFxGraph fx1 ##"), _event("aten::add")]
    cpu, gpu = LaunchCounter("cpu"), LaunchCounter("cuda")
    cpu._read(calls)
    gpu._read(calls)
    assert (cpu.graph_calls, cpu.total, cpu.by_op) == (2, 3, collections.Counter({"compiled graph": 2, "aten::add": 1}))
    assert (gpu.graph_calls, gpu.total, gpu.by_op) == (2, 0, collections.Counter())     # on a GPU: kernels only
    assert cpu.as_dict() == {"total": 3, "what": "aten ops + compiled-graph calls (CPU proxy)", "kernels": 0,
                             "copies": 0, "memsets": 0, "kernel_launches": 0, "graph_launches": 0, "copy_calls": 0,
                             "memset_calls": 0, "runtime_launches": 0, "other_calls": {}, "aten_ops": 1,
                             "graph_calls": 2}
    assert repr(cpu) == ("LaunchCounter(total=3 aten ops + compiled-graph calls (CPU proxy), "
                         "top=[('compiled graph', 2), ('aten::add', 1)])")
    many = LaunchCounter("cpu")
    many._read([_event(f"aten::op{i}") for i in range(5) for _ in range(5 - i)])
    assert repr(many) == "LaunchCounter(total=15 aten ops + compiled-graph calls (CPU proxy), " \
                         "top=[('aten::op0', 5), ('aten::op1', 4), ('aten::op2', 3)])"


def test_a_call_nested_two_levels_down_is_still_inside():
    graph = _nested_event("cudaGraphLaunch")
    wrapper = _nested_event("a wrapper", graph)                       # not a runtime call, between the two
    outer_op = _nested_event("aten::linear")
    c = LaunchCounter("cuda")
    c._read([graph, wrapper, _nested_event("cuLaunchKernel", wrapper), outer_op,
             _nested_event("aten::addmm", _nested_event("a record function", outer_op))])
    assert (c.graph_launches, c.kernel_launches, c.aten_ops) == (1, 0, 1)


def test_other_runtime_calls_are_counted_by_name_each_time():
    c = LaunchCounter("cuda")
    c._read([_event("cudaStreamSynchronize"), _event("cudaStreamSynchronize"), _event("cudaEventRecord")])
    assert c.other_calls == {"cudaStreamSynchronize": 2, "cudaEventRecord": 1} and c.runtime_launches == 0
