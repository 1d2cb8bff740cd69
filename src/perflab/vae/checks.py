"""The notebook's correctness checks, each a `perflab.kit.claims.Check` (name, passed, detail); the notebook reports
them with `report_checks`, which stops it on a failure. A detail says what was measured beside the rule, in a form
that holds from run to run (nbval compares the printout): counts, and a gap as the power of ten it stays under."""
from __future__ import annotations

import torch

from ..kit.claims import Check
from ..kit.formatting import within
from ..kit.syncs import count_host_syncs
from . import baseline, optimized
from .captured import CapturedStep
from .config import CHECKED_STEPS, ModelConfig, TrainConfig
from .impls import IMPLS
from .model import ComplexLinear
from .reference import complex_linear_reference, fisher_ratio_reference, remap_reference
from .step_ops import fisher_ratio_loop, fisher_ratio_vectorized, remap_host, remap_presence, remap_unique
from .train import BadLabelsError, step_losses
from .trainers import eager, fresh, train_fresh

# the check whose outcome the sep_grad claim is judged on (`evidence.evidence`)
SEP_GRAD_STEERS = "the separability gradient changes the weights"


def _worst(pairs, rtol: float, atol: float) -> tuple[float, bool]:
    """The largest |a - b| over tensor pairs, and whether every pair is within atol + rtol * |b| (torch.allclose)."""
    worst, ok = 0.0, True
    for a, b in pairs:
        a, b = a.detach().double(), b.detach().double()
        worst = max(worst, float((a - b).abs().max()) if a.numel() else 0.0)
        ok &= bool(torch.allclose(a, b, rtol=rtol, atol=atol))
    return worst, ok


def remap_checks(batches, num_labels: int) -> list[Check]:
    """Every remap equals the reference on the data's batches and on hand-made label sets; the
    presence-table remap counts zero host syncs on all of them."""
    dev = batches[0][1].device
    cases = [y for _, y in batches[:4]] + [torch.tensor(v, device=dev) for v in
                                           ([0, 1, 2, 1], [3, 4, 5, 3], [4, 4, 4], [5, 0, 5, 2], [2, 1, 0, 3])]
    wrong, syncs = [], 0
    for y in cases:
        ref = remap_reference(y.tolist())
        for f in (remap_host, remap_unique):
            if f(y, num_labels).labels.tolist() != ref:
                wrong.append(f.__name__)
        with count_host_syncs(dev) as c:
            out = remap_presence(y, num_labels)
        syncs += c.total
        if out.labels.tolist() != ref:
            wrong.append("remap_presence")
    calls = 3 * len(cases)
    return [Check("remaps equal the reference (0-2, 3-5, one class, unsorted, data)", not wrong,
                  f"{calls - len(wrong)} of {calls} calls equal (3 remaps x {len(cases)} label sets)"
                  + (f"; wrong: {', '.join(sorted(set(wrong)))}" if wrong else "")),
            Check("presence-table remap: host syncs", syncs == 0, f"{syncs} syncs over {len(cases)} calls (allowed 0)")]


def separability_checks(model, batches, num_labels: int) -> list[Check]:
    """The vectorized ratio equals the loop (float32, rtol 1e-5: the same sums in another order)
    and the float64 reference (rtol 1e-4: float32 inputs), on the encoder means of real batches."""
    ok_loop = ok_ref = True
    gap_loop = gap_ref = 0.0
    with torch.no_grad():
        for x, y in batches[:4]:
            r = remap_presence(y, num_labels)
            z = model.encode(x)[0]
            loop = fisher_ratio_loop(z, r.labels, r.n_classes)
            vec = fisher_ratio_vectorized(z, r.labels, r.n_classes, num_labels=num_labels)
            ok_loop &= torch.allclose(vec, loop, rtol=1e-5, atol=1e-7)
            gap_loop = max(gap_loop, abs(vec.item() - loop.item()) / max(abs(loop.item()), 1e-30))
            ref = fisher_ratio_reference(z, r.labels)
            ok_ref &= abs(vec.item() - ref) <= 1e-4 * abs(ref) + 1e-7
            gap_ref = max(gap_ref, abs(vec.item() - ref) / max(abs(ref), 1e-30))
    n = min(4, len(batches))
    return [Check("separability: vectorized equals the class loop", ok_loop,
                  f"largest relative gap {within(gap_loop, ok_loop)} over {n} batches (allowed 1e-05)", gap_loop),
            Check("separability: vectorized equals the float64 reference", ok_ref,
                  f"largest relative gap {within(gap_ref, ok_ref)} over {n} batches (allowed 1e-04)", gap_ref)]


def complex_linear_check(device) -> list[Check]:
    torch.manual_seed(0)
    layer = ComplexLinear(7, 5).to(device)
    h = torch.randn(3, 14, device=device)
    worst, ok = _worst([(layer(h), complex_linear_reference(layer, h))], rtol=1e-5, atol=1e-6)
    return [Check("ComplexLinear equals (A + iB) h + b in complex128", ok,
                  f"largest |difference| {within(worst, ok)} (allowed 1e-06 + 1e-05 x |value|)", worst)]


def same_math_checks(batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int, device) -> list[Check]:
    """Baseline and optimized on the same seed and data: bit-identical parameters with the original's
    no_grad separability; close parameters with its gradient flowing (the loop's and the matmuls'
    gradients differ by rounding, which Adam carries); and the gradient does change the weights."""
    kw = dict(model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, device=device)
    _, mb = train_fresh(eager(baseline.step_config()), batches, **kw)
    _, mo = train_fresh(eager(optimized.step_config(sep_grad=False)), batches, **kw)
    exact = torch.device(device).type == "cpu"
    pairs = list(zip(mb.parameters(), mo.parameters()))
    differ = sum(not torch.equal(p, q) for p, q in pairs)
    if exact:  # the same kernels in the same order on the same data: bit for bit
        same, rule = differ == 0, f"{differ} of {len(pairs)} parameter tensors differ (allowed: none, bit for bit)"
    else:  # a GPU BLAS may pick another kernel between two runs (workspace, alignment): rounding only
        worst, same = _worst(pairs, rtol=1e-5, atol=1e-7)
        rule = f"largest |difference| {within(worst, same)} (allowed 1e-07 + 1e-05 x |value|)"
    _, gb = train_fresh(eager(baseline.step_config(sep_grad=True)), batches, **kw)
    _, go = train_fresh(eager(optimized.step_config(sep_grad=True)), batches, **kw)
    worst, close = _worst(zip(gb.parameters(), go.parameters()), rtol=1e-4, atol=1e-5)
    changed = sum(not torch.equal(p, q) for p, q in zip(mo.parameters(), go.parameters()))
    n = len(batches)
    return [Check(f"same parameters after {n} steps, no_grad separability", same, rule),
            Check(f"same parameters after {n} steps, separability gradient", close,
                  f"largest |difference| {within(worst, close)} (allowed 1e-05 + 1e-04 x |value|)", worst),
            Check(SEP_GRAD_STEERS, changed > 0,
                  f"{changed} of {len(pairs)} parameter tensors differ, sep_grad True vs False (needed: some)")]


def bad_label_checks(batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int, device) -> list[Check]:
    """A label outside the declared range: the baseline raises at the batch; the optimized loop at
    its next host read."""
    bad = [(x, y.clone()) for x, y in batches[:3]]
    bad[1][1][0] = train_cfg.num_labels + 3
    out = []
    for impl, err, knobs in (("baseline", ValueError, {}), ("optimized", BadLabelsError, dict(log_every=2))):
        model, opt = fresh(model_cfg, seed, device)
        try:
            IMPLS[impl](model, bad, optimizer=opt, train=train_cfg, progress=False, **knobs)
            raised = False
        except err:
            raised = True
        out.append(Check(f"{impl}: a label outside [0, {train_cfg.num_labels}) raises", raised,
                         f"{err.__name__} raised" if raised else f"nothing raised (expected {err.__name__})"))
    return out


def fullgraph_checks(batches, *, model_cfg: ModelConfig, train_cfg: TrainConfig, seed: int, device) -> list[Check]:
    """A second witness: dynamo captures the optimized step's losses as one graph (fullgraph=True,
    backend "eager": no code generation), and cannot capture the baseline's (its host reads break it)."""
    model, _ = fresh(model_cfg, seed, device)
    x, y = batches[0]
    out = []
    for impl, sc, want in (("optimized", optimized.step_config(), True), ("baseline", baseline.step_config(), False)):
        torch._dynamo.reset()
        fn = torch.compile(step_losses, backend="eager", fullgraph=True)
        try:
            fn(model, x, y, 1, sc, train_cfg)
            captured, seen = True, "one graph"
        except Exception as e:  # dynamo's Unsupported / UserError on a data-dependent host read
            captured, seen = False, f"refused ({type(e).__name__})"
        verb = "captures" if want else "cannot capture"
        out.append(Check(f"dynamo {verb} the {impl} losses in one graph", captured == want,
                         f"fullgraph=True: {seen}"))
    torch._dynamo.reset()
    return out


def curves_agree(a, b, rtol: float, steps: int | None = None) -> dict[str, bool]:
    """Per metric: every step of EpochLog `b` (the first `steps`, default all) within `rtol` of `a` (relative to
    max(1, |a|))."""
    return {k: len(a.values[k]) == len(b.values[k]) and
            _gap(a.values[k][:steps], b.values[k][:steps]) < rtol for k in a.values}


def curve_gap(a, b) -> float:
    """The largest relative difference (to max(1, |a|)) between EpochLogs `a` and `b`, any metric, any step."""
    return max(_gap(a.values[k], b.values[k]) for k in a.values)


def _gap(u: list[float], v: list[float]) -> float:
    return max((abs(x - y) / max(1.0, abs(x)) for x, y in zip(u, v)), default=0.0)



def captured_checks(captured: CapturedStep, compiled, curves: dict, batches, rtol: float) -> list[Check]:
    """The captured step after its first epoch (`curves["captured"]`, from the same seed and data as
    `curves["optimized"]`): compiled once (`compiled`: a CompileCounter over that epoch, none when compile is
    "off"), its curves equal the optimized step's to `rtol`, and a batch of another shape afterwards raises
    ValueError without running anything (no silent recompile, no replay over the wrong memory)."""
    once = compiled.recompiles == 0 and compiled.compiles == (0 if captured.impl.compile == "off" else 1)
    same = curves_agree(curves["optimized"], curves["captured"], rtol=rtol, steps=CHECKED_STEPS)
    x, y = batches[0]
    before, step = [p.detach().clone() for p in captured.model.parameters()], captured.step
    try:
        captured(x[: x.shape[0] // 2], y[: y.shape[0] // 2])
        refused = False
    except ValueError as e:
        refused = "captured for" in str(e)
    untouched = captured.step == step and all(torch.equal(p, q) for p, q in zip(before, captured.model.parameters()))
    n = len(curves["captured"])
    steps = min(n, CHECKED_STEPS)
    gap = max(_gap(curves["optimized"].values[k][:steps], curves["captured"].values[k][:steps])
              for k in curves["optimized"].values)
    return [Check(f"captured: compiled once, no recompile in {n} steps", once,
                  f"{compiled.compiles} compile(s), {compiled.recompiles} recompile(s)"),
            Check(f"captured: curves equal the optimized step's over {steps} steps", all(same.values()),
                  f"largest relative gap {within(gap, all(same.values()))} (allowed {rtol:.0e})", gap),
            Check("captured: a batch of another shape raises, nothing runs", refused and untouched,
                  ("ValueError raised" if refused else "no ValueError")
                  + ("; weights and step count unchanged" if untouched else "; the step ran"))]


def curve_check(a, b, rtol: float, what: str) -> Check:
    """EpochLog `b` equals `a` at every step to `rtol` (relative to max(1, |a|)), with the largest gap."""
    same, gap = curves_agree(a, b, rtol=rtol), curve_gap(a, b)
    return Check(f"{what} over {len(a)} steps", all(same.values()),
                 f"largest relative gap {within(gap, all(same.values()))} (allowed {rtol:.0e})"
                 + ("" if all(same.values()) else f"; differ: {', '.join(k for k, ok in same.items() if not ok)}"), gap)
