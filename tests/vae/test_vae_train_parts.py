"""The training loop's parts one by one (vae/train.py): the loss as the seed writes it from its parts, the optimizer's
settings, the batch checks' messages, the progress bar, and what each way of reading the metrics logs and raises.
The equality tests of test_vae_train.py run baseline and optimized through the same parts, so a bug in a part both
share passes them: these pin each part against what it must give on its own."""
import dataclasses
import io

import pytest
import torch

from perflab.vae import (
    BadLabelsError,
    ModelConfig,
    StepConfig,
    TrainConfig,
    build_model,
    make_batches,
    make_optimizer,
    run_epoch,
    single_changes,
    train_step,
)
from perflab.vae.step_ops import fisher_ratio_loop
from perflab.vae.train import REMAPS, check_batch, step_losses

SMALL = ModelConfig(hidden=(32, 16), latent=8)
TC = TrainConfig(beta_warmup=4, lam_warmup=4, lam_max=0.5, eps=0.5)   # eps large enough to move J


@pytest.fixture(scope="module")
def batches():
    return make_batches(6, batch=32, group=1, seed=1, per_kind=6)


def _epoch(batches, sc, seed=0, **kw):
    torch.manual_seed(seed)
    model = build_model(SMALL, seed=seed)
    return run_epoch(model, batches, sc, optimizer=make_optimizer(model), train=TC, **kw)


def _bad(batches, steps, count=1):
    out = [(x, y.clone()) for x, y in batches]
    for s in steps:
        out[s][1][:count] = 11
    return out


@pytest.mark.parametrize("sc", [StepConfig(), StepConfig(separability="vectorized"),
                                StepConfig(separability="vectorized", sep_grad=True, remap="presence")])
def test_the_loss_is_nll_plus_beta_kl_minus_lambda_j_with_j_on_the_encoders_mean(batches, sc):
    x, y = batches[0]
    model = build_model(SMALL, seed=0).eval()      # eval: the encoder's mean is the same in both passes below
    v = step_losses(model, x, y, 3, sc, TC)
    assert TC.beta(3) > 0 and TC.lam(3) > 0
    torch.testing.assert_close(v["loss"], v["nll"] + TC.beta(3) * v["kl"] - TC.lam(3) * v["sep"], rtol=0, atol=1e-6)
    r = REMAPS[sc.remap](y, TC.num_labels)
    with torch.no_grad():
        want = fisher_ratio_loop(model.encode(x)[0], r.labels, r.n_classes, TC.eps)
    torch.testing.assert_close(v["sep"].detach(), want, rtol=1e-5, atol=1e-6)


def test_the_optimizer_is_fused_adam_at_its_learning_rate_and_capturable_only_when_asked():
    model = build_model(SMALL, seed=0)
    d = make_optimizer(model).defaults
    assert (type(make_optimizer(model)).__name__, d["lr"], d["fused"], d["capturable"]) == ("Adam", 1e-3, True, False)
    d = make_optimizer(model, 0.02, capturable=True).defaults
    assert (d["lr"], d["capturable"]) == (0.02, True)


def test_a_step_sets_the_old_gradients_to_none_and_names_its_step_in_a_batch_error(batches):
    x, y = batches[0]
    model = build_model(SMALL, seed=0)
    opt = make_optimizer(model)
    calls, zero = [], opt.zero_grad
    opt.zero_grad = lambda **kw: (calls.append(kw), zero(**kw))[1]
    train_step(model, opt, x, y, 0, StepConfig(), TC)
    assert calls == [{"set_to_none": True}]         # no fill kernel per parameter, no stale buffer kept
    with pytest.raises(ValueError, match=r"^step 7: x must be \[batch, 256\], got \(32, 100\)$"):
        train_step(model, opt, x[:, :100], y, 7, StepConfig(), TC)


def test_the_batch_checks_name_what_they_got():
    x, y = torch.zeros(4, 256), torch.zeros(4, dtype=torch.long)
    check_batch(x[:1], y[:1], 256, 0)                                        # a batch of one is a batch
    with pytest.raises(ValueError, match=r"^step 2: x must be \[batch, 256\], got \(\)$"):
        check_batch([[0.0] * 256], y, 256, 2)                                # not a tensor: no shape to show
    with pytest.raises(ValueError, match=r"^step 2: x must be \[batch, 256\], got \(4, 256, 1\)$"):
        check_batch(x[..., None], y, 256, 2)
    with pytest.raises(ValueError, match=r"^step 3: empty batch \(x has shape \(0, 256\)\)$"):
        check_batch(x[:0], y[:0], 256, 3)
    with pytest.raises(ValueError, match=r"^step 4: labels must be \[4\] to match x, got \(3,\)$"):
        check_batch(x, y[:3], 256, 4)
    with pytest.raises(ValueError, match=r"^step 4: labels must be \[4\] to match x, got \(\)$"):
        check_batch(x, [0, 0, 0, 0], 256, 4)


def test_the_progress_bar_counts_its_batches_under_its_label_and_leaves_no_line(batches):
    out = io.StringIO()
    _epoch(batches, StepConfig(), progress_file=out)                      # progress is on by default
    text = out.getvalue()
    assert "train: " in text and "/6 [" in text and not text.endswith("\n")   # leave=False: the line is cleared
    out = io.StringIO()
    _epoch(batches, StepConfig(), progress_file=out, desc="epoch 3")
    assert "epoch 3: " in out.getvalue()
    out = io.StringIO()
    _epoch(batches, StepConfig(), progress_file=out, progress=False)
    assert out.getvalue() == ""
    out = io.StringIO()
    _epoch(iter(batches), StepConfig(), progress_file=out)                # a generator: no total, still counted
    assert "0it [" in out.getvalue() and "/6" not in out.getvalue()


@pytest.mark.parametrize("metrics", ["item", "device"])
def test_the_postfix_shows_the_metrics_read_at_each_log_every(batches, metrics):
    sc = StepConfig(metrics=metrics, log_every=4)
    out = io.StringIO()
    log = _epoch(batches, sc, progress_file=out)
    text = out.getvalue()
    loss = log.values["loss"]
    shown = loss[3] if metrics == "item" else sum(loss[:4]) / 4           # item: the 4th step's; device: the mean
    assert f"loss={shown:.4f}" in text
    if metrics == "item":
        assert f"loss={loss[0]:.4f}" not in text and f"loss={loss[4]:.4f}" not in text
        assert log.reads == len(batches)                                  # one read per step
    assert log.steps == list(range(len(batches)))


def test_the_epoch_trains_with_its_train_config_and_logs_its_steps_from_start_step(batches):
    sc = StepConfig()
    log = _epoch(batches[:2], sc, progress=False, start_step=5)
    torch.manual_seed(0)
    model = build_model(SMALL, seed=0)
    first = train_step(model, make_optimizer(model), *batches[0], 5, sc, TC)
    assert log.steps == [5, 6] and log.values["loss"][0] == pytest.approx(float(first["loss"].detach()), rel=1e-6)
    with pytest.raises(ValueError, match=r"^train_epoch: `batches` yielded no batch$"):
        _epoch([], sc, progress=False)


def test_a_remap_on_the_device_reports_every_bad_label_of_the_epoch_with_its_steps(batches):
    sc = single_changes()["remap presence table"]
    with pytest.raises(BadLabelsError, match=r"^3 labels outside the declared range \[0, 6\) in steps 10\.\.15 "):
        _epoch(_bad(_bad(batches, [1]), [4], count=2), sc, progress=False, start_step=10)


def test_a_deferred_read_names_the_first_five_steps_with_bad_labels_and_how_to_fix_them(batches):
    sc = dataclasses.replace(StepConfig(), remap="presence", metrics="device", log_every=8)
    more = batches + batches[:2]
    with pytest.raises(BadLabelsError) as e:
        _epoch(_bad(more, range(6)), sc, progress=False)
    assert str(e.value) == (
        "labels outside the declared range [0, 6) (step 0: 1, step 1: 1, step 2: 1, step 3: 1, step 4: 1 ...). The "
        "sync-free remap gave them no class and this host read reports them; validate the data with "
        "remap_presence(y, num_labels, check=True), or declare num_labels to cover them")
    with pytest.raises(BadLabelsError, match=r"\(step 0: 1, step 1: 1, step 2: 1, step 3: 1, step 4: 1\)\. The"):
        _epoch(_bad(more, range(5)), sc, progress=False)
