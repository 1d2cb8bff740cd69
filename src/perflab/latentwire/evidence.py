"""The claims' evidence: `evidence(run, found)` gives each claim of CLAIMS its `Evidence` (what `card.judge` takes),
read from the notebook's `study.Findings` alone: the gains decided on the ablation's trainers (a claim off its setup
quotes the decision made on its variant for another claim, else the ablation's ratio of medians, said to be
indicative), the parts decided alone, the memory ratios counted, AMP, the compiled step's MFU, the widest spread; the
claims nothing here measures say why. Each sentence is written from the run's numbers, in the claim's unit."""
from __future__ import annotations

import math

from ..kit.claims import Evidence
from ..kit.formatting import value_text
from ..kit.verdicts import Decision, Measured
from . import floors as floors_
from . import sweep as sweep_
from .ablation import TESTED_BY
from .claims import CLAIMS, OVERHEADS
from .findings import GAINS, MEMORY, Findings, decided, indicative, indicative_text, mfu, per_sample, spreads, widest


def _x(m) -> str:
    return value_text(m.value, m.low, m.high, "x")


def _pct(m) -> str:
    return value_text(m.value, m.low, m.high, "%")


def _rounds(d: Decision) -> str:
    return f"{d.how}, {d.seconds:.2f} s"


def _share_removed(d: Decision) -> str:
    """The share of the baseline's step a speedup removes: 1 - 1/gain, with the interval's ends."""
    def s(g):
        return f"{1 - 1 / g:.0%}" if g > 0 and math.isfinite(g) else "-inf" if g <= 0 else "100%"
    return f"removes {s(d.value)} [{s(d.low)}, {s(d.high)}] of the baseline's step"


def _gain(key: str, run, found: Findings) -> Evidence:
    """A gain claim: its decision; off its setup, the decision made on its variant for another claim, else the
    ablation's indicative ratio, said to be so."""
    v, dt, d = TESTED_BY[key], run.device.type, found.gains.get(key)
    if v not in found.ablation:
        return Evidence(None, f"no {v} variant in this run")
    notes = []
    if key == "fused_adamw" and found.optimizer:
        og, (m_default, m_fused) = found.optimizer
        notes.append(f"AdamW.step alone {og:.2f}x ({m_default.median * 1e3:.2f} -> {m_fused.median * 1e3:.2f} ms, "
                     f"{m_default.median / found.base.measurement.median:.1%} of the baseline step; ratio of medians)")
    if key == "non_blocking" and found.data:
        notes.append(f"{found.data['bytes_per_sample']} bytes per sample host-to-device")
    if key in ("quick_wins", "all", "target_5x") and not found.ablation[v].variant.knobs.get("amp"):
        notes.append("bf16 autocast off in this run (amp=False)")
    if d is not None:
        text = f"{v}: {_x(d)} samples/s on {dt} ({_rounds(d)})"
        if key in OVERHEADS:
            text += f": {_share_removed(d)}"
        return Evidence(d, "; ".join([text, *notes]))
    other, keys = decided(found, v)
    why = CLAIMS[key].why_not or "a claim about another setup"
    if other is not None:
        text = f"{v}: {_x(other)} samples/s on {dt}, decided for {', '.join(keys)} ({_rounds(other)}); not judged: {why}"
    else:
        text = f"{v}: {indicative(found, v):.2f}x samples/s on {dt} ({indicative_text(run)}), not judged; {why}"
    return Evidence(None, "; ".join([text, *notes]))


def _data_share(key: str, run, found: Findings) -> Evidence:
    """dataloader: the share of all on-the-fly preparation (the most a DataLoader can hide); pretokenize: what
    tokenizing adds over the cache gather; each with the end-to-end ratio of its variant beside it, indicative."""
    d = (found.parts or {}).get(key)
    fly, cache = found.data["on_the_fly"], found.data["cache"]
    context = (f"on the fly {fly.median * 1e6:.0f} us/sample, cache {cache.median * 1e6:.0f} us, baseline step "
               f"{per_sample(found) * 1e3:.1f} ms/sample")
    v = TESTED_BY[key]
    end = f"; end to end {indicative(found, v):.2f}x ({indicative_text(run)})" if v in found.ablation else ""
    if d is None:
        return Evidence(None, f"not measured in this run; {context}{end}")
    what = "all on-the-fly preparation" if key == "dataloader" else "on the fly minus the cache gather"
    return Evidence(d, f"{_pct(d)} of the baseline's time per sample on {run.device.type}: {what} ({_rounds(d)}); "
                       f"{context}{end}")


def _attention(run, found: Findings) -> Evidence:
    d, dt = (found.parts or {}).get("flash_attention"), run.device.type
    (seq, (first, _)), *rest = found.attention.items()
    others = "".join(f"; {g.value:.2f}x at length {s} (ratio of mean times)" for s, (g, _) in rest)
    if d is not None:
        return Evidence(d, f"{_x(d)} on one attention layer (fwd+bwd) on {dt} at the study's LM length {seq} "
                           f"({_rounds(d)}){others}")
    return Evidence(None, f"eager over SDPA on one attention layer (fwd+bwd) on {dt}: {first.value:.2f}x at length "
                          f"{seq} (ratio of mean times){others}; not judged")


def _memory(key: str, run, found: Findings) -> Evidence:
    v, base = TESTED_BY[key], found.base
    r = found.ablation.get(v)
    if key == "grad_accum" and run.cfg.accum_steps < 2:
        return Evidence(None, "accum_steps=1: there is nothing to accumulate")
    if r is None or not r.activation_bytes or not base.activation_bytes:
        return Evidence(None, f"no activation count for {v} in this run")
    ratio = base.activation_bytes / r.activation_bytes
    return Evidence(Measured.exact(ratio),
                    f"{ratio:.2f}x less activation memory on {run.device.type}: {base.activation_bytes / 2**20:.1f} -> "
                    f"{r.activation_bytes / 2**20:.1f} MiB held for backward (counted); speed "
                    f"{indicative(found, v):.2f}x ({indicative_text(run)})")


def _amp(run, found: Findings) -> Evidence:
    """bf16 over fp32 at the sweep's largest batch measured in both (decided on the GPU setup); the sweep's own
    ratios (each point timed alone) and the ablation's batch-1 figure beside it, each said how it was taken."""
    d, dt = found.amp, run.device.type
    gains = floors_.amp_gains(found.sweep)
    notes = [f"{g.value:.2f}x at batch {b}" for b, g in sorted(gains.items())]
    sweep_text = ("the sweep's bf16 / fp32 (ratios of mean times, each point timed alone): " + ", ".join(notes)
                  if notes else "")
    if "amp_bf16" in found.ablation:
        sweep_text += (f"{'; ' if sweep_text else ''}at batch 1 (the ablation's amp_bf16) "
                       f"{indicative(found, 'amp_bf16'):.2f}x ({indicative_text(run)})")
    if d is not None:
        return Evidence(d, f"{_x(d)} samples/s, bf16 vs fp32 at batch {sweep_.amp_batch(found.sweep)} on {dt} "
                           f"({_rounds(d)})" + (f"; {sweep_text}" if sweep_text else ""))
    why = CLAIMS["amp"].why_not if gains else "no batch measured in both fp32 and bf16"
    return Evidence(None, "; ".join(x for x in (f"not judged on {dt}: {why}", sweep_text,
                                                sweep_.floor_ratio(found.peaks)) if x))


def _mfu(run, found: Findings) -> Evidence:
    """The compiled step's MFU when it runs bf16; else why not (its share of the fp32 floor is no bf16 MFU)."""
    c, dt = found.compiled, run.device.type
    if c is None:
        return Evidence(None, "no compiled step in this run (compile='off')")
    share = mfu(run.cfg, found.flops, found.peaks, c)
    if not c.variant.knobs.get("amp"):
        return Evidence(None, f"amp=False: the compiled step runs fp32 ({_pct(share)} of the fp32 floor at batch "
                              f"{c.samples_per_step} on {dt}, not an MFU)")
    return Evidence(share, f"{_pct(share)} of the bf16 matmul floor on {dt}: the compiled step at batch "
                           f"{c.samples_per_step} (its mean time over {len(c.measurement.times)} blocks, 99% interval)")


def _spread(run, found: Findings) -> Evidence:
    table = spreads(found)
    worst, which = widest(table)
    under = int(table["under 10%"].sum())
    return Evidence(Measured.exact(worst), f"{worst:.1%} IQR/median at most on {run.device.type}, the widest: {which} "
                                           f"({under} of {len(table)} timings under 10%)")


def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Each claim's Evidence, keyed by claim (what `card.judge` takes), read from `found` alone: the gains decided on
    the ablation's trainers, the parts decided alone, the memory ratios counted, AMP, the compiled step's MFU, the
    widest spread; the claims nothing here measures say why."""
    out = {k: _gain(k, run, found) for k in GAINS}
    out |= {k: _memory(k, run, found) for k in MEMORY}
    out |= {k: _data_share(k, run, found) for k in ("dataloader", "pretokenize")}
    out["flash_attention"] = _attention(run, found)
    out["amp"] = _amp(run, found)
    out["target_mfu"] = _mfu(run, found)
    out["target_spread"] = _spread(run, found)
    out |= {c.key: Evidence(None, c.why_not) for c in CLAIMS if c.measured_by == "study.evidence"}
    return out
