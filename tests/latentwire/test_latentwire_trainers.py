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
from perflab.latentwire.ablation import IMPLS
from perflab.latentwire.activations import saved_activations
from perflab.latentwire.batches import batch_on_the_fly
from perflab.latentwire.curves import curve_runs, loss_curve
from perflab.latentwire.params import LatentWireParams

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
    with pytest.raises(ValueError, match="no version 'fast': expected one of baseline, optimized"):
        IMPLS["fast"]
    with pytest.raises(ValueError, match="no version 'fast'"):
        IMPLS.variant("fast", "quick")  # where the plan is declared, before anything is built


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


# ---- the optimized version's wiring: what each toggle hands to the data path, the loader and the compiled step ----
# (issue 39 item 3: mutants of latentwire/optimized.py the tests above let live; each test names those it kills)

def _pinned(batch) -> bool:
    from perflab.kit.syncs import is_pinned
    flags = {is_pinned(t) for t in batch.tensors().values()}
    assert len(flags) == 1, "a batch is pinned whole or not at all"
    return flags.pop()


def _same_batch(got, want):
    assert got.tensors().keys() == want.tensors().keys()
    for name, t in want.tensors().items():
        assert torch.equal(getattr(got, name), t), name


def _fake_compile(monkeypatch):
    """torch.compile replaced by a recorder: what it was given, and the batches the compiled step is called with
    (run eagerly). The compiled path's wiring without a compile (the real compile is the slow tests')."""
    calls = []

    def fake(model, **kwargs):
        seen = []

        def compiled(batch, **kw):
            seen.append(batch)
            return model(batch, **kw)

        calls.append({"model": model, "kwargs": kwargs, "fn": compiled, "batches": seen})
        return compiled

    monkeypatch.setattr(torch, "compile", fake)
    return calls


def _fake_ranks(monkeypatch, rank, world):
    import perflab.latentwire.trainer_base as trainer_base
    monkeypatch.setattr(trainer_base, "dist_layout", lambda: (rank, world))


def test_the_optimized_versions_defaults_are_the_baselines():
    # lr, accum_steps and the sample order of seed 0, from make_trainer and from the trainer class itself
    # (kills make_trainer 3 and 5, OptimizedTrainer.__init__ 1-3; mutmut keeps the original signature, so the
    # signature test above cannot see a changed default)
    for opt in (optimized.make_trainer(build_model(TINY), EXAMPLES),
                optimized.OptimizedTrainer(build_model(TINY), EXAMPLES, device="cpu")):
        base = baseline.make_trainer(build_model(TINY), EXAMPLES)
        assert opt.opt.param_groups[0]["lr"] == base.opt.param_groups[0]["lr"] == 1e-3
        assert opt.accum_steps == base.accum_steps == 1
        assert [opt.order.next() for _ in range(30)] == [base.order.next() for _ in range(30)]  # past an epoch
        opt.close()


def test_sdpa_switches_the_lm_and_the_pooler_and_its_absence_switches_them_back():
    # kills __init__ 18 and 20 (the attention option dropped or never sdpa): the losses agree to 1e-5 either way
    model = build_model(TINY)
    optimized.make_trainer(model, EXAMPLES, sdpa=True).close()
    assert model.pooler.attention == "sdpa" and {b.attn.attention for b in model.lm.blocks} == {"sdpa"}
    optimized.make_trainer(model, EXAMPLES).close()
    assert model.pooler.attention == "manual" and {b.attn.attention for b in model.lm.blocks} == {"manual"}


@pytest.mark.parametrize("dataloader", [False, True])
def test_pretokenized_batches_are_gathered_from_the_cache_not_tokenized_per_step(monkeypatch, dataloader):
    # after the cache is built, no batch tokenizes (the on-the-fly path made to fail): kills __init__ 28 and 62,
    # make_loader 7 and 12, _ExamplesDataset.__getitems__ 5 and 11 (the cache not reaching host_batch)
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, batch_size=4, pretokenize=True, dataloader=dataloader)

    def tokenizes(*args, **kwargs):
        raise AssertionError("a batch was tokenized during training")

    monkeypatch.setattr(optimized, "batch_on_the_fly", tokenizes)
    got = [next(tr.batches) for _ in range(3)]
    monkeypatch.undo()
    tr.close()
    for b in got:
        _same_batch(b, batch_on_the_fly(EXAMPLES, b.index.tolist(), Tokenizer(), TINY))


@pytest.mark.parametrize("pretokenize, dataloader", [(False, False), (True, False), (False, True), (True, True)])
def test_under_compile_every_batch_is_padded_to_the_datas_widths(monkeypatch, pretokenize, dataloader):
    # the fixed shapes of the compiled step, from the cache or tokenized now, by hand or through the DataLoader; the
    # data tokenized once for them (kills __init__ 43-53, 70 and 82, _manual_batches 8 and 14, host_batch 3, 5,
    # 17 and 19-22, make_loader 8 and 13, __getitems__ 6 and 12); without compile a batch keeps its own widths
    import perflab.latentwire.batches as batches
    tok, widths = Tokenizer(), PretokenizedCache.for_model(EXAMPLES, Tokenizer(), TINY).widths
    _fake_compile(monkeypatch)
    tokenized = []
    real = batches.tokenize_example
    monkeypatch.setattr(batches, "tokenize_example", lambda *a, **k: tokenized.append(1) or real(*a, **k))
    kw = dict(batch_size=3, pretokenize=pretokenize, dataloader=dataloader)
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, compile="default", compile_backend="eager", **kw)
    assert tr.widths == widths and len(tokenized) == len(EXAMPLES)  # one cache, for the toggle or for the widths
    got = [next(tr.batches) for _ in range(4)]
    tr.close()
    eager = optimized.make_trainer(build_model(TINY), EXAMPLES, **kw)
    own = [next(eager.batches) for _ in range(4)]
    eager.close()
    assert eager.widths is None and any(b.widths != widths for b in own)
    for padded, b in zip(got, own):
        # the same rows in the same order as eager's, padded: prompt bytes with PAD_BYTE, answers with <pad>, labels IGNORE
        want = batch_on_the_fly(EXAMPLES, b.index.tolist(), tok, TINY)
        _same_batch(b, want)
        assert padded.widths == widths
        _same_batch(padded, want.pad_to(widths, tok.pad_id))


def test_a_batch_tokenized_now_is_padded_to_the_widths_with_the_tokenizers_own_pad_id():
    # this tokenizer's <pad> is id 0, which F.pad's default fill matches; another LM's tokenizer (hf.py) has its own
    # (kills host_batch 20: pad_to(widths, None))
    tok = Tokenizer()
    tok.pad_id = 5
    index = [1, 2, 3]  # answers of 4 columns where the data's longest has 6
    widths = PretokenizedCache.for_model(EXAMPLES, tok, TINY).widths
    own = batch_on_the_fly(EXAMPLES, index, tok, TINY)
    got = optimized.host_batch(EXAMPLES, index, tok, TINY, None, widths)
    assert got.widths == widths and own.ans_ids.shape[1] < widths[1]
    _same_batch(got, own.pad_to(widths, 5))
    assert (got.ans_ids[:, own.ans_ids.shape[1]:] == 5).all()


def test_the_compiled_step_is_the_whole_model_compiled_with_the_mode_and_backend_asked(monkeypatch):
    # fullgraph on one process, not under DDP (which splits the graph at its buckets); only inductor takes a mode
    # (kills __init__ 118-129)
    calls = _fake_compile(monkeypatch)
    for world, compile, backend, want in [
        (1, "max-autotune", "inductor", {"fullgraph": True, "backend": "inductor", "mode": "max-autotune"}),
        (1, "default", "aot_eager", {"fullgraph": True, "backend": "aot_eager"}),
        (2, "default", "inductor", {"fullgraph": False, "backend": "inductor", "mode": "default"}),
    ]:
        _fake_ranks(monkeypatch, 0, world)
        model = build_model(TINY)
        tr = optimized.make_trainer(model, EXAMPLES, compile=compile, compile_backend=backend)
        tr.close()
        assert calls[-1]["model"] is model and calls[-1]["kwargs"] == want
        assert tr.loss_fn is calls[-1]["fn"] and not tr.cudagraphs
    n = len(calls)
    optimized.make_trainer(build_model(TINY), EXAMPLES).close()
    assert len(calls) == n  # compile off: nothing compiled


def test_a_cuda_graph_step_is_a_new_generation_and_its_outputs_are_tracked_under_check_lifetimes(monkeypatch):
    # inductor in reduce-overhead on CUDA replays CUDA graphs (the trainer is only built here, on any host); under
    # check_lifetimes any backend of a CUDA-graph mode is tracked on the CPU, and a mode without graphs is not
    # (kills __init__ 108-111 and 130-133)
    from perflab.kit.cudagraphs import check_lifetimes
    calls = _fake_compile(monkeypatch)

    def built(device, compile, backend):
        tr = optimized.make_trainer(build_model(TINY), EXAMPLES, device=device, compile=compile, compile_backend=backend)
        tr.close()
        return tr

    assert built("cuda", "reduce-overhead", "inductor").cudagraphs is True
    assert built("cuda", "reduce-overhead", "eager").cudagraphs is False
    assert built("cuda", "default", "inductor").cudagraphs is False
    assert built("cpu", "reduce-overhead", "inductor").cudagraphs is False
    with check_lifetimes():
        tr = built("cpu", "reduce-overhead", "eager")
        assert tr.cudagraphs is True
        assert tr.loss_fn is not calls[-1]["fn"] and tr.loss_fn.__wrapped__ is calls[-1]["fn"]
        tr = built("cpu", "default", "eager")
        assert tr.cudagraphs is False and tr.loss_fn is calls[-1]["fn"]


def test_a_compiled_step_marks_the_batch_dimension_of_every_tensor_dynamic(monkeypatch):
    # one graph for every batch size above 1: dim 0 of each tensor the compiled step gets is marked (dynamo's mark
    # on the tensor); an eager step marks nothing (kills _mark_batch_dynamic 1-5, step 14 and 15)
    calls = _fake_compile(monkeypatch)
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, accum_steps=2, batch_size=2, pretokenize=True,
                                compile="default", compile_backend="eager")
    tr.step()
    tr.close()
    assert len(calls[-1]["batches"]) == 2
    for batch in calls[-1]["batches"]:
        assert {k: getattr(t, "_dynamo_weak_dynamic_indices", None) for k, t in batch.tensors().items()} == \
            {k: {0} for k in batch.tensors()}
    seen = []
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, accum_steps=2, batch_size=2, pretokenize=True)
    tr.loss_fn = lambda batch, **kw: seen.append(batch) or tr.model(batch, **kw)
    tr.step()
    tr.close()
    assert len(seen) == 2 and all(not hasattr(t, "_dynamo_weak_dynamic_indices") for b in seen for t in b.tensors().values())


def test_a_step_syncs_its_own_device_counts_itself_and_frees_the_gradients(monkeypatch):
    # two synchronizes per step (the baseline's), of the trainer's device; steps counted; zero_grad(set_to_none=True):
    # no gradient tensor kept between steps (kills step 2, 29-33 and 38)
    synced = []
    monkeypatch.setattr(optimized, "synchronize", synced.append)
    model = build_model(TINY)
    tr = optimized.make_trainer(model, EXAMPLES, accum_steps=2)
    for _ in range(3):
        tr.step()
    tr.close()
    assert synced == [torch.device("cpu")] * 6 and tr.steps == 3
    assert all(p.grad is None for p in model.trainable_parameters())
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, no_step_sync=True)
    tr.step()
    assert len(synced) == 6 and tr.steps == 1  # no_step_sync: none


def test_each_step_skips_ddps_all_reduce_on_all_but_its_last_micro_batch(monkeypatch):
    # through step() (the test above calls _micro itself): a world of 2 faked, DDP's no_sync recorded (kills step 16)
    import contextlib
    _fake_ranks(monkeypatch, 0, 2)
    entered = []

    @contextlib.contextmanager
    def no_sync():
        entered.append(len(entered))
        yield

    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, accum_steps=3, grad_accum=True, no_step_sync=True)
    tr.model = type("DDP", (), {"no_sync": staticmethod(no_sync)})()  # the step's loss_fn stays the real model
    tr.step()
    tr.close()
    assert entered == [0, 1]


def test_amp_autocasts_to_bfloat16_whatever_the_devices_autocast_default():
    # the dtype is the trainer's (bf16: no GradScaler needed), not the device's default (float16 on CUDA; CPU's
    # default made float16 here): kills _micro 4 and 6
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, amp=True)
    tr.close()
    default = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", torch.float16)
    try:
        with tr._micro(0):
            got = torch.get_autocast_dtype("cpu")
    finally:
        torch.set_autocast_dtype("cpu", default)
    assert got == torch.bfloat16


@pytest.mark.parametrize("pretokenize", [False, True])
@pytest.mark.parametrize("dataloader", [False, True])
def test_host_batches_are_pinned_under_pin_memory_only(pretokenize, dataloader):
    # pinned by the cache, by hand, or after the DataLoader (which pins only with an accelerator): every path, both
    # ways (kills __init__ 37, _manual_batches 15-18, _loader_batches 9 and 10)
    for pin in (False, True):
        tr = optimized.make_trainer(build_model(TINY), EXAMPLES, batch_size=2, pin_memory=pin, pretokenize=pretokenize,
                                    dataloader=dataloader)
        got = [_pinned(next(tr.batches)) for _ in range(2)]
        tr.close()
        assert got == [pin, pin]


def test_the_dataloader_pins_its_batches_itself_where_an_accelerator_can(monkeypatch):
    # with an accelerator (faked: the trainer is only built) the DataLoader's pin thread pins, and keeps its workers
    # across epochs by default (kills __init__ 56, 65 and 66)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, pin_memory=True, dataloader=True, num_workers=1)
    assert tr.loader_pins is True and tr.loader.pin_memory is True and tr.loader.persistent_workers is True
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, dataloader=True, num_workers=1, persistent_workers=False)
    assert tr.loader_pins is False and tr.loader.pin_memory is False and tr.loader.persistent_workers is False


def test_a_dataloader_trainer_reshuffles_each_epoch_as_the_distributed_sampler_of_its_seed(monkeypatch):
    # epoch e's order is DistributedSampler's: randperm(n) from seed + e, e counted from 0 (kills __init__ 55,
    # _loader_batches 3-5)
    tr = optimized.make_trainer(build_model(TINY), EXAMPLES, batch_size=4, dataloader=True, seed=3)
    got = [next(tr.batches).index.tolist() for _ in range(3 * 6)]  # 3 epochs of 6 batches
    tr.close()
    for epoch in range(3):
        order = torch.randperm(24, generator=torch.Generator().manual_seed(3 + epoch)).tolist()
        assert sum(got[6 * epoch:6 * (epoch + 1)], []) == order, epoch


@pytest.mark.parametrize("dataloader", [False, True])
def test_each_rank_of_two_reads_its_own_half_of_an_epoch(monkeypatch, dataloader):
    # the rank and world size reach the sample order, by hand and through the sampler (a world of 2 faked; the
    # trainers are not stepped): kills __init__ 80, 81, 88, 93 and 94
    halves = []
    for rank in (0, 1):
        _fake_ranks(monkeypatch, rank, 2)
        tr = optimized.make_trainer(build_model(TINY), EXAMPLES, batch_size=3, dataloader=dataloader)
        halves.append(sorted(i for _ in range(4) for i in next(tr.batches).index.tolist()))  # 24 / (2 x 3)
        tr.close()
    assert len(halves[0]) == len(halves[1]) == 12 and sorted(halves[0] + halves[1]) == list(range(24))


def _loader(examples, **kw):
    kw = dict(cache=None, batch_size=4, num_workers=0, persistent_workers=True, pin_memory=False, seed=0) | kw
    return optimized.make_loader(examples, Tokenizer(), TINY, kw.pop("cache"), **kw)


def test_make_loader_serves_whole_shuffled_batches_of_its_seed_on_one_rank_by_default():
    # one rank by default; DistributedSampler's shuffle of `seed`; no ragged last batch; tokenized on the fly without
    # a cache (kills make_loader 1, 2, 18, 25, 27 and 50, __getitems__ 1, 3 and 4)
    loader, sampler = _loader(EXAMPLES, batch_size=5, seed=7)
    got = list(loader)
    order = torch.randperm(24, generator=torch.Generator().manual_seed(7)).tolist()
    assert len(sampler) == 24 and [b.index.tolist() for b in got] == [order[i:i + 5] for i in range(0, 20, 5)]
    for b in got:
        _same_batch(b, batch_on_the_fly(EXAMPLES, b.index.tolist(), Tokenizer(), TINY))


def test_make_loader_drops_the_samples_that_would_repeat_across_ranks():
    # 23 samples on 2 ranks: 11 each, disjoint (without drop_last the sampler pads a rank with a repeat): kills
    # make_loader 20, 26 and 28
    ranks = [_loader(EXAMPLES[:23], batch_size=1, rank=r, world=2)[1] for r in (0, 1)]
    a, b = (list(s) for s in ranks)
    assert len(a) == len(b) == 11 and not set(a) & set(b) and set(a) | set(b) <= set(range(23))


def test_make_loader_accepts_exactly_one_batch_and_hands_on_its_dataloader_options():
    # a set that fills one batch exactly is enough (kills make_loader 29); pin_memory and persistent workers reach the
    # DataLoader, persistence only with workers (kills make_loader 36, 37, 42, 43 and 53)
    loader, _ = _loader(EXAMPLES[:4], batch_size=4)
    assert [len(b.index) for b in loader] == [4]
    with pytest.raises(ValueError, match="4 examples cannot fill one batch of 5"):
        _loader(EXAMPLES[:4], batch_size=5)
    assert _loader(EXAMPLES, pin_memory=True)[0].pin_memory is True
    assert _loader(EXAMPLES, num_workers=1)[0].persistent_workers is True
    assert _loader(EXAMPLES, num_workers=1, persistent_workers=False)[0].persistent_workers is False
    assert _loader(EXAMPLES, num_workers=0)[0].persistent_workers is False
