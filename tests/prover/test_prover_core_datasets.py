"""Benchmark graphs: vendored files, the TSV loader and its errors, names that clash with reserved symbols,
one entry point for every graph; filtered link-prediction ranks against a hand-computed case; the published table."""
import hashlib
import math
import re

import pytest
import torch

from perflab.prover.core.data import family_kg
from perflab.prover.core.datasets import (
    BENCHMARKS,
    DATA_DIR,
    load_benchmark,
    load_kg,
    load_tsv_folder,
    read_triples,
    symbol,
    unsymbol,
)
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.kg import FIRST_PRED, SPECIAL_PREDICATES, KGFormatError, KnowledgeGraph
from perflab.prover.core.mining import MinedRule, MiningConfig
from perflab.prover.core.policy import make_policy
from perflab.prover.links.benchmark_eval import (
    PUBLISHED,
    best_published_mrr,
    evaluate_filtered,
    filtered_candidates,
    published,
    rules_only,
)
from perflab.prover.links.reference import engine_coverage

SIZES = {"kinship": (8544, 1068, 1074, 104, 25), "nations": (1592, 199, 201, 14, 55), "umls": (5216, 652, 661, 135, 46)}


def _write(d, **files):
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return d


# ---- the vendored files -----------------------------------------------------------------------

def test_vendored_files_match_the_checksums_in_source_md():
    table = re.findall(r"^\| (\w+/\w+\.txt) \| (\d+) \| ([0-9a-f]{64}) \|$", (DATA_DIR / "SOURCE.md").read_text(), re.M)
    assert len(table) == 9
    for rel, n, sha in table:
        data = (DATA_DIR / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha, rel
        assert data.count(b"\n") == int(n), rel


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmarks_load_with_their_published_sizes(name):
    b = load_benchmark(name, rules=False)
    n_train, n_valid, n_test, n_ent, n_rel = SIZES[name]
    assert b.splits() == {"train": n_train, "valid": n_valid, "test": n_test}
    assert (b.kg.n_constants, b.kg.n_predicates - FIRST_PRED) == (n_ent, n_rel)
    assert b.kg.rules == [] and b.mining is None and "train" not in b.kg.queries  # the policy trains on valid
    first = read_triples(DATA_DIR / name / "test.txt")[0]
    p, h, t = b.kg.queries["test"][0].tolist()
    assert (b.original(b.kg.constants[h]), b.original(b.kg.predicates[p]), b.original(b.kg.constants[t])) == first


def test_mined_benchmark_saves_and_loads_back(tmp_path):
    b = load_benchmark("nations")                         # default MiningConfig: at most 15 rules per head
    per_head = torch.bincount(torch.tensor([r.head[0] for r in b.kg.rules]))
    assert len(b.kg.rules) == len(b.mining.rules) > 0 and int(per_head.max()) <= 15
    back = KnowledgeGraph.load(b.save(tmp_path / "nations"))
    strs = lambda g, t: sorted(g.atom_str(a) for a in t.tolist())  # noqa: E731
    assert strs(back, back.facts) == strs(b.kg, b.kg.facts)
    assert all(strs(back, back.queries[s]) == strs(b.kg, b.kg.queries[s]) for s in ("valid", "test"))
    assert [back.rule_str(r) for r in back.rules] == [b.kg.rule_str(r) for r in b.kg.rules]
    text = (tmp_path / "nations" / "rules.txt").read_text()
    assert text.count("% support ") == len(b.kg.rules)   # every rule carries its counts


# ---- the TSV format and its errors -------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    ("a\tr\tb\nc\tr\n", "train.txt:2: expected head<TAB>relation<TAB>tail (3 non-empty tab-separated fields), got 2"),
    ("a\tr\tb\n\n\nc\t\td\n", "train.txt:4: expected head<TAB>relation<TAB>tail"),
    ("a r b\n", "train.txt:1: expected head<TAB>relation<TAB>tail (3 non-empty tab-separated fields), got 1"),
    ("a\tr\tb\tc\n", "got 4 field(s)"),
    (b"a\tr\tb\nc\t\xff\xfe\td\n", "train.txt:2: not UTF-8 (byte 0xff at column 3)"),
])
def test_bad_lines_name_the_file_the_line_and_what_was_expected(tmp_path, content, message):
    d = _write(tmp_path / "bad", **{"train.txt": content})
    with pytest.raises(KGFormatError) as e:
        load_tsv_folder(d)
    assert message in str(e.value) and str(d / "train.txt") in str(e.value)


def test_a_query_relation_missing_from_train_is_refused(tmp_path):
    d = _write(tmp_path / "g", **{"train.txt": "a\tr\tb\n", "test.txt": "b\tr\ta\n\nb\ts\ta\n"})
    with pytest.raises(KGFormatError, match=r"test.txt:3: relation 's' is in no training triple"):
        load_tsv_folder(d)


# ---- what a user's files hold that the fixtures did not: line ends, blank lines, a BOM, leaks ------------------

TRAIN = [("ann", "parent", "bob"), ("bob", "parent", "cid"), ("cid", "likes", "née")]
TEST = [("ann", "likes", "cid"), ("bob", "likes", "ann")]


def _tsv(triples, end="\n"):
    return end.join("\t".join(t) for t in triples)


@pytest.mark.parametrize("end, blank, final, bom", [
    ("\n", False, False, False), ("\r\n", False, True, False), ("\r\n", False, False, False),
    ("\n", True, True, False), ("\n", False, True, True), ("\r\n", True, False, True), ("\r", False, False, False)],
    ids=["no final newline", "CRLF", "CRLF, no final newline", "blank lines", "BOM", "BOM, CRLF, blank lines, no final "
         "newline", "CR only"])
def test_every_triple_is_read_whatever_the_line_ends_blank_lines_or_bom(tmp_path, end, blank, final, bom):
    """Issue 48: every fixture ended in '\\n'; a user's split file need not. No triple lost, none mangled (a '\\r'
    left on a tail, a BOM on the first head), in every split, whatever the file's line ends."""
    def write(triples):
        lines = ["\t".join(t) for t in triples]
        if blank:                                     # blank and whitespace-only lines, first, between and last
            lines = ["", " \t"] + lines[:1] + ["", ""] + lines[1:] + [""]
        return ("\ufeff" if bom else "") + end.join(lines) + (end if final else "")
    d = _write(tmp_path / "g", **{"train.txt": write(TRAIN), "test.txt": write(TEST)})
    assert read_triples(d / "train.txt") == TRAIN and read_triples(d / "test.txt") == TEST
    b = load_tsv_folder(d, rules=False)
    assert b.splits() == {"train": 3, "test": 2}
    names = lambda rows: [(b.original(b.kg.constants[h]), b.original(b.kg.predicates[p]),  # noqa: E731
                           b.original(b.kg.constants[t])) for p, h, t in rows.tolist()]
    assert sorted(names(b.kg.facts)) == sorted(TRAIN) and names(b.kg.queries["test"]) == TEST


def test_a_name_holding_a_character_str_splitlines_cuts_at_stays_one_name_and_later_lines_keep_their_numbers(tmp_path):
    """A form feed, \\x1c or U+2028 inside a name is a character of it, not a line end: the triple is read whole, and a
    bad line after it is named by the line an editor shows."""
    names = ["a\x0cb", "c\x1cd", "e\u2028f", "g\x85h"]
    train = "".join(f"{n}\tr\tz\n" for n in names)
    d = _write(tmp_path / "g", **{"train.txt": train})
    assert [h for h, _, _ in read_triples(d / "train.txt")] == names
    _write(d, **{"train.txt": train + "bad line\n"})
    with pytest.raises(KGFormatError, match=r"train.txt:5: expected head<TAB>relation<TAB>tail"):
        read_triples(d / "train.txt")


@pytest.mark.parametrize("content, message", [
    ("\ufeffa\tr\tb\r\nc\tr\r\n", "train.txt:2: expected head<TAB>relation<TAB>tail (3 non-empty tab-separated "
     "fields), got 2"),
    ("a\tr\tb\r\n\r\n\r\nc\t\td", "train.txt:4: expected head<TAB>relation<TAB>tail"),
    ("a\tr\tb\r\na\tr\tb\tc", "train.txt:2: expected head<TAB>relation<TAB>tail (3 non-empty tab-separated fields), "
     "got 4"),
])
def test_a_malformed_line_is_refused_by_its_number_whatever_the_line_ends(tmp_path, content, message):
    d = _write(tmp_path / "bad", **{"train.txt": content})
    with pytest.raises(KGFormatError) as e:
        load_tsv_folder(d)
    assert message in str(e.value) and str(d / "train.txt") in str(e.value)


@pytest.mark.parametrize("split, other", [("test", "train"), ("valid", "train"), ("test", "valid")])
def test_a_triple_in_two_splits_is_refused_naming_both(tmp_path, split, other):
    files = {"train.txt": _tsv(TRAIN) + "\n", "valid.txt": "bob\tlikes\tcid\n", "test.txt": _tsv(TEST) + "\n"}
    leaked = {"train": "bob\tparent\tcid", "valid": "bob\tlikes\tcid"}[other]
    files[f"{split}.txt"] = files[f"{split}.txt"].replace("\n", f"\n\n{leaked}\r\n", 1)
    d = _write(tmp_path / "leak", **files)
    with pytest.raises(KGFormatError) as e:
        load_tsv_folder(d, rules=False)
    line = files[f"{split}.txt"].replace("\r", "").split("\n").index(leaked) + 1
    assert f"{d / (split + '.txt')}:{line}: {leaked.replace(chr(9), ' ')!r} is also in {other}.txt" in str(e.value)
    assert "the splits must be disjoint" in str(e.value)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_vendored_benchmarks_splits_are_disjoint_and_none_is_lost(name):
    splits = {s: read_triples(DATA_DIR / name / f"{s}.txt") for s in ("train", "valid", "test")}
    assert {s: len(t) for s, t in splits.items()} == dict(zip(("train", "valid", "test"), SIZES[name][:3]))
    sets = {s: set(t) for s, t in splits.items()}
    assert all(len(sets[s]) == len(splits[s]) for s in sets)                    # no repeats within a split
    assert not (sets["train"] & sets["valid"] or sets["train"] & sets["test"] or sets["valid"] & sets["test"])


NASTY = ["<pad>", "<true>", "<false>", "<end>", "X", "_y", "u_x", "u__3c_pad_3e_", "a b", "a,b", "p(q)", "x.y",
         "née", "%c", "#h", "-1", "0.5", "plain", "co-occurs_with", ""]


def test_symbols_are_injective_safe_and_invertible():
    syms = [symbol(n) for n in NASTY]
    assert len(set(syms)) == len(NASTY)
    assert all(unsymbol(s) == n for s, n in zip(syms, NASTY))
    safe = re.compile(r"[a-z][A-Za-z0-9_\-]*")
    assert all(safe.fullmatch(s) for s in syms if s) and not set(syms) & set(SPECIAL_PREDICATES)
    assert symbol("plain") == "plain" and symbol("co-occurs_with") == "co-occurs_with"


def test_names_like_reserved_symbols_still_work(tmp_path):
    # relation "<true>" is the inverse of relation "<end>"; entities are named like reserved or odd symbols
    ents = ["<pad>", "<false>", "X", "a b", "né", "u_x"]
    pairs = [(ents[i], ents[j]) for i in range(len(ents)) for j in range(len(ents)) if i != j][:12]
    train = "".join(f"{a}\t<end>\t{b}\n" for a, b in pairs) + "".join(f"{b}\t<true>\t{a}\n" for a, b in pairs[:9])
    test = "".join(f"{b}\t<true>\t{a}\n" for a, b in pairs[9:])
    b = load_tsv_folder(_write(tmp_path / "odd", **{"train.txt": train, "test.txt": test}),
                        MiningConfig(min_support=2, min_confidence=0.5))
    kg = b.kg
    assert kg.pred_id(symbol("<true>")) >= FIRST_PRED and kg.const_id(symbol("<pad>")) >= 1
    assert kg.predicates[:FIRST_PRED] == list(SPECIAL_PREDICATES) and kg.constants[0] == "<pad>"
    assert {b.original(c) for c in kg.constants[1:]} == set(ents)
    assert any(r.text == f"{symbol('<true>')}(X,Y) :- {symbol('<end>')}(Y,X)." for r in kg.rules)
    engine = UnificationEngine(kg)
    assert bool(engine_coverage(engine, kg.queries["test"], max_depth=1).all())  # proved by the mined inverse rule
    back = KnowledgeGraph.load(b.save(tmp_path / "saved"))           # and the text format carries the names
    assert sorted(back.atom_str(a) for a in back.queries["test"].tolist()) == \
        sorted(kg.atom_str(a) for a in kg.queries["test"].tolist())


def test_load_kg_takes_family_a_benchmark_or_a_folder(tmp_path):
    fam = load_kg("family", n_families=2, seed=1)
    ref = family_kg(n_families=2, seed=1)
    assert torch.equal(fam.facts, ref.facts) and len(fam.rules) == len(ref.rules)
    assert load_kg("", n_families=2, seed=1).summary() == fam.summary()
    nations = load_kg("nations", rules=MiningConfig(max_rules_per_head=3))
    assert len(nations.facts) == 1592 and 0 < len(nations.rules) <= 3 * 55
    folder = load_kg(str(ref.save(tmp_path / "fam")))               # the facts.txt folder format
    assert len(folder.facts) == len(ref.facts) and len(folder.rules) == len(ref.rules)
    tsv = _write(tmp_path / "tsv", **{"train.txt": "a\tr\tb\nb\tr\tc\na\ts\tc\nb\ts\td\nc\tr\td\n", "test.txt": "a\ts\td\n"})
    g = load_kg(str(tsv), rules=MiningConfig(min_support=1, min_confidence=0.3))
    assert len(g.facts) == 5 and len(g.queries["test"]) == 1 and g.rules
    with pytest.raises(ValueError, match="kg='nope': not 'family', a benchmark"):
        load_kg("nope")


# ---- filtered ranks ---------------------------------------------------------------------------

def test_filtered_candidates_are_every_unknown_corruption():
    kg = load_benchmark("nations", rules=False).kg
    q = kg.queries["test"][:6]
    true = kg.true_set()
    for side, pos in (("head", 1), ("tail", 2)):
        cs = filtered_candidates(kg, q, side)
        assert torch.equal(cs.cands[:, 0], q) and cs.mask[:, 0].all() and cs.cands.shape == (6, kg.n_constants, 3)
        for i, query in enumerate(q.tolist()):
            want = {tuple(query[:pos] + [e] + query[pos + 1:]) for e in range(1, kg.n_constants + 1)} - {tuple(query)}
            want -= true
            got = [tuple(c) for c, m in zip(cs.cands[i, 1:].tolist(), cs.mask[i, 1:].tolist()) if m]
            assert len(got) == len(set(got)) and set(got) == want


def _zero_policy(kg):
    policy = make_policy(kg, seed=0)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()          # every logit 0: greedy takes the first successor, log-prob -log(#successors)
    return policy


@pytest.mark.parametrize("filtered", [False, True])
def test_ranks_equal_a_hand_computed_case(filtered):
    # q(X,Y) :- p(X,Z), p(Z,Y). The test query q(a,c) is proved through b; of its head corruptions only q(d,c) is
    # proved too (through p(d,b)), with the same two choices, so it ties with the positive; no tail corruption
    # (q(a,a), q(a,b), q(a,d)) is proved. With q(d,c) a valid triple the tie is filtered away.
    facts = "p(a,b).\np(b,c).\np(d,b).\n"
    kg = KnowledgeGraph.from_text(facts, "q(X,Y) :- p(X,Z), p(Z,Y).\n",
                                  {"test": "q(a,c).\n", **({"valid": "q(d,c).\n"} if filtered else {})})
    engine = UnificationEngine(kg)
    res = evaluate_filtered(kg, engine, _zero_policy(kg), kg.queries["test"], batch=4, max_depth=6)
    # each step offers {successor, <end>}: two choices of log-prob -log 2, twice
    score = -2 * math.log(2)
    head, tail = res.results["head"], res.results["tail"]
    assert head.scores[0, 0].item() == pytest.approx(score) and tail.scores[0, 0].item() == pytest.approx(score)
    assert int(tail.proven[0, 1:].sum()) == 0 and int(head.proven[0, 1:].sum()) == (0 if filtered else 1)
    assert res.candidates == (1 + 3) + (1 + 3) - (1 if filtered else 0)
    head_rank = {"mean": 1.0, "optimistic": 1.0, "pessimistic": 1.0} if filtered else \
        {"mean": 1.5, "optimistic": 1.0, "pessimistic": 2.0}
    assert res.ranks.tolist() == [head_rank["mean"], 1.0]
    for name, m in [("mean", res.metrics), *res.bounds.items()]:
        r = head_rank[name]
        assert m["MRR"] == pytest.approx((1 / r + 1) / 2)
        assert m["Hits@1"] == (1.0 if r == 1 else 0.5) and m["Hits@3"] == 1.0
    assert res.per_side["tail"]["MRR"] == 1.0 and res.ms_per_candidate > 0
    # the rules alone (score = confidence of a rule that fires) see the same tie
    q, p = kg.pred_id("q"), kg.pred_id("p")
    alone = rules_only(kg, [MinedRule(q, ((p, False), (p, False)), support=1, head_size=1, body_size=2)],
                       kg.queries["test"])
    assert alone["metrics"]["MRR"] == pytest.approx((1 / head_rank["mean"] + 1) / 2)
    assert alone["optimistic"]["MRR"] == 1.0


# ---- the published table ----------------------------------------------------------------------

def test_published_rows_are_consistent_and_cited():
    assert {r["dataset"] for r in PUBLISHED} == set(BENCHMARKS)
    for r in PUBLISHED:
        h1, h3, h10, mrr = r["Hits@1"], r["Hits@3"], r["Hits@10"], r["MRR"]
        assert 0 <= h1 <= h3 <= h10 <= 1 and "Table" in r["source"]
        # MRR is bounded by the Hits it comes with (ranks 1 | 2-3 | 4-10 | >10), up to the tables' 2-digit rounding
        lo = h1 + (h3 - h1) / 3 + (h10 - h3) / 10
        hi = h1 + (h3 - h1) / 2 + (h10 - h3) / 4 + (1 - h10) / 11
        assert lo - 0.01 <= mrr <= hi + 0.01, r
    assert best_published_mrr("umls")["model"] == "NTPλ" and published("family") == []
