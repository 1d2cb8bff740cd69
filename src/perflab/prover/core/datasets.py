"""Real benchmark graphs (Kinship, Nations, UMLS) and one entry point for every graph a notebook can use.

    kg = load_kg("kinship")            # vendored splits, rules mined from the training facts
    kg = load_kg("family")             # the synthetic family graph (data.family_kg)
    kg = load_kg("path/to/folder")     # facts.txt / rules.txt / test.txt (kg.py), or a TSV folder (below)
    bench = load_benchmark("umls", MiningConfig(min_confidence=0.3))   # the same, with names and mining stats

Benchmarks are folders of train.txt / valid.txt / test.txt, one `head<TAB>relation<TAB>tail` per line (the
format PyKEEN and most link-prediction code ship), UTF-8 (a byte-order mark dropped), any line ends (\\n, \\r\\n, \\r),
blank lines skipped; the three splits disjoint (a triple in two is a leak: refused, naming both). The three in
`benchmarks/` are vendored from the PyKEEN wheel (see benchmarks/SOURCE.md: origin, licence, sha256); nothing is
downloaded. A graph built from them has
    facts            the train split (the knowledge base the prover reads)
    queries          {"valid": ..., "test": ...} (valid is what `data.training_queries` trains the policy on;
                     test is only evaluated)
    rules            mined from the train split (`mining.py`), unless rules=False
and every known triple (train, valid, test) filters corruptions (`KnowledgeGraph.true_set`).

Names become engine symbols: a name of the form [a-z][A-Za-z0-9_-]* that does not start with `u_` is kept;
any other (upper-case first letter, which the rule format reads as a variable, `<pad>` or `<true>` which
name reserved ids, spaces, punctuation, non-ASCII) becomes `u_` + its characters with every non-[A-Za-z0-9]
character written `_<hex code>_`. The map is injective, so two names never share a symbol, and `Benchmark.names`
maps symbols back. Reserved ids stay reserved whatever the data calls its entities.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import torch

from ...kit.paths import user_path
from .kg import KGFormatError, KnowledgeGraph, text_lines
from .mining import MiningConfig, MiningResult, mine_rules, rules_text, with_rules

BENCHMARKS = ("kinship", "nations", "umls")
DATA_DIR = Path(__file__).resolve().parent / "benchmarks"
SPLIT_FILES = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}

_SAFE = re.compile(r"[a-z][A-Za-z0-9_\-]*")
_ESCAPE_PREFIX = "u_"


def symbol(name: str) -> str:
    """The engine symbol of a benchmark name (module doc): injective, never a variable or a reserved name."""
    if _SAFE.fullmatch(name) and not name.startswith(_ESCAPE_PREFIX):
        return name
    return _ESCAPE_PREFIX + "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}_" for c in name)


def unsymbol(sym: str) -> str:
    """The inverse of `symbol`."""
    if not sym.startswith(_ESCAPE_PREFIX):
        return sym
    parts = sym[len(_ESCAPE_PREFIX):].split("_")       # alternating: text, hex, text, hex, ..., text
    return "".join(p if i % 2 == 0 else chr(int(p, 16)) for i, p in enumerate(parts))


# ---- reading TSV splits ----------------------------------------------------------------------

def read_triples(path: str | Path) -> list[tuple[str, str, str]]:
    """(head, relation, tail) per line of a tab-separated file; blank lines are skipped. A line that is not
    three non-empty tab-separated fields, or a file that is not UTF-8, raises KGFormatError naming the file
    and the line."""
    return [t for t, _ in _read_numbered(Path(path))]


def _read_numbered(path: Path) -> list[tuple[tuple[str, str, str], int]]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")                      # a byte-order mark: dropped by text_lines
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise KGFormatError(f"{path}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {col}); "
                            "expected UTF-8 text, one head<TAB>relation<TAB>tail per line") from None
    out = []
    for i, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(f.strip() for f in fields):
            raise KGFormatError(f"{path}:{i}: expected head<TAB>relation<TAB>tail (3 non-empty tab-separated "
                                f"fields), got {len(fields)} field(s): {line!r}")
        out.append((tuple(f.strip() for f in fields), i))
    return out


@dataclasses.dataclass
class Benchmark:
    name: str
    kg: KnowledgeGraph              # facts = train, queries = valid + test, rules = mined (or none)
    names: dict[str, str]           # engine symbol -> original name (entities and relations)
    mining: MiningResult | None     # the mined rules with their counts (None when rules=False)
    source: Path

    def original(self, sym: str) -> str:
        return self.names.get(sym, sym)

    def splits(self) -> dict[str, int]:
        return {"train": len(self.kg.facts), **{k: len(v) for k, v in self.kg.queries.items()}}

    def save(self, directory: str | Path) -> Path:
        """The graph as a folder for the notebooks' `kg` parameter (facts.txt, rules.txt with the mining counts, valid.txt, test.txt):
        edit rules.txt and load it back with load_kg(folder)."""
        d = self.kg.save(directory)
        if self.mining is not None:
            (d / "rules.txt").write_text(rules_text(self.kg, self.mining.rules, header=f"rules mined from {self.name} train"))
        return d


def _split_text(numbered, file: Path, known_relations: set | None) -> str:
    lines = []
    for (h, r, t), i in numbered:
        if known_relations is not None and r not in known_relations:
            raise KGFormatError(f"{file}:{i}: relation {r!r} is in no training triple, so the prover has neither "
                                "facts nor rules for it (expected a relation of train.txt)")
        lines.append(f"{symbol(r)}({symbol(h)},{symbol(t)}).\n")
    return "".join(lines)


def _check_disjoint(triples: dict, d: Path) -> None:
    """A triple in two splits is a leak (a test triple among the training facts is proved by looking it up, and its
    rank says nothing of the rules): refused, naming both places. A triple repeated within one split is kept."""
    first: dict = {}
    for split in SPLIT_FILES:
        for t, i in triples.get(split, []):
            other = first.setdefault(t, (split, i))
            if other[0] != split:
                raise KGFormatError(f"{d / SPLIT_FILES[split]}:{i}: {' '.join(t)!r} is also in "
                                    f"{SPLIT_FILES[other[0]]} (line {other[1]}): the splits must be disjoint (a "
                                    f"{split} triple seen in {other[0]} is a leak); remove it from one of them")


def load_tsv_folder(directory: str | Path, rules: bool | MiningConfig = True, device="cpu",
                    name: str | None = None) -> Benchmark:
    """A folder of train.txt (required), valid.txt and test.txt in the TSV format (module doc), the three disjoint.
    rules=True mines with the default MiningConfig, a MiningConfig mines with it, False leaves the graph without
    rules."""
    d = Path(directory)
    if not (d / "train.txt").is_file():
        raise FileNotFoundError(f"{d}: no train.txt (expected train.txt, valid.txt, test.txt: head<TAB>relation<TAB>tail)")
    triples = {s: _read_numbered(d / f) for s, f in SPLIT_FILES.items() if (d / f).is_file()}
    _check_disjoint(triples, d)
    relations = {r for (_, r, _), _ in triples["train"]}
    facts = _split_text(triples["train"], d / "train.txt", None)
    queries = {s: _split_text(triples[s], d / SPLIT_FILES[s], relations) for s in ("valid", "test") if s in triples}
    names = {symbol(x): x for ts in triples.values() for triple, _ in ts for x in triple}
    kg = KnowledgeGraph.from_text(facts, "", queries,
                                  names={"facts": str(d / "train.txt"), **{s: str(d / SPLIT_FILES[s]) for s in queries}})
    mined = None
    if rules is not False:
        mined = mine_rules(kg, rules if isinstance(rules, MiningConfig) else MiningConfig(), device=device)
        kg = with_rules(kg, mined.rules)
    return Benchmark(name or d.name, kg, names, mined, d)


def load_benchmark(name: str, rules: bool | MiningConfig = True, device="cpu") -> Benchmark:
    """One of BENCHMARKS from the vendored splits (module doc)."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
    return load_tsv_folder(DATA_DIR / name, rules, device, name=name)


def _is_tsv_folder(d: Path) -> bool:
    if (d / "facts.txt").is_file() or not (d / "train.txt").is_file():
        return False
    with open(d / "train.txt", "rb") as fh:
        first = next((ln for ln in fh if ln.strip()), b"")
    return b"\t" in first and b"(" not in first


def load_graph(spec: str, *, n_families: int = 6, seed: int = 0, rules: bool | MiningConfig = True,
               device="cpu") -> tuple[KnowledgeGraph, Benchmark | None]:
    """The graph a notebook's `kg` parameter names, and its Benchmark (names, mined rules) where it has one:
        "family" (or "")           data.family_kg(n_families, seed), its own 15 rules; no Benchmark
        "kinship" | "nations" | "umls"   load_benchmark(spec, rules)
        a folder                   train/valid/test.txt in the TSV format (load_tsv_folder, rules mined), or
                                   facts.txt/rules.txt/... (KnowledgeGraph.load; no Benchmark)
    A benchmark name wins over a folder of the same name: write ./kinship for the folder."""
    if spec in ("", "family"):
        from .data import family_kg
        return family_kg(n_families=n_families, seed=seed), None
    if spec in BENCHMARKS:
        bench = load_benchmark(spec, rules, device)
        return bench.kg, bench
    d = Path(spec).expanduser()
    if d.is_dir():
        if _is_tsv_folder(d):
            bench = load_tsv_folder(d, rules, device)
            return bench.kg, bench
        return KnowledgeGraph.load(d), None
    raise ValueError(f"kg={spec!r}: not 'family', a benchmark ({', '.join(BENCHMARKS)}) or an existing folder")


def load_kg(spec: str, *, n_families: int = 6, seed: int = 0, rules: bool | MiningConfig = True,
            device="cpu") -> KnowledgeGraph:
    """The graph alone (`load_graph`)."""
    return load_graph(spec, n_families=n_families, seed=seed, rules=rules, device=device)[0]


# ---- what the notebooks' `kg` parameter names ----------------------------------------------------------------

def knowledge_graph(kg: str, n_families: int, seed: int, max_derived: int = 16, device="cpu"):
    """The graph the notebooks' `kg` parameter names (`load_graph`): "family" (the seeded synthetic graph), a
    benchmark (kinship, nations, umls: rules mined from train, at most max_derived - 1 per head, the successors a
    ground goal can offer), or a folder (a relative path is read from where the user ran the command).
    -> (KnowledgeGraph, Benchmark or None: names and mined rules of a benchmark)."""
    spec = kg if kg in ("", "family", *BENCHMARKS) else str(user_path(kg))
    return load_graph(spec, n_families=n_families, seed=seed, rules=MiningConfig(max_rules_per_head=max_derived - 1),
                      device=device)


def graph_label(kg: str) -> str:
    """A short name for the graph in tables and workload names: the parameter, or a folder's last part."""
    return kg if kg in ("family", *BENCHMARKS) else Path(kg).name


def test_queries(kg, n: int) -> torch.Tensor:
    """The first n test triples; n = 0: the whole split."""
    q = kg.queries["test"]
    return q if n == 0 else q[:n]
