"""Each rollout loop's bookkeeping against its schedule written out simply (core.rollout's module doc): steps run,
rows computed, rows wasted, host reads and the per-step trace, on ladder proofs of known lengths. The speedups study
04 claims are ratios of these counts; the loops' outcomes are compared in test_prover_early_exit.py."""
import pytest
import torch

from perflab.prover.core import rollout
from perflab.prover.core.data import ladder_kg, ladder_queries
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import PolicyConfig, make_policy
from perflab.prover.core.step import GreedyStep

LENGTHS = [3, 1, 1, 7, 2, 1, 1, 1, 5, 1, 2, 12, 1, 1, 4, 1, 1, 2, 1, 1]   # 20: two chunks of 8 and one of 4


@pytest.fixture(scope="module")
def ladder():
    kg = ladder_kg(levels=12, n_pairs=16, n_constants=64)
    engine = UnificationEngine(kg, max_derived=6, end_action=False)
    step = GreedyStep(engine, make_policy(kg, PolicyConfig(embed_dim=16, hidden=32, n_blocks=1), seed=3), max_depth=12)
    return step, ladder_queries(kg, torch.tensor(LENGTHS), torch.Generator().manual_seed(1))


def _chunks(batch):
    return [LENGTHS[i:i + batch] for i in range(0, len(LENGTHS), batch)]


def _expected(name, batch, min_bucket):
    """(steps, rows computed, host reads, per step (rows computed, rows active before it)) of each loop, by its rule:
    every slot of a chunk each step (full, masked), the active rows (compact), the smallest power-of-two bucket of at
    least min_bucket holding them (bucketed); reads: one per step, and one more that finds no row left (compact,
    bucketed), and one for the outcomes."""
    steps = computed = reads = 0
    trace = []
    for chunk in _chunks(batch):
        for t in range(max(chunk)):
            active = sum(n > t for n in chunk)
            rows = {"full": batch, "masked": batch, "compact": active,
                    "bucketed": min(batch, max(min_bucket, 1 << (active - 1).bit_length()))}[name]
            trace.append((rows, active))
            steps, computed = steps + 1, computed + rows
        reads += max(chunk) + (name in ("compact", "bucketed"))
    return steps, computed, reads + 1, trace


@pytest.mark.parametrize("name", ["full", "masked", "compact", "bucketed"])
@pytest.mark.parametrize("batch", [8, 16])
def test_each_chunked_loop_runs_the_steps_of_its_schedule(ladder, name, batch):
    step, cands = ladder
    steps, computed, reads, trace = _expected(name, batch, min_bucket=4)
    kw = {"min_bucket": 4} if name == "bucketed" else {}
    got_trace = []
    import time

    t0 = time.perf_counter()
    with torch.inference_mode():
        r = getattr(rollout, name)(step, cands, batch, trace=got_trace, **kw)
    assert 0 <= r.seconds <= time.perf_counter() - t0                  # the call's own wall time, not a clock reading
    assert r.steps.tolist() == LENGTHS and r.records.tolist() == [1] * len(LENGTHS) and bool(r.proven.all())
    assert (r.steps.dtype, r.records.dtype, r.proven.dtype) == (torch.long, torch.long, torch.bool)
    assert (r.steps_executed, r.slot_steps, r.wasted_slot_steps, r.host_reads, r.batch) == (
        steps, computed, computed - sum(LENGTHS), reads, batch)
    assert [(rows, active) for _, rows, active in got_trace] == trace
    assert len(r.trace) == len(got_trace) and r.ms_per_step == pytest.approx(1e3 * r.seconds / steps)


def test_a_padded_chunk_counts_its_padding_as_waste(ladder):
    step, cands = ladder
    trace = []
    with torch.inference_mode():
        r = rollout.rollout_full(step, cands[:8], n_real=3, trace=trace)
    assert r.steps.tolist() == LENGTHS[:3] and r.steps_executed == 7                 # the padding's 7-step proof too
    assert (r.slot_steps, r.wasted_slot_steps) == (7 * 8, 7 * 8 - sum(LENGTHS[:3]))
    assert len(trace) == 7 and r.trace is trace                                      # the trace asked for, filled


def test_concat_sums_the_counters_of_consecutive_chunks(ladder):
    step, cands = ladder
    with torch.inference_mode():
        parts = [rollout.full(step, cands[i:i + n], n, trace=[]) for i, n in ((0, 8), (8, 8), (16, 4))]
        whole = rollout.full(step, cands, 8)
    both = rollout.concat(parts)
    assert torch.equal(both.steps, whole.steps) and torch.equal(both.score, whole.score)
    assert torch.equal(both.proven, whole.proven) and torch.equal(both.records, whole.records)
    for k in ("steps_executed", "slot_steps", "wasted_slot_steps"):
        assert getattr(both, k) == sum(getattr(p, k) for p in parts), k
    assert both.host_reads == sum(p.host_reads for p in parts) and both.batch == 4                # the last part's
    assert both.steps_executed == whole.steps_executed and len(both.trace) == both.steps_executed > 0
    assert both.seconds == pytest.approx(sum(p.seconds for p in parts))
    assert both.trace == [t for p in parts for t in p.trace]
    empty = rollout.concat([])
    assert [tuple(getattr(empty, k).shape) for k in ("score", "proven", "steps", "records")] == [(0,)] * 4
    assert (empty.proven.dtype, empty.steps.dtype, empty.records.dtype, empty.steps_executed) == (
        torch.bool, torch.long, torch.long, 0)


def test_pad_fill_and_the_batch_check():
    c = torch.arange(9).view(3, 3)
    assert torch.equal(rollout.pad_to(c, 5), torch.cat([c, c[-1:], c[-1:]]))      # the last real row repeated
    assert rollout.pad_to(c, 3) is c
    assert torch.equal(rollout.fill(c, 7), torch.cat([c, c, c[:1]]))
    for bad in (0, -1, 2.0, True, "8"):
        with pytest.raises(ValueError, match=f"batch must be an int >= 1, got {bad!r}"):
            rollout.check_batch(bad)
    assert rollout.check_batch(3) == 3 and rollout.check_batch(1) == 1                # one slot is a batch


def test_bucketed_by_default_steps_buckets_of_at_least_8(ladder):
    step, cands = ladder
    trace = []
    with torch.inference_mode():
        rollout.bucketed(step, cands, 16, trace=trace)
    assert [rows for _, rows, _ in trace] == [rows for rows, _ in _expected("bucketed", 16, min_bucket=8)[3]]
    assert min(rows for _, rows, _ in trace) == 8



@pytest.mark.parametrize("lengths, batch, steps", [([1, 1, 1], 4, 1), ([1] * 8, 4, 2), ([2, 1], 2, 2)])
def test_recycle_stops_at_the_step_its_last_proof_ends(ladder, lengths, batch, steps):
    # no phantom step: every proof of one step in one batch ends the run after one step (the first read tells)
    step, _ = ladder
    cands = ladder_queries(step.engine.kg, torch.tensor(lengths), torch.Generator().manual_seed(2))
    with torch.inference_mode():
        r = rollout.recycle(step, cands, batch)
    assert (r.steps_executed, r.slot_steps, r.steps.tolist()) == (steps, steps * batch, lengths)


def test_recycle_of_nothing_is_an_empty_result_of_its_batch(ladder):
    step, cands = ladder
    trace = []
    r = rollout.recycle(step, cands[:0], 4, trace=trace)
    assert [(tuple(getattr(r, k).shape), getattr(r, k).dtype) for k in ("score", "proven", "steps", "records")] == [
        ((0,), torch.float32), ((0,), torch.bool), ((0,), torch.long), ((0,), torch.long)]
    assert (r.batch, r.steps_executed) == (4, 0) and r.trace is trace


def test_recycle_reports_its_own_seconds_batch_and_trace(ladder):
    import time

    step, cands = ladder
    for trace in ([], None):
        t0 = time.perf_counter()
        with torch.inference_mode():
            r = rollout.recycle(step, cands, 8, trace=trace)
        wall = time.perf_counter() - t0
        assert 0 <= r.seconds <= wall and r.batch == 8               # the call's own wall time, its slots
        if trace is None:
            assert r.trace == []                                     # no trace asked for: an empty one
        else:                                                        # the trace asked for: a step's seconds each
            assert r.trace is trace and len(trace) == r.steps_executed > 0
            assert all(0 <= sec <= wall for sec, _, _ in trace)
    assert rollout.recycle(step, cands[:0], 4).trace == []


def test_recycle_keeps_ids_and_counts_in_integer_buffers(ladder):
    # the slots and the queue hold term ids and step counts: float32 buffers would round ids from 2^24 on
    step, cands = ladder
    with torch.inference_mode():
        rollout.recycle(step, cands[:6], 4)
    slots = step.buffers(("slots", 4), None)                           # the buffers of that call (made once)
    queue = step.buffers(("queue", 4, 6), None)
    assert [t.dtype for t in slots] == [torch.long, torch.long, torch.long, torch.float32, torch.bool]
    assert (queue.states.dtype, queue.next_var.dtype, queue.slot_cand.dtype) == (torch.long,) * 3


def test_recycle_gives_up_on_a_slot_that_never_finishes(ladder, monkeypatch):
    from perflab.prover.core.step import GreedyStep

    step, cands = ladder
    never = lambda *slots: GreedyStep.advance(step, *slots)._replace(done=torch.zeros_like(slots[4]))  # noqa: E731
    monkeypatch.setattr(step, "advance", never)
    with pytest.raises(RuntimeError, match="^recycle did not drain its queue: a slot never finished$"), \
            torch.inference_mode():
        rollout.recycle(step, cands[:2], 1)


def test_compact_asks_for_one_dynamic_shape_graph_and_the_others_for_static_ones(ladder, monkeypatch):
    step, cands = ladder
    asked = {}
    compiled = step.compiled

    def spy(name, fn, **kw):
        asked[name] = kw
        return compiled(name, fn, **kw)

    monkeypatch.setattr(step, "compiled", spy)
    with torch.inference_mode():
        for name in ("full", "compact", "bucketed", "recycle"):
            getattr(rollout, name)(step, cands[:8], 8)
    assert asked["compact"] == {"dynamic": True}
    assert all(kw.get("dynamic", False) is False for name, kw in asked.items() if name != "compact")
