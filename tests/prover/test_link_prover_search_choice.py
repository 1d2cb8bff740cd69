"""03's optimized link prover (`links.optimized.Prover`): which search it runs where (the sparse one on the CPU, the
fixed-shape one on a device), with the run's compile mode, backend and batch, and the score a candidate without a
proof gets from `Prover.score`. Its results alone cannot tell the searches apart (they find the same proofs), so these
look at the search chosen and at what `score` hands on."""
import types

import pytest
import torch

from perflab.prover.core.data import random_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy
from perflab.prover.links import optimized
from perflab.prover.links.params import LinkConfig
from perflab.prover.links.search import SparseClosingSearch


@pytest.fixture(scope="module")
def graph():
    kg = random_kg(1)
    engine = UnificationEngine(kg, max_atoms=4, max_derived=6, max_fact_matches=3)
    cands = torch.cat([kg.facts, kg.facts.flip(0), kg.facts[:, [0, 2, 1]]])[:40]   # some proved, some not
    return kg, engine, make_policy(kg, seed=1), cands


def test_on_the_cpu_the_prover_runs_the_sparse_search_with_the_runs_compile_settings(graph):
    """On the CPU the optimized prover is SparseClosingSearch (the last step's policy only where a proof closes: a
    third of the CPU's time, issue 33), built with the config's beam, depth, compile mode and backend; the plain
    ClosingSearch gives the same proofs slower, so no result would show the wrong choice."""
    kg, engine, policy, _ = graph
    cfg = LinkConfig(beam=3, search_depth=2, search_batch=12, compile="default", backend="eager")
    prover = optimized.Prover(engine, policy, cfg)
    assert type(prover.search) is SparseClosingSearch
    assert (prover.search.width, prover.search.depth) == (3, 2)
    assert (prover.search.mode, prover.search.backend) == ("default", "eager")
    assert (prover.search._step.mode, prover.search._step.backend) == ("default", "eager")
    assert prover.batch == 12


def test_on_a_device_the_prover_runs_the_fixed_shape_search(graph, monkeypatch):
    """On a device (a GPU's engine, stood in for by its device) the prover is ClosingSearch: fixed shapes and no host
    read, so a chunk can be a CUDA graph; the sparse search would wait on the host every chunk."""
    _, _, policy, _ = graph
    built = []

    def recorder(kind):
        return lambda *a: built.append((kind, a[2:]))

    monkeypatch.setattr(optimized, "ClosingSearch", recorder("closing"))
    monkeypatch.setattr(optimized, "SparseClosingSearch", recorder("sparse"))
    gpu = types.SimpleNamespace(device=torch.device("cuda"))
    optimized.Prover(gpu, policy, LinkConfig(beam=8, search_depth=2, compile="reduce-overhead", backend="inductor"))
    assert built == [("closing", (8, 2, "reduce-overhead", "inductor"))]


def test_prover_score_hands_on_its_batch_and_the_fail_score(graph):
    """Prover.score(candidates, fail_score) is the search's score at the config's batch: the same proofs, scores and
    rows per step, and a candidate without a proof scores the fail_score asked for (the ranks a user reads put it
    there), not the default -100."""
    kg, engine, policy, cands = graph
    cfg = LinkConfig(beam=3, search_depth=2, search_batch=12, compile="off")
    got = optimized.Prover(engine, policy, cfg).score(cands, fail_score=-7.5)
    want = SparseClosingSearch(engine, policy, 3, 2).score(cands, 12, -7.5)
    assert got.proven.any() and not got.proven.all()                 # both kinds of candidate
    assert (got.score[~got.proven] == -7.5).all()
    assert torch.equal(got.proven, want.proven) and torch.equal(got.depth, want.depth)
    torch.testing.assert_close(got.score, want.score, rtol=0, atol=1e-5)
    assert got.batch == 12 and got.row_steps == want.row_steps       # 4 candidates x beam 3 a step
