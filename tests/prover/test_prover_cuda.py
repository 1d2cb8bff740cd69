"""03's GPU path on tiny configs (`pytest -m gpu`: skipped without CUDA): what the notebook runs on CUDA,
at a size that takes about a second; the list of CUDA-only branches is tests/gpu/test_cuda_branches.py."""

import pytest
import torch

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")



# ---- 03_eval -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prover_cuda():
    from perflab.prover.core.data import family_kg
    from perflab.prover.core.engine import UnificationEngine
    from perflab.prover.core.policy import PolicyConfig, make_policy

    kg = family_kg(n_families=2, seed=2)
    engine = UnificationEngine(kg, max_derived=12, device=CUDA)
    policy = make_policy(kg, PolicyConfig(embed_dim=8, hidden=16, n_blocks=1), seed=0, device=CUDA)
    return kg, engine, policy


def test_cuda_03_correctness_checks_pass(prover_cuda):
    # the searches' check counts proven flags exactly (ties cannot reach them) and depths except near-tied proof scores
    # (gpu-review-2026-12-01 W3: an exact depth between BeamSearch and ClosingSearch could fail on a tie)
    # 7e47ac6: the inputs' copies inside the counted block made "no host sync" fail here (review finding 1)
    from perflab.prover.evaluation.checks import correctness_03

    kg, engine, policy = prover_cuda
    checks, info = correctness_03(kg, engine, policy, kg.queries["test"][:8], max_depth=4)
    assert all(c.passed for c in checks), (checks, info["syncs"])
    assert info["syncs"]["syncs"] == 0 and info["syncs"]["host_operands"] == 0
    from perflab.prover.links.checks import search_checks

    checks, info = search_checks(kg, engine, policy, kg.queries["test"][:2], width=16, depth=2, batch=64)
    assert all(c.passed for c in checks), (checks, info)


def test_cuda_03_search_under_cuda_graphs(prover_cuda):
    # b62ef7a: after time_variants' reset, every compiled call was a new cudagraph-tree generation and the search's
    # step 2 read step 1's freed outputs: 03 stopped at its link-prediction cell (gpu-review-2026-11-25 N1). One mode
    # (max-autotune takes the same path through uses_cudagraphs and would autotune for minutes); 03's smoke runs the
    # whole link prediction compiled.
    from torch._dynamo.utils import counters

    from perflab.kit.compiles import count_compiles, reset
    from perflab.prover.links.search import BeamSearch, differences

    kg, engine, policy = prover_cuda
    cands = kg.queries["test"][:20].to(CUDA)
    # beam S at depth 2: every child kept, so no tie between inductor's and eager's scores can choose other beams; a
    # depth where the two best proofs' scores are near-tied is allowed (`search.differences`), anything else is not
    want = BeamSearch(engine, policy, engine.S, 2).score(cands, batch=64)
    reset()
    search = BeamSearch(engine, policy, engine.S, 2, compile="reduce-overhead", backend="inductor")
    assert search._step.cudagraphs
    skips0 = counters["inductor"]["cudagraph_skips"]
    with count_compiles() as cc:
        for _ in range(2):                         # chunks of 64 // S candidates: several generations per call
            got = search.score(cands, batch=64)
            assert differences(got, want)[0] == 0, differences(got, want)
            torch.testing.assert_close(got.score, want.score, rtol=1e-5, atol=1e-5)
    # CUDA graphs recorded and none skipped: inductor skips them silently on a CPU input or a mutated one (review W1),
    # and eager code would pass every check above
    assert cc.cudagraph_recordings >= 1 and counters["inductor"]["cudagraph_skips"] == skips0, cc.as_dict()
    reset()


def test_cuda_03_step_profile(prover_cuda):
    # 7e47ac6: key_averages() events have no self_cuda_time_total: AttributeError (review finding 3)
    from perflab.prover.core.batching import cache_bytes
    from perflab.prover.core.ranking import corruptions
    from perflab.prover.core.step import GreedyStep
    from perflab.prover.evaluation.profiles import step_profile

    kg, engine, policy = prover_cuda
    cands = corruptions(kg, kg.queries["test"][:2], 3, "both", seed=0).flat().to(CUDA)     # 8 candidates
    prof = step_profile(GreedyStep(engine, policy, max_depth=4), cands, 8, min_run_time=0.05, max_run_time=0.2)
    assert prof.launches > 0 and prof.views == 0 and prof.top and prof.table and prof.ms_per_step > 0
    assert all(0 <= share <= 1 for _, _, share in prof.top) and sum(share for *_, share in prof.top) > 0  # device time
    assert cache_bytes(CUDA)["L2"] > 2**20


def test_cuda_03_sweep_peak_under_cuda_graphs_near_the_model(prover_cuda):
    # gpu-review T4: a replay allocates nothing, so 1a70d9c's sweep read 0.0-1.3 MiB against 12-388 MiB predicted
    from torch._dynamo.utils import counters

    from perflab.kit.compiles import count_compiles
    from perflab.prover.core.batching import step_bytes
    from perflab.prover.core.ranking import corruptions
    from perflab.prover.core.step import GreedyStep
    from perflab.prover.evaluation.sweep import batch_sweep

    kg, engine, policy = prover_cuda
    cands = corruptions(kg, kg.queries["test"][:4], 7, "both", seed=0).flat().to(CUDA)
    step = GreedyStep(engine, policy, max_depth=4, compile="reduce-overhead")
    skips0 = counters["inductor"]["cudagraph_skips"]
    with count_compiles() as cc:
        pts = batch_sweep(step, cands, (64, 256), rounds_time=0.1, min_rounds=2)
    # the timed step replayed CUDA graphs (recorded, none skipped: review W1), so the eager probe is what measured
    assert cc.cudagraph_recordings >= 1 and counters["inductor"]["cudagraph_skips"] == skips0, cc.as_dict()
    for p in pts:
        predicted = step_bytes(engine, policy, p.batch)
        assert "eager step" in p.peak_method
        # the model counts the step's largest intermediates; the allocator rounds blocks up, and a rollout holds the
        # slots too: within 0.25x-4x of the prediction, not ~0 as a replay reads
        assert 0.25 * predicted <= p.peak_bytes <= 4 * predicted, (p.batch, p.peak_bytes, predicted)
    assert pts[1].peak_bytes > pts[0].peak_bytes


def test_cuda_03_out_of_memory_halves_the_batch(prover_cuda):
    # the allocator's cache is emptied before the smaller try (prover/evaluation/optimized.py's CUDA branch)
    from perflab.prover.core.ranking import corruptions
    from perflab.prover.core.step import GreedyStep
    from perflab.prover.evaluation import baseline, optimized

    kg, engine, policy = prover_cuda
    cands = corruptions(kg, kg.queries["test"][:3], 5, "both", seed=0).flat().to(CUDA)      # 18 candidates

    class Flaky(GreedyStep):
        failed = False

        def init(self, queries):
            if not Flaky.failed and queries.shape[0] > 4:
                Flaky.failed = True
                raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
            return super().init(queries)

    with torch.inference_mode(), pytest.warns(RuntimeWarning, match="out of memory at batch 8"):
        got = optimized.score_candidates(Flaky(engine, policy, max_depth=4), cands, 8)
        want = baseline.score_candidates(GreedyStep(engine, policy, max_depth=4), cands, 18)
    assert got.oom_halvings == [8] and got.batch == 4 and torch.equal(got.proven.cpu(), want.proven.cpu())
