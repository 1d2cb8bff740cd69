"""The two versions, `baseline.make_trainer` and `optimized.make_trainer` (study.IMPLS): the optimized version's toggles
change speed, not the computation; `train` runs either; bad requests are refused by name."""
import dataclasses
import inspect

import pytest
import torch

from perflab.kit.compiles import count_compiles
from perflab.kit.launches import count_launches
from perflab.kit.params import ParameterError
from perflab.kit.syncs import count_host_syncs
from perflab.latentwire import (
    ModelConfig,
    PretokenizedCache,
    Toggles,
    Tokenizer,
    baseline,
    build_model,
    evaluate,
    make_examples,
    optimized,
    train,
)
from perflab.latentwire.activations import saved_activations
from perflab.latentwire.batches import batch_on_the_fly
from perflab.latentwire.params import LatentWireParams
from perflab.latentwire.study import IMPLS, Variant, curve_runs, loss_curve, version

TINY = ModelConfig(d_enc=16, enc_layers=1, d_lm=32, lm_layers=2, latent_len=4, adapter_hidden=32)
EXAMPLES = make_examples(24, seed=0)


def _run(name="optimized", steps=2, accum_steps=2, seed=0, **toggles):
    model = build_model(TINY, seed=seed)
    trainer = IMPLS[name](model, EXAMPLES, accum_steps=accum_steps, seed=seed, lr=3e-3, **toggles)
    trainer.seen = []
    for _ in range(steps):
        trainer.step()
    rows = trainer.losses()
    trainer.close()
    return rows, model, trainer


def test_impls_names_the_two_versions_baseline_first_with_one_signature():
    assert list(IMPLS) == ["baseline", "optimized"]
    assert IMPLS["baseline"] is baseline.make_trainer and IMPLS["optimized"] is optimized.make_trainer
    base = inspect.signature(baseline.make_trainer).parameters
    opt = inspect.signature(optimized.make_trainer).parameters
    assert list(opt)[:len(base)] == list(base) and all(opt[n].default == p.default for n, p in base.items())
    assert [p.kind for p in opt.values()][len(base):] == [inspect.Parameter.VAR_KEYWORD]  # the toggles


def test_an_unknown_version_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match="unknown implementation 'fast': expected one of baseline, optimized"):
        version("fast")
    with pytest.raises(ValueError, match="unknown implementation 'fast'"):
        Variant("fast", version="fast")  # where the plan is declared, before anything is built


def test_the_baseline_has_no_toggles():
    # the toggles are knobs of the optimized version: the baseline's signature has none to take
    with pytest.raises(TypeError, match="unexpected keyword argument 'amp'"):
        baseline.make_trainer(build_model(TINY), EXAMPLES, amp=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'amp'"):
        train(baseline.make_trainer, build_model(TINY), EXAMPLES, amp=True)
    assert {f.name for f in dataclasses.fields(Toggles)} >= {"amp", "sdpa", "compile", "single_pass"}


def test_optimized_with_every_toggle_off_reproduces_the_baseline():
    base, m1, t1 = _run("baseline", steps=3)
    opt, m2, t2 = _run("optimized", steps=3)
    assert t1.seen == t2.seen  # the same samples in the same order
    assert opt == base  # same ops in the same order: bitwise equal losses
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        assert torch.equal(p1, p2), n


@pytest.mark.parametrize("toggle, tol", [
    ({"pin_memory": True}, 0), ({"pretokenize": True}, 0), ({"grad_accum": True}, 1e-6),
    ({"fused_adamw": True}, 1e-5), ({"sdpa": True}, 1e-5), ({"checkpointing": True}, 0),
    ({"single_pass": True}, 1e-5), ({"no_step_sync": True}, 0),
    ({"amp": True}, 3e-2),  # bf16 keeps ~3 significant digits: the loss moves in the third
])
def test_each_toggle_alone_keeps_the_baselines_losses(toggle, tol):
    base, _, _ = _run("baseline")
    got, _, _ = _run(**toggle)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(base), rtol=tol, atol=tol)


def test_dataloader_with_a_worker_reads_each_sample_once_per_epoch():
    rows, _, t = _run(steps=3, accum_steps=2, dataloader=True, num_workers=1, batch_size=4, pretokenize=True)
    assert len(t.seen) == 24 and sorted(t.seen) == list(range(24))  # one epoch of 24 = 3 steps x 2 x 4
    assert all(torch.isfinite(torch.tensor(r)).all() for r in rows)


def test_everything_together_trains_and_reads_losses_once():
    model = build_model(TINY, seed=1)
    before = evaluate(model, EXAMPLES, batch_size=8)
    res = train(optimized.make_trainer, model, EXAMPLES, steps=6, accum_steps=1, lr=3e-3, batch_size=4, pretokenize=True,
                grad_accum=True, fused_adamw=True, sdpa=True, single_pass=True, no_step_sync=True, pin_memory=True)
    assert res.samples == 24 and res.lm_forwards == 6  # one LM forward per micro-batch
    after = evaluate(model, EXAMPLES, batch_size=8)
    assert set(after) == {"loss", "tf", "first", "k", "first_token_acc"} and 0 <= after["first_token_acc"] <= 1
    assert after["loss"] < before["loss"] - 0.3  # it learned something (on the samples it saw)


def test_host_syncs_per_step_baseline_versus_optimized():
    def syncs(version, **toggles):
        model = build_model(TINY, seed=0)
        trainer = IMPLS[version](model, EXAMPLES, accum_steps=2, **toggles)
        trainer.step()  # warm-up: the optimizer creates its state
        with count_host_syncs("cpu") as s:
            trainer.step()
        trainer.close()
        return s.by_op

    base = syncs("baseline")
    assert base["synchronize"] == 2 and base["item"] >= 4  # plus AdamW's per-parameter step counters
    # 6 tensors per micro-batch copied from pageable memory: each blocks on a GPU, and is counted on a CPU too
    assert base["to(device) from host"] == 6 * 2
    quick = dict(pretokenize=True, fused_adamw=True, no_step_sync=True)
    assert syncs("optimized", **quick) == {"to(device) from host": 6 * 2}  # unpinned: the copies still block
    assert sum(syncs("optimized", pin_memory=True, **quick).values()) == 0
    assert sum(syncs("optimized", pin_memory=True, dataloader=True, **quick).values()) == 0
    assert sum(syncs("optimized", pin_memory=True, dataloader=True, num_workers=1, **quick).values()) == 0


def test_grad_accum_and_checkpointing_cut_activation_memory():
    def peak(**toggles):
        model = build_model(TINY, seed=0)
        trainer = optimized.make_trainer(model, EXAMPLES, accum_steps=4, **toggles)
        with saved_activations(model) as act:
            trainer.step()
        return act.peak_bytes

    summed = peak()
    assert 3.5 < summed / peak(grad_accum=True) < 4.5  # 4 micro-batch graphs alive vs one at a time
    assert peak(checkpointing=True) < summed / 4


@pytest.mark.slow
def test_compile_with_the_eager_backend_runs_the_same_losses_without_recompiles():
    # dynamo's tracing is the cost here; batches are padded to the data's widths, so later steps whose own
    # longest prompt differs find the first step's graph (this process may have compiled it in another test)
    kw = dict(accum_steps=1, pretokenize=True, single_pass=True, batch_size=2)
    base, _, _ = _run("optimized", steps=3, **kw)
    trainer = optimized.make_trainer(build_model(TINY, seed=0), EXAMPLES, lr=3e-3, compile="default",
                                     compile_backend="eager", **kw)
    trainer.step()
    with count_compiles() as cc:
        trainer.step()
        trainer.step()
    got = trainer.losses()
    trainer.close()
    assert cc.compiles == 0
    assert trainer.widths == PretokenizedCache.for_model(EXAMPLES, Tokenizer(), TINY).widths
    # padding adds masked keys and IGNORE columns: the sums change order only (float rounding)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(base), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_compiled_step_equals_the_eager_step():
    # the study's one inductor compile in tests (~30-60 s on 2 busy cores): every toggle on, fp32 (amp off: bf16
    # would round differently in fused and eager kernels), manual sample order, 3 steps of 2 micro-batches
    toggles = {**dataclasses.asdict(Toggles.all_on(batch_size=4, amp=False)), "dataloader": False, "num_workers": 0}
    losses, seen, calls = [], [], {}
    examples = make_examples(32, seed=0)
    for mode in ("off", "default"):
        model = build_model(ModelConfig(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4), seed=0)
        tr = optimized.make_trainer(model, examples, accum_steps=2, lr=3e-3, **{**toggles, "compile": mode})
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


def test_loss_curves_train_each_variant_from_the_same_weights():
    p = LatentWireParams(n_examples=24, d_enc=16, enc_layers=1, d_lm=32, lm_layers=2, latent_len=4, ablation_batch=4,
                         accum_steps=1, max_batch=4, curve_batch=4, curve_samples=8, num_workers=0)
    curves = [loss_curve(v, EXAMPLES, EXAMPLES[:8], p=p, device="cpu") for v in curve_runs(p)]
    assert [c.name for c in curves] == ["baseline", "optimized, batch 1", "optimized, batch 4"]
    assert [c.samples for c in curves] == [list(range(1, 9)), list(range(1, 9)), [4, 8]]
    # batch 1 in the baseline's order: every toggle alone stays within 1e-5 of it (above), together within 1e-4
    torch.testing.assert_close(torch.tensor(curves[1].losses), torch.tensor(curves[0].losses), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"sdpaa": True}, ParameterError, r"unknown parameter 'sdpaa' \(did you mean 'sdpa'\?\)"),
    ({"batch_size": "16"}, ParameterError, "parameter 'batch_size' must be int"),
    ({"num_workers": 2}, ParameterError, "needs dataloader=True"),
    ({"compile": "max"}, ParameterError, "parameter 'compile' must be 'off' |"),
    ({"compile": "inductor"}, ParameterError, "parameter 'compile' must be 'off' | 'default'"),  # a backend, not a mode
    ({"compile_backend": "cudagraphs"}, ParameterError, "parameter 'compile_backend' must be 'inductor'"),
    ({"steps": 0}, ValueError, "steps must be >= 1"),
    ({"accum_steps": 0}, ValueError, "accum_steps must be >= 1"),
])
def test_bad_requests_are_refused_by_name(kwargs, error, message):
    with pytest.raises(error, match=message):
        train(optimized.make_trainer, build_model(TINY), EXAMPLES, **kwargs)


def test_batch_larger_than_the_data_is_refused():
    with pytest.raises(ValueError, match="cannot fill one batch of 32"):
        optimized.make_trainer(build_model(TINY), EXAMPLES, batch_size=32)
    with pytest.raises(ValueError, match="cannot fill one batch of 32"):
        optimized.make_trainer(build_model(TINY), EXAMPLES, batch_size=32, dataloader=True)


@pytest.mark.parametrize("name, toggles", [
    ("baseline", {}), ("optimized", {}), ("optimized", {"grad_accum": True}),
    ("optimized", {"grad_accum": True, "batch_size": 2, "pretokenize": True}),
])
def test_one_accumulated_sgd_step_equals_one_step_on_the_mean_loss_of_its_micro_batches(name, toggles):
    # AdamW divides each step by the gradient's own scale, so a gradient accum_steps times too large moves the
    # weights about as far (the trainers' own losses cannot tell); plain SGD moves them by lr x the gradient itself
    k, lr = 3, 0.5
    model = build_model(TINY, seed=0)
    trainer = IMPLS[name](model, EXAMPLES, accum_steps=k, seed=0, **toggles)
    trainer.opt = torch.optim.SGD(model.trainable_parameters(), lr=lr)
    trainer.seen = []
    trainer.step()
    trainer.close()
    ref = build_model(TINY, seed=0)
    b = len(trainer.seen) // k
    micro = [trainer.seen[i * b:(i + 1) * b] for i in range(k)]
    loss = sum(ref(batch_on_the_fly(EXAMPLES, m, ref.tokenizer, ref.cfg)).total for m in micro) / k
    loss.backward()
    torch.optim.SGD(ref.trainable_parameters(), lr=lr).step()
    start = build_model(TINY, seed=0).trainable_parameters()
    moved = max(float((p - p0).detach().abs().max()) for p, p0 in zip(ref.trainable_parameters(), start))
    assert moved > 1e-2  # the step is large against the tolerance: a gradient k times too large would miss by 2x that
    for (n, p), p_ref in zip(model.named_parameters(), ref.parameters()):
        # fp32, the same kernels on the same rows: 1e-5 relative and 1e-6 absolute are rounding (summation order)
        torch.testing.assert_close(p, p_ref, rtol=1e-5, atol=1e-6, msg=n)


def test_each_micro_batch_runs_under_autocast_and_ddp_syncs_once_per_accumulated_step():
    # DDP's no_sync() on every micro-batch but the last under grad_accum: one all-reduce per optimizer step (a
    # world of 2 faked: the trainer's model replaced by a recorder of no_sync); amp: bf16 autocast on the device
    import contextlib

    def micro_batches(**toggles):
        tr = optimized.make_trainer(build_model(TINY), EXAMPLES, accum_steps=3, **toggles)
        synced_later, autocast = [], []

        @contextlib.contextmanager
        def no_sync():
            synced_later.append(i)
            yield

        tr.model, tr.world = type("DDP", (), {"no_sync": staticmethod(no_sync)})(), 2
        for i in range(3):
            with tr._micro(i):
                autocast.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"))
        return synced_later, autocast

    assert micro_batches(grad_accum=True) == ([0, 1], [False] * 3)     # the last micro-batch all-reduces
    assert micro_batches(amp=True) == ([], [torch.bfloat16] * 3)       # without grad_accum: every backward syncs
