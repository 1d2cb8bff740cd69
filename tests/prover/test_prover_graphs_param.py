"""The prover notebooks' `kg` parameter (family, a benchmark, a folder) and study 3 on a real graph at a tiny size."""
from types import SimpleNamespace

import pytest
import torch

from perflab.kit.params import ParameterError, validate
from perflab.prover.core import datasets
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy
from perflab.prover.early_exit.params import EarlyExitParams
from perflab.prover.evaluation.params import EvalParams
from perflab.prover.links import claims as link_claims
from perflab.prover.links import study as link_study
from perflab.prover.links.params import LinkParams

FACTS = "parent(ann,bob).\nparent(bob,cid).\n"
RULES = "grandparent(X,Y) :- parent(X,Z), parent(Z,Y).\n"


@pytest.mark.parametrize("name", ["family", "kinship", "nations", "umls"])
def test_the_four_graph_names_are_accepted_by_the_three_notebooks(name):
    assert validate({"kg": name}, EvalParams).kg == name
    assert validate({"kg": name}, EarlyExitParams).kg == name
    assert validate({"kg": name}, LinkParams).kg == name


def test_a_folder_is_accepted_and_a_relative_one_is_resolved_from_perflab_cwd(tmp_path, monkeypatch):
    (tmp_path / "graphs" / "mine").mkdir(parents=True)
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path))             # perflab run: where the user ran it
    monkeypatch.chdir(tmp_path.parent)                            # the kernel runs elsewhere
    assert validate({"kg": "graphs/mine"}, EvalParams).kg == "graphs/mine"
    assert validate({"kg": str(tmp_path / "graphs" / "mine")}, EvalParams).kg.endswith("mine")
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path / "graphs"))   # from elsewhere the same text names no folder
    with pytest.raises(ParameterError, match="is not a folder"):
        validate({"kg": "graphs/mine"}, EvalParams)


@pytest.mark.parametrize("schema", [EvalParams, LinkParams])
@pytest.mark.parametrize("bad", ["kinships", "", "no/such/folder"])
def test_a_bad_graph_names_the_value_and_the_choices(bad, schema):
    with pytest.raises(ParameterError) as e:
        validate({"kg": bad}, schema)
    msg = str(e.value)
    assert f"kg={bad!r}" in msg and "family, kinship, nations, umls" in msg and "folder" in msg


def test_kg_dir_is_gone():
    with pytest.raises(ParameterError, match="kg_dir"):
        validate({"kg_dir": "x"}, EvalParams)


def test_a_tsv_folder_loads_with_mined_rules(tmp_path, monkeypatch):
    d = tmp_path / "tsv"
    d.mkdir()
    (d / "train.txt").write_text("".join(f"a{i}\tp\tb{i}\nb{i}\tq\ta{i}\n" for i in range(6)))
    (d / "test.txt").write_text("a7\tp\tb7\n")
    (d / "valid.txt").write_text("b6\tq\ta6\n")
    (d / "train.txt").write_text((d / "train.txt").read_text() + "b7\tq\ta7\n")
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path))
    kg, bench = datasets.knowledge_graph("tsv", n_families=1, seed=0)
    assert bench is not None and bench.name == "tsv" and len(bench.mining.rules) >= 1    # p(X,Y) :- q(Y,X)
    assert len(kg.queries["test"]) == 1 and datasets.graph_label("tsv") == "tsv"


@pytest.mark.slow
def test_study_3_on_kinship_at_a_tiny_size():
    from perflab.prover.links.embeddings import EmbeddingConfig
    from perflab.prover.links.params import LinkConfig
    from perflab.prover.links.predict import evaluate_link_prediction
    from perflab.prover.links.protocols import comparison

    kg, bench = datasets.knowledge_graph("kinship", n_families=1, seed=0, max_derived=16)
    assert bench.name == "kinship" and max(len(v) for v in _rules_per_head(kg).values()) <= 15
    engine = UnificationEngine(kg, max_derived=16)
    assert engine.K == 15                                             # windows of 24 facts, 15 successors kept
    policy = make_policy(kg, seed=0)                                  # train_updates=0: an untrained policy
    cfg = LinkConfig(n_queries=2, n_fit=2, search_batch=64, emb=EmbeddingConfig(rank=8, epochs=2), n_cost=1, compile="off",
                     greedy_batch=0)
    lp = evaluate_link_prediction(kg, engine, policy, cfg, rules=bench.mining.rules)
    fit = lp.results["fitted"]
    assert len(fit.ranks["realistic"]) == 4 and lp.candidates > 2 * (kg.n_constants - 1) and not lp.whole_split
    for r in lp.results.values():
        m = r.metrics
        for k in m["realistic"]:                                      # pessimistic <= realistic <= optimistic
            assert m["pessimistic"][k] <= m["realistic"][k] + 1e-9 <= m["optimistic"][k] + 2e-9
        assert 0.0 <= r.tie_share <= r.tied_any <= 1.0
    assert all(0.0 <= v <= 1.0 for v in lp.coverage.values()) and set(lp.cost) == {"greedy (full)", "greedy (recycle)", "search"}
    rows = comparison(lp, "kinship")
    assert [r["model"] for r in rows[-3:]] == ["ComplEx", "NTP", "NTPλ"] and rows[-1]["ties"].startswith("optimistic")
    cfg = LinkParams(kg="kinship", n_queries=2, verdict_time=0.05)
    run = SimpleNamespace(cfg=cfg, device=torch.device("cpu"))
    found = link_study.Findings(work=SimpleNamespace(kg=kg, dataset="kinship"), lp=lp)
    found.speed = link_study.decide_speed(run, found)                 # 2 of 1074 triples: no target's setup
    measured = link_study.evidence(run, found)
    rows = {r["key"]: r for r in link_claims.CLAIMS.judge(measured, cfg=cfg, device="cpu")}
    assert rows["kg_mrr"]["why"] == "measured at n_queries=2" and "the first 2 of 1074" in rows["kg_mrr"]["measured"]
    assert measured["kg_rules"][0].value == pytest.approx(fit.metrics["realistic"]["MRR"] - lp.rules_only["metrics"]["MRR"])
    assert measured["kg_ties"][0].value == fit.tie_share and measured["kg_speed"][0] is None   # one pass: not judged
    assert found.speed is None and link_claims.CLAIMS.headline == "kg_mrr"
    run = SimpleNamespace(cfg=LinkParams(kg="kinship", n_queries=0, verdict_time=0.05), device=torch.device("cpu"))
    found.speed = link_study.decide_speed(run, found)                 # the whole-split setup: groups are decided
    measured = link_study.evidence(run, found)
    d = measured["kg_speed_5k"][0]                                     # decided against the higher CPU threshold
    assert d.quantity == "candidates/s" and d.rounds >= 1 and all(x > 0 for x in d.samples) and d.at_least == 5e3
    assert measured["kg_speed"][0] == d.measured and "kg_speed_5k's decision" in measured["kg_speed"][1]
    from perflab.prover.links.predict import scoring_sampler

    rate = scoring_sampler(kg, lp)     # batch 64 < a side's ~100 corruptions: groups of one test triple, cycled
    assert all(n > 0 and secs > 0 for n, secs in (rate() for _ in range(3)))   # (candidates, seconds)
    import matplotlib

    matplotlib.use("Agg")
    found.throughput = [{"version": "last step closes", "cand/s": 1500.0, "p20": 1400.0, "p80": 1700.0}]
    fig = link_study.throughput_figure(run, found)   # the decided rate's interval apart from a version's spread
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "1,500 (p20-p80 1,400-1,700)" in texts and any(t.endswith("(99% interval)") for t in texts), texts
    matplotlib.pyplot.close(fig)
    fig = link_study.mrr_figure(run, found)           # the card's: narrow enough to sit beside the card's table
    assert fig.get_size_inches()[0] * 110 <= 760 and len(fig.axes) == 1
    matplotlib.pyplot.close(fig)


def _rules_per_head(kg):
    out = {}
    for r in kg.rules:
        out.setdefault(r.head[0], []).append(r)
    return out


@pytest.mark.parametrize("device_type, verdict", [("cpu", "not tested here"), ("cuda", "holds")])
def test_the_gpu_throughput_claim_is_judged_on_cuda_only(device_type, verdict):
    from perflab.kit.claims import Claims
    from perflab.kit.verdicts import Measured

    c = link_claims.CLAIMS["kg_speed_gpu"]
    [row] = Claims(c).judge({c.key: (Measured(2e5, 1.8e5, 2.2e5), "200,000 candidates/s")},
                            cfg=LinkParams(n_queries=0), device=device_type)
    assert row["verdict"] == verdict
    if device_type == "cpu":
        assert row["why"] == "measured on cpu"


def test_a_proof_scores_log_of_each_rule_weight_it_uses():
    import dataclasses
    import math

    from perflab.prover.core.data import family_kg
    from perflab.prover.core.ranking import corruptions
    from perflab.prover.core.step import GreedyStep
    from perflab.prover.early_exit.baseline import rollout

    kg = family_kg(n_families=2, seed=1)                                  # its own rules: weight 1, log 0
    half = dataclasses.replace(kg, rules=[dataclasses.replace(r, weight=0.5) for r in kg.rules])
    cands = corruptions(kg, kg.queries["test"][:8], 3, "both", seed=0).flat()
    policy = make_policy(kg, seed=0)                                      # the same policy: the same choices
    with torch.inference_mode():
        a, b = (rollout(GreedyStep(UnificationEngine(g, max_derived=12), policy, 6), cands, 16) for g in (kg, half))
    assert torch.equal(a.steps, b.steps) and torch.equal(a.proven, b.proven)
    uses = (b.score - a.score) / math.log(0.5)                             # rules applied along each path
    torch.testing.assert_close(uses, uses.round(), atol=1e-4, rtol=0)     # float32 sums of a few log-probs
    assert bool((uses.round() >= 0).all() & (uses.round() <= b.steps).all()) and int(uses.round().max()) >= 1
