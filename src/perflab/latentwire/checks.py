"""The notebook's correctness cell: each check is a `perflab.kit.claims.Check` (name, passed, detail) whose detail says
what was measured beside the rule, in a form that holds from run to run, so nbval can compare the printout: counts,
and a gap as the power of ten it stays under ("< 1e-06")."""
from __future__ import annotations

import dataclasses
import math

import torch

from ..kit.claims import Check
from ..kit.compiles import count_compiles
from ..kit.formatting import within
from ..kit.syncs import count_host_syncs
from . import losses, reference
from .ablation import IMPLS
from .batches import PretokenizedCache, batch_on_the_fly
from .config import Toggles
from .model import build_model
from .params import LatentWireParams
from .tokenizer import Tokenizer


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    return bool(torch.allclose(a.detach().float(), b.detach().float(), rtol=rtol, atol=atol))


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b| (inf for shapes that differ); a check prints it as `within` writes it."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max()) if a.shape == b.shape and a.numel() else math.inf


def _check(name: str, ok: bool, gap: float, before: str, after: str) -> Check:
    """A check of a largest |difference|: the detail names it as `within` does (the same on every host where it
    passes), the gap itself is the check's value (logged)."""
    return Check(name, ok, f"{before}|difference| {within(gap, ok)}{after}", gap)


def single_pass_checks(p: LatentWireParams, examples, device, n: int = 5) -> list[Check]:
    """First-token and K-token CE from the single pass equal their own forwards (fp32, eager attention),
    and the LM-forward counts of both."""
    model = build_model(p.model_config(), seed=p.seed + 1, lm=p.lm, device=device)
    k = model.cfg.k_tokens
    batch = PretokenizedCache.for_model(examples[:n], model.tokenizer, model.cfg).batch(list(range(n))).to(device)
    ctx, ans = model.lm_inputs(batch)
    f0 = model.lm.forward_calls
    logits = reference.teacher_forced_logits(model.lm, ctx, ans)
    f1 = model.lm.forward_calls
    first_loop = reference.first_token_ce_loop(model.lm, ctx, batch.labels)
    k_loop = reference.k_token_ce_loop(model.lm, ctx, ans, batch.labels, k)
    f2 = model.lm.forward_calls
    # fp32: the two differ only in matmul shapes (summation order): 1e-5 relative is float rounding
    tol = dict(rtol=1e-5, atol=1e-6)
    first, kce = losses.first_token_ce(logits, batch.labels), losses.k_token_ce(logits, batch.labels, k)
    rule = " (allowed 1e-06 + 1e-05 x |value|)"
    return [
        _check("single-pass first-token CE equals its own LM forward", _close(first, first_loop, **tol),
               _gap(first, first_loop), f"batch {n}: ", rule),
        _check("single-pass K-token CE equals the K-forward loop", _close(kce, k_loop, **tol), _gap(kce, k_loop),
               f"K={k}, batch {n}: ", rule),
        Check("LM forwards per micro-batch: loop K+2, single pass 1",
              (f1 - f0, f1 - f0 + f2 - f1) == (1, k + 2), f"single pass {f1 - f0}, loop {f1 - f0 + f2 - f1}"),
    ]


def toggles_off_check(p: LatentWireParams, examples, device, steps: int = 2) -> Check:
    """The optimized version with every toggle off trains exactly like the baseline (same samples, same losses)."""
    rows, seen = [], []
    for name in ("baseline", "optimized"):
        model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
        tr = IMPLS[name](model, examples, device=device, lr=p.lr, accum_steps=p.accum_steps, seed=p.seed)
        tr.seen = []
        for _ in range(steps):
            tr.step()
        rows.append(torch.tensor(tr.losses()))
        seen.append(tr.seen)
        tr.close()
    # same kernels in the same order; 1e-6 leaves room for GPU kernels that accumulate with atomics
    ok = seen[0] == seen[1] and _close(rows[0], rows[1], rtol=1e-6, atol=0.0)
    return _check("optimized with every toggle off reproduces the baseline", ok, _gap(rows[1], rows[0]),
                  f"{steps} steps x {p.accum_steps} micro-batches, {'same' if seen[0] == seen[1] else 'other'} "
                  "samples, loss ", " (allowed 1e-06 x |loss|)")


def cache_check(p: LatentWireParams, examples) -> Check:
    model_cfg, tok = p.model_config(), Tokenizer()
    cache = PretokenizedCache.for_model(examples, tok, model_cfg)
    differ = 0
    for lo in range(0, len(examples), 16):
        index = list(range(lo, min(lo + 16, len(examples))))
        fly = batch_on_the_fly(examples, index, tok, model_cfg)
        differ += not all(torch.equal(cache.batch(index).tensors()[k], v) for k, v in fly.tensors().items())
    chunks = -(-len(examples) // 16)
    return Check("pre-tokenized cache equals tokenizing on the fly", differ == 0,
                 f"{len(examples)} examples in {chunks} batches of 16: {differ} differ (bitwise; allowed none)")


def sdpa_check(p: LatentWireParams, examples, device) -> Check:
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    batch = PretokenizedCache.for_model(examples[:8], model.tokenizer, model.cfg).batch(list(range(8))).to(device)
    manual = model(batch, single_pass=True).total
    model.set_options(attention="sdpa")
    fused = model(batch, single_pass=True).total
    return _check("sdpa attention equals the eager attention", _close(fused, manual, 1e-5, 1e-6), _gap(fused, manual),
                  "batch 8: loss ", " (allowed 1e-06 + 1e-05 x |loss|)")


def host_sync_check(p: LatentWireParams, examples, device) -> tuple[Check, dict]:
    """Host syncs inside one step: the baseline's (synchronize x2, .item()s, AdamW's, its blocking copies) vs
    the optimized step with pinned batches + no_step_sync + fused AdamW + the cache (none). Without pinned
    memory the optimized step's copies block too (6 tensors per micro-batch): `count_host_syncs` counts them on
    every device, as a GPU would make them."""
    counts = {}
    for name, toggles in (("baseline", {}),
                          ("optimized", {"pin_memory": True, "pretokenize": True, "fused_adamw": True,
                                         "no_step_sync": True, "single_pass": True})):
        model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
        tr = IMPLS[name](model, examples, device=device, lr=p.lr, accum_steps=p.accum_steps, seed=p.seed, **toggles)
        tr.step()  # the optimizer's state exists from here on
        with count_host_syncs(device) as s:
            tr.step()
        tr.close()
        counts[name] = dict(sorted(s.by_op.items()))
    ok = sum(counts["optimized"].values()) == 0 and counts["baseline"].get("synchronize", 0) == 2
    detail = f"per step: baseline {counts['baseline']}, optimized {counts['optimized'] or 0} (allowed 0)"
    return Check("host syncs per step: the optimized step (pinned batches, non-blocking copies) has none", ok,
                 detail), counts


def compiled_check(p: LatentWireParams, examples, device, steps: int = 3) -> Check:
    """The compiled step (all toggles, p.compile/p.backend) trains like the same step eager: the same samples,
    losses within a tolerance, and no compile after the first step (batches padded to fixed widths)."""
    toggles = dataclasses.asdict(Toggles.all_on(batch_size=p.ablation_batch, amp=p.amp))
    toggles.update(dataloader=False, num_workers=0)  # the sample order of the manual stream; no workers to start
    rows, seen = [], []
    for mode in ("off", p.compile):
        model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
        tr = IMPLS["optimized"](model, examples, device=device, lr=p.lr, accum_steps=p.accum_steps, seed=p.seed,
                                **{**toggles, "compile": mode, "compile_backend": p.backend})
        tr.seen = []
        tr.step()  # the compiled step compiles here (or finds the graph this kernel compiled before)
        with count_compiles() as cc:
            for _ in range(steps - 1):  # other samples, other own widths: the padded shapes stay the same
                tr.step()
        rows.append(torch.tensor(tr.losses()))
        seen.append(tr.seen)
        tr.close()
    # fp32: the compiled kernels sum in another order (1e-7 relative on the CPU defaults), and AdamW's normalized
    # update can turn such a difference in a near-zero gradient into a full-size step: 1e-5 over 3 steps.
    # bf16 rounds matmul inputs to 8 bits of mantissa (0.4%), in places that differ between fused and eager: 2e-2
    tol = 2e-2 if p.amp else 1e-5
    ok = seen[0] == seen[1] and _close(rows[1], rows[0], rtol=tol, atol=tol) and cc.compiles == 0
    return _check(f"compiled step (compile={p.compile}, backend={p.backend}) trains like the eager step", ok,
                  _gap(rows[1], rows[0]), f"{steps} steps x {p.accum_steps} micro-batches of {p.ablation_batch}, "
                  f"{'same' if seen[0] == seen[1] else 'other'} samples, loss ",
                  f" (allowed {tol:.0e} + {tol:.0e} x |loss|); {cc.compiles} compiles after the first step (allowed 0)")


def all_checks(p: LatentWireParams, examples, device) -> tuple[list[Check], dict]:
    checks = [*single_pass_checks(p, examples, device), toggles_off_check(p, examples, device),
              cache_check(p, examples), sdpa_check(p, examples, device)]
    if p.compile != "off":
        checks.append(compiled_check(p, examples, device))
    sync_check, counts = host_sync_check(p, examples, device)
    return [*checks, sync_check], counts
