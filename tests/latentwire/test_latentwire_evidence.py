"""06's claim glue on injected findings of known truth: every claim of CLAIMS decided at the value injected, in its
unit, with the verdict the rule gives, on a CPU run and on a GPU run (no timing: times, counts and decisions are
given); the gain claims decided once per variant (`decide_gains`: one comparison, one number, judged for each claim on
it); and the page showing the decided number where a claim was decided on it (table, figure, sentences)."""
import dataclasses
import types

import numpy as np
import pytest
import torch

from perflab.kit.bench import from_times
from perflab.kit.card import measured_cell
from perflab.kit.formatting import value_text
from perflab.kit.verdicts import Decision, Measured, judge
from perflab.latentwire import display, findings, make_examples, study
from perflab.latentwire.ablation import TESTED_BY, variants
from perflab.latentwire.claims import CLAIMS
from perflab.latentwire.curves import Curve
from perflab.latentwire.params import LatentWireParams
from perflab.latentwire.timing import StepTiming, VariantResult

TINY = dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4)
P = LatentWireParams(**TINY, n_examples=32, ablation_batch=4, accum_steps=2, num_workers=1, rounds=2)
EXAMPLES = make_examples(32, seed=0)

# the truth injected: each variant's gain over the baseline as its paired rounds decided it (value, low, high)
GAIN = {"pin_memory": (1.30, 1.27, 1.33), "batch_size": (1.87, 1.80, 1.95), "single_pass": (1.92, 1.88, 1.97),
        "fused_adamw": (1.02, 0.95, 1.09), "quick_wins": (1.94, 1.80, 2.09), "all_together": (3.37, 2.95, 3.82)}
PARTS = {"flash_attention": (2.10, 1.90, 2.30), "dataloader": (0.0034, 0.0020, 0.0049),
         "pretokenize": (0.0018, 0.0005, 0.0032), "amp": (2.50, 2.30, 2.70)}
STEP_S = 0.05                      # every variant's median step, except those below
STEP = {"batch_size": 0.1, "quick_wins": 0.1, "all_together": 0.04, "compiled": 0.032}   # indicative: 2.00x, ...
ACTIVATION_MIB = {"grad_accum": 4.0, "checkpointing": 2.0}   # the baseline's, and the others': 8 MiB
WIDE = [0.7, 1.0, 1.0, 1.3]        # checkpointing's blocks, x its step: IQR/median 0.15 (numpy's percentiles)
FLOPS, BF16 = 2e8, 2e11            # FLOPs per sample (single pass); the bf16 matmul floor (FLOP/s)
COMPILED = [0.039, 0.041, 0.04, 0.0395, 0.0405, 0.04, 0.04, 0.04]  # per step, batch 16: MFU 2e8*16/2e11/0.04 = 0.4


def _decision(value, low, high, key, quantity="speedup"):
    rule = CLAIMS[key].rule
    return Decision(judge(Measured(value, low, high), **rule), value, low, high, rounds=20, seconds=5.0,
                    confidence=0.99, quantity=quantity, calls=(1, 2), typical=value, **rule)


def _result(v, times, *, activation_mib=8.0, samples=None):
    sps = samples or P.accum_steps * v.knobs.get("batch_size", 1)
    m = from_times(times, label="latentwire step", sub_label=v.name, description=v.version)
    return VariantResult(v, sps, 600 * 2**20, "rss_hwm", None if v.knobs.get("compile", "off") != "off" else
                         int(activation_mib * 2**20), 6.0, 0.1, {"total": 3000, "what": "aten ops"}, 1,
                         timing=StepTiming(1, step_times=list(times)), measurement=m)


class FakeTrainer:
    def __init__(self, name):
        self.name, self.paused = name, 0

    def step(self):
        pass

    def pause(self):
        self.paused += 1


def fake_decide(calls):
    """decide_speedup as Claim.decide calls it, returning each variant's injected truth, recording each call."""
    def decide(base_step, opt_step, *, scale, max_run_time, device, **rule):
        v = opt_step.__self__.name
        calls.append((base_step.__self__.name, v, scale, rule))
        key = next(k for k in CLAIMS.keys if TESTED_BY.get(k) == v and CLAIMS[k].rule == rule)
        return _decision(*GAIN[v], key)
    return decide


def injected(dt: str, monkeypatch) -> tuple:
    """(run, found, calls): the findings a run of every measuring function would give, at the truth above."""
    p = dataclasses.replace(P, amp=dt == "cuda", compile="default")
    run = types.SimpleNamespace(cfg=p, device=torch.device(dt))
    plan = variants(p)
    results = {}
    for v in plan:
        t = STEP.get(v.name, STEP_S)
        times = [t * w for w in WIDE] if v.name == "checkpointing" else [t] * 4
        results[v.name] = _result(v, times, activation_mib=ACTIVATION_MIB.get(v.name, 8.0))
    calls = []
    monkeypatch.setattr(study, "decide_speedup", fake_decide(calls))
    gains = study.decide_gains(run, results, {v.name: FakeTrainer(v.name) for v in plan})
    ms = {k: from_times([t] * 4, label=label, sub_label=sub, description=desc) for k, t, label, sub, desc in (
        ("manual", 2e-3, "attention layer fwd+bwd", "[4, 20, 32]", "manual"),
        ("sdpa", 1e-3, "attention layer fwd+bwd", "[4, 20, 32]", "sdpa"),
        ("fly", 60e-6, "data path, one sample", "", "tokenize+collate"),
        ("cache", 35e-6, "data path, one sample", "", "cache"),
        ("default", 2e-3, "AdamW.step", "53 tensors", "default"), ("fused", 5e-4, "AdamW.step", "53 tensors", "fused"))}
    gpu = dt == "cuda"
    peak = from_times([1e-3] * 4, label="matmul peak")
    sweep = {amp: [_result(study.IMPLS.variant("optimized", f"batch={b}{', bf16' if amp else ''}", batch_size=b,
                                               amp=amp), [0.02 * b] * 4, samples=b) for b in (1, 4, 16)]
             for amp in (False, True)}
    compiled = _result(study.IMPLS.variant("optimized", "compiled, batch=16", batch_size=16, amp=p.amp,
                                           compile="default"), COMPILED, samples=16)
    found = study.Findings(
        EXAMPLES, EXAMPLES[:8], flops={False: {"total": 2 * FLOPS}, True: {"total": FLOPS}, "padded": {"total": FLOPS}},
        peaks={"fp32": (BF16 / 2, peak), "bf16": (BF16, peak)}, ablation=results, gains=gains,
        attention={20: (Measured(2.0, 1.9, 2.1), [ms["manual"], ms["sdpa"]]),
                   512: (Measured(1.9, 1.7, 2.1), [ms["manual"], ms["sdpa"]])},
        data={"on_the_fly": ms["fly"], "cache": ms["cache"], "bytes_per_sample": 2248},
        optimizer=(4.0, [ms["default"], ms["fused"]]),
        parts={"flash_attention": _decision(*PARTS["flash_attention"], "flash_attention") if gpu else None,
               "dataloader": _decision(*PARTS["dataloader"], "dataloader", "share of the baseline's time per sample"),
               "pretokenize": _decision(*PARTS["pretokenize"], "pretokenize", "saving")},
        sweep=sweep, compiled=compiled, amp=_decision(*PARTS["amp"], "amp") if gpu else None,
        curves=[Curve(n, [2, 4], [3.0, 2.0], 1.0, {"loss": 10.0, "first_token_acc": 0.0}) for n in ("a", "b", "c")],
        untrained={"loss": 13.0, "first_token_acc": 0.0})
    return run, found, calls


# what each claim is judged on, from the truth above: {claim: (value, low, high) or None, verdict}, per device
MFU = FLOPS * 16 / BF16 / np.mean(COMPILED)
SPREAD = float(np.subtract(*np.percentile(WIDE, [75, 25])) / np.median(WIDE))
GPU_ONLY = {"non_blocking", "batch_size", "amp", "flash_attention", "target_5x", "target_mfu", "target_spread"}
EXPECTED = {
    "non_blocking": (GAIN["pin_memory"], "holds"), "dataloader": (PARTS["dataloader"], "does not hold"),
    "pretokenize": (PARTS["pretokenize"], "does not hold"), "grad_accum": ((2.0,) * 3, "holds"),
    "batch_size": (GAIN["batch_size"], "partly holds"), "loss_loop": (GAIN["single_pass"], "holds"),
    "amp": (PARTS["amp"], "holds"), "kv_cache": (GAIN["single_pass"], "holds"),
    "fused_adamw": (GAIN["fused_adamw"], "within noise"), "flash_attention": (PARTS["flash_attention"], "within noise"),
    "checkpointing": ((4.0,) * 3, "holds"), "quick_wins": (GAIN["quick_wins"], "within noise"),
    "all": (GAIN["all_together"], "partly holds"), "target_5x": (GAIN["all_together"], "partly holds"),
    "target_mfu": ((MFU, None, None), "holds"), "target_spread": ((SPREAD,) * 3, "does not hold"),
    "multi_gpu": (None, "not tested here"), "memory_strategy": (None, "not tested here")}


@pytest.mark.parametrize("dt", ["cpu", "cuda"])
def test_every_claim_is_decided_at_the_injected_value_in_its_unit(dt, monkeypatch):
    run, found, _ = injected(dt, monkeypatch)
    rows = {r.key: r for r in CLAIMS.judge(study.evidence(run, found), cfg=run.cfg, device=run.device)}
    for c in CLAIMS:                                       # a claim added later needs its truth here
        assert c.key in EXPECTED, f"claim {c.key!r} has no injected truth in this test"
        r, (want, verdict) = rows[c.key], EXPECTED[c.key]
        assert (r.unit, r.measured_by) == (c.unit, c.measured_by) and c.unit in ("x", "%", "x less activation memory")
        if want is None:
            assert (r.verdict, r.value) == ("not tested here", None), c.key
            continue
        if dt == "cpu" and c.key in GPU_ONLY:                 # off its setup: not judged, what ran is still shown
            assert r.verdict == "not tested here" and r.why == "measured on cpu", c.key
            if r.value is None:
                continue
        else:
            assert r.verdict == verdict, (c.key, r.verdict, r.value, r.low, r.high)
        assert r.value == pytest.approx(want[0]), c.key
        if want[1] is not None:
            assert (r.low, r.high) == pytest.approx(want[1:]), c.key
        else:
            assert r.low < r.value < r.high, c.key            # an interval of its own (MFU over blocks)
        assert measured_cell(r) == value_text(r.value, r.low, r.high, c.unit)
    if dt == "cuda":   # a share reads in percent on the card: the MFU 40.0% [..], the widest spread 15.0%
        assert measured_cell(rows["target_mfu"]).startswith("40.0%") and measured_cell(rows["target_spread"]) == "15.0%"
    else:
        assert measured_cell(rows["dataloader"]) == "0.340% [0.200, 0.490]"


@pytest.mark.parametrize("dt", ["cpu", "cuda"])
def test_each_variant_is_decided_once_against_the_baseline_and_every_claim_on_it_judged_on_that(dt, monkeypatch):
    run, found, calls = injected(dt, monkeypatch)
    decided = [v for _, v, _, _ in calls]
    on = {TESTED_BY[k] for k in findings.GAINS if not (dt == "cpu" and k in GPU_ONLY)}
    assert sorted(decided) == sorted(on)                             # one decision per variant, none twice
    assert all(b == "baseline" for b, *_ in calls)                   # the baseline first: baseline time / variant's
    for _, v, scale, rule in calls:                                  # scaled by samples per step, variant / baseline
        assert scale == found.ablation[v].samples_per_step / found.base.samples_per_step
        first = next(k for k in CLAIMS.keys if TESTED_BY.get(k) == v and not (dt == "cpu" and k in GPU_ONLY))
        assert rule == CLAIMS[first].rule                            # against the first claim on it that runs here
    g = found.gains
    assert g["loss_loop"].measured == g["kv_cache"].measured         # one comparison, one interval
    assert (g["loss_loop"].at_least, g["kv_cache"].at_least) == (CLAIMS["loss_loop"].at_least, CLAIMS["kv_cache"].at_least)
    if dt == "cuda":
        assert g["all"].measured == g["target_5x"].measured and g["target_5x"].at_least == 5.0
    else:
        assert g["target_5x"] is None and g["non_blocking"] is None and g["batch_size"] is None


def test_off_its_setup_a_claim_quotes_the_decision_made_on_its_variant_or_an_indicative_ratio(monkeypatch):
    run, found, _ = injected("cpu", monkeypatch)
    ev = study.evidence(run, found)
    assert "3.37x [2.95, 3.82]" in ev["target_5x"].sentence and "decided for all" in ev["target_5x"].sentence
    assert "2.00x samples/s on cpu (indicative: ratio of medians of 2 rounds)" in ev["batch_size"].sentence
    assert "removes 48% [47%, 49%] of the baseline's step" in ev["loss_loop"].sentence
    assert ev["grad_accum"].sentence.startswith("2.00x less activation memory on cpu: 8.0 -> 4.0 MiB")


def test_the_table_and_the_figure_show_the_decided_number_or_say_it_is_indicative(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    run, found, _ = injected("cpu", monkeypatch)
    table = display.ablation_table(run, found)
    spread = [r.iqr_ratio for r in found.ablation.values()]
    assert f"spread {min(spread):.0%}-{max(spread):.0%} (IQR/median)" in display.ablation_note(run, found)
    assert table.loc["single_pass", "vs baseline"] == "1.92x [1.88, 1.97]"
    # the samples/s column is the ablation's own rounds: its own ratio is said beside the decided one, on its face
    assert table.loc["single_pass", "how"] == ("decided: loss_loop, kv_cache (the samples/s column's own ratio: "
                                               f"{display.indicative(found, 'single_pass'):.2f}x, indicative)")
    assert tuple(table.loc["batch_size", ["vs baseline", "how"]]) == ("2.00x", "indicative")
    assert table.loc["all_together", "report claims"] == "4-6x (all)"
    costs = display.costs_table(run, found)   # what each variant costs: the appendix's, not the verdicts' table
    assert list(costs.index) == list(table.index) and "median step" not in table.columns
    assert any(c.startswith("process peak RSS MiB") for c in costs.columns)   # a CPU's peak is the process's, said
    assert display.peak_label("cuda_allocator") == "peak MiB (CUDA allocator, first step)"
    fig = display.ablation_figure(run, found)
    texts = [t.get_text() for t in fig.axes[1].texts]
    assert fig.get_size_inches()[0] * 110 <= 760   # the card's figure: narrow enough to sit beside its table
    assert "1.92x [1.88, 1.97] holds: loss_loop, kv_cache" in texts
    assert "3.37x [2.95, 3.82] partly holds: all" in texts and "2.00x indicative" in texts
    # a variant whose claims judge a share or a memory: its speed is not the card's number, and it says so
    assert any("pretokenize: judged on its share of the step (card)" in t for t in texts)
    assert any("grad_accum: judged on activation memory (card)" in t for t in texts)
    assert "judged on its share of the step (card)" in table.loc["pretokenize", "how"]
    # a claim not tested on this run is not sent to the card for a number it does not have (amp: a GPU claim)
    assert table.loc["amp_bf16", "how"] == "indicative; amp: not tested here (set up for cuda)"
    assert any("amp: not tested here (set up for cuda)" in t for t in texts)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert {"1x", "2x", "3x", "4x"} <= set(ticks)                   # the value and the threshold read off the axis
    import matplotlib.pyplot as plt

    plt.close(fig)
    # a decision whose interval is still open (too few rounds for a bound) is drawn to the axis's edge
    found.gains["fused_adamw"] = dataclasses.replace(found.gains["fused_adamw"], low=0.0, high=float("inf"))
    fig = display.ablation_figure(run, found)
    assert "1.02x [0, inf] within noise: fused_adamw" in [t.get_text() for t in fig.axes[1].texts]
    plt.close(fig)


@pytest.mark.parametrize("dt", ["cpu", "cuda"])
def test_the_parts_are_decided_in_the_claims_unit_on_the_right_sides(dt, monkeypatch):
    # each decide_* of the kit called as the claim says: its rule, the baseline side first, a share over the
    # baseline's time per sample (per = 1 / its median step over its samples per step), bf16 over fp32
    from perflab.latentwire import parts, sweep

    run, found, _ = injected(dt, monkeypatch)
    seen = {}

    def recorder(name):
        def decide(*fns, **kw):
            seen.setdefault(name, []).append((fns, kw))
            return "decision"
        return decide
    for name in ("decide_time", "decide_saving", "decide_speedup"):
        monkeypatch.setattr(study, name, recorder(name))
    monkeypatch.setattr(parts, "data_fns", lambda *a: {"on_the_fly": "fly", "cache": "cache"})
    monkeypatch.setattr(parts, "attention_fns", lambda *a, **k: {"manual": "manual", "sdpa": "sdpa"})
    pair = {False: FakeTrainer("fp32"), True: FakeTrainer("bf16")}
    pair[False].close = pair[True].close = lambda: None
    monkeypatch.setattr(sweep, "amp_pair", lambda batch, *a, **k: seen.setdefault("amp_batch", batch) and pair)
    got = study.decide_parts(run, found)
    per = 1 / (STEP_S / found.base.samples_per_step)               # samples per second of the baseline's step
    (fns, kw), = seen["decide_time"]
    assert fns == ("fly",) and kw["scale"] == pytest.approx(per) and kw["at_least"] == CLAIMS["dataloader"].at_least
    (fns, kw), = seen["decide_saving"]
    assert fns == ("fly", "cache") and kw["per"] == pytest.approx(per) and kw["partly"] == CLAIMS["pretokenize"].partly
    assert got["dataloader"] == got["pretokenize"] == "decision"
    amp = study.decide_amp(run, found)
    if dt == "cpu":                                                 # GPU mechanisms: no time spent on a CPU
        assert got["flash_attention"] is None and amp is None and "decide_speedup" not in seen
        return
    (attention, kw_a), (fns, kw) = seen["decide_speedup"]
    assert attention == ("manual", "sdpa") and kw_a["at_least"] == CLAIMS["flash_attention"].at_least
    assert seen["amp_batch"] == 16 and amp == got["flash_attention"] == "decision"  # the largest batch in both dtypes
    assert fns == (pair[False].step, pair[True].step) and kw["at_least"] == CLAIMS["amp"].at_least


def test_the_sweeps_memory_panel_draws_a_steps_own_memory_not_the_processs():
    from types import SimpleNamespace

    cpu = SimpleNamespace(memory_method="rss_hwm", peak_bytes=700 * 2**20, activation_bytes=16 * 2**20)
    assert display.memory_of(cpu) == 16.0 and "activations" in display.memory_label("rss_hwm")
    assert display.memory_of(SimpleNamespace(memory_method="rss_hwm", peak_bytes=1, activation_bytes=None)) is None
    gpu = SimpleNamespace(memory_method="cuda_allocator", peak_bytes=3 * 2**30, activation_bytes=16 * 2**20)
    assert display.memory_of(gpu) == 3072.0 and "CUDA allocator" in display.memory_label("cuda_allocator")
