"""The study's measuring machinery, checked with counts (never timings): the compiled step against the eager
step, launches per step, timing blocks, and the rule that only the timed variant's DataLoader workers live."""
import dataclasses

import torch

from perflab.kit.compiles import count_compiles
from perflab.kit.launches import count_launches
from perflab.latentwire import ModelConfig, Toggles, build_model, make_examples, make_trainer
from perflab.latentwire.params import LatentWireParams
from perflab.latentwire.study import Variant, prepare_variant, run_ablation
from perflab.latentwire.timing import StepTiming, dataloader_workers, time_blocks, time_rounds

TINY = dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4)
EXAMPLES = make_examples(32, seed=0)
# small time budgets: these tests count, they do not time
P = LatentWireParams(**TINY, n_examples=32, ablation_batch=4, accum_steps=2, num_workers=1, min_run_time=0.01,
                     max_run_time=0.05, block_s=0.001, rounds=2)


def test_compiled_step_equals_the_eager_step():
    # the study's one inductor compile in tests (~30-60 s on 2 busy cores): every toggle on, fp32 (amp off: bf16
    # would round differently in fused and eager kernels), manual sample order, 3 steps of 2 micro-batches
    toggles = {**dataclasses.asdict(Toggles.all_on(batch_size=4, amp=False)), "dataloader": False, "num_workers": 0}
    losses, seen, calls = [], [], {}
    for mode in ("off", "default"):
        model = build_model(ModelConfig(**TINY), seed=0)
        tr = make_trainer(model, EXAMPLES, impl="optimized", accum_steps=2, lr=3e-3, **{**toggles, "compile": mode})
        tr.seen = []
        tr.step()  # compiles (counted from the next step: another test may have compiled this code first)
        with count_compiles() as cc, count_launches("cpu") as launches:
            tr.step()
            tr.step()
        calls[mode] = launches.graph_calls
        losses.append(torch.tensor(tr.losses()))
        seen.append(tr.seen)
        tr.close()
    assert seen[0] == seen[1]
    assert cc.compiles == 0  # fixed widths: the first step's graph serves every batch
    assert calls == {"off": 0, "default": 8}  # a forward and a backward graph per micro-batch, 2 x 2 micro-batches
    # inductor sums in another order (~1e-7 relative); AdamW's normalized update can amplify that over 3 steps
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-5)


def test_launches_per_step_are_counted_and_fall_with_the_recommendations():
    got = {}
    for v in (Variant("baseline", impl="baseline"), Variant("single_pass", toggles={"single_pass": True}),
              Variant("all_together", toggles=dataclasses.asdict(Toggles.all_on(batch_size=4, amp=False)))):
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
    tr = make_trainer(model, EXAMPLES, impl="optimized", batch_size=4, dataloader=True, num_workers=1, pretokenize=True)
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


def test_only_the_timed_variants_workers_are_alive():
    plan = [Variant("baseline", impl="baseline"),
            Variant("loader_a", toggles={"dataloader": True, "num_workers": 1, "pretokenize": True}),
            Variant("loader_b", toggles={"dataloader": True, "num_workers": 1, "batch_size": 2})]
    results = run_ablation(plan, EXAMPLES, p=P, device="cpu")
    assert {k: r.timing.foreign_workers for k, r in results.items()} == {"baseline": 0, "loader_a": 0, "loader_b": 0}
    assert {k: r.timing.own_workers for k, r in results.items()} == {"baseline": 0, "loader_a": 1, "loader_b": 1}
    assert all(r.timing.turns == P.rounds and len(r.measurement.times) >= 6 for r in results.values())
    assert dataloader_workers() == set()


def test_a_pool_left_running_beside_the_timed_trainer_is_counted():
    # the count the rule rests on can fail: a trainer outside the timing keeps its worker alive
    model = build_model(ModelConfig(**TINY), seed=0)
    other = make_trainer(model, EXAMPLES, impl="optimized", batch_size=4, dataloader=True, num_workers=1)
    timed = make_trainer(build_model(ModelConfig(**TINY), seed=0), EXAMPLES, impl="optimized", batch_size=4)
    try:
        other.step()  # its worker starts and stays
        timing = time_rounds({"timed": (timed, 1)}, device="cpu", rounds=1, min_time=0.01, max_time=0.02)["timed"]
    finally:
        other.close()
        timed.close()
    assert timing.foreign_workers == 1 and timing.own_workers == 0


def test_the_claims_decisions_are_what_the_claims_judge_takes():
    # a tiny ablation, its gains decided on the live trainers and the parts timed alone, 0.05 s of rounds each:
    # every claim gets an entry, each decision was made against its claim's rule (verdicts: timings, never asserted)
    from perflab.kit.claims import verdict_text
    from perflab.kit.verdicts import Measured
    from perflab.latentwire import claims
    from perflab.latentwire.study import data_path, lm_sequence_length

    p = dataclasses.replace(P, verdict_time=0.05)
    plan = [Variant("baseline", impl="baseline"), Variant("batch_size", toggles={"batch_size": 4}),
            Variant("single_pass", toggles={"single_pass": True})]
    with study_ablation(plan, p) as (results, trainers):
        gains = claims.decide_gains(trainers, results, cfg=p, device="cpu")
    assert {k for k, d in gains.items() if d is not None} == {"loss_loop", "kv_cache"}
    assert gains["non_blocking"] is None and gains["target_5x"] is None     # GPU claims: not timed on a CPU
    assert gains["batch_size"] is None                                     # a GPU's utilization: not on a CPU
    seq = lm_sequence_length(build_model(ModelConfig(**TINY), seed=0), EXAMPLES)
    parts = claims.decide_parts(p, EXAMPLES, device="cpu", base=results["baseline"], seq=seq, sweep={}, sweep_toggles={})
    assert parts["flash_attention"] is None and parts["pretokenize"].quantity == "saving"   # FA2: a CUDA kernel
    assert parts["amp"] is None
    extra = {"attention": {seq: Measured(1.0, 0.9, 1.1)}, "data": data_path(p, EXAMPLES, "cpu"), "amp": {},
             "amp_note": "", "spread": (0.05, "baseline"), "compiled": None, "mfu": None}
    found = claims.measurements(results, {**gains, **parts}, extra, "cpu", p.accum_steps)
    rows = {r["key"]: r for r in claims.CLAIMS.judge(found, cfg=p, device="cpu")}
    assert list(rows) == list(claims.CLAIMS.keys)
    assert verdict_text(rows["non_blocking"]) == "not tested here (measured on cpu)"
    assert verdict_text(rows["target_mfu"]) == "not tested here (measured on cpu)"
    assert rows["loss_loop"]["rounds"] >= 1 and "paired rounds" in rows["loss_loop"]["measured"]
    assert verdict_text(rows["flash_attention"]) == "not tested here (measured on cpu)"
    assert "not judged" in rows["flash_attention"]["measured"] and "blocks" in rows["dataloader"]["measured"]
    assert rows["dataloader"]["measured"].startswith(f"{rows['dataloader']['value']:.1%}")
    assert rows["grad_accum"]["verdict"] == "not tested here" and "no activation count" in rows["grad_accum"]["measured"]


def study_ablation(plan, p):
    from perflab.latentwire.study import ablation

    return ablation(plan, EXAMPLES, p=p, device="cpu")


def test_paired_rounds_of_a_compiled_step_pass_under_the_cudagraph_check():
    # the claims' paired rounds call trainer.step() as the timing does: one CUDA-graph generation per optimizer step
    # (its mark inside the step), nothing kept across steps; under reduce-overhead a round reads no freed output
    from perflab.kit.compiles import reset
    from perflab.kit.cudagraphs import check_lifetimes
    from perflab.kit.verdicts import decide_speedup

    kw = dict(accum_steps=2, pretokenize=True, single_pass=True, batch_size=2, lr=3e-3, no_step_sync=True)
    base = make_trainer(build_model(ModelConfig(**TINY), seed=0), EXAMPLES, impl="baseline", accum_steps=2)
    try:
        with check_lifetimes() as check:
            reset()
            compiled = make_trainer(build_model(ModelConfig(**TINY), seed=0), EXAMPLES, impl="optimized",
                                    compile="reduce-overhead", compile_backend="eager", **kw)
            try:
                assert compiled.cudagraphs
                d = decide_speedup(base.step, compiled.step, scale=2.0, at_least=1.0, max_run_time=0.2,
                                   device="cpu")
                assert check.generations >= d.rounds and check.freed
            finally:
                compiled.close()
    finally:
        base.close()
        reset()
