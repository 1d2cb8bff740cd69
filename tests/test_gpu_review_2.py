"""The second reading of the CUDA paths (`../shared/research/gpu-review-2026-11-25.md`), findings N5-N8, as far as a
CPU reaches. N1 and N4 (CUDA-graph output lifetimes) are in tests/test_cudagraph_lifetimes.py."""
import types

import pytest
import torch
from torch.autograd import DeviceType

from perflab.launches import LaunchCounter
from perflab.prover.links.ranking import CandidateSet, rank_bounds, ranks, within_bounds
from perflab.syncs import count_host_syncs

# ---- N5: the cost comparison runs each way at its own batch ---------------------------------------------------

def test_the_greedy_loop_is_not_timed_at_the_search_batch():
    from perflab.prover.links.embeddings import EmbeddingConfig
    from perflab.prover.links.predict import LinkConfig, cost_per_candidate
    from perflab.prover.params import EvalParams

    cfg = LinkConfig.of(EvalParams(search_batch=4096, batch=64), batch=64)
    assert (cfg.batch, cfg.greedy_slots) == (4096, 64)          # b62ef7a ran the greedy loops at 4096 too
    assert LinkConfig(batch=96).greedy_slots == 96               # no greedy batch given: the search's

    from perflab.prover.data import family_kg
    from perflab.prover.engine import UnificationEngine
    from perflab.prover.links.search import BeamSearch
    from perflab.prover.policy import PolicyConfig, make_policy

    kg = family_kg(n_families=2, seed=1)
    engine = UnificationEngine(kg, max_derived=8)
    policy = make_policy(kg, PolicyConfig(embed_dim=16, hidden=32, n_blocks=1), seed=0)
    cfg = LinkConfig(batch=256, greedy_batch=16, beam=4, max_depth=4, emb=EmbeddingConfig(rank=4, epochs=1))
    cost = cost_per_candidate(kg, engine, policy, BeamSearch(engine, policy, 4, 2), kg.queries["test"][:1], cfg)
    assert {k: v["batch"] for k, v in cost.items()} == {"greedy (full)": 16, "greedy (recycle)": 16, "search": 256}


# ---- N6: one launch is counted once, whatever entry points it passes through ----------------------------------

def _ev(name, parent=None, device_type=DeviceType.CPU):
    return types.SimpleNamespace(name=name, device_type=device_type, cpu_parent=parent)


def test_a_launch_reported_by_two_nested_entry_points_counts_once():
    outer = _ev("__cudaLaunchKernel")                    # CUDA 13's <<<>>> entry, if CUPTI reports both
    graph, runtime = _ev("cudaGraphLaunch"), _ev("cudaLaunchKernel")
    events = [outer, _ev("cudaLaunchKernel", outer), runtime, _ev("cuLaunchKernel", runtime),
              graph, _ev("cuGraphLaunch", graph), _ev("cuLaunchKernelEx", _ev("triton_poi_fused_0"))]
    c = LaunchCounter("cuda")
    c._read(events)
    # 3 kernel launches (the <<<>>> one, the runtime call whose driver call nests in it, Triton's), 1 graph launch
    assert (c.kernel_launches, c.graph_launches, c.other_calls) == (3, 1, {}), (c.kernel_launches, c.graph_launches)


# ---- N7: ranks across batch sizes equal up to float rounding -------------------------------------------------

def _cs(q: int, k: int) -> CandidateSet:
    return CandidateSet(torch.zeros(q, 3, dtype=torch.long), torch.zeros(q, 1 + k, 3, dtype=torch.long),
                        torch.ones(q, 1 + k, dtype=torch.bool), torch.rand(q, 1 + k, generator=torch.Generator().manual_seed(0)))


def test_rank_bounds_allow_rounding_flips_and_nothing_more():
    cs = _cs(3, 4)
    ref = torch.tensor([[0.50000, 0.90, 0.1, 0.500004, 0.2],      # a near-tie just above the positive
                        [0.30000, 0.29999, 0.1, 0.2, 0.4],          # rounding puts it level with the positive
                        [-1.0000, 0.5, -2.0, -3.0, -1.0]])          # an exact tie
    bounds = rank_bounds(ref, cs, atol=1e-5)
    flipped = ref.clone()
    flipped[0, 3], flipped[1, 1] = 0.499996, 0.300002               # each moved by < 1e-5: the order flips
    for rule in ("optimistic", "pessimistic", "mean", "random"):
        assert within_bounds(ranks(ref, cs, rule), bounds) and within_bounds(ranks(flipped, cs, rule), bounds), rule
    wrong = ref.clone()
    wrong[0, 2] = wrong[0, 4] = 0.6                                  # a real reorder: outside the bounds
    assert not within_bounds(ranks(wrong, cs, "optimistic"), bounds)
    lo, hi = bounds
    assert lo.tolist() == [2, 2, 2] and hi.tolist() == [3, 3, 3]


# ---- N8: ComplEx scores build no index from host data --------------------------------------------------------

def test_complex_scores_make_no_host_copy():
    from perflab.prover.links.embeddings import ComplEx

    model = ComplEx(n_constants=7, n_relations=3, rank=4, generator=torch.Generator().manual_seed(0))
    h, r = torch.tensor([1, 2, 3]), torch.tensor([0, 1, 5])
    with count_host_syncs("cpu") as syncs:
        s = model.scores(h, r)
    assert syncs.total == 0, syncs.by_op                              # b62ef7a: 1 (a device tensor from [0])
    assert torch.isneginf(s[:, 0]).all() and torch.isfinite(s[:, 1:]).all() and s.shape == (3, 8)
    s.sum().backward()                                                # still differentiable (the training loss)
    assert model.ent.grad is not None


@pytest.mark.parametrize("side", ["head", "tail"])
def test_complex_side_log_probs_normalize(side):
    from perflab.prover.links.embeddings import ComplEx

    model = ComplEx(n_constants=5, n_relations=2, rank=3, generator=torch.Generator().manual_seed(1))
    lp = model.side_log_probs(torch.tensor([[4, 1, 2], [5, 3, 3]]), side)   # (pred, h, t); preds from FIRST_PRED
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, dtype=lp.dtype))  # padding column: probability 0
