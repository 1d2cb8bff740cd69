"""The captured step: the optimized step's math (bit for bit in its eager form, to rounding compiled), no host
sync inside, the whole step one compiled graph with ~8x fewer ops dispatched than the baseline on a CPU, and a
clear error for a batch it was not captured for. One inductor compile for the whole module (`compiled`)."""
import types
import warnings

import pytest
import torch

from perflab.kit.compiles import count_compiles
from perflab.kit.launches import count_launches
from perflab.kit.syncs import assert_no_host_syncs, count_host_syncs
from perflab.vae import BadLabelsError, ModelConfig, TrainConfig, baseline, make_batches, optimized
from perflab.vae.captured import Captured, _Ring
from perflab.vae.measuring import DRAWS, count_step_launches, launch_kinds
from perflab.vae.trainers import captured, eager, trainer

SMALL = ModelConfig(hidden=(32, 16), latent=8)
TC = TrainConfig(beta_warmup=4, lam_warmup=4, lam_max=0.5)  # beta and lambda ramp within the test's steps
SC = optimized.step_config(sep_grad=False, log_every=4)  # the baseline's math: same curves as the baseline
KW = dict(model_cfg=SMALL, train_cfg=TC, seed=0, device="cpu")


@pytest.fixture(scope="module")
def batches():
    return make_batches(10, batch=64, group=1, seed=0, per_kind=12)


@pytest.fixture(scope="module")
def optimized(batches):
    tr = trainer(eager(SC), **KW)
    return tr.epoch(batches), tr.model


@pytest.fixture(scope="module")
def compiled(batches):
    """A captured step compiled by inductor (the module's one compile), after one epoch over `batches`: (trainer, its
    log, the compiles, its weights after that epoch). The weights are a copy: a later test steps the same trainer on
    (the launch count), and the epoch's result must not depend on whether it ran first (mutation/flakes.py found it)."""
    torch._dynamo.reset()
    tr = trainer(captured(Captured(SC, compile="default")), **KW)
    with count_compiles() as cc:
        log = tr.epoch(batches)
    yield tr, log, cc, [p.detach().clone() for p in tr.model.parameters()]
    torch._dynamo.reset()


def test_compiled_step_equals_the_optimized_step(compiled, optimized):
    _, log, cc, weights = compiled
    assert cc.compiles == 1 and cc.recompiles == 0 and cc.graphs == 1  # forward to Adam: one graph
    opt_log, opt_model = optimized
    # inductor's fused kernels sum in another order than eager's, and the traced Adam computes its bias corrections
    # in float32 where the fused kernel uses doubles: rounding (~1e-7 relative per step), which Adam carries into
    # the weights; 1e-5 leaves room. Other dropout masks or noise differ by 1e-3 from the first step.
    for p, q in zip(opt_model.parameters(), weights, strict=True):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
    for k in ("loss", "nll", "kl", "sep"):
        torch.testing.assert_close(torch.tensor(log.values[k]), torch.tensor(opt_log.values[k]), rtol=1e-5, atol=1e-5)
    assert log.steps == list(range(10)) and log.reads == 3          # read after steps 4, 8 and at the end
    assert log.values["loss"][0] != log.values["loss"][-1]


def test_eager_form_is_bit_identical_to_the_optimized_step(batches, optimized):
    # the schedule's weights from the device counter equal the host's Python floats cast to float32
    tr = trainer(captured(Captured(SC, compile="off")), **KW)
    log = tr.epoch(batches)
    opt_log, opt_model = optimized
    assert all(torch.equal(p, q) for p, q in zip(opt_model.parameters(), tr.model.parameters()))
    assert log.values == opt_log.values


def test_launches_baseline_vs_captured(batches, compiled):
    tr, *_ = compiled
    steps = 4
    base, _ = count_step_launches(trainer(eager(baseline.step_config()), **KW), batches[:steps])
    cap, c = count_step_launches(tr, batches[:steps])
    ops = c.by_op
    assert c.graph_calls == steps                         # the whole step, backward and Adam included: one graph
    # what inductor's C++ code hands to aten from inside the graph, per step: the 22 matmuls (forward 6, the
    # no_grad encoder pass 3, separability 2, backward 11), the 7 random draws kept in aten for the same masks
    # (6 dropouts, the noise), the remap's cumsum; nothing between graphs (no copies, grad hand-overs or Adam).
    # The noise is randn_like on torch 2.13, randn of its shape on 2.11 (its inductor decomposes randn_like)
    assert ops["aten::mm"] + ops["aten::addmm"] == 22 * steps
    assert ops["aten::native_dropout"] == 6 * steps and ops["aten::randn_like"] + ops["aten::randn"] == steps
    assert launch_kinds(c, steps)[DRAWS] == 7                # the notebook's breakdown names both as draws
    assert ops["aten::cumsum"] == steps
    assert c.total - (22 + 7 + 1 + 1) * steps <= 2        # the rest: the metric ring's one read (tolist)
    # the CPU proxy: 248 -> 31 per step, ~8x; the 10x is out of reach while the matmuls and the draws stay
    # aten calls (module doc of perflab.vae.captured; the notebook prints the breakdown)
    assert base == 248 and 7.5 * cap <= base < 10 * cap


def test_no_host_sync_inside_the_step(batches):
    # the counter sees eager calls only (module doc of perflab.kit.syncs): count the step's eager form, the same
    # code that the compiled form compiles with fullgraph=True (which refuses any host read)
    tr = trainer(captured(Captured(SC, compile="off")), **KW)
    tr(*batches[0])
    with assert_no_host_syncs():
        for x, y in batches[1:4]:
            tr(x, y)
    with count_host_syncs() as c:
        tr.epoch(batches)
    assert c.by_op == {"tolist": 3}                       # 10 steps, log_every 4: the ring is read 3 times


def test_a_batch_it_was_not_captured_for_is_refused(compiled, batches):
    tr, *_ = compiled
    x, y = batches[0]
    step, before = tr.step, [p.detach().clone() for p in tr.model.parameters()]
    with count_compiles() as cc:
        with pytest.raises(ValueError, match=r"x is \(32, 256\).*captured for \(64, 256\)"):
            tr(x[:32], y[:32])
        with pytest.raises(ValueError, match=r"y is \(64,\) torch.int32.*captured for \(64,\) torch.int64"):
            tr(x, y.int())
        with pytest.raises(ValueError, match=r"x must be \[batch, 256\]"):
            tr(x[:, :100], y)
    assert cc.compiles == 0 and tr.step == step           # no silent recompile, nothing ran
    assert all(torch.equal(p, q) for p, q in zip(before, tr.model.parameters()))


def test_bad_labels_are_reported_at_the_next_read(batches):
    bad = [(x, y.clone()) for x, y in batches[:6]]
    bad[2][1][5] = 11
    tr = trainer(captured(Captured(SC, compile="off")), **KW)
    with pytest.raises(BadLabelsError, match=r"\[0, 6\) \(step 2: 1\)"):
        tr.epoch(bad)


def test_ring_keeps_the_newest_rows_in_order():
    ring = _Ring(3, torch.device("cpu"))
    for i in range(5):  # what the step does on the device, then what the host mirrors
        ring.buf[int(ring.slot)] = float(i)
        ring.slot.copy_((ring.slot + 1) % 3)
        ring.advance()
    assert [r["loss"] for r in ring.read()] == [2.0, 3.0, 4.0]
    assert ring.read() == []


def test_only_sync_free_steps_can_be_captured():
    with pytest.raises(ValueError, match="sync-free switches"):
        Captured(baseline.step_config()).check()
    with pytest.raises(ValueError, match="yielded no batch"):
        trainer(captured(Captured(SC, compile="off")), **KW).epoch([])


@pytest.mark.gpu
@pytest.mark.parametrize("compile", ["off", "default"])
def test_cuda_one_replay_per_step_same_math_no_sync(compile):
    from perflab.vae.captured import traced_backward_problem, unsupported_message

    if compile != "off" and (problem := traced_backward_problem()) is not None:
        pytest.skip(unsupported_message(problem))  # this torch: 05 runs the eager form (docs/gpu-hosts.md)
    dev = torch.device("cuda")
    data = make_batches(8, batch=64, group=1, seed=0, per_kind=12, device=dev)
    kw = dict(KW, device=dev)
    ref = trainer(eager(SC), **kw)
    ref.epoch(data)
    torch._dynamo.reset()
    tr = trainer(captured(Captured(SC, compile=compile)), **kw)
    tr.epoch(data)
    # "off": the replay runs the optimized step's own kernels with the same Philox offsets: rounding at most;
    # "default": inductor's kernels and the traced Adam (float32 scalars) in the replay: rounding, carried by Adam
    rtol, atol = (1e-5, 1e-6) if compile == "off" else (1e-4, 1e-5)
    for p, q in zip(ref.model.parameters(), tr.model.parameters()):
        torch.testing.assert_close(q, p, rtol=rtol, atol=atol)
    with count_launches() as c, assert_no_host_syncs(dev, cuda_debug=True) as s:
        for x, y in data[:4]:
            tr(x, y)
    # per step: one graph launch, the two RNG-state fills before a replay of a graph that draws random numbers
    # (PyTorch PR #143777), the two input copies; every kernel of the step inside the replay. The fills: 8 kernel
    # launches, up to 16 where CUDA 13's CUPTI reports a launch under two names that do not nest in time
    # (gpu-review-2026-11-26 T9/N6, 2026-11-28 P1; as tests/vae/test_vae_cuda.py), said in the report, not a failure;
    # more would be the step's own kernels outside the replay. Graph launches and copies stay exact
    assert (c.graph_launches, c.copy_calls) == (4, 2 * 4), c.as_dict()
    assert 2 * 4 <= c.kernel_launches <= 4 * 4, c.as_dict()
    if c.kernel_launches != 2 * 4:
        warnings.warn(f"captured step: {c.kernel_launches} kernel launches for 4 replays (expected 8); "
                      f"runtime calls seen: {c.as_dict()}", stacklevel=1)
    assert c.kernels > 4 * 20 and s.cuda_debug_warnings == 0
    with pytest.raises(ValueError, match="captured for"):
        tr(*[t[:32] for t in data[0]])
    torch._dynamo.reset()


# ---- 4: the torch the captured step runs on ------------------------------------------------------------------

def test_this_torch_traces_backward_into_one_graph():
    from perflab.vae.captured import traced_backward_problem

    assert traced_backward_problem() is None  # the pinned CPU torch: the captured step compiles (tests below)


def test_a_torch_that_cannot_trace_backward_gets_a_clear_error_or_the_eager_form(monkeypatch):
    from perflab.vae import ModelConfig, TrainConfig, optimized
    from perflab.vae import captured as cap
    from perflab.vae.trainers import captured, trainer

    problem = "torch 2.10.0 has no torch._dynamo.config.trace_autograd_ops"
    monkeypatch.setattr(cap, "traced_backward_problem", lambda: problem)
    impl = cap.Captured(optimized.step_config(log_every=2), compile="default")
    kw = dict(model_cfg=ModelConfig(hidden=(8,), latent=4), train_cfg=TrainConfig(), seed=0, device="cpu")
    with pytest.raises(RuntimeError, match=rf"{problem}\. Install torch >= {cap.TESTED_TORCH}.*compile=off"):
        trainer(captured(impl), **kw)
    eager, note = cap.runnable(impl)
    assert eager.compile == "off" and note == f"compile=default replaced by off: {problem}"
    assert trainer(captured(eager), **kw).compiled is None                     # the fallback runs
    assert cap.runnable(cap.Captured(impl.step, compile="off")) == (cap.Captured(impl.step, compile="off"), "")


# ---- 5: compiled vs eager curves over a long run ------------------------------------------------------------

def test_curves_are_checked_over_their_first_steps_and_the_whole_gap_reported():
    from perflab.vae.checks import CHECKED_STEPS, curve_gap, curves_agree

    a = types.SimpleNamespace(values={"loss": [1.0] * 500})
    drift = [1.0 + 2e-4 * (i >= CHECKED_STEPS) for i in range(500)]   # rounding carried past the checked steps
    b = types.SimpleNamespace(values={"loss": drift})
    assert curves_agree(a, b, rtol=1e-4, steps=CHECKED_STEPS) == {"loss": True}
    assert curves_agree(a, b, rtol=1e-4) == {"loss": False}
    assert curve_gap(a, b) == pytest.approx(2e-4)


# ---- 8: one static graph per captured batch size -------------------------------------------------------------

def test_the_captured_step_compiles_a_static_graph(monkeypatch):
    from perflab.vae import ModelConfig, TrainConfig, optimized
    from perflab.vae import captured as cap
    from perflab.vae.trainers import captured, trainer

    seen = {}
    monkeypatch.setattr(cap, "traced_backward_problem", lambda: None)  # the probe is not what this test compiles
    monkeypatch.setattr(cap.torch, "compile", lambda fn, **kw: seen.update(kw) or fn)
    trainer(captured(cap.Captured(optimized.step_config(log_every=2), compile="default", backend="eager")),
            model_cfg=ModelConfig(hidden=(8,), latent=4), train_cfg=TrainConfig(), seed=0, device="cpu")
    # 7e47ac6 let dynamo mark the batch dynamic at the second CapturedStep of a process (05's sweep): another
    # program than the headline's static step, its kernels tuned at the first size
    assert seen["dynamic"] is False and seen["fullgraph"] is True
