"""The prover notebooks' `kg` parameter (family, a benchmark, a folder) and study 3 on a real graph at a tiny size."""
import pytest

from perflab.params import ParameterError, validate
from perflab.prover import benchmark_eval, claims, study
from perflab.prover.engine import UnificationEngine
from perflab.prover.params import EarlyExitParams, EvalParams
from perflab.prover.policy import make_policy

FACTS = "parent(ann,bob).\nparent(bob,cid).\n"
RULES = "grandparent(X,Y) :- parent(X,Z), parent(Z,Y).\n"


@pytest.mark.parametrize("name", ["family", "kinship", "nations", "umls"])
def test_the_four_graph_names_are_accepted_by_both_notebooks(name):
    assert validate({"kg": name}, EvalParams).kg == name
    assert validate({"kg": name}, EarlyExitParams).kg == name


def test_a_folder_is_accepted_and_a_relative_one_is_resolved_from_perflab_cwd(tmp_path, monkeypatch):
    (tmp_path / "graphs" / "mine").mkdir(parents=True)
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path))             # perflab run: where the user ran it
    monkeypatch.chdir(tmp_path.parent)                            # the kernel runs elsewhere
    assert validate({"kg": "graphs/mine"}, EvalParams).kg == "graphs/mine"
    assert validate({"kg": str(tmp_path / "graphs" / "mine")}, EvalParams).kg.endswith("mine")
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path / "graphs"))   # from elsewhere the same text names no folder
    with pytest.raises(ParameterError, match="is not a folder"):
        validate({"kg": "graphs/mine"}, EvalParams)


@pytest.mark.parametrize("bad", ["kinships", "", "no/such/folder"])
def test_a_bad_graph_names_the_value_and_the_choices(bad):
    with pytest.raises(ParameterError) as e:
        validate({"kg": bad}, EvalParams)
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
    kg, bench = study.knowledge_graph("tsv", n_families=1, seed=0)
    assert bench is not None and bench.name == "tsv" and len(bench.mining.rules) >= 1    # p(X,Y) :- q(Y,X)
    assert len(kg.queries["test"]) == 1 and study.graph_label("tsv") == "tsv"


def test_study_3_on_kinship_at_a_tiny_size():
    kg, bench = study.knowledge_graph("kinship", n_families=1, seed=0, max_derived=16)
    assert bench.name == "kinship" and max(len(v) for v in _rules_per_head(kg).values()) <= 15
    engine = UnificationEngine(kg, max_derived=16)
    policy = make_policy(kg, seed=0)                                  # train_updates=0: an untrained policy
    ev = benchmark_eval.evaluate_benchmark("kinship", kg, bench.mining.rules, engine, policy, n_queries=2, batch=256,
                                           max_depth=4, seed=0)
    res = ev.result
    assert len(res.ranks) == 4 and ev.batch == 256 and res.candidates > 2 * (kg.n_constants - 1)   # both sides
    for m in (res.metrics, *res.bounds.values(), ev.rules_only["metrics"]):
        assert all(0.0 <= v <= 1.0 for v in m.values())
    for k in res.metrics:                                             # pessimistic <= mean <= optimistic
        assert res.bounds["pessimistic"][k] <= res.metrics[k] + 1e-9 <= res.bounds["optimistic"][k] + 2e-9
    assert all(0.0 <= v <= 1.0 for v in ev.coverage.values()) and ev.best["model"] == "ComplEx"
    rows = benchmark_eval.comparison(ev)
    assert [r["model"] for r in rows[-3:]] == ["ComplEx", "NTP", "NTPλ"] and "Table 1" in rows[-1]["source"]
    measured = claims.measure_real_graph("kinship", ev, "cpu")
    m, sentence = measured["kg_mrr"]
    assert m.value == pytest.approx(res.metrics["MRR"] - 0.81) and "rule" in sentence and "proved" in sentence
    assert measured["nations_100k"][0] is None                        # measured on nations only
    assert claims.eval_headline(ev) == "kg_mrr" and claims.eval_headline(None) == "speed_5x"


def _rules_per_head(kg):
    out = {}
    for r in kg.rules:
        out.setdefault(r.head[0], []).append(r)
    return out


@pytest.mark.parametrize("device_type, verdict", [("cpu", "not tested here"), ("cuda", "holds")])
def test_the_nations_throughput_claim_is_judged_on_cuda_only(device_type, verdict):
    from perflab.verdicts import Measured

    c = next(c for c in claims.EVAL_CLAIMS if c.key == "nations_100k")
    assert c.needs == "cuda"
    [row] = claims.assess([c], {"nations_100k": (Measured.exact(2e5), "200,000 candidates/s")}, device_type)
    assert row["verdict"] == verdict
    if device_type == "cpu":
        assert "judged on cuda runs only" in row["measured"]


def test_on_family_the_real_graph_claims_are_not_tested():
    rows = claims.assess([c for c in claims.EVAL_CLAIMS if c.key in ("kg_mrr", "nations_100k")],
                         claims.measure_real_graph("family", None, "cpu"), "cpu")
    assert [r["verdict"] for r in rows] == ["not tested here"] * 2 and "kg=family" in rows[0]["measured"]


def test_a_proof_scores_log_of_each_rule_weight_it_uses():
    import dataclasses
    import math

    import torch

    from perflab.prover.data import family_kg
    from perflab.prover.ranking import corruptions
    from perflab.prover.rollout import rollout
    from perflab.prover.step import GreedyStep

    kg = family_kg(n_families=2, seed=1)                                  # its own rules: weight 1, log 0
    half = dataclasses.replace(kg, rules=[dataclasses.replace(r, weight=0.5) for r in kg.rules])
    cands = corruptions(kg, kg.queries["test"][:8], 3, "both", seed=0).flat()
    policy = make_policy(kg, seed=0)                                      # the same policy: the same choices
    with torch.inference_mode():
        a, b = (rollout(GreedyStep(UnificationEngine(g, max_derived=12), policy, 6), cands, 16, "full") for g in (kg, half))
    assert torch.equal(a.steps, b.steps) and torch.equal(a.proven, b.proven)
    uses = (b.score - a.score) / math.log(0.5)                             # rules applied along each path
    torch.testing.assert_close(uses, uses.round(), atol=1e-4, rtol=0)     # float32 sums of a few log-probs
    assert bool((uses.round() >= 0).all() & (uses.round() <= b.steps).all()) and int(uses.round().max()) >= 1
