"""SQuAD-style (context, question, answer) triples: a seeded generator over a generated fact base, and a
loader/writer for SQuAD-format JSON so users can bring real data (SQuAD v1.1/v2.0, HotpotQA converted).

    examples = make_examples(256, seed=0)        # deterministic for a seed
    examples = load_squad("dev-v1.1.json")       # first answer of each answerable question
    save_squad(examples, "mine.json")            # round-trips through load_squad

The encoder reads `prompt_text(ex)` as UTF-8 bytes; the LM is trained to produce `ex.answer`.
"""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

# Fixed word lists: the tokenizer's vocabulary is built from them (see tokenizer.py), so generated
# text tokenizes mostly into whole words, like a BPE vocabulary on its own language.
SYLLABLES = ("ka", "lo", "mi", "ra", "ven", "tor", "el", "sa", "dun", "bri", "mor", "na", "ti", "gal",
             "wen", "ash", "fel", "dor", "ri", "ko", "lan", "vi", "zar", "em")
CITIES = ("Paris", "Lima", "Oslo", "Cairo", "Kyoto", "Quito", "Dakar", "Perth", "Riga", "Hanoi", "Bern",
          "Accra", "Porto", "Tunis", "Sofia", "Turin", "Nagoya", "Lagos", "Minsk", "Zagreb")
PROFESSIONS = ("baker", "pilot", "chemist", "lawyer", "painter", "surgeon", "architect", "farmer",
               "violinist", "engineer", "librarian", "sculptor", "geologist", "tailor", "astronomer")
ORG_SUFFIXES = ("Systems", "Foods", "Motors", "Labs", "Textiles", "Press", "Mining", "Records")
INSTRUMENTS = ("piano", "cello", "flute", "guitar", "harp", "drums", "oboe", "trumpet")
TEMPLATE_WORDS = ("Context", "Question", "Answer", "was", "born", "in", "works", "as", "a", "an", "the",
                  "founded", "In", "which", "year", "did", "Where", "What", "does", "work", "Which", "company",
                  "plays", "instrument", "play", "You", "answer", "questions", "about", "given", "text",
                  "briefly", "and", "of", "who", "is", "from")


@dataclasses.dataclass(frozen=True)
class QAExample:
    context: str
    question: str
    answer: str
    answer_start: int = -1  # character offset of the answer in the context (SQuAD's field); -1 if unknown
    id: str = ""


def prompt_text(ex: QAExample) -> str:
    """What the byte encoder reads (the origin feeds context and question as UTF-8 bytes)."""
    return f"Context: {ex.context}\nQuestion: {ex.question}"


def _name(rng: random.Random) -> str:
    first = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    last = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    return f"{first} {last}"


def _person(rng: random.Random) -> dict:
    org = "".join(rng.choice(SYLLABLES) for _ in range(2)).capitalize() + " " + rng.choice(ORG_SUFFIXES)
    return {"name": _name(rng), "city": rng.choice(CITIES), "job": rng.choice(PROFESSIONS), "org": org,
            "year": str(rng.randint(1850, 2020)), "instrument": rng.choice(INSTRUMENTS)}


# (sentence about a person, question about that fact, the fact's key)
_FACTS = (
    ("{name} was born in {city}.", "Where was {name} born?", "city"),
    ("{name} works as a {job}.", "What does {name} work as?", "job"),
    ("{name} founded {org} in {year}.", "Which company did {name} found?", "org"),
    ("{name} founded {org} in {year}.", "In which year did {name} found {org}?", "year"),
    ("{name} plays the {instrument}.", "Which instrument does {name} play?", "instrument"),
)


def make_examples(n: int, seed: int = 0, *, max_prompt_bytes: int = 320, distractors: int = 1) -> list[QAExample]:
    """`n` triples from a seeded fact base: a context of facts about a target person and `distractors`
    other people (sentences shuffled), a question about one of the target's facts, its answer span.
    Distractor sentences are dropped until the prompt fits `max_prompt_bytes` (the encoder's limit)."""
    if n < 1:
        raise ValueError(f"make_examples: n must be >= 1, got {n}")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        people = [_person(rng) for _ in range(1 + distractors)]
        target = people[0]
        sent, question, key = rng.choice(_FACTS)
        fact = sent.format(**target)
        other = rng.choice([f for f in _FACTS if f[0] != sent])[0].format(**target)
        noise = [f[0].format(**p) for p in people[1:] for f in rng.sample(_FACTS, 2)]
        keyed = [(rng.random(), s) for s in [fact, other] + noise]  # a random order, fixed per example
        while True:
            context = " ".join(s for _, s in sorted(keyed))
            answer = target[key]
            ex = QAExample(context, question.format(**target), answer,
                           context.index(fact) + fact.index(answer), f"gen-{seed}-{i}")
            if len(prompt_text(ex).encode()) <= max_prompt_bytes or len(keyed) <= 2:
                break
            keyed.pop()  # drop a distractor sentence (the first two are the target's)
        out.append(ex)
    return out


def load_squad(path: str | Path, *, limit: int | None = None) -> list[QAExample]:
    """SQuAD-format JSON ({"data": [{"paragraphs": [{"context", "qas": [{"question", "answers"}]}]}]}):
    one example per question with at least one answer (SQuAD 2.0's unanswerable ones are skipped),
    taking its first answer."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")   # a byte-order mark (Windows editors write one) is not JSON: dropped
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x}); expected SQuAD's UTF-8 JSON") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise ValueError(f"{path}: not SQuAD format: expected a top-level object with a 'data' list")
    out = []
    for article in doc["data"]:
        for para in article.get("paragraphs", []):
            context = para.get("context")
            if not isinstance(context, str):
                raise ValueError(f"{path}: a paragraph of {article.get('title', '?')!r} has no 'context' string")
            for qa in para.get("qas", []):
                answers = qa.get("answers") or []
                if qa.get("is_impossible") or not answers:
                    continue
                out.append(_example(path, article, context, qa, len(out)))
                if limit is not None and len(out) >= limit:
                    return out
    return out


def _example(path: Path, article: dict, context: str, qa: dict, n: int) -> QAExample:
    """One question's example (its first answer), or a ValueError naming the file, the question and what is missing."""
    a = qa["answers"][0]
    where = f"{path}: question {qa.get('id', n)!r} of {article.get('title', '?')!r}"
    if not isinstance(qa.get("question"), str):
        raise ValueError(f"{where} has no 'question' string")
    if not isinstance(a, dict) or not isinstance(a.get("text"), str):
        raise ValueError(f"{where}: its first answer has no 'text' string")
    raw = a.get("answer_start", -1)
    try:                                # an int, or its text ("49"); a fraction or a word is no offset
        start = int(raw)
        ok = not isinstance(raw, bool) and float(raw) == start
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{where}: answer_start {raw!r} is not a character offset (an integer)")
    return QAExample(context, qa["question"], a["text"], start, str(qa.get("id", n)))


def save_squad(examples: list[QAExample], path: str | Path, *, title: str = "perflab.latentwire") -> Path:
    """Write examples as SQuAD v1.1 JSON (one paragraph per example)."""
    paragraphs = [{"context": ex.context,
                   "qas": [{"id": ex.id or str(i), "question": ex.question,
                            "answers": [{"text": ex.answer, "answer_start": ex.answer_start}]}]}
                  for i, ex in enumerate(examples)]
    path = Path(path)
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": title, "paragraphs": paragraphs}]}, indent=1))
    return path
