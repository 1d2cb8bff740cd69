"""Training: the optimized step has zero host syncs; baseline, each single change and optimized give
the same losses and parameters for the same seed and data; bad input gives clear errors."""
import contextlib
import dataclasses
import math

import pytest
import torch

from perflab.kit.params import ParameterError
from perflab.kit.syncs import assert_no_host_syncs, count_host_syncs
from perflab.vae import (
    BadLabelsError,
    ModelConfig,
    StepConfig,
    TrainConfig,
    baseline,
    build_model,
    make_batches,
    make_optimizer,
    optimized,
    run_epoch,
    single_changes,
    train_step,
)
from perflab.vae.study import IMPLS

SMALL = ModelConfig(hidden=(32, 16), latent=8)   # counts and equalities do not depend on widths
# warm-ups of a few steps so beta and lambda are non-zero within a short test
TC = TrainConfig(beta_warmup=4, lam_warmup=4, lam_max=0.5)


@pytest.fixture(scope="module")
def batches():
    return make_batches(12, batch=64, group=1, seed=0, per_kind=12)


def _run(batches, *, impl="baseline", config=None, model_cfg=SMALL, seed=0, syncs=None, **kw):
    """Train one epoch by version `impl` (a name in IMPLS) or, given `config`, by `run_epoch` of that StepConfig;
    `syncs`: a count_host_syncs() counter around the epoch only (the model's copy to the
    device is setup, not the loop: on a GPU it is one blocking copy per parameter)."""
    torch.manual_seed(seed)  # dropout and the reparameterization draw from the global RNG
    model = build_model(model_cfg, seed=seed)
    opt = make_optimizer(model)
    with syncs or contextlib.nullcontext():
        if config is not None:
            log = run_epoch(model, batches, config, optimizer=opt, train=TC, progress=False, **kw)
        else:
            log = IMPLS[impl](model, batches, optimizer=opt, train=TC, progress=False, **kw)
    return log, model


@pytest.mark.parametrize("sep_grad", [False, True])
def test_optimized_step_has_zero_host_syncs(batches, sep_grad):
    torch.manual_seed(0)
    model = build_model(SMALL)
    opt = make_optimizer(model)
    sc = optimized.step_config(sep_grad=sep_grad)
    for i, (x, y) in enumerate(batches[:3]):
        with assert_no_host_syncs():
            train_step(model, opt, x, y, i, sc, TC)


def test_optimized_epoch_reads_once_per_log_every(batches):
    log, _ = _run(batches, impl="optimized", log_every=5, syncs=(c := count_host_syncs("cpu")))
    assert c.by_op == {"tolist": 3}  # 12 steps, log_every 5: reads after steps 5, 10 and 12
    assert log.reads == 3 and len(log) == 12 and log.steps == list(range(12))


def test_baseline_syncs_every_step(batches):
    _run(batches[:2], impl="baseline", syncs=(c := count_host_syncs("cpu")))
    # per step: labels to host and back (2), one masked gather per class (3), .cpu() and .item() x 4 metrics
    assert c.by_op == {"tolist": 2, "tensor(host list) -> device": 2, "__getitem__[bool mask]": 6,
                       "cpu": 8, "item": 8}


def test_identical_losses_and_parameters_no_grad_separability(batches):
    base, m_base = _run(batches, impl="baseline")
    opt, m_opt = _run(batches, impl="optimized", sep_grad=False, log_every=4)
    # J is a constant here (no gradient): the updates are bit-identical; J itself differs between
    # the loop and the matmuls by float rounding, so the loss values agree to ~1e-6 relative
    for p, q in zip(m_base.parameters(), m_opt.parameters()):
        assert torch.equal(p, q)
    for k in ("nll", "kl"):
        assert base.values[k] == opt.values[k]
    torch.testing.assert_close(torch.tensor(opt.values["sep"]), torch.tensor(base.values["sep"]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(opt.values["loss"]), torch.tensor(base.values["loss"]), rtol=1e-6, atol=1e-4)
    assert max(base.values["sep"]) > 0 and base.values["loss"][0] != base.values["loss"][-1]


def test_identical_losses_with_separability_gradient(batches):
    base, m_base = _run(batches, impl="baseline", sep_grad=True)
    opt, m_opt = _run(batches, impl="optimized", sep_grad=True)
    # J's gradient now flows: loop and matmul gradients differ by float rounding, which Adam carries
    # into the weights; after 12 steps they agree to ~1e-5 (a wrong gradient would differ at 1e-3)
    for p, q in zip(m_base.parameters(), m_opt.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(opt.values["loss"]), torch.tensor(base.values["loss"]), rtol=1e-5, atol=1e-3)
    no_grad, m_ng = _run(batches, impl="optimized", sep_grad=False)
    assert not all(torch.equal(p, q) for p, q in zip(m_ng.parameters(), m_opt.parameters()))  # J does steer


def test_each_single_change_keeps_the_math(batches):
    base, m_base = _run(batches[:4], impl="baseline")
    for name, sc in single_changes(log_every=3).items():
        log, m = _run(batches[:4], config=sc)
        if sc.sep_grad:
            continue  # a different objective by design (checked above)
        assert all(torch.equal(p, q) for p, q in zip(m_base.parameters(), m.parameters())), name
        assert log.values["nll"] == base.values["nll"], name


def test_complex_variant_trains_identically(batches):
    cfg = ModelConfig(kind="complex", hidden=(16, 8), latent=4)
    base, mb = _run(batches[:3], model_cfg=cfg, impl="baseline")
    opt, mo = _run(batches[:3], model_cfg=cfg, impl="optimized", sep_grad=False)
    assert all(torch.equal(p, q) for p, q in zip(mb.parameters(), mo.parameters()))
    assert all(math.isfinite(v) for v in opt.values["loss"])


def _with_bad_label(batches, at):
    out = [(x, y.clone()) for x, y in batches]
    out[at][1][5] = 11
    return out


def test_bad_labels_baseline_raises_at_the_batch(batches):
    bad = _with_bad_label(batches[:4], at=2)
    with pytest.raises(ValueError, match=r"outside the declared range \[0, 6\).*11"):
        _run(bad, impl="baseline")


def test_bad_labels_optimized_raises_at_the_next_read(batches):
    bad = _with_bad_label(batches[:8], at=2)
    with pytest.raises(BadLabelsError, match=r"\[0, 6\) \(step 2: 1\)"):
        _run(bad, impl="optimized", log_every=4)
    # single changes with per-step metrics and a device remap report at the end of the epoch
    sc = single_changes()["remap presence table"]
    with pytest.raises(BadLabelsError, match="1 labels outside"):
        _run(bad, config=sc)


def test_bad_batches(batches):
    x, y = batches[0]
    with pytest.raises(ValueError, match="empty batch"):
        _run([(x[:0], y[:0])], impl="optimized")
    with pytest.raises(ValueError, match="empty batch"):
        _run([(x[:0], y[:0])], impl="baseline")
    with pytest.raises(ValueError, match=r"labels must be \[64\]"):
        _run([(x, y[:10])], impl="optimized")
    with pytest.raises(ValueError, match=r"x must be \[batch, 256\]"):
        _run([(x[:, :100], y)], impl="optimized")
    with pytest.raises(ValueError, match="yielded no batch"):
        _run([], impl="optimized")
    with pytest.raises(ValueError, match="no version 'fast': expected one of baseline, optimized, captured"):
        _run(batches, impl="fast")
    with pytest.raises(ParameterError, match="log_every"):
        _run(batches, config=dataclasses.replace(StepConfig(), log_every=0))


def test_the_versions_are_named_in_impls_with_one_signature():
    import inspect

    assert list(IMPLS) == ["baseline", "optimized", "captured"]
    shared = ["model", "batches", "optimizer", "train", "start_step", "progress", "progress_file"]
    for name, fn in IMPLS.items():
        assert fn.__name__ == "train_epoch" and list(inspect.signature(fn).parameters)[:len(shared)] == shared, name


@pytest.mark.gpu
def test_optimized_step_on_cuda_has_no_sync_warnings():
    dev = torch.device("cuda")
    data = make_batches(3, group=1, per_kind=8, device=dev)
    torch.manual_seed(0)
    model = build_model(ModelConfig(), device=dev)
    opt = make_optimizer(model)
    sc = optimized.step_config()
    train_step(model, opt, *data[0], 0, sc)  # warm-up: first-call allocations
    with assert_no_host_syncs(cuda_debug=True) as c:
        for i, (x, y) in enumerate(data[1:], start=1):
            train_step(model, opt, x, y, i, sc)
    assert c.cuda_debug_warnings == 0


def test_dynamo_captures_the_optimized_losses_in_one_graph(batches):
    # a second witness for "sync-free": fullgraph=True fails on any host read; backend "eager"
    # traces without generating code (cheap on CPU)
    from perflab.kit.compiles import count_compiles
    from perflab.vae.train import step_losses

    model = build_model(SMALL)
    x, y = batches[0]
    torch._dynamo.reset()
    try:
        fn = torch.compile(step_losses, backend="eager", fullgraph=True)
        with count_compiles() as cc:
            out = fn(model, x, y, 1, optimized.step_config(), TC)
        assert cc.graphs == 1 and cc.compiles == 1
        assert set(out) == {"loss", "nll", "kl", "sep", "n_bad"}
        torch._dynamo.reset()
        fn = torch.compile(step_losses, backend="eager", fullgraph=True)
        with pytest.raises(Exception, match="(?i)data-dependent|graph break|unsupported"):
            fn(model, x, y, 1, baseline.step_config(), TC)
    finally:
        torch._dynamo.reset()


def test_optimized_train_epoch_hands_its_arguments_and_defaults_to_run_epoch(monkeypatch):
    # optimized.train_epoch is run_epoch under the sync-free StepConfig: its defaults (metrics read every 50 steps,
    # the separability's gradient on, a progress bar named "optimized") and every argument reach run_epoch
    from perflab.vae import optimized
    from perflab.vae.config import OPTIMIZED, TrainConfig

    calls = []
    monkeypatch.setattr(optimized, "run_epoch", lambda *a, **kw: calls.append((a, kw)) or "log")
    model, batches, opt, tc, out = object(), [], object(), TrainConfig(), object()
    assert optimized.train_epoch(model, batches, optimizer=opt) == "log"
    (m, b, sc), kw = calls[0]
    assert (m, b, sc) == (model, batches, dataclasses.replace(OPTIMIZED, log_every=50, sep_grad=True))
    assert optimized.step_config() == sc                   # the same defaults
    assert kw == dict(optimizer=opt, train=TrainConfig(), start_step=0, progress=True, progress_file=None, desc="optimized")
    optimized.train_epoch(model, batches, optimizer=opt, train=tc, start_step=7, progress=False, progress_file=out,
                          log_every=5, sep_grad=False)
    (_, _, sc), kw = calls[1]
    assert (sc.log_every, sc.sep_grad) == (5, False)
    assert kw == dict(optimizer=opt, train=tc, start_step=7, progress=False, progress_file=out, desc="optimized")
