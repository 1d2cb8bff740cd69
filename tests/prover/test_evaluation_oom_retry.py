"""03's fixed evaluation loop (`evaluation.optimized.score_candidates`) where its tests did not look: the score a
failed proof gets, the out-of-memory retry down to a batch of one, the cached blocks handed back on a GPU before the
smaller try, and which line the retry's warning names."""
import warnings

import pytest
import torch

from perflab.prover.core.data import family_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import PolicyConfig, make_policy
from perflab.prover.core.ranking import corruptions
from perflab.prover.core.step import GreedyStep
from perflab.prover.evaluation import baseline, optimized


@pytest.fixture(scope="module")
def setup():
    kg = family_kg(n_families=2, seed=2)
    engine = UnificationEngine(kg, max_derived=12)
    policy = make_policy(kg, PolicyConfig(embed_dim=8, hidden=16, n_blocks=1), seed=0)
    cands = corruptions(kg, kg.queries["test"][:3], 6, "both", seed=0).flat()   # 21 candidates
    return engine, policy, cands


class _OnCuda:
    """The engine as a GPU's would look to the retry: its device reads cuda, everything else is the engine's."""

    device = torch.device("cuda")

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)


class OomStep(GreedyStep):
    """Runs out of memory at every batch above `limit` (all of them where limit is 0); `on_cuda`: its engine reads as
    a GPU's between a failure and the next try (the only place the loop looks at the device)."""

    def __init__(self, *a, limit, on_cuda=False, **k):
        self._real, self._on_cuda = None, on_cuda
        super().__init__(*a, **k)
        self.limit, self.starts = limit, []

    @property
    def engine(self):
        return self._real if self._real is not None and not self._failed_last else self._shown

    @engine.setter
    def engine(self, engine):
        self._real, self._failed_last = engine, False
        self._shown = _OnCuda(engine) if self._on_cuda else engine

    def init(self, queries):
        self._failed_last = False
        self.starts.append(queries.shape[0])
        if queries.shape[0] > self.limit:
            self._failed_last = True
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return super().init(queries)


def test_a_failed_proof_scores_the_fail_score_asked_for(setup):
    """The fail_score handed to score_candidates reaches every chunk: a candidate the greedy policy cannot prove
    scores it, as in the baseline loop (dropped, every failure would score the default -100 and its rank change
    against proved candidates scored below -100)."""
    engine, policy, cands = setup
    step = GreedyStep(engine, policy, max_depth=4)
    with torch.inference_mode():
        got = optimized.score_candidates(step, cands, 8, fail_score=-7.5)
        want = baseline.score_candidates(step, cands, 8, fail_score=-7.5)
    assert (~got.proven).any()                                        # some fail: the test can see the score
    assert (got.score[~got.proven] == -7.5).all()
    torch.testing.assert_close(got.score, want.score, rtol=1e-5, atol=1e-5)


def test_out_of_memory_halves_down_to_a_batch_of_one_and_then_gives_up(setup):
    """A step that fits one row only: the loop halves 4 -> 2 -> 1 and scores everything at batch 1 (each chunk's
    failure kept in the halvings); a step that fits nothing raises the out-of-memory error at batch 1 rather than
    retrying forever or giving up at batch 2."""
    engine, policy, cands = setup
    few = cands[:5]
    step = OomStep(engine, policy, max_depth=4, limit=1)
    with torch.inference_mode(), pytest.warns(RuntimeWarning) as seen:
        got = optimized.score_candidates(step, few, 4)
        want = baseline.score_candidates(GreedyStep(engine, policy, max_depth=4), few, 5)
    assert [str(w.message) for w in seen] == ["out of memory at batch 4: retrying from candidate 0 with batch 2",
                                              "out of memory at batch 2: retrying from candidate 0 with batch 1"]
    assert got.oom_halvings == [4, 2] and got.batch == 1
    assert step.starts == [4, 2, 1, 1, 1, 1, 1]
    torch.testing.assert_close(got.score, want.score, rtol=1e-5, atol=1e-5)
    never = OomStep(engine, policy, max_depth=4, limit=0)
    with torch.inference_mode(), warnings.catch_warnings(), pytest.raises(torch.OutOfMemoryError):
        warnings.simplefilter("ignore", RuntimeWarning)
        optimized.score_candidates(never, few, 4)
    assert never.starts == [4, 2, 1]


@pytest.mark.parametrize("on_cuda", [False, True])
def test_on_a_gpu_the_failed_chunks_cached_blocks_are_handed_back_before_the_smaller_try(setup, monkeypatch, on_cuda):
    """After an out-of-memory error on a GPU the caching allocator still holds the failed chunk's blocks: the loop
    empties the cache once per halving before the smaller try (else the smaller batch can fail for memory the
    process holds); on the CPU there is no cache to empty and torch.cuda is not touched."""
    engine, policy, cands = setup
    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(len(step.starts)))
    step = OomStep(engine, policy, max_depth=4, limit=2, on_cuda=on_cuda)
    with torch.inference_mode(), pytest.warns(RuntimeWarning):
        got = optimized.score_candidates(step, cands[:6], 8)
    assert got.oom_halvings == [8, 4] and got.batch == 2
    assert emptied == ([1, 2] if on_cuda else [])                    # after each failed try, before the next


def test_the_retry_warning_names_the_line_that_called_score_candidates(setup):
    """The out-of-memory warning points at the caller's line (stacklevel 2), where a user can change the batch,
    not at optimized.py nor at a frame above the caller.

    Left out of the mutation run (mutation/mutate.py): mutmut's trampoline is a frame between the caller and the
    loop there."""
    engine, policy, cands = setup
    step = OomStep(engine, policy, max_depth=4, limit=2)
    with torch.inference_mode(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        optimized.score_candidates(step, cands[:4], 4)
    oom = [w for w in seen if "out of memory" in str(w.message)]
    assert len(oom) == 1 and oom[0].filename == __file__
