import pytest
import torch

from perflab.kit.compiles import _attempt, count_compiles, reset, same_draws_options


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


def _three_draws():
    # PyTorch issue #181136's example: the first draw is read last, so a scheduler that runs each draw when its
    # inputs are ready (torch 2.11's) draws b and c before a
    a = torch.randn(2, 4, 4, 4)
    b = torch.randn(2, 3, 4, 4)
    c = torch.randn(4, 3, 3, 3)
    return a + torch.nn.functional.conv2d(b, c, padding=1)


@pytest.mark.slow
def test_a_compiled_graph_draws_what_eager_draws():
    torch.manual_seed(0)
    eager = _three_draws()
    reset()
    compiled = torch.compile(_three_draws, fullgraph=True, options=same_draws_options())
    torch.manual_seed(0)
    # the same numbers, drawn in the same order: only the conv's summation order may differ (float32 rounding);
    # draws in another order differ by O(1) (2.11 without the chain: 15)
    torch.testing.assert_close(compiled(), eager, rtol=1e-5, atol=1e-5)
    reset()


def test_a_compiling_probe1d_solver_allows_its_variants():
    # gpu-review T5: has_prev x tol x dtype x device variants of lm_iteration pass dynamo's default limit of 8 on a
    # GPU run, after which the function silently runs eagerly
    import torch

    from perflab.probe1d.config import ProbeConfig
    from perflab.probe1d.optimized import OptimizedSolver

    torch._dynamo.config.recompile_limit = 8
    OptimizedSolver(ProbeConfig(compile="default", backend="eager"), torch.device("cpu"))
    assert torch._dynamo.config.recompile_limit >= 64
