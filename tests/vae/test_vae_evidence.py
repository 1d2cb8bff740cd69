"""05's claim glue on findings of known truth (vae_injected.py): every claim of CLAIMS decided at the injected value,
in its unit, with the verdict its rule gives; the savings and speedups scaled by the run's own parameters; the tables
and figures drawn from the same findings. A claim added to CLAIMS without an expectation here fails the first test."""
import math

import matplotlib
import pytest
from vae_injected import GPU_DECISIONS, findings, run

from perflab.kit.card import card_markdown
from perflab.kit.verdicts import Decision
from perflab.vae import figures, study, tables
from perflab.vae.claims import CLAIMS, REMAPS, SAVINGS, SPEEDUPS
from perflab.vae.evidence import evidence, median_ratio, median_saving, reading

matplotlib.use("Agg")

# claim -> (value, low, high, verdict) that the injected findings must give; on a GPU at the preset's setup
ON_GPU = {key: (*GPU_DECISIONS[key], v) for key, v in (
    ("remap", "holds"), ("lazy", "partly holds"), ("deferred", "does not hold"), ("total", "within noise"),
    ("remap_host_ms", "holds"), ("remap_unique_ms", "does not hold"), ("optimized_2x", "within noise"),
    ("captured_10x", "holds"))} | {
    "unique_syncs": (4, 4, 4, "does not hold"), "integrity": (1, 1, 1, "holds"), "sep_grad": (1, 1, 1, "fixed"),
    "optimized_syncs": (0, 0, 0, "holds"), "captured_syncs": (0, 0, 0, "holds"), "captured_math": (1, 1, 1, "holds"),
    "captured_launches": (3, 3, 3, "holds"),   # one graph launch + the two RNG-state fills of a replay
    "cpu_ops_10x": (None, None, None, "not tested here")}
# on a CPU: the timed claims are about a GPU, the op count is the CPU's
ON_CPU = {key: (None, None, None, "not tested here") for key in (*SAVINGS, *REMAPS, *SPEEDUPS, "captured_launches")} | {
    key: ON_GPU[key] for key in ("unique_syncs", "integrity", "sep_grad", "optimized_syncs", "captured_syncs",
                                 "captured_math")} | {"cpu_ops_10x": (248 / 31, 248 / 31, 248 / 31, "partly holds")}
UNITS = {**{k: "s/epoch" for k in SAVINGS}, **{k: "ms" for k in REMAPS}, **{k: "x" for k in SPEEDUPS},
         "cpu_ops_10x": "x", "integrity": "bool", "sep_grad": "bool", "captured_math": "bool",
         "unique_syncs": "syncs per call", "optimized_syncs": "syncs per step", "captured_syncs": "syncs per step",
         "captured_launches": "launches per step"}


def _rows(device_type: str, **params):
    r = run(device_type, **params)
    return {row.key: row for row in CLAIMS.judge(evidence(r, findings(device_type)), cfg=r.cfg, device=r.device)}


@pytest.mark.parametrize("device_type, expected", [("cuda", ON_GPU), ("cpu", ON_CPU)])
def test_every_claim_is_decided_at_the_injected_value(device_type, expected):
    rows = _rows(device_type)
    for c in CLAIMS:   # every claim, so that one added later cannot go untested
        assert c.key in expected, f"claim {c.key!r} has no expected value in this test: add it"
        value, low, high, verdict = expected[c.key]
        r = rows[c.key]
        assert r.verdict == verdict, (c.key, r.verdict, r.measured)
        assert r.unit == UNITS.get(c.key, "") and r.measured_by == c.measured_by, c.key
        if value is None:
            assert r.value is None, (c.key, r.value)
        else:
            assert (r.value, r.low, r.high) == pytest.approx((value, low, high)), (c.key, r.value, r.low, r.high)


def test_every_claim_names_the_function_that_measures_it():
    for c in CLAIMS:
        assert c.measured_by.startswith("study."), c.key
        fn = CLAIMS.measurer(c.key)
        assert callable(fn) and fn is getattr(study, c.measured_by.split(".")[1]), c.key


def test_off_their_setup_the_timed_claims_say_what_this_run_measured_in_their_unit():
    rows = _rows("cpu")
    # the timing table's medians, scaled to a 5000-batch epoch: remap torch.unique 9 ms against the baseline's 10 ms
    assert rows["remap"].measured.startswith("indicative, not judged: +5.00 s per 5000-batch epoch on cpu")
    assert "+5.00 s" in rows["deferred"].measured   # seed 2 (8 ms) before seed 3 (7 ms)
    assert "+20.00 s" in rows["total"].measured      # the seed's three together: 6 ms
    assert rows["optimized_2x"].measured.startswith("indicative, not judged: 2.00x (baseline / optimized")
    assert rows["captured_10x"].measured.startswith("indicative, not judged: 20.0x (baseline / captured")
    assert "spreads (p20-p80 of the blocks) are apart" in rows["captured_10x"].measured
    assert "0.0140 ms" in rows["remap_host_ms"].measured
    assert rows["cpu_ops_10x"].measured == "248 -> 31 aten ops per step: 8.0x fewer on cpu"
    assert all(r.why == "measured on cpu" for r in rows.values() if r.verdict == "not tested here")


@pytest.mark.parametrize("epoch_batches", [5000, 1000])
def test_the_indicative_saving_is_scaled_to_the_runs_epoch(epoch_batches):
    r = run("cpu", epoch_batches=epoch_batches)
    saved, apart = median_saving(r, findings(), "baseline", "optimized")
    assert saved == pytest.approx(5e-3 * epoch_batches) and apart   # 10 ms - 5 ms a step
    assert median_ratio(findings(), "optimized") == (pytest.approx(2.0), True)
    equal = findings(times={**findings().times, "optimized": findings().times["baseline"]})
    assert median_ratio(equal, "optimized") == (1.0, False)   # one spread: not told apart


@pytest.mark.parametrize("epoch_batches, log_every", [(5000, 10), (5000, 50)])
def test_the_savings_are_decided_per_epoch_of_the_runs_steps(monkeypatch, epoch_batches, log_every):
    """decide_savings times before against after as SAVINGS names them, each call (log_every steps) scaled to an epoch
    of epoch_batches steps; decide_speedups times the baseline against each version (a ratio: no scale), the captured
    step as compiled above."""
    ran, seen = [], []

    class Trainer:
        def __init__(self, name):
            self.name = name

        def epoch(self, batches, **kw):
            ran.append((self.name, len(batches)))

    def fake(kind):
        def decide(a, b, **kw):
            a(), b()
            seen.append((ran[-2], ran[-1], kw))
            return Decision("", 1.0, 0.5, 1.5, rounds=3, seconds=0.1, confidence=0.99, quantity=kind,
                            **{k: kw[k] for k in ("at_least", "at_most", "partly") if k in kw})
        return decide
    monkeypatch.setattr(study, "decide_saving", fake("saving"))
    monkeypatch.setattr(study, "decide_speedup", fake("speedup"))
    monkeypatch.setattr(study, "trainer", lambda v, **kw: Trainer(v.name))
    f = findings("cuda")
    f.inputs.timed_batches = [None] * log_every
    f.captured = type("C", (), {"trainer": Trainer("the captured step compiled above")})()
    r = run("cuda", epoch_batches=epoch_batches, log_every=log_every)
    savings = study.decide_savings(r, f)
    assert set(savings) == set(SAVINGS) and all(isinstance(d, Decision) for d in savings.values())
    assert [(b, a) for (b, _), (a, _), _ in seen] == list(SAVINGS.values())
    assert all(n == log_every for (_, n), _, _ in seen)                      # one call: log_every steps
    assert [kw["per"] for *_, kw in seen] == [epoch_batches / log_every] * len(SAVINGS)
    assert [kw["at_least"] for *_, kw in seen] == [CLAIMS[k].at_least for k in SAVINGS]
    seen.clear()
    speed = study.decide_speedups(r, f)
    assert set(speed) == set(SPEEDUPS) and all("per" not in kw and "scale" not in kw for *_, kw in seen)
    assert [(b, a) for (b, _), (a, _), _ in seen] == [("baseline", "optimized"),
                                                      ("baseline", "the captured step compiled above")]
    assert study.decide_speedups(run("cpu"), f) == {k: None for k in SPEEDUPS}   # not this run's setup: untimed
    assert study.decide_savings(run("cuda", epoch_batches=1234), f) == {k: None for k in SAVINGS}


def test_the_card_the_tables_and_the_sentences_show_the_judged_numbers():
    r = run("cuda")
    f = findings("cuda")
    rows = CLAIMS.judge(evidence(r, f), cfg=r.cfg, device=r.device)
    card = card_markdown(rows)
    assert "20.0x [18.0, 22.0]" in card and "80.0 s/epoch [70.0, 90.0]" in card
    times = tables.times_table(r, f)
    assert times.loc["captured", "baseline / this"] == "20.0x [18.0, 22.0]"      # the decision, not the medians
    assert times.loc["optimized", "how"].startswith("decided in paired rounds")
    seed = tables.seed_table(r, f)
    assert seed["measured here"].iloc[0] == "80.0 s [70.0, 90.0] per 5000-batch epoch"
    assert list(seed["verdict"].iloc[:4]) == ["holds", "partly holds", "does not hold", "within noise"]
    lines = reading(r, f, rows)
    assert any("Captured against the baseline: 20.0x [18.0, 22.0] in paired rounds" in x and "holds" in x
               for x in lines)
    cpu = run("cpu")
    fc = findings("cpu")
    rows = CLAIMS.judge(evidence(cpu, fc), cfg=cpu.cfg, device=cpu.device)
    times = tables.times_table(cpu, fc)
    assert times.loc["optimized", "baseline / this"] == "2.00x" and "indicative" in times.loc["optimized", "how"]
    assert tables.seed_table(cpu, fc)["verdict"].iloc[0] == "not tested here (measured on cpu)"
    assert "Not tested here (9)" in card_markdown(rows)
    lines = reading(cpu, fc, rows)
    assert "Per step at batch 64 on cpu (median of the timing table's blocks): baseline 10.00 ms, 248 aten ops" \
        in lines[0]
    assert "Optimized against the baseline: 2.00x, indicative" in lines[1] and "not judged on this run" in lines[1]
    assert "short of 10x by 1.2x" in lines[3] and "are 30 ops per step" in lines[3]   # 248 / 31 = 8.0x


def test_the_figures_draw_the_findings():
    for device_type in ("cpu", "cuda"):
        r, f = run(device_type), findings(device_type)
        for fig in (figures.times(r, f), figures.sweep(r, f)):
            assert fig.get_axes()
            matplotlib.pyplot.close(fig)
    r, f = run("cpu"), findings("cpu")
    fig = figures.times(r, f)       # the card's figure: each bar's speed as the timing table gives it, said how
    labels = [t.get_text() for t in fig.get_axes()[0].texts]
    assert any(x.endswith("2.00x") for x in labels) and "indicative" in fig.get_axes()[0].get_title(loc="left")
    matplotlib.pyplot.close(fig)
    fig, name, caption = figures.card(r, f)   # a CPU's headline is the op count: the card draws that, not time
    ax = fig.get_axes()[0]
    labels = [t.get_text() for t in ax.texts]
    assert name == "ops_per_step" and "10x target" in caption
    assert "248" in labels and f"31  ·  {248 / 31:.2f}x fewer" in labels       # each total, and its ratio to the baseline's
    assert [round(x, 1) for x in (line.get_xdata()[0] for line in ax.lines)] == [24.8, 124.0]   # 10x and 2x (partly)
    assert "8.00x fewer\nthan the baseline (target 10x)" in ax.get_title(loc="left")
    matplotlib.pyplot.close(fig)
    fig, name, _ = figures.card(run("cuda"), findings("cuda"))
    assert name == "time_per_step"   # elsewhere the headline is the captured step's speed
    matplotlib.pyplot.close(fig)


def test_a_crossover_outside_the_sweep_is_not_drawn():
    f = findings()
    f.sweep.fits["optimized"]["crossover_batch"] = math.inf
    fig = figures.sweep(run(), f)
    assert "no batch in range" in fig._suptitle.get_text() and "inf" not in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)


def test_a_setup_key_off_the_run_is_said_in_the_sentence():
    rows = _rows("cuda", batch=16)
    assert rows["captured_10x"].verdict == "not tested here" and rows["captured_10x"].why == "measured at batch=16"
    assert rows["remap"].verdict == "holds"   # the savings' setup has no batch
