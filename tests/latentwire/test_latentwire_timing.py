"""How the study times a variant, checked with counts (never timings): launches per step, timing blocks of whole
optimizer steps, and the rule that only the timed variant's DataLoader workers live."""
import dataclasses

import pytest

from perflab.latentwire import ModelConfig, Toggles, build_model, make_examples, optimized
from perflab.latentwire.ablation import IMPLS, prepare_variant, run_ablation
from perflab.latentwire.params import LatentWireParams
from perflab.latentwire.timing import StepTiming, dataloader_workers, time_blocks, time_rounds

TINY = dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4)
EXAMPLES = make_examples(32, seed=0)
# small time budgets: these tests count, they do not time
P = LatentWireParams(**TINY, n_examples=32, ablation_batch=4, accum_steps=2, num_workers=1, min_run_time=0.01,
                     max_run_time=0.05, block_s=0.001, rounds=2)


def test_launches_per_step_are_counted_and_fall_with_the_recommendations():
    got = {}
    for v in (IMPLS.variant("baseline"), IMPLS.variant("optimized", "single_pass", single_pass=True),
              IMPLS.variant("optimized", "all_together", **dataclasses.asdict(Toggles.all_on(batch_size=4, amp=False)))):
        trainer, r = prepare_variant(v, EXAMPLES, p=P, device="cpu")
        trainer.close()
        got[v.name] = r.launches["total"] / r.samples_per_step
        assert r.launches["aten_ops"] > 0 and r.launches["what"].startswith("aten ops")
    assert got["baseline"] > got["single_pass"] > got["all_together"]  # K+1 fewer LM forwards; then batch 4


def test_time_blocks_runs_blocks_of_n_steps():
    calls = []
    times = time_blocks(lambda: calls.append(1), n=3, blocks=4, device="cpu")
    assert len(calls) == 12 and len(times) == 4 and all(t >= 0 for t in times)
    m = StepTiming(3, step_times=times).measurement("label", "case")
    assert m.number_per_run == 3 and m.times == times  # raw times are whole blocks, .times per step


def test_pause_stops_the_workers_and_the_next_step_starts_a_new_pool():
    model = build_model(ModelConfig(**TINY), seed=0)
    tr = optimized.make_trainer(model, EXAMPLES, batch_size=4, dataloader=True, num_workers=1, pretokenize=True)
    tr.seen = []
    try:
        tr.step()
        first = tr.worker_pids()
        assert len(first) == 1 and dataloader_workers() == set(first)
        tr.pause()
        assert tr.worker_pids() == [] and dataloader_workers() == set()
        tr.step()
        assert len(tr.worker_pids()) == 1 and tr.worker_pids() != first  # a fresh pool
        assert len(tr.seen) == 8
    finally:
        tr.close()
    assert dataloader_workers() == set()


@pytest.mark.slow
def test_only_the_timed_variants_workers_are_alive():
    plan = [IMPLS.variant("baseline"),
            IMPLS.variant("optimized", "loader_a", dataloader=True, num_workers=1, pretokenize=True),
            IMPLS.variant("optimized", "loader_b", dataloader=True, num_workers=1, batch_size=2)]
    results = run_ablation(plan, EXAMPLES, p=P, device="cpu")
    assert {k: r.timing.foreign_workers for k, r in results.items()} == {"baseline": 0, "loader_a": 0, "loader_b": 0}
    assert {k: r.timing.own_workers for k, r in results.items()} == {"baseline": 0, "loader_a": 1, "loader_b": 1}
    assert all(r.timing.turns == P.rounds and len(r.measurement.times) >= 6 for r in results.values())
    assert dataloader_workers() == set()


def test_a_pool_left_running_beside_the_timed_trainer_is_counted():
    # the count the rule rests on can fail: a trainer outside the timing keeps its worker alive
    model = build_model(ModelConfig(**TINY), seed=0)
    other = optimized.make_trainer(model, EXAMPLES, batch_size=4, dataloader=True, num_workers=1)
    timed = optimized.make_trainer(build_model(ModelConfig(**TINY), seed=0), EXAMPLES, batch_size=4)
    try:
        other.step()  # its worker starts and stays
        timing = time_rounds({"timed": (timed, 1)}, device="cpu", rounds=1, min_time=0.01, max_time=0.02)["timed"]
    finally:
        other.close()
        timed.close()
    assert timing.foreign_workers == 1 and timing.own_workers == 0


def test_loader_paused_says_whether_the_next_step_starts_a_pool_of_workers():
    # only a DataLoader with workers and no live iterator: before its first step and after pause(); never once closed,
    # where pause() and close() are no-ops again (kills loader_paused 1-6, close 1: mutants the counts above let live)
    def trainer(**toggles):
        return optimized.make_trainer(build_model(ModelConfig(**TINY), seed=0), EXAMPLES, batch_size=4, **toggles)

    for tr in (trainer(), trainer(dataloader=True)):
        assert tr.loader_paused() is False  # no workers to start, before the first step as after it
        tr.step()
        assert tr.loader_paused() is False
        tr.close()
    tr = trainer(dataloader=True, num_workers=1)
    try:
        states = [tr.loader_paused()]
        tr.step()
        states.append(tr.loader_paused())
        tr.pause()
        states.append(tr.loader_paused())
    finally:
        tr.close()
    assert states == [True, False, True]
    assert tr.loader_paused() is False
    tr.pause()
    tr.close()
    assert dataloader_workers() == set()


def test_pause_joins_the_workers_even_while_another_reference_holds_the_iterator():
    # "joined before this returns": not left to the iterator's __del__, which a held reference (a profiler, a
    # debugger's frame) delays (kills pause 3, 7 and 8)
    tr = optimized.make_trainer(build_model(ModelConfig(**TINY), seed=0), EXAMPLES, batch_size=4, dataloader=True,
                                num_workers=1)
    held = None
    try:
        tr.step()
        held = tr._it
        workers = list(held._workers)
        assert len(workers) == 1 and workers[0].is_alive()
        tr.pause()
        assert not any(w.is_alive() for w in workers)
    finally:
        if held is not None:
            held._shutdown_workers()
        tr.close()
    assert dataloader_workers() == set()
