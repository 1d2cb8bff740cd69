"""03b_links' claims (`links.claims`) on the one claims kit: every claim names its unit and the function that measures
it, the findings -> evidence path on injected findings of known truth decides every claim of CLAIMS at the injected
value with the verdict its rule gives (a claim added later without a truth here fails), and the throughput is decided
once and judged against each speed target of the run's device. No timing is asserted."""
from types import SimpleNamespace

import pytest
import torch

from perflab.kit.claims import Claims
from perflab.kit.verdicts import Decision
from perflab.prover.links import claims, predict, study
from perflab.prover.links.params import LinkConfig, LinkParams

CPU = torch.device("cpu")
CUDA = SimpleNamespace(type="cuda")
NTP_NATIONS, RATE = 0.74, 7000.0   # NTPλ's published MRR on Nations; the injected candidates/s


def test_the_claims_are_kit_claims_checked_against_the_notebooks_parameters():
    assert isinstance(claims.CLAIMS, Claims) and claims.CLAIMS.headline == "kg_mrr"
    assert claims.CLAIMS.package == "perflab.prover.links"
    assert dict(claims.CLAIMS["kg_speed"].setup) == {"device": "cpu", "n_queries": 0}
    assert all(c.metric for c in claims.CLAIMS)


@pytest.mark.parametrize("key", claims.CLAIMS.keys)
def test_every_claim_names_its_unit_and_the_function_that_measures_it(key):
    c = claims.CLAIMS[key]
    assert c.unit in ("MRR above NTPλ", "MRR above the rules", "MRR above ComplEx", "%", "cand/s"), c.unit
    assert callable(claims.CLAIMS.measurer(key)), c.measured_by


def _ranks(mrr, n=402):
    """n realistic ranks of reciprocal mean `mrr`, all alike (no spread: the interval is the value)."""
    return torch.full((n,), 1.0 / mrr, dtype=torch.float64)


def _lp(mrr=0.85, alone=0.78, rules=0.70, ties=0.01, whole_split=True, fit_queries=199, ranks=None):
    """`ranks`: {"fitted", "embedding alone", "rules"} -> rank tensors, each MRR then taken from them."""
    ranks = ranks or {"fitted": _ranks(mrr), "embedding alone": _ranks(alone), "rules": _ranks(rules)}
    m = {k: float((1 / r).mean()) for k, r in ranks.items()}
    ranked = SimpleNamespace(metrics={r: {"MRR": m["fitted"]} for r in ("realistic", "optimistic", "pessimistic")},
                             tie_share=ties, ranks={"realistic": ranks["fitted"]})
    return SimpleNamespace(results={"fitted": ranked, "prover alone": SimpleNamespace(tie_share=0.4),
                                    "embedding alone": SimpleNamespace(metrics={"realistic": {"MRR": m["embedding alone"]}},
                                                                       ranks={"realistic": ranks["embedding alone"]})},
                           fit_queries=fit_queries, whole_split=whole_split, queries=201 if whole_split else 24,
                           test_size=201, candidates=3198, candidates_per_s=2500.0,
                           rules_only={"metrics": {"MRR": m["rules"]}, "ranks": ranks["rules"]}, config=LinkConfig())


def _found(run, monkeypatch, **kw):
    """Findings as the notebook fills them, the throughput decided on a sampler of a steady RATE candidates/s."""
    monkeypatch.setattr(predict, "scoring_sampler", lambda kg, lp: lambda: (RATE, 1.0))
    found = study.Findings(work=SimpleNamespace(kg=None, dataset="nations"), lp=_lp(**kw))
    found.speed = study.decide_speed(run, found)
    return found


def _rows(device, monkeypatch, cfg=None, **kw):
    run = SimpleNamespace(cfg=cfg or LinkParams(verdict_time=0.05), device=device)
    found = _found(run, monkeypatch, **kw)
    return found, {r.key: r for r in claims.CLAIMS.judge(study.evidence(run, found), cfg=run.cfg, device=device)}


# claim -> (the value its evidence must carry, the verdict on the CPU defaults: Nations' whole split) for two truths
TRUTH = {
    "kg_mrr": ((0.85 - NTP_NATIONS, "holds"), (0.70 - NTP_NATIONS, "does not hold")),
    "kg_rules": ((0.85 - 0.70, "holds"), (0.70 - 0.72, "does not hold")),
    "kg_ties": ((0.01, "holds"), (0.08, "does not hold")),
    "kg_speed": ((RATE, "holds"), (RATE, "holds")),
    "kg_speed_gpu": ((None, "not tested here"), (None, "not tested here")),   # a GPU target on a CPU run
    "kg_speed_5k": ((RATE, "holds"), (RATE, "holds")),
    "kg_proofs": ((0.85 - 0.78, "holds"), (0.70 - 0.695, "does not hold")),
}
GOOD, BAD = {}, dict(mrr=0.70, alone=0.695, rules=0.72, ties=0.08)


@pytest.mark.parametrize("truth", [0, 1], ids=["good", "bad"])
@pytest.mark.parametrize("key", claims.CLAIMS.keys)
def test_every_claim_is_decided_at_the_injected_truth(key, truth, monkeypatch):
    assert set(TRUTH) == set(claims.CLAIMS.keys)                              # a new claim needs its truth here
    value, verdict = TRUTH[key][truth]
    c = claims.CLAIMS[key]
    _, rows = _rows(CPU, monkeypatch, **(GOOD, BAD)[truth])
    row = rows[key]
    assert row.unit == c.unit and row.measured_by == c.measured_by and row.verdict == verdict, row
    if value is None:
        assert row.value is None and row.why == "measured on cpu"
    else:
        assert row.value == pytest.approx(value, rel=1e-6, abs=1e-12), (key, row.value, value)


def test_an_mrr_gain_is_judged_on_the_paired_interval_over_the_positives(monkeypatch):
    """The proofs' gain over ComplEx alone is a mean over the split's positives: judged on the paired t interval of
    the per-positive differences of reciprocal ranks, not as an exact number (how far another split could move it)."""
    g = torch.Generator().manual_seed(0)
    alone = torch.randint(1, 12, (402,), generator=g).double()
    better = torch.where(torch.rand(402, generator=g) < 0.1, torch.ones(402, dtype=torch.float64), alone)
    slight = alone.clone()
    slight[:3] = 1.0                                      # three positives moved up: a gain the split cannot tell
    for fitted, verdict in ((better, "holds"), (slight, "within noise")):
        ranks = {"fitted": fitted, "embedding alone": alone, "rules": alone * 2}
        _, rows = _rows(CPU, monkeypatch, ranks=ranks)
        gain = (1 / fitted - 1 / alone)
        half = study.t_quantile(0.995, 401) * float(gain.std()) / 402 ** 0.5
        row = rows["kg_proofs"]
        assert row.value == pytest.approx(float(gain.mean())) and row.verdict == verdict, (row.value, row.low)
        assert (row.low, row.high) == pytest.approx((row.value - half, row.value + half))
        mrr = rows["kg_mrr"]                              # against a published number: the MRR's own interval
        assert mrr.high - mrr.low == pytest.approx(2 * study.t_quantile(0.995, 401) * float((1 / fitted).std())
                                                   / 402 ** 0.5)
    with pytest.raises(ValueError, match="402 ranks against 4 to subtract"):
        study.mrr_interval(alone, minus=alone[:4])


def test_the_rate_is_decided_once_and_judged_against_each_target_of_the_device(monkeypatch):
    found, rows = _rows(CPU, monkeypatch)
    d = found.speed
    assert isinstance(d, Decision) and d.at_least == 5e3 and d.quantity == "candidates/s"   # the higher CPU target
    assert rows["kg_speed_5k"].rounds == d.rounds and (rows["kg_speed"].value, rows["kg_speed"].low) == \
        (d.measured.value, d.measured.low)                                                 # one number, two rules
    assert "kg_speed_5k's decision" in rows["kg_speed"].measured
    _, on_gpu = _rows(CUDA, monkeypatch)
    assert on_gpu["kg_speed_gpu"].verdict == "does not hold" and on_gpu["kg_speed_gpu"].value == pytest.approx(RATE)
    assert on_gpu["kg_speed"].why == "measured on cuda"


def test_a_slice_of_the_split_decides_no_throughput_and_no_whole_split_target(monkeypatch):
    found, rows = _rows(CPU, monkeypatch, cfg=LinkParams(n_queries=24), whole_split=False)
    assert found.speed is None                                                              # no time spent
    for key in ("kg_mrr", "kg_speed", "kg_speed_5k", "kg_proofs"):
        assert rows[key].verdict == "not tested here" and rows[key].why == "measured at n_queries=24", key
    assert rows["kg_rules"].verdict == rows["kg_ties"].verdict == "holds"                   # any slice


def test_without_a_valid_split_or_a_published_figure_nothing_is_claimed(monkeypatch):
    run = SimpleNamespace(cfg=LinkParams(verdict_time=0.05), device=CPU)
    found = _found(run, monkeypatch, fit_queries=0)
    found.work = SimpleNamespace(kg=None, dataset=None)
    ev = study.evidence(run, found)
    assert ev["kg_proofs"].measured is None and "no valid split" in ev["kg_proofs"].sentence
    assert ev["kg_mrr"].measured is None and "no published NTPλ figure" in ev["kg_mrr"].sentence


def test_the_mrr_interval_is_the_spread_of_the_reciprocal_ranks():
    m = study.mrr_interval(torch.tensor([1.0, 2.0, 1.0, 4.0] * 25))
    assert m.value == pytest.approx((1 + 0.5 + 1 + 0.25) / 4) and m.low < m.value < m.high < 1.0
    assert study.mrr_interval(torch.ones(10)).low == study.mrr_interval(torch.ones(10)).high == 1.0


def test_a_scorer_whose_tie_rules_agree_is_one_row_of_the_comparison():
    from perflab.prover.links import protocols

    m = {"MRR": 0.867, "Hits@1": 0.796, "Hits@3": 0.923, "Hits@10": 0.993}
    rows = protocols._by_rule("fitted", {"realistic": m, "optimistic": m, "pessimistic": m})
    assert len(rows) == 1 and rows[0]["ties"] == protocols.ALL_AGREE and rows[0]["MRR"] == 0.867
    tied = protocols._by_rule("prover", {"realistic": m, "optimistic": dict(m, MRR=0.9), "pessimistic": m})
    assert [r["ties"].split(":")[0] for r in tied] == ["realistic", "optimistic", "pessimistic"]   # ties: each rule
