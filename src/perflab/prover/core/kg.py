"""Knowledge graphs of binary facts and Horn rules, and the text format they are stored in.

A directory holds
    facts.txt   pred(a,b).  one ground fact per line (train.txt is accepted as an alias)
    rules.txt   head(X,Y) :- b1(X,Z), b2(Z,Y).  bodies of 1 or 2 atoms; names starting upper-case (or _)
                are variables; an optional leading weight (`0.9 head(...) :- ...` or `0.9::head...`) is ignored
    test.txt / valid.txt / train_queries.txt   queries, in the facts format
Blank lines and lines starting with % or # are skipped. UTF-8, a byte-order mark dropped; lines end in \\n, \\r\\n or \\r
(`text_lines`), the last one with or without. Every error names the file and line.

Ids (shared by the tensor engine, the reference and the policy):
    predicates  0 padding, 1 <true>, 2 <false>, 3 <end>, 4.. the graph's predicates
    terms       0 padding, 1..C constants, C+1.. variables (rules store variable k as -(k+1))
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import torch

PAD, TRUE, FALSE, END = 0, 1, 2, 3
FIRST_PRED = 4
SPECIAL_PREDICATES = ("<pad>", "<true>", "<false>", "<end>")
SPLITS = ("train", "valid", "test")
_QUERY_FILES = {"train": "train_queries.txt", "valid": "valid.txt", "test": "test.txt"}

_ATOM = re.compile(r"\s*([A-Za-z_][\w\-.]*)\s*\(([^()]*)\)\s*")
_WEIGHT = re.compile(r"^\s*[-+]?\d+(\.\d*)?([eE][-+]?\d+)?\s*(::|\s)\s*")


class KGFormatError(ValueError):
    """A line of a knowledge-graph file that cannot be read (the message names file and line)."""


@dataclasses.dataclass(frozen=True)
class Rule:
    head: tuple[int, int, int]                 # (pred, arg, arg); variables as -(k+1)
    body: tuple[tuple[int, int, int], ...]     # 1 or 2 atoms
    n_vars: int                                # distinct variables in the rule
    text: str = ""
    weight: float = 1.0                        # in (0, 1]: a proof's score adds log(weight) per use (mined: confidence)


@dataclasses.dataclass
class KnowledgeGraph:
    predicates: list[str]               # id -> name (the first four are SPECIAL_PREDICATES)
    constants: list[str]                # id -> name (0 is padding)
    facts: torch.Tensor                 # [F, 3] int64, unique, sorted by (pred, a, b)
    rules: list[Rule]
    queries: dict[str, torch.Tensor]    # split -> [Q, 3] int64
    true_facts: torch.Tensor | None = None  # [T, 3] every true triple known (for filtering); default facts+queries

    def __post_init__(self):
        self._pred_ids = {n: i for i, n in enumerate(self.predicates)}
        self._const_ids = {n: i for i, n in enumerate(self.constants)}

    @property
    def n_constants(self) -> int:
        return len(self.constants) - 1

    @property
    def n_predicates(self) -> int:
        return len(self.predicates)

    def pred_id(self, name: str) -> int:
        if name not in self._pred_ids or self._pred_ids[name] < FIRST_PRED:
            raise KeyError(f"unknown predicate {name!r}")
        return self._pred_ids[name]

    def const_id(self, name: str) -> int:
        if name not in self._const_ids or self._const_ids[name] == 0:
            raise KeyError(f"unknown constant {name!r}")
        return self._const_ids[name]

    def atom(self, text: str) -> torch.Tensor:
        """'parent(ann,bob)' -> tensor([pred, a, b])."""
        name, args = _parse_atom(text, "<atom>", 0)
        try:
            return torch.tensor([self.pred_id(name), self.const_id(args[0]), self.const_id(args[1])])
        except KeyError as e:
            raise KeyError(f"{text!r}: {e.args[0]}") from None

    def term_str(self, t: int) -> str:
        return self.constants[t] if 0 < t <= self.n_constants else (f"_{t - self.n_constants}" if t > 0 else "-")

    def atom_str(self, atom) -> str:
        p, a, b = (int(x) for x in atom)
        if p < FIRST_PRED:
            return SPECIAL_PREDICATES[p]
        return f"{self.predicates[p]}({self.term_str(a)},{self.term_str(b)})"

    def true_set(self) -> set[tuple[int, int, int]]:
        """Every triple known to be true: facts, all query splits, and `true_facts` (used to filter corruptions)."""
        parts = [self.facts, *self.queries.values()] + ([self.true_facts] if self.true_facts is not None else [])
        return {tuple(r) for part in parts for r in part.tolist()}

    def summary(self) -> str:
        qs = ", ".join(f"{k} {len(v)}" for k, v in self.queries.items())
        return (f"{self.n_predicates - FIRST_PRED} predicates, {self.n_constants} constants, "
                f"{len(self.facts)} facts, {len(self.rules)} rules; queries: {qs or 'none'}")

    # ---- building ------------------------------------------------------------------------
    @classmethod
    def from_text(cls, facts: str, rules: str = "", queries: dict[str, str] | None = None,
                  names: dict[str, str] | None = None, true_facts: str = "") -> KnowledgeGraph:
        """Build from the text of the files (see module doc). `names` maps a part to the file name
        used in error messages."""
        names = {"facts": "facts.txt", "rules": "rules.txt", "true": "true_facts", **(names or {})}
        fact_atoms = [a for a, _ in _parse_facts(facts, names["facts"])]
        parsed_rules = _parse_rules(rules, names["rules"])
        raw_queries = {split: _parse_facts(text, names.get(split, _QUERY_FILES.get(split, split)))
                       for split, text in (queries or {}).items()}
        true_atoms = [a for a, _ in _parse_facts(true_facts, names["true"])]
        rule_atoms = [a for head, body, _, _ in parsed_rules for a in (head, *body)]
        preds = _ordered(SPECIAL_PREDICATES, (name for name, _ in fact_atoms + rule_atoms))
        for atoms in raw_queries.values():
            for (name, _), (file, line) in atoms:
                if name not in preds:
                    raise KGFormatError(f"{file}:{line}: unknown predicate {name!r} in a query "
                                        f"(not in the facts or rules; known: {', '.join(preds[FIRST_PRED:])})")
        query_atoms = [a for atoms in raw_queries.values() for a, _ in atoms]
        rule_consts = [t for _, args in rule_atoms for t in args if not _is_var(t)]  # facts: every token is one
        consts = _ordered(["<pad>"], [t for _, args in fact_atoms for t in args] + rule_consts
                          + [t for _, args in query_atoms + true_atoms for t in args])
        pid, cid = dict(map(reversed, enumerate(preds))), dict(map(reversed, enumerate(consts)))

        def enc(atoms):
            rows = [[pid[n], cid[a], cid[b]] for n, (a, b) in atoms]
            return torch.tensor(rows, dtype=torch.long).reshape(-1, 3)

        facts_t = torch.unique(enc(fact_atoms), dim=0) if fact_atoms else torch.zeros(0, 3, dtype=torch.long)
        rules_t = [_encode_rule(h, b, pid, cid, text) for h, b, text, _ in parsed_rules]
        q = {split: enc([a for a, _ in atoms]) for split, atoms in raw_queries.items()}
        tf = torch.unique(enc(true_atoms), dim=0) if true_atoms else None
        return cls(predicates=preds, constants=consts, facts=facts_t, rules=rules_t, queries=q, true_facts=tf)

    @classmethod
    def load(cls, directory: str | Path) -> KnowledgeGraph:
        """Read facts.txt (or train.txt), rules.txt and whichever query files exist (see module doc)."""
        d = Path(directory)
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: not a directory")
        facts_file = next((d / n for n in ("facts.txt", "train.txt") if (d / n).is_file()), None)
        if facts_file is None:
            raise FileNotFoundError(f"{d}: neither facts.txt nor train.txt is there")
        rules_file = d / "rules.txt"
        queries, names = {}, {"facts": str(facts_file), "rules": str(rules_file)}
        for split, fname in _QUERY_FILES.items():
            if (d / fname).is_file():
                queries[split] = read_text(d / fname)
                names[split] = str(d / fname)
        return cls.from_text(read_text(facts_file), read_text(rules_file) if rules_file.is_file() else "",
                             queries, names)

    def save(self, directory: str | Path) -> Path:
        """Write the graph in the text format (facts.txt, rules.txt, query files)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "facts.txt").write_text("".join(f"{self.atom_str(f)}.\n" for f in self.facts.tolist()))
        (d / "rules.txt").write_text("".join(f"{self.rule_str(r)}\n" for r in self.rules))
        for split, q in self.queries.items():
            (d / _QUERY_FILES[split]).write_text("".join(f"{self.atom_str(a)}.\n" for a in q.tolist()))
        return d

    def rule_str(self, r: Rule) -> str:
        def t(x):
            return "XYZWVUTS"[-x - 1] if -x - 1 < 8 and x < 0 else (f"V{-x}" if x < 0 else self.constants[x])

        def a(atom):
            return f"{self.predicates[atom[0]]}({t(atom[1])},{t(atom[2])})"
        return f"{a(r.head)} :- {', '.join(a(b) for b in r.body)}."


# ---- parsing ---------------------------------------------------------------------------------

def read_text(path: Path) -> str:
    """A file's text as UTF-8 (a byte-order mark kept: `text_lines` drops it); a file that is not raises KGFormatError
    naming the file, line and column."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise KGFormatError(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at column {col}); "
                            "save the file as UTF-8") from None


def _ordered(first, names) -> list[str]:
    """`first` then every new name, in order of first appearance."""
    out = list(first)
    seen = set(out)
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _is_var(term: str) -> bool:
    return term[:1].isupper() or term[:1] == "_"


_NEWLINE = re.compile(r"\r\n|\r|\n")


def text_lines(text: str) -> list[str]:
    """A file's lines as an editor numbers them: cut at \\n, \\r\\n or \\r only (str.splitlines also cuts at a
    form feed, \\x1c-\\x1e, \\x85 and U+2028/9, which can sit inside a name: a triple cut in two, and every later
    line misnumbered), a last line without its newline kept, a leading byte-order mark dropped."""
    lines = _NEWLINE.split(text.removeprefix("\ufeff"))
    return lines[:-1] if lines[-1] == "" else lines


def _lines(text: str):
    for i, raw in enumerate(text_lines(text), start=1):
        line = raw.strip()
        if line and not line.startswith(("%", "#")):
            yield i, line


def _parse_atom(text: str, file: str, line: int):
    m = _ATOM.fullmatch(text)
    if not m:
        raise KGFormatError(f"{file}:{line}: cannot read an atom in {text.strip()!r} (expected pred(a,b))")
    name, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
    if len(args) != 2 or not all(args):
        raise KGFormatError(f"{file}:{line}: {name}/{len(args)} in {text.strip()!r}: "
                            "only binary predicates (arity 2) are supported")
    return name, tuple(args)


def _parse_facts(text: str, file: str):
    out = []
    for i, line in _lines(text):
        body = line[:-1] if line.endswith(".") else line
        if ":-" in body:
            raise KGFormatError(f"{file}:{i}: a rule in a facts file: {line!r}")
        out.append((_parse_atom(body, file, i), (file, i)))
    return out


def _split_atoms(text: str, file: str, line: int) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    if depth != 0:
        raise KGFormatError(f"{file}:{line}: unbalanced parentheses in {text.strip()!r}")
    parts.append(cur)
    return [p.strip() for p in parts]


def _parse_rules(text: str, file: str):
    rules = []
    for i, line in _lines(text):
        src = _WEIGHT.sub("", line, count=1)
        src = src[:-1] if src.endswith(".") else src
        if ":-" not in src:
            raise KGFormatError(f"{file}:{i}: a rule needs 'head :- body', got {line!r}")
        head_s, body_s = src.split(":-", 1)
        head = _parse_atom(head_s, file, i)
        body_parts = _split_atoms(body_s, file, i)
        if any(not p for p in body_parts):
            raise KGFormatError(f"{file}:{i}: empty atom in the body of {line!r}")
        body = [_parse_atom(p, file, i) for p in body_parts]
        if not 1 <= len(body) <= 2:
            raise KGFormatError(f"{file}:{i}: rule bodies of 1 or 2 atoms are supported, got {len(body)} in {line!r}")
        rules.append((head, body, line, i))
    return rules


def _encode_rule(head, body, pid, cid, text) -> Rule:
    var_ids: dict[str, int] = {}

    def term(t):
        if _is_var(t):
            var_ids.setdefault(t, len(var_ids))
            return -(var_ids[t] + 1)
        return cid[t]

    def atom(a):
        name, (x, y) = a
        return (pid[name], term(x), term(y))
    h = atom(head)
    b = tuple(atom(a) for a in body)
    return Rule(head=h, body=b, n_vars=len(var_ids), text=text)
