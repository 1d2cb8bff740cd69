"""The loss curves: three runs from the same initial weights on `curve_samples` samples (the baseline; every
recommendation at batch 1 in the baseline's sample order, so only the numerics differ; every recommendation at
`curve_batch`), each evaluated on the held-out examples after it, and what they show and do not (`quality`).
"""
from __future__ import annotations

import dataclasses
import time

from ..kit.claims import Check
from ..kit.env import synchronize
from ..kit.versions import Variant
from .ablation import IMPLS
from .config import Toggles
from .model import build_model
from .params import LatentWireParams
from .training import evaluate


@dataclasses.dataclass
class Curve:
    name: str
    samples: list[int]      # samples seen after each step
    losses: list[float]     # training loss of each step
    seconds: float          # wall time of the run (device synchronized at the end)
    heldout: dict           # evaluate() on the held-out examples after the run


def loss_curve(v: Variant, examples, heldout, *, p: LatentWireParams, device) -> Curve:
    """Train a fresh model (same seed) as variant `v` on `p.curve_samples` samples, one micro-batch per step."""
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    trainer = v(model, examples, device=device, lr=p.lr, accum_steps=1, seed=p.seed)
    steps = max(1, p.curve_samples // trainer.samples_per_step)
    t0 = time.perf_counter()
    try:
        for _ in range(steps):
            trainer.step()
        synchronize(device)
        seconds = time.perf_counter() - t0
        rows = trainer.losses()
    finally:
        trainer.close()
    per = trainer.samples_per_step
    return Curve(v.name, [per * (i + 1) for i in range(steps)], [r[0] for r in rows], seconds,
                 evaluate(model, heldout, device=device))


def curve_runs(p: LatentWireParams) -> list[Variant]:
    """The loss curves' variants: the baseline; every recommendation at batch 1 in the baseline's sample order
    (manual indexing), so only numerics differ; and every recommendation at p.curve_batch. Eager: the
    compiled step's numerics are checked against the eager step in the correctness cell."""
    same_order = dataclasses.asdict(Toggles.all_on(batch_size=1, amp=p.amp))
    same_order.update(dataloader=False, num_workers=0)
    batched = dataclasses.asdict(Toggles.all_on(batch_size=p.curve_batch, num_workers=p.num_workers, amp=p.amp))
    return [IMPLS.variant("baseline"), IMPLS.variant("optimized", "optimized, batch 1", **same_order),
            IMPLS.variant("optimized", f"optimized, batch {p.curve_batch}", **batched)]


def untrained(p: LatentWireParams, heldout, device) -> dict:
    """evaluate() on the held-out examples of the initial weights every curve starts from (the same seed)."""
    return evaluate(build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device), heldout, device=device)


QUALITY_GAP = 0.02  # the optimized step at batch 1 (the baseline's samples, in its order) ends within 2% of its loss


def quality(curves: list[Curve], untrained: dict, p: LatentWireParams) -> tuple[Check, list[str]]:
    """The loss curves read out: the check (the optimized step at batch 1, on the baseline's samples in its order,
    ends within 2% of the baseline's held-out loss: only numerics differ) and what it does and does not show, in
    sentences from this run's numbers: how far training moved the held-out loss from the initial weights', the
    first-token accuracy, and the batched run's gap (fewer, larger updates of the same samples)."""
    base, same, batched = curves
    b, o = base.heldout["loss"], same.heldout["loss"]
    gap = abs(o - b) / b
    check = Check(f"same training: optimized at batch 1 (the baseline's samples, in its order) ends within "
                  f"{QUALITY_GAP:.0%} of the baseline's held-out loss", gap <= QUALITY_GAP,
                  f"{o:.3f} vs {b:.3f}: {gap:.1%} apart (allowed {QUALITY_GAP:.0%})", gap)
    u, n = untrained["loss"], base.samples[-1]
    out = [f"held-out loss {u:.3f} at the initial weights, {b:.3f} after the baseline's {n} samples "
           f"({(b - u) / u:+.1%})"]
    accs = [c.heldout["first_token_acc"] for c in curves]
    if max(accs) == 0:
        out.append(f"first-token accuracy 0 in all three runs: {n} samples do not teach this model to name an answer's "
                   f"first token, so the check shows that the optimized step's numerics (single pass, SDPA, fused AdamW"
                   f"{', bf16' if p.amp else ''}) train as the baseline's do on the same samples, not that either "
                   f"reaches a useful quality")
    else:
        out.append("first-token accuracy: " + ", ".join(f"{c.name} {a:.3f}" for c, a in zip(curves, accs)))
    x, steps = batched.heldout["loss"], len(batched.samples)
    out.append(f"{batched.name}: held-out loss {x:.3f}, {(x - b) / b:+.1%} against the baseline's after as many "
               f"samples ({n}, in the DataLoader's shuffled order), in {steps} updates of {batched.samples[0]} instead of "
               f"{len(base.samples)} of {base.samples[0]} at the same learning rate: fewer, larger updates set that gap "
               f"(the numerics are the batch-1 run's, checked); what a larger batch reaches per sample at a learning "
               f"rate tuned for it is not what this run measures")
    return check, out
