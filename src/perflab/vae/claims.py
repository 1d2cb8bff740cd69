"""05_vae_sync: the seed's claims and the issues' targets as data, each beside the rule that gives its verdict.

Every claim is judged by `perflab.verdicts.judge` on a `Measured` (a value and the interval it is known to):
- timings give an interval (p20/p80 of each side, combined conservatively), counts and checks are exact;
- the whole interval on the claim's side: "holds" ("fixed" for a defect this study repairs);
- the interval straddles the claimed number: "within noise";
- the whole interval short of it: "partly holds" when the whole interval still shows a real effect (`partly`:
  a speedup above MIN_GAIN, a saving above MIN_SHARE of the baseline's epoch, a tenfold target's real
  reduction), "within noise" when that smaller effect itself cannot be told from none, else "does not hold".
  (Stricter than judge's own `partly`, which reads the median: a verdict flips only when the whole interval
  crosses a threshold, not when a median wobbles across it.)
- a claim about a mechanism this device does not have (CUDA graphs and launches on a CPU, the CPU's op
  count on a GPU): "not tested here", with what was measured still in the sentence.
Sentences with numbers are built here from the run (`assess`), never typed into the notebook.
"""
from __future__ import annotations

import dataclasses
import math

from ..bench import speedup, speedup_range, summary
from ..verdicts import Measured, judge, log_claims
from .checks import CHECKED_STEPS
from .study import DRAWS, GRAPH_CALLS, MATMULS

MIN_GAIN = 1.05     # a speedup below this is within this study's noise on a shared CPU
MIN_SHARE = 0.02    # a saving below 2% of the baseline's epoch is not a real effect here
# "a few launches per step": the captured step's host calls that start device work other than its input copies
# (reported apart): one cudaGraphLaunch, and the two RNG-state fills CUDA graphs that draw random numbers launch
# before each replay (PyTorch PR #143777: replay_prologue's seed/offset fill_)
CAPTURED_LAUNCHES = 3


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    text: str                      # what the seed (or the issue) says
    claimed: str                   # its number, as written
    source: str                    # "seed 002", "issue 13", ...
    at_least: float | None = None  # the claim: measured value >= at_least (or <= at_most)
    at_most: float | None = None
    partly: float | None = None    # a real but smaller effect (module doc); savings: set from the run
    needs: str = ""                # "cuda" / "cpu": the mechanism only exists there
    fix: bool = False              # a defect this study repairs: "fixed" when it holds


# The seed's savings per 5000-batch epoch: (key, text, claimed, low s, high s, before, after) where before and
# after name the implementations (single_changes) between which the change is measured.
SAVINGS = (
    ("remap", "Label remapping GPU-side (torch.unique) saves 60-115 s/epoch", "60-115 s/epoch", 60.0, 115.0,
     "baseline", "remap torch.unique (seed 1)"),
    ("lazy", "Lazy metric extraction (tensors in the dict) saves 40 s/epoch", "40 s/epoch", 40.0, 40.0,
     "baseline", "metrics on device, read every step (seed 2)"),
    ("deferred", "Deferred CPU calls (read at display time) save 5-8 s/epoch", "5-8 s/epoch", 5.0, 8.0,
     "metrics on device, read every step (seed 2)", "metrics on device, read every N (seed 3)"),
    ("total", "The three together save 2-5 min/epoch", "2-5 min/epoch (105-163 s in its table)", 105.0, 300.0,
     "baseline", "seed's three together"),
)

CLAIMS = tuple(Claim(k, text, claimed, "seed 002", at_least=lo) for k, text, claimed, lo, _, _, _ in SAVINGS) + (
    Claim("remap_host_ms", "The CPU round-trip remap costs 13-25 ms per batch", "13-25 ms", "seed 002", at_least=13.0),
    Claim("remap_unique_ms", "The GPU-side remap costs ~1-2 ms per batch", "1-2 ms", "seed 002", at_least=1.0),
    Claim("unique_syncs", "The GPU-side remap (torch.unique) takes the remap off the host", "GPU-side only",
          "seed 002", at_most=0),
    Claim("integrity", "Algorithm integrity: NO changes to forward pass, loss, gradient flow", "unchanged",
          "seed 002", at_least=1),
    Claim("sep_grad", "The separability term shapes the latent space (computed under no_grad in the origin)",
          "J steers the encoder", "research note", at_least=1, fix=True),
    Claim("optimized_syncs", "Zero host syncs inside the optimized step", "0", "issue 6", at_most=0),
    Claim("optimized_2x", "The optimized step >= 2x faster than the baseline at batch 64 (GPU preset)", "2x",
          "issue 6", at_least=2.0, partly=MIN_GAIN, needs="cuda"),
    Claim("captured_math", "The captured step keeps the optimized step's math (loss curves equal to rounding)",
          "same curves", "issue 13", at_least=1),
    Claim("captured_syncs", "Zero host syncs inside the captured step", "0", "issue 13", at_most=0),
    Claim("captured_10x", "The captured step >= 10x faster than the baseline at batch 64 (GPU preset)", "10x",
          "issue 13", at_least=10.0, partly=MIN_GAIN, needs="cuda"),
    Claim("captured_launches", "The captured step: at most a few launches per step (one graph replay)",
          f"<= {CAPTURED_LAUNCHES} launch calls besides the input copies", "issue 13", at_most=CAPTURED_LAUNCHES,
          needs="cuda"),
    Claim("cpu_ops_10x", "On CPU: >= 10x fewer aten ops dispatched per step than the baseline", "10x",
          "issue 13", at_least=10.0, partly=2.0, needs="cpu"),
)


def verdict(c: Claim, m: Measured | None, device_type: str) -> str:
    """The verdict of `c` on `m` (module doc)."""
    v = judge(m, at_least=c.at_least, at_most=c.at_most, needs=c.needs, device_type=device_type)
    if v == "does not hold" and c.partly is not None and c.at_least is not None:
        smaller = judge(m, at_least=c.partly)  # short of the claim: is a smaller effect real?
        v = {"holds": "partly holds", "within noise": "within noise", "does not hold": "does not hold"}[smaller]
    return "fixed" if v == "holds" and c.fix else v


@dataclasses.dataclass
class Evidence:
    """What the notebook measured, by implementation name where it has one."""
    times: dict                # time per step at `batch` (Measurements): baseline, each change, optimized, captured
    syncs_per_step: dict       # host syncs per step, the loop's metric reads included
    step_syncs: dict           # host syncs inside the step itself (reads excluded): "optimized", "captured"
    launches: dict             # launches per step (kernels on CUDA, the aten-op proxy on CPU)
    host_launches: dict        # per implementation, host calls per step into the GPU runtime (study.host_calls)
    remap_times: dict          # remap_host / remap_unique / remap_presence per call (Measurements)
    unique_remap_syncs: dict   # syncs of one torch.unique remap, by op
    curves: dict               # "baseline = optimized", "optimized = captured": equal to rounding (bool)
    curve_steps: int
    captured_gap: float        # largest relative gap between the optimized and captured curves, all steps
    sep_grad_steers: bool
    epoch_batches: int
    batch: int
    device_type: str
    device_kind: str


def saving(base, other, steps: int) -> dict:
    """Seconds saved over `steps` steps by `other` vs `base`: median and a conservative range
    (base p20 - other p80, base p80 - other p20)."""
    b, o = summary(base), summary(other)
    return {"median_s": (b["median_s"] - o["median_s"]) * steps,
            "lo_s": (b["p20_s"] - o["p80_s"]) * steps, "hi_s": (b["p80_s"] - o["p20_s"]) * steps}


def _ratio(times: dict, name: str) -> Measured:
    lo, hi = speedup_range(times["baseline"], times[name])
    v = speedup(times["baseline"], times[name])
    return Measured(v, min(lo, v), max(hi, v))


def _fewer(launches: dict) -> float:
    """Baseline's launches over the captured step's (inf when the profiler saw none for the captured step)."""
    return launches["baseline"] / launches["captured"] if launches["captured"] else math.inf


def _ms(m) -> Measured:
    s = summary(m)
    return Measured(s["median_s"] * 1e3, s["p20_s"] * 1e3, s["p80_s"] * 1e3)


def measurements(ev: Evidence) -> dict[str, tuple[Measured | None, str]]:
    """Each claim's measurement and the sentence that says what it is (on this device)."""
    out, dk, n = {}, ev.device_kind, ev.epoch_batches
    base_epoch = summary(ev.times["baseline"])["median_s"] * n
    for key, _, _, _, _, before, after in SAVINGS:
        s = saving(ev.times[before], ev.times[after], n)
        m = Measured(s["median_s"], min(s["lo_s"], s["median_s"]), max(s["hi_s"], s["median_s"]))
        out[key] = (m, f"{s['median_s']:+.1f} s [{s['lo_s']:+.1f}, {s['hi_s']:+.1f}] per {n}-batch epoch on {dk} "
                       f"({100 * s['median_s'] / base_epoch:+.1f}% of the baseline's {base_epoch:.0f} s)")
    for key, impl in (("remap_host_ms", "remap_host"), ("remap_unique_ms", "remap_unique")):
        m = _ms(ev.remap_times[impl])
        out[key] = (m, f"{m.value:.3f} ms ({m.low:.3f}-{m.high:.3f}, p20-p80) per call on {dk}")
    u = sum(ev.unique_remap_syncs.values())
    out["unique_syncs"] = (Measured.exact(u), f"{u} syncs per call ({dict(ev.unique_remap_syncs)}) vs 2 for the CPU "
                                              f"round trip; the presence table: 0")
    same = ev.curves["baseline = optimized"]
    out["integrity"] = (Measured.exact(int(same)), f"baseline vs optimized equal to rounding over {ev.curve_steps} "
                                                   f"steps: {same}")
    out["sep_grad"] = (Measured.exact(int(ev.sep_grad_steers)),
                       f"with sep_grad=True its gradient reaches the encoder (weights differ: {ev.sep_grad_steers})")
    for impl in ("optimized", "captured"):
        k = ev.step_syncs[impl]
        out[f"{impl}_syncs"] = (Measured.exact(k), f"{k} in the step; {ev.syncs_per_step[impl]:.2f} per step with "
                                                   f"the metric reads (one per log_every steps)")
    for impl, key in (("optimized", "optimized_2x"), ("captured", "captured_10x")):
        m = _ratio(ev.times, impl)
        out[key] = (m, f"{m.value:.2f}x [{m.low:.2f}, {m.high:.2f}] (baseline / {impl}, per step, batch {ev.batch}) "
                       f"on {dk}")
    cap = ev.curves["optimized = captured"]
    out["captured_math"] = (Measured.exact(int(cap)), f"optimized vs captured equal to rounding (checked over the "
                                                      f"first {min(ev.curve_steps, CHECKED_STEPS)} steps): {cap}; "
                                                      f"largest relative gap over {ev.curve_steps} steps "
                                                      f"{ev.captured_gap:.1e}")
    h = ev.host_launches["captured"]
    out["captured_launches"] = (Measured.exact(h["graph"] + h["kernel"]) if ev.device_type == "cuda" else None,
                                f"{h['graph']:.2f} graph launch + {h['kernel']:.2f} kernel launches (the RNG "
                                f"prologue of a replay) per step; {h['copy']:.2f} copies apart (2 inputs, the metric "
                                f"ring's read)" if ev.device_type == "cuda"
                                else f"no CUDA runtime on {dk}; {ev.launches['captured']:.1f} aten ops per step")
    r = _fewer(ev.launches)
    out["cpu_ops_10x"] = (Measured.exact(r), f"{ev.launches['baseline']:.0f} -> {ev.launches['captured']:.0f} "
                                             f"{'kernels' if ev.device_type == 'cuda' else 'aten ops'} per step: "
                                             f"{r:.1f}x fewer on {dk}")
    return out


def assess(ev: Evidence) -> list[dict]:
    """One row per claim: key, claim, source, seed (its number), measured (a sentence), verdict."""
    found = measurements(ev)
    base_epoch = summary(ev.times["baseline"])["median_s"] * ev.epoch_batches
    rows = []
    for c in CLAIMS:
        if c.key in {k for k, *_ in SAVINGS}:  # a real saving: MIN_SHARE of the baseline's epoch
            c = dataclasses.replace(c, partly=MIN_SHARE * base_epoch)
        m, sentence = found[c.key]
        rows.append({"key": c.key, "claim": c.text, "source": c.source, "seed": c.claimed, "measured": sentence,
                     "verdict": verdict(c, m, ev.device_type)})
    return rows


def seed_table(ev: Evidence, rows: list[dict]):
    """The seed's table with measured values: per-step saving, its extrapolation to an epoch, syncs removed
    per step and the verdict (as `assess` gives it), and a last row for all of ours together."""
    import pandas as pd

    verdicts = {r["key"]: r["verdict"] for r in rows}
    out = []
    for key, text, claimed, _, _, before, after in SAVINGS + (("all", "All changes here (optimized, same math)",
                                                                 "-", 0, 0, "baseline", "optimized"),):
        s = saving(ev.times[before], ev.times[after], ev.epoch_batches)
        out.append({"change": text.split(" save")[0], "seed claim": claimed,
                    "saving per step": f"{s['median_s'] / ev.epoch_batches * 1e3:+.3f} ms",
                    f"per {ev.epoch_batches}-batch epoch": f"{s['median_s']:+.1f} s [{s['lo_s']:+.1f}, {s['hi_s']:+.1f}]",
                    "syncs removed per step": round(ev.syncs_per_step[before] - ev.syncs_per_step[after], 2),
                    "verdict": verdicts.get(key, "-")})
    return pd.DataFrame(out)


def report(run, rows: list[dict], device_type: str) -> None:
    """Log every claim and print it; the captured step's target on this device leads the report (on CUDA its
    speed against the baseline, on a CPU its dispatched ops: the figure each device can measure)."""
    lead = "captured_10x" if device_type == "cuda" else "cpu_ops_10x"
    log_claims(run.log, rows, headline=next(r["claim"] for r in rows if r["key"] == lead))


def reading(ev: Evidence, rows: list[dict], kinds: dict[str, float]) -> list[str]:
    """Sentences for the notebook's reading of this run: time and launches per step, and for a missed launch
    target, by how much and what the captured step's remaining launches are (`kinds`: study.launch_kinds)."""
    v = {r["key"]: r["verdict"] for r in rows}
    unit = "kernels" if ev.device_type == "cuda" else "aten ops"
    out = [f"Per step at batch {ev.batch} on {ev.device_kind}: " + "; ".join(
        f"{impl} {summary(ev.times[impl])['median_s'] * 1e3:.2f} ms, {ev.launches[impl]:.0f} {unit}"
        for impl in ("baseline", "optimized", "captured")) + "."]
    r, o = _ratio(ev.times, "captured"), _ratio(ev.times, "optimized")
    out.append(f"The captured step runs at {r.value:.2f}x [{r.low:.2f}, {r.high:.2f}] the baseline's speed "
               f"(optimized: {o.value:.2f}x [{o.low:.2f}, {o.high:.2f}]).")
    ratio = _fewer(ev.launches)
    if ev.device_type != "cuda" and v["cpu_ops_10x"] != "holds":
        top = sorted(kinds.items(), key=lambda kv: -kv[1])
        floor = kinds.get(MATMULS, 0) + kinds.get(DRAWS, 0) + kinds.get(GRAPH_CALLS, 0)
        out.append(f"CPU op target: {ratio:.1f}x fewer ops, short of 10x by {10 / ratio:.1f}x. The captured step's "
                   f"{ev.launches['captured']:.0f} ops per step are: " +
                   ", ".join(f"{k} {n:.0f}" for k, n in top if n >= 0.5) + ". " +
                   (f"The matmuls and the random draws, with the graph calls, are {floor:.0f} ops per step: while "
                    f"they stay aten calls the step cannot dispatch fewer, {ev.launches['baseline'] / floor:.1f}x "
                    f"fewer than the baseline at most." if floor else ""))
    if ev.device_type == "cuda":
        out.append("Host calls into the CUDA runtime per step (all kinds): " + "; ".join(
            f"{impl} {sum(ev.host_launches[impl].values()):.1f}" for impl in ("baseline", "optimized", "captured")) + ".")
    return out
