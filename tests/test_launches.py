import pytest
import torch

from perflab.launches import count_launches


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
