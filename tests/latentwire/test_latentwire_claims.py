"""06's claims: the verdict rules as data (the kit's rule on each claim's interval), the decisions a tiny ablation
makes in paired rounds (every claim gets an entry), and those paired rounds under the CUDA-graph lifetime check."""
import dataclasses

import pytest
import torch

from perflab.latentwire import ModelConfig, build_model, make_examples
from perflab.latentwire.ablation import IMPLS
from perflab.latentwire.params import LatentWireParams

TINY = dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4)
EXAMPLES = make_examples(32, seed=0)
# small time budgets: these tests count, they do not time
P = LatentWireParams(**TINY, n_examples=32, ablation_batch=4, accum_steps=2, num_workers=1, min_run_time=0.01,
                     max_run_time=0.05, block_s=0.001, rounds=2)


def test_claim_verdicts_follow_the_kits_rule():
    from perflab.kit.verdicts import Measured
    from perflab.latentwire.claims import CLAIMS, removes

    x = Measured.exact
    gpu = (None, "cuda")                                               # a GPU's utilization: judged on CUDA only
    assert CLAIMS["batch_size"].verdict(Measured(2.5, 2.2, 2.8), *gpu) == "holds"
    assert CLAIMS["batch_size"].verdict(Measured(1.5, 1.3, 1.7), *gpu) == "partly holds"  # real, short of 2x
    assert CLAIMS["batch_size"].verdict(Measured(1.01, 0.9, 1.1), *gpu) == "does not hold"
    assert CLAIMS["batch_size"].verdict(Measured(2.1, 1.8, 2.4), *gpu) == "within noise"  # straddles 2x: no flip-flop
    assert CLAIMS["batch_size"].verdict(Measured(2.5, 2.2, 2.8), None, "cpu") == "not tested here"
    assert CLAIMS["pretokenize"].verdict(x(0.002)) == "does not hold"  # a share of the step: 0.2% vs 10-15%
    # "~5-10% overhead" tested end to end: removing 5% of the step is a 1/(1-0.05) = 1.053x speedup
    assert CLAIMS["loss_loop"].rule["at_least"] == pytest.approx(1 / 0.95) == removes(0.05)
    assert CLAIMS["loss_loop"].verdict(Measured(2.0, 1.8, 2.2)) == "holds"   # removes 50% of the step
    assert CLAIMS["kv_cache"].verdict(Measured(1.1, 1.08, 1.12)) == "partly holds"  # 8-11% removed: real, < 15%
    assert CLAIMS["fused_adamw"].verdict(Measured(1.3, 0.9, 1.6)) == "within noise"  # no number: must clear 1.05
    assert CLAIMS["fused_adamw"].verdict(Measured(1.3, 1.1, 1.6)) == "holds"
    assert CLAIMS["amp"].verdict(x(2.5), None, "cpu") == "not tested here"
    assert CLAIMS["amp"].verdict(x(2.5), None, "cuda") == "holds"
    assert CLAIMS["multi_gpu"].verdict(None, None, "cuda") == "not tested here"
    # issue 13's GPU-preset targets: never judged on a CPU; on CUDA the whole interval must clear 5x
    for key, m in (("target_5x", x(9.0)), ("target_mfu", x(0.5)), ("target_spread", x(0.01))):
        assert CLAIMS[key].verdict(m, None, "cpu") == "not tested here" and CLAIMS[key].verdict(m, None, "cuda") == "holds"
    assert CLAIMS["target_5x"].verdict(Measured(5.5, 4.8, 6.0), None, "cuda") == "within noise"
    assert CLAIMS["target_mfu"].verdict(Measured(0.2, 0.18, 0.22), None, "cuda") == "does not hold"
    assert CLAIMS["target_spread"].verdict(x(0.12), None, "cuda") == "does not hold"


@pytest.mark.slow
def test_the_claims_decisions_are_what_the_claims_judge_takes():
    # a tiny ablation, its gains decided on the live trainers and the parts timed alone, 0.5 s each (warm-up included):
    # every claim gets an entry, each decision was made against its claim's rule (verdicts: timings, never asserted)
    from perflab.kit.bench import from_times
    from perflab.kit.claims import verdict_text
    from perflab.kit.formatting import value_text
    from perflab.kit.notebook import open_run
    from perflab.latentwire import claims, study
    from perflab.latentwire.ablation import ablation

    p = dataclasses.replace(P, verdict_time=0.5)
    run = open_run("06_latentwire_amp", p)
    run.device = torch.device("cpu")
    plan = [IMPLS.variant("baseline"), IMPLS.variant("optimized", "batch_size", batch_size=4),
            IMPLS.variant("optimized", "single_pass", single_pass=True)]
    floor = from_times([1e-3] * 4, label="matmul peak")
    found = study.Findings(EXAMPLES, EXAMPLES[:8], peaks={"fp32": (1e11, floor), "bf16": (2e11, floor)}, sweep={})
    with ablation(plan, EXAMPLES, p=p, device="cpu") as (found.ablation, trainers):
        found.gains = study.decide_gains(run, found.ablation, trainers)
    assert {k for k, d in found.gains.items() if d is not None} == {"loss_loop", "kv_cache"}
    assert found.gains["loss_loop"].measured == found.gains["kv_cache"].measured   # one decision, judged twice
    assert found.gains["non_blocking"] is None and found.gains["target_5x"] is None  # GPU claims: not timed on a CPU
    assert found.gains["batch_size"] is None                                          # a GPU's utilization: not on a CPU
    found.attention, found.data, found.optimizer = study.time_parts(run, found)
    found.parts = study.decide_parts(run, found)
    assert found.parts["flash_attention"] is None and found.parts["pretokenize"].quantity == "saving"  # FA2: CUDA's
    assert study.decide_amp(run, found) is None
    rows = {r["key"]: r for r in claims.CLAIMS.judge(study.evidence(run, found), cfg=p, device="cpu")}
    assert list(rows) == list(claims.CLAIMS.keys)
    assert verdict_text(rows["non_blocking"]) == "not tested here (measured on cpu)"
    assert verdict_text(rows["target_mfu"]) == "not tested here (measured on cpu)"
    assert rows["loss_loop"]["rounds"] >= 1 and "paired rounds" in rows["loss_loop"]["measured"]
    assert verdict_text(rows["flash_attention"]) == "not tested here (measured on cpu)"
    assert "not judged" in rows["flash_attention"]["measured"] and "blocks" in rows["dataloader"]["measured"]
    d = rows["dataloader"]
    assert d["measured"].startswith(value_text(d["value"], d["low"], d["high"], "%"))
    assert rows["grad_accum"]["verdict"] == "not tested here" and "no activation count" in rows["grad_accum"]["measured"]


@pytest.mark.slow
def test_paired_rounds_of_a_compiled_step_pass_under_the_cudagraph_check():
    # the claims' paired rounds call trainer.step() as the timing does: one CUDA-graph generation per optimizer step
    # (its mark inside the step), nothing kept across steps; under reduce-overhead a round reads no freed output
    from perflab.kit.compiles import reset
    from perflab.kit.cudagraphs import check_lifetimes
    from perflab.kit.verdicts import decide_speedup

    kw = dict(accum_steps=2, pretokenize=True, single_pass=True, batch_size=2, lr=3e-3, no_step_sync=True)
    base = IMPLS["baseline"](build_model(ModelConfig(**TINY), seed=0), EXAMPLES, accum_steps=2)
    try:
        with check_lifetimes() as check:
            reset()
            compiled = IMPLS["optimized"](build_model(ModelConfig(**TINY), seed=0), EXAMPLES,
                                          compile="reduce-overhead", compile_backend="eager", **kw)
            try:
                assert compiled.cudagraphs
                for _ in range(2):   # compiled (and its graphs recorded) before deciding: a compile is not a call
                    base.step(), compiled.step()
                d = decide_speedup(base.step, compiled.step, scale=2.0, at_least=1.0, max_run_time=0.5,
                                   device="cpu")
                assert d.rounds >= 1 and check.generations >= d.rounds and check.freed
            finally:
                compiled.close()
    finally:
        base.close()
        reset()


def test_the_attention_layer_is_timed_side_by_side_and_its_ratio_is_manual_over_sdpa(monkeypatch):
    # the timer is the kit's interleaved one (both in each round), called once with both; the ratio is manual / sdpa
    from perflab.kit.bench import from_times
    from perflab.latentwire import parts

    calls = []

    def timer(fns, *, label, sub_labels, descriptions, **kw):
        calls.append(sorted(fns))
        for fn in fns.values():
            fn()                                                      # a forward+backward of each: it runs
        t = {"manual": [0.3, 0.3], "sdpa": [0.1, 0.1]}
        return {k: from_times(t[k], label=label, sub_label=sub_labels[k], description=descriptions[k]) for k in fns}
    monkeypatch.setattr(parts, "measure_interleaved", timer)
    gain, (manual, sdpa) = parts.attention_layer(P, batch=2, seq=8, device="cpu")
    assert calls == [["manual", "sdpa"]]
    assert (manual.task_spec.description, sdpa.task_spec.description) == ("manual", "sdpa")
    assert manual.task_spec.sub_label == f"[2, 8, {P.d_lm}]" and gain.value == pytest.approx(3.0)
