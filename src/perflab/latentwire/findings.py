"""What notebook 06 finds, in one object: `Findings`, one field per measuring function of `study`, filled in as the
notebook runs, and what reads it for the page and the claims: the decision made on a variant (`decided`), the
ablation's own ratio where none was (`indicative`), the compiled step's MFU (`mfu`), every timing's spread
(`spreads`: target_spread's measurement)."""
from __future__ import annotations

import dataclasses

import pandas as pd

from ..kit.bench import summary
from ..kit.verdicts import Decision, Measured
from . import floors as floors_
from .ablation import claims_of
from .claims import CLAIMS
from .timing import VariantResult, iqr_ratio

GAINS = tuple(c.key for c in CLAIMS if c.measured_by == "study.decide_gains")      # decided on the ablation's trainers
MEMORY = tuple(c.key for c in CLAIMS if c.measured_by == "ablation.prepare_variant")  # activation bytes, counted


@dataclasses.dataclass
class Findings:
    """What notebook 06 measures, one field per measuring function (module doc), filled in as it runs."""
    examples: list                                # the training triples (inputs)
    heldout: list                                 # the held-out triples of the quality check (inputs)
    flops: dict | None = None                     # FLOPs per sample {False: K-forward loop, True: single pass,
                                                  # "padded": single pass at the compiled step's widths}
                                                  # (flops_and_floors)
    peaks: dict | None = None                     # {"fp32" | "bf16": (FLOP/s, Measurement)} (flops_and_floors)
    ablation: dict | None = None                  # {variant: VariantResult}, timed in rounds (ablate)
    gains: dict | None = None                     # {claim: Decision | None}: paired rounds vs the baseline (ablate)
    attention: dict | None = None                 # {LM length: (manual / sdpa Measured, [manual, sdpa])}, the
                                                  # study's own length first (time_parts)
    data: dict | None = None                      # one sample on the fly vs from the cache (time_parts)
    optimizer: tuple | None = None                # (default / fused, [default, fused]) of AdamW.step (time_parts)
    parts: dict | None = None                     # {"flash_attention" | "dataloader" | "pretokenize": Decision | None}
    sweep: dict | None = None                     # {amp: [VariantResult]} at batch 1, 4, 16, ... (sweep_batches)
    compiled: VariantResult | None = None         # the compiled step at the best batch (sweep_batches; None when
                                                  # compile="off")
    amp: Decision | None = None                   # bf16 vs fp32 in paired rounds (decide_amp; None off its setup)
    curves: list | None = None                    # [curves.Curve]: baseline, optimized at batch 1, at curve_batch
    untrained: dict | None = None                 # held-out quality of the initial weights (loss_curves)

    @property
    def base(self) -> VariantResult:
        return self.ablation["baseline"]

    @property
    def seq(self) -> int:
        """The study's LM length (positions of a typical teacher-forced LM input: the first `attention` key)."""
        return next(iter(self.attention))


def decided(found: Findings, variant: str) -> tuple[Decision | None, list[str]]:
    """The decision made on `variant`'s gain over the baseline (paired rounds), and the claims judged on it; (None, [])
    where none was made in this run."""
    keys = [k for k in claims_of(variant) if k in GAINS and (found.gains or {}).get(k) is not None]
    return (found.gains[keys[0]] if keys else None), keys


def indicative(found: Findings, variant: str) -> float:
    """Samples/s of `variant` over the baseline's from the ablation's own timings: the ratio of their medians over
    the ablation's rounds. A figure for a sentence, a table or a figure, said to be so; never judged."""
    return found.ablation[variant].samples_per_s / found.base.samples_per_s


def indicative_text(run) -> str:
    n = run.cfg.rounds
    return f"indicative: ratio of medians of {n} round{'s' if n != 1 else ''}"


def per_sample(found: Findings) -> float:
    """Seconds of the baseline's step per sample (its median step over its samples per step)."""
    return found.base.measurement.median / found.base.samples_per_step


def dtype(cfg) -> str:
    return "bf16" if cfg.amp else "fp32"


def mfu(cfg, flops: dict, peaks: dict, compiled: VariantResult) -> Measured:
    """The compiled step's model FLOP/s (unpadded FLOPs) over the matmul floor of the dtype it runs in."""
    return floors_.fraction_of_floor(compiled, flops[True]["total"], peaks[dtype(cfg)][0])


def timings(found: Findings) -> list[tuple[str, str, object]]:
    """Every timing of the run as (benchmark, case, Measurement): the ablation's steps, the sweep's and the compiled
    step's, the parts timed alone and the matmul floors."""
    out = [("latentwire step", name, r.measurement) for name, r in (found.ablation or {}).items()]
    out += [("batch sweep", r.variant.name, r.measurement) for rows in (found.sweep or {}).values() for r in rows]
    out += [("batch sweep", found.compiled.variant.name, found.compiled.measurement)] if found.compiled else []
    for _, ms in (found.attention or {}).values():
        out += [(m.task_spec.label, f"{m.task_spec.sub_label} {m.task_spec.description}", m) for m in ms]
    out += [(m.task_spec.label, k, m) for k, m in (found.data or {}).items() if k != "bytes_per_sample"]
    out += [("AdamW.step", m.task_spec.description, m) for m in (found.optimizer or (None, []))[1]]
    out += [("floor", f"matmul {name}", m) for name, (_, m) in (found.peaks or {}).items()]
    return out


def spreads(found: Findings, threshold: float = 0.1) -> pd.DataFrame:
    """target_spread: every timing of the run (`timings`) with its IQR/median over its blocks, and whether it is
    under `threshold` (a single block: no spread measured, not under)."""
    rows = []
    for bench, case, m in timings(found):
        s = summary(m)
        rows.append({"benchmark": bench, "case": case, "median_s": s["median_s"], "iqr_s": s["iqr_s"],
                     "IQR/median": iqr_ratio(m.times), "blocks": s["n"]})
    df = pd.DataFrame(rows)
    df[f"under {threshold:.0%}"] = df["IQR/median"] < threshold
    return df


def widest(table: pd.DataFrame) -> tuple[float, str]:
    """(IQR/median, name) of the timing with the widest spread in a `spreads` table (single blocks skipped)."""
    row = table.loc[table["IQR/median"].idxmax()]
    return float(row["IQR/median"]), f"{row['benchmark']} {row['case']}"
