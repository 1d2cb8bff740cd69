"""06's correctness checks (`latentwire.checks`), the ones the notebook prints PASS/FAIL for: the details they print
on a tiny model, and that each fails, naming what differs, when what it checks is broken: a loss that is not its
forward's, an extra LM forward, a version with every toggle off that trains otherwise, a cache that is not the
tokenizer's, an attention kernel that computes something else, a step that syncs, a compiled step that is not the eager
one. A check that cannot fail would let every such bug through."""
import contextlib
import dataclasses
import math
import types

import pytest
import torch

from perflab.latentwire import checks, make_examples
from perflab.latentwire.params import LatentWireParams
from perflab.latentwire.study import IMPLS

CPU = torch.device("cpu")
RULE = "(allowed 1e-06 + 1e-05 x |value|)"


def _params(**over):
    return LatentWireParams(n_examples=32, d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4, ablation_batch=4,
                            max_batch=4, curve_batch=4, num_workers=0, min_run_time=0.05, max_run_time=0.2, block_s=0.01,
                            **over)


P = _params(compile="off")
EXAMPLES = make_examples(32, seed=0)


def _versions(monkeypatch, **wrap):
    """checks.IMPLS with the named versions wrapped: wrap[name](trainer_factory) -> factory."""
    monkeypatch.setattr(checks, "IMPLS", {n: wrap.get(n, lambda f: f)(IMPLS[n]) for n in ("baseline", "optimized")})


def test_the_single_pass_checks_pass_and_count_the_lm_forwards():
    """Both CEs equal their own forwards on a batch of 5; one LM forward for the single pass, K + 2 for the loop."""
    got = checks.single_pass_checks(P, EXAMPLES, CPU)
    assert [(c.name, c.passed) for c in got] == [("single-pass first-token CE equals its own LM forward", True),
                                                 ("single-pass K-token CE equals the K-forward loop", True),
                                                 ("LM forwards per micro-batch: loop K+2, single pass 1", True)]
    assert got[0].detail.startswith("batch 5: |difference| ") and got[0].detail.endswith(RULE)
    assert got[1].detail.startswith("K=4, batch 5: |difference| ") and got[1].detail.endswith(RULE)
    assert got[2].detail == "single pass 1, loop 6"
    three = checks.single_pass_checks(P, EXAMPLES, CPU, n=3)
    assert three[0].detail.startswith("batch 3: ") and three[1].detail.startswith("K=4, batch 3: ")


def test_the_single_pass_checks_fail_on_a_loss_off_its_forward_and_an_extra_forward(monkeypatch):
    """A first-token CE 2e-3 off, a K-token CE 2e-3 off, a teacher-forced pass that runs the LM twice: each check
    fails and prints the gap or the count."""
    first, kce, tf = checks.losses.first_token_ce, checks.losses.k_token_ce, checks.reference.teacher_forced_logits
    monkeypatch.setattr(checks.losses, "first_token_ce", lambda *a: first(*a) + 2e-3)
    monkeypatch.setattr(checks.losses, "k_token_ce", lambda *a: kce(*a) + 2e-3)

    def twice(lm, *a):
        tf(lm, *a)
        return tf(lm, *a)

    monkeypatch.setattr(checks.reference, "teacher_forced_logits", twice)
    got = checks.single_pass_checks(P, EXAMPLES, CPU)
    assert [c.passed for c in got] == [False, False, False]
    assert got[0].detail == f"batch 5: |difference| 2.0e-03 {RULE}" and got[0].value == pytest.approx(2e-3, rel=0.05)
    assert got[1].detail.startswith("K=4, batch 5: |difference| ") and got[1].detail.endswith(RULE)
    assert got[1].value > 1e-5
    assert got[2].detail == "single pass 2, loop 7"


def test_toggles_off_passes_and_fails_on_other_samples_or_other_losses(monkeypatch):
    """With every toggle off the optimized version takes the baseline's samples and losses; one with another seed
    takes other samples, one with another learning rate other losses: the check fails and says which."""
    ok = checks.toggles_off_check(P, EXAMPLES, CPU)
    assert (ok.name, ok.passed, ok.detail) == (
        "optimized with every toggle off reproduces the baseline", True,
        "2 steps x 2 micro-batches, same samples, loss |difference| within tolerance (allowed 1e-06 x |loss|)")
    assert checks.toggles_off_check(P, EXAMPLES, CPU, steps=3).detail.startswith("3 steps x 2 micro-batches")
    _versions(monkeypatch, optimized=lambda f: lambda *a, seed, **k: f(*a, seed=seed + 1, **k))
    other = checks.toggles_off_check(P, EXAMPLES, CPU)
    assert not other.passed and other.detail.startswith("2 steps x 2 micro-batches, other samples, loss |difference| ")
    _versions(monkeypatch, optimized=lambda f: lambda *a, lr, **k: f(*a, lr=lr * 10, **k))
    later = checks.toggles_off_check(P, EXAMPLES, CPU, steps=3)
    assert not later.passed and later.detail.startswith("3 steps x 2 micro-batches, same samples, loss |difference| ")
    assert later.value > 1e-6 and "within tolerance" not in later.detail


def test_the_cache_check_counts_batches_that_differ_from_the_tokenizer(monkeypatch):
    """32 examples in 2 batches of 16, none differing; a tokenizer whose second batch's ids differ makes it fail
    with 1 counted."""
    ok = checks.cache_check(P, EXAMPLES)
    assert (ok.name, ok.passed, ok.detail) == ("pre-tokenized cache equals tokenizing on the fly", True,
                                               "32 examples in 2 batches of 16: 0 differ (bitwise; allowed none)")
    assert checks.cache_check(P, EXAMPLES[:17]).detail == "17 examples in 2 batches of 16: 0 differ (bitwise; allowed none)"
    fly = checks.batch_on_the_fly

    def off(examples, index, tok, cfg):
        b = fly(examples, index, tok, cfg)
        if 16 in index:                                                 # example 16: the second batch's first
            b.enc_ids[index.index(16), 0] += 1
        return b

    monkeypatch.setattr(checks, "batch_on_the_fly", off)
    bad = checks.cache_check(P, EXAMPLES)
    assert (bad.passed, bad.detail) == (False, "32 examples in 2 batches of 16: 1 differ (bitwise; allowed none)")


def test_the_sdpa_check_fails_on_an_attention_that_computes_something_else(monkeypatch):
    """sdpa and the eager attention give the same loss on a batch of 8; an 'sdpa' that also scales the LM's
    embeddings does not, and the check fails with the loss gap."""
    ok = checks.sdpa_check(P, EXAMPLES, CPU)
    assert (ok.name, ok.passed) == ("sdpa attention equals the eager attention", True)
    assert ok.detail.startswith("batch 8: loss |difference| ") and ok.detail.endswith("(allowed 1e-06 + 1e-05 x |loss|)")
    build = checks.build_model

    def built(*a, **k):
        model = build(*a, **k)
        options = model.set_options

        def set_options(**o):
            options(**o)
            with torch.no_grad():
                for p in model.lm.parameters():
                    p.mul_(1.001)                                       # a loss 1e-3-ish off: beyond 1e-6 + 1e-5 x

        model.set_options = set_options
        return model

    monkeypatch.setattr(checks, "build_model", built)
    assert not checks.sdpa_check(P, EXAMPLES, CPU).passed


def test_the_sdpa_check_compares_the_notebooks_model_in_its_single_pass(monkeypatch):
    """The model compared is the notebook's (its config, seed and LM on the device asked), run in the single pass
    it trains with, both times."""
    build, built, passes = checks.build_model, [], []

    def recorded(*a, **k):
        built.append((a, k))
        model = build(*a, **k)
        forward = model.forward
        model.forward = lambda batch, **kw: passes.append(kw) or forward(batch, **kw)
        return model

    monkeypatch.setattr(checks, "build_model", recorded)
    assert checks.sdpa_check(P, EXAMPLES, CPU).passed
    assert built == [((P.model_config(),), dict(seed=P.seed, lm=P.lm, device=CPU))]
    assert passes == [{"single_pass": True}, {"single_pass": True}]


def test_the_host_sync_check_counts_both_steps_and_fails_on_an_unpinned_step(monkeypatch):
    """The baseline's syncs per step (its two synchronize calls, its .item()s, its blocking copies) and none in the
    optimized step; without pinned batches the optimized step's copies block and the check fails, naming them."""
    ok, counts = checks.host_sync_check(P, EXAMPLES, CPU)
    assert (ok.name, ok.passed) == ("host syncs per step: the optimized step (pinned batches, non-blocking copies) has "
                                    "none", True)
    assert counts["optimized"] == {} and counts["baseline"]["synchronize"] == 2
    assert counts["baseline"]["to(device) from host"] == 6 * P.accum_steps and list(counts["baseline"]) == sorted(
        counts["baseline"])
    assert ok.detail == f"per step: baseline {counts['baseline']}, optimized 0 (allowed 0)"
    _versions(monkeypatch, optimized=lambda f: lambda *a, pin_memory, **k: f(*a, pin_memory=False, **k))
    bad, counts = checks.host_sync_check(P, EXAMPLES, CPU)
    assert counts["optimized"] == {"to(device) from host": 6 * P.accum_steps}
    assert (bad.passed, bad.detail) == (False, f"per step: baseline {counts['baseline']}, optimized "
                                               f"{counts['optimized']} (allowed 0)")


@pytest.mark.slow  # a compile (eager backend): ~4 s
def test_the_compiled_check_passes_with_the_eager_backend_and_fails_on_other_samples(monkeypatch):
    """The compiled step (backend eager: no code generation) trains like the eager one over 3 steps with no compile
    after the first; one that draws other samples fails, and so does one that compiles on every step."""
    p = _params(compile="default", backend="eager")
    ok = checks.compiled_check(p, EXAMPLES, CPU)
    assert (ok.name, ok.passed) == ("compiled step (compile=default, backend=eager) trains like the eager step", True)
    assert ok.detail.startswith("3 steps x 2 micro-batches of 4, same samples, loss |difference| ")
    assert ok.detail.endswith("(allowed 1e-05 + 1e-05 x |loss|); 0 compiles after the first step (allowed 0)")

    def seeded(f):
        def make(*a, seed, compile, **k):
            return f(*a, seed=seed + (compile != "off"), compile=compile, **k)
        return make

    _versions(monkeypatch, optimized=seeded)
    bad = checks.compiled_check(p, EXAMPLES, CPU)
    assert not bad.passed and ", other samples, " in bad.detail
    monkeypatch.setattr(checks, "IMPLS", IMPLS)

    @contextlib.contextmanager
    def recompiling():
        yield types.SimpleNamespace(compiles=2)

    monkeypatch.setattr(checks, "count_compiles", recompiling)
    again = checks.compiled_check(p, EXAMPLES, CPU)
    assert not again.passed and again.detail.endswith("; 2 compiles after the first step (allowed 0)")
    assert ", same samples, " in again.detail
    amp = checks.compiled_check(_params(compile="default", backend="eager", amp=True), EXAMPLES, CPU, steps=2)
    assert "(allowed 2e-02 + 2e-02 x |loss|)" in amp.detail and amp.detail.startswith("2 steps x 2 micro-batches of 4")


@pytest.mark.slow  # a compile: ~2.6 s: make test runs it, the fast tier stays the edit loop
def test_all_checks_run_the_compiled_check_only_when_compiling():
    """Compile off: seven checks (three of the single pass), the sync check last and its counts returned; compile on:
    the compiled check too, before the sync check."""
    got, counts = checks.all_checks(P, EXAMPLES, CPU)
    assert len(got) == 7 and all(c.passed for c in got) and got[-1].name.startswith("host syncs per step")
    assert counts["optimized"] == {} and counts["baseline"]
    on, _ = checks.all_checks(_params(compile="default", backend="eager"), EXAMPLES, CPU)
    assert len(on) == 8 and on[-2].name.startswith("compiled step") and on[-1].name.startswith("host syncs per step")


def test_a_gap_is_the_largest_difference_and_shapes_that_differ_have_an_infinite_one():
    """The largest |a - b|; tensors of other shapes, or empty ones, have no gap: inf (a check comparing them must not
    pass on an empty comparison). A check prints a gap as `within` writes it: the same words on every host where it
    passes (a rounding-level magnitude moves with the CPU's kernels), the number where it fails."""
    from perflab.kit.formatting import within

    assert checks._gap(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])) == 0.5
    assert checks._gap(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])) == 0.0
    assert checks._gap(torch.tensor([1.0, 2.0]), torch.tensor([1.0])) == math.inf
    assert checks._gap(torch.tensor([]), torch.tensor([])) == math.inf
    assert (within(3e-8, True), within(3e-8, False), within(0.0, False), within(math.inf, False)) == (
        "within tolerance", "3.0e-08", "0", "inf")
    assert checks._close(torch.tensor([1.0], dtype=torch.bfloat16), torch.tensor([1.001]), rtol=0.0, atol=1e-2)
    assert not checks._close(torch.tensor([1.0]), torch.tensor([1.02]), rtol=1e-2, atol=0.0)


def test_the_checks_build_the_notebooks_model_and_count_the_optimized_steps_syncs(monkeypatch):
    """The single-pass checks take the notebook's config, LM and device with seed + 1; the sync check builds each
    version's model from the notebook's seed and hands the trainer the device, lr, accumulation and seed, the
    optimized one with its five sync-free toggles (pinned batches, the cache, fused AdamW, no step sync, single pass):
    the step the notebook times, not another."""
    build, built, made = checks.build_model, [], []

    def recorded(*a, **k):
        built.append((a, k))
        return build(*a, **k)

    def maker(name):
        return lambda f: lambda *a, **k: made.append((name, k)) or f(*a, **k)

    monkeypatch.setattr(checks, "build_model", recorded)
    checks.single_pass_checks(P, EXAMPLES, CPU)
    assert built == [((P.model_config(),), dict(seed=P.seed + 1, lm=P.lm, device=CPU))]
    built.clear()
    _versions(monkeypatch, baseline=maker("baseline"), optimized=maker("optimized"))
    checks.host_sync_check(P, EXAMPLES, CPU)
    assert built == [((P.model_config(),), dict(seed=P.seed, lm=P.lm, device=CPU))] * 2
    common = dict(device=CPU, lr=P.lr, accum_steps=P.accum_steps, seed=P.seed)
    assert made == [("baseline", common), ("optimized", {**common, "pin_memory": True, "pretokenize": True,
                                                          "fused_adamw": True, "no_step_sync": True,
                                                          "single_pass": True})]


class _OtherSamples:
    """A trainer whose steps record other sample ids than they train on (its losses are the trainer's own)."""

    class Ids(list):
        def extend(self, xs):
            super().extend(("other", x) for x in xs)

    def __init__(self, trainer):
        object.__setattr__(self, "trainer", trainer)

    def __getattr__(self, name):
        return getattr(self.trainer, name)

    def __setattr__(self, name, value):
        setattr(self.trainer, name, self.Ids() if name == "seen" else value)


def test_toggles_off_fails_on_other_samples_alone_and_trains_the_notebooks_setup(monkeypatch):
    """Other samples with the same losses still fail the check (the samples are compared, not only the losses); both
    versions get the notebook's model, device, lr, accumulation and seed, and no toggle."""
    _versions(monkeypatch, optimized=lambda f: lambda *a, **k: _OtherSamples(f(*a, **k)))
    bad = checks.toggles_off_check(P, EXAMPLES, CPU)
    assert not bad.passed and bad.detail.startswith("2 steps x 2 micro-batches, other samples, loss |difference| 0 ")
    build, built, made = checks.build_model, [], []
    monkeypatch.setattr(checks, "build_model", lambda *a, **k: built.append((a, k)) or build(*a, **k))

    def maker(name):
        return lambda f: lambda *a, **k: made.append((name, k)) or f(*a, **k)

    _versions(monkeypatch, baseline=maker("baseline"), optimized=maker("optimized"))
    assert checks.toggles_off_check(P, EXAMPLES, CPU).passed
    assert built == [((P.model_config(),), dict(seed=P.seed, lm=P.lm, device=CPU))] * 2
    common = dict(device=CPU, lr=P.lr, accum_steps=P.accum_steps, seed=P.seed)
    assert made == [("baseline", common), ("optimized", common)]


def test_the_compiled_check_runs_every_toggle_on_the_manual_stream_at_the_ablation_batch(monkeypatch):
    """Both runs (eager, then compiled) build the notebook's model and take every toggle on at the ablation batch with
    the notebook's amp, the manual sample stream (no DataLoader, no workers: the eager run's order), the compile mode
    and backend asked for."""
    from perflab.latentwire.config import Toggles

    p = _params(compile="default", backend="eager")
    build, built, made = checks.build_model, [], []
    monkeypatch.setattr(checks, "build_model", lambda *a, **k: built.append((a, k)) or build(*a, **k))
    _versions(monkeypatch, optimized=lambda f: lambda *a, **k: made.append(k) or f(*a, **k))
    assert checks.compiled_check(p, EXAMPLES, CPU, steps=2).passed
    assert built == [((p.model_config(),), dict(seed=p.seed, lm=p.lm, device=CPU))] * 2
    on = {**dataclasses.asdict(Toggles.all_on(batch_size=p.ablation_batch, amp=p.amp)), "dataloader": False,
          "num_workers": 0, "compile_backend": "eager"}
    common = dict(device=CPU, lr=p.lr, accum_steps=p.accum_steps, seed=p.seed)
    assert made == [{**common, **on, "compile": "off"}, {**common, **on, "compile": "default"}]
    assert p.ablation_batch != Toggles.all_on().batch_size and Toggles.all_on().dataloader


class _Counted:
    """A trainer whose steps are counted in `steps` (a list shared by all trainers made)."""

    def __init__(self, trainer, steps):
        object.__setattr__(self, "trainer", trainer)
        object.__setattr__(self, "steps", steps)

    def __getattr__(self, name):
        return getattr(self.trainer, name)

    def __setattr__(self, name, value):
        setattr(self.trainer, name, value)

    def step(self):
        self.steps.append(1)
        return self.trainer.step()


def test_the_compiled_check_steps_as_often_as_it_says_and_compares_its_own_two_runs(monkeypatch):
    """Each run takes exactly `steps` steps (the detail says so); a compiled run on other samples with the eager run's
    losses fails it, and so does one on the same samples with other losses (another lr): the two runs are compared
    with each other, samples and losses. A relative tolerance is the one asked, not allclose's default."""
    p = _params(compile="default", backend="eager")
    steps = []
    _versions(monkeypatch, optimized=lambda f: lambda *a, **k: _Counted(f(*a, **k), steps))
    assert checks.compiled_check(p, EXAMPLES, CPU, steps=2).passed and len(steps) == 4
    _versions(monkeypatch, optimized=lambda f: lambda *a, **k: (
        _OtherSamples(f(*a, **k)) if k["compile"] != "off" else f(*a, **k)))
    other = checks.compiled_check(p, EXAMPLES, CPU, steps=2)
    assert not other.passed and ", other samples, loss |difference| " in other.detail
    _versions(monkeypatch, optimized=lambda f: lambda *a, lr, **k: f(*a, lr=lr * (10 if k["compile"] != "off" else 1),
                                                                        **k))
    losses = checks.compiled_check(p, EXAMPLES, CPU, steps=3)
    assert not losses.passed and ", same samples, loss |difference| " in losses.detail and losses.value > 1e-5
    assert not checks._close(torch.tensor([1.0]), torch.tensor([1.0 + 5e-6]), rtol=1e-6, atol=0.0)
