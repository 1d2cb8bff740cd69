import torch

from perflab.compiles import _attempt, count_compiles, reset


def _f(t):
    return torch.sin(t) * 2 + 1


def test_one_graph_for_one_shape_then_a_recompile_for_a_new_one():
    reset()
    f = torch.compile(_f, backend="eager", dynamic=False)  # eager backend: dynamo's counting without inductor's 30 s
    with count_compiles() as first:
        f(torch.randn(8))
        f(torch.randn(8))          # same shape: cached
    assert (first.compiles, first.recompiles, first.graphs) == (1, 0, 1)
    with count_compiles() as second:
        f(torch.randn(9))          # new shape: a recompile
        f(torch.randn(8))          # the first graph still serves
    assert (second.compiles, second.recompiles, second.graphs) == (1, 1, 1)
    assert second.cudagraph_recordings == 0


def test_graph_break_makes_two_graphs():
    reset()

    def g(t):
        t = t + 1
        torch._dynamo.graph_break()
        return t * 3

    with count_compiles() as cc:
        torch.compile(g, backend="eager")(torch.randn(4))
    assert cc.graphs == 2 and cc.recompiles == 0


def test_attempt_parsing():
    assert [_attempt(s) for s in ("0/0", "3/1", "[2/4]", "5/2_1", "x")] == [0, 1, 4, 2, 0]
