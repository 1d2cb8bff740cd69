"""05's correctness checks (`vae.checks`), the ones the notebook prints PASS/FAIL for: the details they print on a
small model, and that each fails, naming what differs, when what it checks is broken: a remap off the reference or one
that syncs, a separability ratio off the loop's, a complex layer off its formula, a version that trains otherwise, a
bad label that raises nothing, a captured step that recompiles or runs a batch of another shape, curves that part. A
check that cannot fail would let every such bug through."""
import dataclasses
import types

import pytest
import torch

from perflab.vae import ModelConfig, TrainConfig, build_model, checks, make_batches

SMALL = ModelConfig(hidden=(32, 16), latent=8)
TC = TrainConfig(beta_warmup=4, lam_warmup=4, lam_max=0.5)
KW = dict(model_cfg=SMALL, train_cfg=TC, seed=0, device="cpu")


@pytest.fixture(scope="module")
def batches():
    return make_batches(6, batch=64, group=1, seed=0, per_kind=12)


def test_worst_is_the_largest_gap_and_every_pair_within_its_tolerance():
    """The largest |a - b| over all pairs (an empty pair counts 0), and allclose's rule for each pair."""
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])
    assert checks._worst([(a, a), (a, b), (a[:0], b[:0])], rtol=0.0, atol=0.6) == (0.5, True)
    assert checks._worst([(a, b), (a, a)], rtol=0.0, atol=0.4) == (0.5, False)
    assert checks._worst([(a, b * 0 + a * 1.1)], rtol=0.1, atol=0.0) == (pytest.approx(0.2), True)   # rtol of |b|
    assert checks._worst([], rtol=0.0, atol=0.0) == (0.0, True)


def test_the_remap_checks_pass_and_fail_on_a_wrong_or_syncing_remap(batches, monkeypatch):
    """Three remaps over 4 data batches and 5 hand-made label sets (27 calls), none wrong, the presence table with
    no sync; a host remap that is off on one label set, or a presence remap that reads the host, fails and says so."""
    got = checks.remap_checks(batches, TC.num_labels)
    assert [(c.name, c.passed, c.detail) for c in got] == [
        ("remaps equal the reference (0-2, 3-5, one class, unsorted, data)", True,
         "27 of 27 calls equal (3 remaps x 9 label sets)"),
        ("presence-table remap: host syncs", True, "0 syncs over 9 calls (allowed 0)")]
    host, presence = checks.remap_host, checks.remap_presence

    def off(y, n):
        r = host(y, n)
        return r._replace(labels=r.labels + 1) if y.tolist() == [4, 4, 4] else r

    def reads(y, n):
        y.max().item()
        return presence(y, n)

    monkeypatch.setattr(checks, "remap_host", off)
    monkeypatch.setattr(checks, "remap_presence", reads)
    got = checks.remap_checks(batches, TC.num_labels)
    assert [(c.passed, c.detail) for c in got] == [
        (False, "26 of 27 calls equal (3 remaps x 9 label sets); wrong: off"),
        (False, "9 syncs over 9 calls (allowed 0)")]

    def wrong(y, n):
        r = presence(y, n)
        return r._replace(labels=r.labels.flip(0)) if len(y) == 4 else r    # the four hand-made sets of 4 labels

    monkeypatch.setattr(checks, "remap_presence", wrong)
    got = checks.remap_checks(batches, TC.num_labels)
    assert (got[0].passed, got[0].detail) == (False, "22 of 27 calls equal (3 remaps x 9 label sets); wrong: off, "
                                                     "remap_presence")
    assert got[1].passed


def test_the_separability_checks_fail_on_a_ratio_off_the_loop_and_the_reference(batches, monkeypatch):
    """The vectorized ratio equals the class loop and the float64 reference on 4 batches; one 1e-3 relative off fails
    both, with the gap's power of ten."""
    model = build_model(SMALL, seed=0)
    got = checks.separability_checks(model, batches, TC.num_labels)
    assert [(c.name, c.passed) for c in got] == [("separability: vectorized equals the class loop", True),
                                                 ("separability: vectorized equals the float64 reference", True)]
    assert got[0].detail.endswith("over 4 batches (allowed 1e-05)") and got[1].detail.endswith(
        "over 4 batches (allowed 1e-04)")
    assert checks.separability_checks(model, batches[:2], TC.num_labels)[0].detail.endswith("over 2 batches (allowed 1e-05)")
    vec = checks.fisher_ratio_vectorized
    monkeypatch.setattr(checks, "fisher_ratio_vectorized", lambda *a, **k: vec(*a, **k) * 1.003)
    got = checks.separability_checks(model, batches, TC.num_labels)
    assert [(c.passed, c.detail) for c in got] == [
        (False, "largest relative gap 3.0e-03 over 4 batches (allowed 1e-05)"),
        (False, "largest relative gap 3.0e-03 over 4 batches (allowed 1e-04)")]


def test_the_complex_linear_check_fails_on_a_layer_off_its_formula(monkeypatch):
    """ComplexLinear equals (A + iB) h + b in complex128; a reference off by 1e-3 fails with the gap."""
    ok = checks.complex_linear_check("cpu")
    assert [(c.name, c.passed) for c in ok] == [("ComplexLinear equals (A + iB) h + b in complex128", True)]
    assert ok[0].detail.endswith("(allowed 1e-06 + 1e-05 x |value|)")
    ref = checks.complex_linear_reference
    monkeypatch.setattr(checks, "complex_linear_reference", lambda layer, h: ref(layer, h) + 2e-3)
    bad = checks.complex_linear_check("cpu")
    assert (bad[0].passed, bad[0].detail) == (False, "largest |difference| 2.0e-03 (allowed 1e-06 + 1e-05 x |value|)")


def test_the_same_math_checks_pass_and_fail_when_the_optimized_step_trains_otherwise(batches, monkeypatch):
    """On the CPU: bit for bit without the separability gradient, close with it, and the gradient changes the
    weights; an optimized step whose separability gradient cannot be switched off fails the first and the last."""
    got = checks.same_math_checks(batches, **KW)
    n = len(list(build_model(SMALL, seed=0).parameters()))
    assert [(c.name, c.passed) for c in got] == [("same parameters after 6 steps, no_grad separability", True),
                                                 ("same parameters after 6 steps, separability gradient", True),
                                                 ("the separability gradient changes the weights", True)]
    assert got[0].detail == f"0 of {n} parameter tensors differ (allowed: none, bit for bit)"
    assert got[1].detail.endswith("(allowed 1e-05 + 1e-04 x |value|)")
    assert got[2].detail.endswith(f" of {n} parameter tensors differ, sep_grad True vs False (needed: some)")
    assert not got[2].detail.startswith("0 ")
    opt = checks.optimized.step_config
    monkeypatch.setattr(checks.optimized, "step_config", lambda **k: dataclasses.replace(opt(**k), sep_grad=True))
    got = checks.same_math_checks(batches, **KW)
    assert not got[0].passed and not got[0].detail.startswith("0 of") and not got[2].passed
    assert got[2].detail == f"0 of {n} parameter tensors differ, sep_grad True vs False (needed: some)"


class _TorchOnAGpu:
    """checks' torch, whose devices read as a GPU's: everything else is torch's."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def device(d):
        return types.SimpleNamespace(type="cuda")


def test_the_same_math_check_off_the_cpu_allows_rounding_and_says_so(batches, monkeypatch):
    """On a GPU (the device read as one; the runs stay on the CPU) the first check compares within 1e-7 + 1e-5 x
    |value| and prints the largest difference instead of a count: a GPU BLAS may pick another kernel between runs."""
    monkeypatch.setattr(checks, "torch", _TorchOnAGpu())
    got = checks.same_math_checks(batches, **KW)
    assert (got[0].passed, got[0].detail) == (True, "largest |difference| within tolerance (allowed 1e-07 + 1e-05 x |value|)")


def test_the_bad_label_checks_fail_when_nothing_raises(batches, monkeypatch):
    """A label of num_labels + 3 in the second batch: the baseline raises ValueError, the optimized loop
    BadLabelsError; a version that lets it through fails its check, saying nothing was raised."""
    got = checks.bad_label_checks(batches, **KW)
    assert [(c.name, c.passed, c.detail) for c in got] == [
        ("baseline: a label outside [0, 6) raises", True, "ValueError raised"),
        ("optimized: a label outside [0, 6) raises", True, "BadLabelsError raised")]
    monkeypatch.setattr(checks, "IMPLS", {"baseline": lambda *a, **k: None, "optimized": lambda *a, **k: None})
    got = checks.bad_label_checks(batches, **KW)
    assert [(c.passed, c.detail) for c in got] == [(False, "nothing raised (expected ValueError)"),
                                                   (False, "nothing raised (expected BadLabelsError)")]


def test_the_fullgraph_checks_say_which_step_dynamo_captures(batches, monkeypatch):
    """Dynamo captures the optimized losses in one graph and refuses the baseline's (its host reads); were the
    baseline's captured too, its check fails."""
    got = checks.fullgraph_checks(batches, **KW)
    assert [(c.name, c.passed) for c in got] == [("dynamo captures the optimized losses in one graph", True),
                                                 ("dynamo cannot capture the baseline losses in one graph", True)]
    assert got[0].detail == "fullgraph=True: one graph" and got[1].detail.startswith("fullgraph=True: refused (")
    monkeypatch.setattr(checks.baseline, "step_config", checks.optimized.step_config)
    got = checks.fullgraph_checks(batches, **KW)
    assert [(c.passed, c.detail) for c in got] == [(True, "fullgraph=True: one graph"),
                                                   (False, "fullgraph=True: one graph")]


class Log:
    def __init__(self, **values):
        self.values = values

    def __len__(self):
        return len(next(iter(self.values.values())))


def test_curves_agree_per_metric_relative_to_at_least_one_and_of_equal_length():
    """A gap is relative to max(1, |a|): 0.5 against 0.5 + 5e-6 is within 1e-5 (not relative to 0.5), and a gap of
    exactly rtol is not within it; a metric of another length does not agree; curve_check names the metrics that
    differ and the largest gap."""
    a = Log(loss=[0.5, 100.0], kl=[2.0, 3.0])
    b = Log(loss=[0.5 + 5e-6, 100.0 + 5e-4], kl=[2.0, 3.0 + 1e-3])
    assert checks.curves_agree(a, b, rtol=1e-5 + 1e-12) == {"loss": True, "kl": False}
    assert checks.curves_agree(a, b, rtol=1e-5 + 1e-12, steps=1) == {"loss": True, "kl": True}
    assert checks.curves_agree(a, Log(loss=[0.5], kl=[2.0, 3.0]), rtol=1.0) == {"loss": False, "kl": True}
    assert checks.curve_gap(a, b) == pytest.approx(1e-3 / 3)
    assert checks._gap([], []) == 0.0
    c = checks.curve_check(a, b, 1e-5 + 1e-12, "eager vs eager")
    assert (c.name, c.passed, c.detail) == ("eager vs eager over 2 steps", False,
                                            "largest relative gap 3.3e-04 (allowed 1e-05); differ: kl")
    assert checks.curves_agree(Log(loss=[1.0]), Log(loss=[1.5]), rtol=0.5) == {"loss": False}
    both = checks.curve_check(a, Log(loss=[0.5, 101.0], kl=[2.0, 3.0 + 1e-3]), 1e-5, "two")
    assert both.detail == "largest relative gap 1.0e-02 (allowed 1e-05); differ: loss, kl"
    c = checks.curve_check(a, a, 1e-5, "same")
    assert (c.passed, c.detail) == (True, "largest relative gap within tolerance (allowed 1e-05)")


class _Captured:
    """A captured step's interface: impl.compile, model, step, and a call that refuses or runs a batch (`runs`:
    "step" advances the count only, "weights" changes the weights only, True both)."""

    def __init__(self, compile="default", refuse=True, runs=False):
        self.impl = types.SimpleNamespace(compile=compile)
        self.model = torch.nn.Linear(2, 2)
        self.step, self.refuse, self.runs = 5, refuse, runs

    def __call__(self, x, y):
        if self.runs in (True, "step"):
            self.step += 1
        if self.runs in (True, "weights"):
            with torch.no_grad():
                self.model.weight.add_(1.0)
        if self.refuse:
            raise ValueError("captured for batch 64, got 32")


def test_the_captured_checks_fail_on_a_recompile_a_parted_curve_or_a_batch_that_runs(batches):
    """Compiled once with no recompile, curves equal over the checked steps, and a half batch refused with nothing
    run: each broken in turn fails its own check with what happened."""
    curves = {"optimized": Log(loss=[1.0, 2.0, 3.0]), "captured": Log(loss=[1.0, 2.0, 3.0])}
    once = types.SimpleNamespace(compiles=1, recompiles=0)
    got = checks.captured_checks(_Captured(), once, curves, batches, rtol=1e-5)
    assert [(c.name, c.passed, c.detail) for c in got] == [
        ("captured: compiled once, no recompile in 3 steps", True, "1 compile(s), 0 recompile(s)"),
        ("captured: curves equal the optimized step's over 3 steps", True, "largest relative gap within tolerance (allowed 1e-05)"),
        ("captured: a batch of another shape raises, nothing runs", True,
         "ValueError raised; weights and step count unchanged")]
    eager = checks.captured_checks(_Captured(compile="off"), types.SimpleNamespace(compiles=0, recompiles=0), curves,
                                   batches, rtol=1e-5)
    assert eager[0].passed                                             # compile off: nothing compiled is right
    assert not checks.captured_checks(_Captured(compile="off"), once, curves, batches, rtol=1e-5)[0].passed
    again = checks.captured_checks(_Captured(), types.SimpleNamespace(compiles=1, recompiles=1), curves, batches, 1e-5)
    assert (again[0].passed, again[0].detail) == (False, "1 compile(s), 1 recompile(s)")
    parted = {"optimized": curves["optimized"], "captured": Log(loss=[1.0, 2.0, 3.1])}
    got = checks.captured_checks(_Captured(), once, parted, batches, rtol=1e-5)
    assert (got[1].passed, got[1].detail) == (False, "largest relative gap 3.3e-02 (allowed 1e-05)")
    got = checks.captured_checks(_Captured(refuse=False, runs=True), once, curves, batches, rtol=1e-5)
    assert (got[2].passed, got[2].detail) == (False, "no ValueError; the step ran")
    got = checks.captured_checks(_Captured(refuse=True, runs=True), once, curves, batches, rtol=1e-5)
    assert (got[2].passed, got[2].detail) == (False, "ValueError raised; the step ran")
    for part in ("step", "weights"):                                   # either one alone is the step having run
        got = checks.captured_checks(_Captured(refuse=True, runs=part), once, curves, batches, rtol=1e-5)
        assert (got[2].passed, got[2].detail) == (False, "ValueError raised; the step ran"), part
    long = {"optimized": Log(loss=[1.0] * 150), "captured": Log(loss=[1.0] * 100 + [2.0] * 50)}
    got = checks.captured_checks(_Captured(), once, long, batches, rtol=1e-5)
    assert got[1].passed and got[1].name == "captured: curves equal the optimized step's over 100 steps"
    assert got[0].name == "captured: compiled once, no recompile in 150 steps"


def test_the_captured_check_passes_a_real_captured_step_given_half_its_batch(batches):
    """On a real captured step (compile off: the CPU runs its body) after a batch: half a batch is refused with the
    step's own ValueError, nothing run, and the check passes; its refusal is of the batch's shape, not of an argument
    the step cannot read."""
    from perflab.vae import optimized
    from perflab.vae.captured import Captured
    from perflab.vae.trainers import captured, trainer

    step = trainer(captured(Captured(optimized.step_config(log_every=2), compile="off")), **KW)
    for x, y in batches[:2]:
        step(x, y)
    curves = {"optimized": Log(loss=[1.0, 2.0]), "captured": Log(loss=[1.0, 2.0])}
    got = checks.captured_checks(step, types.SimpleNamespace(compiles=0, recompiles=0), curves, batches, rtol=1e-5)
    assert [c.passed for c in got] == [True, True, True] and got[2].detail == ("ValueError raised; weights and step "
                                                                               "count unchanged")
    assert step.step == 2


def test_each_of_the_four_batches_counts_in_the_separability_checks(batches, monkeypatch):
    """A ratio off on the first batch alone fails both checks (every batch must agree, not the last); one off on a
    fifth batch passes, as the detail's 4 batches say: only the first four are compared."""
    model = build_model(SMALL, seed=0)
    vec, calls = checks.fisher_ratio_vectorized, []

    def off_at(i):
        def f(*a, **k):
            calls.append(1)
            return vec(*a, **k) * (1.003 if len(calls) == i else 1.0)
        return f

    monkeypatch.setattr(checks, "fisher_ratio_vectorized", off_at(1))
    assert [c.passed for c in checks.separability_checks(model, batches, TC.num_labels)] == [False, False]
    calls.clear()
    monkeypatch.setattr(checks, "fisher_ratio_vectorized", off_at(5))
    assert [c.passed for c in checks.separability_checks(model, batches, TC.num_labels)] == [True, True]


def _runs(monkeypatch, *models):
    """checks.train_fresh replaced: the models of its calls in turn (baseline, optimized; then both with the gradient)."""
    queue = list(models)
    monkeypatch.setattr(checks, "train_fresh", lambda *a, **k: (None, queue.pop(0)))


def _linear(shift=0.0, bias=0.0):
    torch.manual_seed(0)
    m = torch.nn.Linear(2, 2)
    with torch.no_grad():
        m.weight.add_(shift)
        m.bias.add_(bias)
    return m


def test_the_same_math_checks_judge_each_pair_at_its_own_tolerance(batches, monkeypatch):
    """With the separability gradient, parameters 1e-3 apart are not 'close' (1e-5 + 1e-4 x |value|); a gradient
    that changes one parameter tensor of two changes the weights. On a GPU, parameters 1e-3 apart without it are not
    the same (1e-7 + 1e-5 x |value|)."""
    _runs(monkeypatch, _linear(), _linear(), _linear(), _linear(shift=1e-3))
    got = checks.same_math_checks(batches, **KW)
    assert [c.passed for c in got] == [True, False, True]
    assert got[2].detail == "1 of 2 parameter tensors differ, sep_grad True vs False (needed: some)"
    monkeypatch.setattr(checks, "torch", _TorchOnAGpu())
    _runs(monkeypatch, _linear(), _linear(shift=1e-3), _linear(), _linear(bias=1.0))
    got = checks.same_math_checks(batches, **KW)
    assert [c.passed for c in got] == [False, False, True]
    assert got[0].detail == "largest |difference| 1.0e-03 (allowed 1e-07 + 1e-05 x |value|)"


def test_a_refused_capture_names_dynamos_exception(batches):
    """The baseline's refusal is printed with the exception dynamo raised (its host reads), by its class's name."""
    got = checks.fullgraph_checks(batches, **KW)
    name = got[1].detail.removeprefix("fullgraph=True: refused (").removesuffix(")")
    assert name != "NoneType" and isinstance(getattr(torch._dynamo.exc, name, None), type), got[1].detail
