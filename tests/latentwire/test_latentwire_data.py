"""perflab.latentwire data: the generator, the SQuAD loader, the tokenizer, batches and the pre-tokenized cache."""
import random
from pathlib import Path

import pytest
import torch

from perflab.latentwire import (
    PretokenizedCache,
    QAExample,
    Tokenizer,
    collate,
    load_squad,
    make_examples,
    prompt_text,
    save_squad,
    tokenize_example,
)
from perflab.latentwire.batches import IGNORE, PAD_BYTE, IndexStream

FIXTURE = Path(__file__).parents[1] / "fixtures" / "latentwire" / "squad_tiny.json"
TOK = Tokenizer()


def _tok(ex, **kw):
    return tokenize_example(ex, TOK, max_bytes=kw.get("max_bytes", 320), max_answer_tokens=32)


def test_generator_is_seeded_and_answers_are_spans_of_the_context():
    a, b, c = make_examples(40, seed=3), make_examples(40, seed=3), make_examples(40, seed=4)
    assert a == b and a != c
    for ex in a:
        assert ex.context[ex.answer_start:ex.answer_start + len(ex.answer)] == ex.answer
        assert len(prompt_text(ex).encode()) <= 320
    assert len({ex.question for ex in a}) == 40


def test_generator_drops_distractors_to_fit_the_encoder_limit():
    short = make_examples(30, seed=1, max_prompt_bytes=160, distractors=3)
    assert all(len(prompt_text(ex).encode()) <= 160 for ex in short)
    assert all(ex.context[ex.answer_start:].startswith(ex.answer) for ex in short)


def test_squad_loader_skips_unanswerable_and_round_trips(tmp_path):
    exs = load_squad(FIXTURE)
    assert [e.id for e in exs] == ["q1", "q3", "q4"]  # q2 is SQuAD 2.0 unanswerable
    assert exs[0].answer == "A Coruña" and exs[1].answer == "the 2nd century"
    for e in exs:
        assert e.context[e.answer_start:e.answer_start + len(e.answer)] == e.answer
    assert load_squad(FIXTURE, limit=2) == exs[:2]
    back = load_squad(save_squad(exs, tmp_path / "out.json"))
    assert back == exs


@pytest.mark.parametrize("content, message", [("{not json", "not valid JSON"), ('{"version": 1}', "'data' list"),
                                              ('{"data": [{"paragraphs": [{"qas": []}]}]}', "no 'context'")])
def test_squad_loader_refuses_malformed_files(tmp_path, content, message):
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_squad(f)


@pytest.mark.parametrize("how", ["BOM", "CRLF", "no final newline", "BOM, CRLF, blank lines"])
def test_the_squad_loader_reads_a_file_from_windows_or_without_its_final_newline(tmp_path, how):
    """Issue 48: a SQuAD file saved by a Windows editor (a byte-order mark, CRLF) or cut without its final newline reads
    the same examples (json.loads refused the BOM: 'Unexpected UTF-8 BOM')."""
    text = FIXTURE.read_text(encoding="utf-8").rstrip("\n")
    if "CRLF" in how:
        text = text.replace("\n", "\r\n")
    if "blank" in how:
        text = "\r\n\r\n" + text.replace("\r\n", "\r\n\r\n", 3) + "\r\n\r\n"
    f = tmp_path / "squad.json"
    f.write_bytes(("\ufeff" if "BOM" in how else "").encode() + text.encode("utf-8"))
    assert load_squad(f) == load_squad(FIXTURE)


@pytest.mark.parametrize("content, message", [
    (b'{"data": [\n  {"title": "T",\n  "paragraphs": [{"context": "Caf\xe9"}]}]}', "bad.json:3: not UTF-8 (byte 0xe9)"),
    (b'{"data": [\n\n  {"title": "T",}]}', "bad.json:3: not valid JSON"),
    (b'{"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "q9", "answers": [{"text": "c"}]}]}]}]}',
     "bad.json: question 'q9' of 'T' has no 'question' string"),
    (b'{"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "q9", "question": "?", '
     b'"answers": [{"answer_start": 0}]}]}]}]}', "question 'q9' of 'T': its first answer has no 'text' string"),
    (b'{"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "q9", "question": "?", '
     b'"answers": [{"text": "c", "answer_start": "start"}]}]}]}]}', "answer_start 'start' is not a character offset"),
])
def test_the_squad_loader_refuses_a_malformed_file_naming_the_file_and_where(tmp_path, content, message):
    f = tmp_path / "bad.json"
    f.write_bytes(content)
    with pytest.raises(ValueError) as e:
        load_squad(f)
    assert message in str(e.value) and str(f) in str(e.value)


def test_tokenizer_round_trips_text_with_bytes_it_has_no_word_for():
    for text in [prompt_text(e) for e in make_examples(5, seed=2)] + ["Coruña 2nd ∑ x\ty", "<|user|>hi<eos>"]:
        ids = TOK.encode(text)
        assert TOK.decode(ids) == text
        assert all(0 <= i < TOK.vocab_size for i in ids)
    assert len(TOK.encode(" Paris")) == 1 and TOK.encode("<|end|>") == [TOK.special_ids["<|end|>"]]


def test_collate_pads_bytes_and_answers_and_masks_labels():
    exs = [QAExample("c", "q?", "Lima"), QAExample("a longer context here", "q?", "Vel Mor Systems ok")]
    b = collate([_tok(e) for e in exs], [7, 9], pad_id=TOK.pad_id, k_tokens=6)
    n0 = len(prompt_text(exs[0]).encode())
    assert b.enc_ids.shape[0] == 2 and (b.enc_ids[0, n0:] == PAD_BYTE).all() and b.enc_pad[0, n0:].all()
    assert not b.enc_pad[1].any()
    assert b.ans_ids.shape[1] >= 6  # at least K columns
    assert b.labels[0, 2:].eq(IGNORE).all() and b.labels[0, 1] == TOK.eos_id  # " Lima" <eos> then padding
    assert b.index.tolist() == [7, 9]


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_pretokenized_cache_equals_tokenizing_on_the_fly(batch_size):
    exs = make_examples(40, seed=5) + load_squad(FIXTURE)
    cache = PretokenizedCache(exs, TOK, max_bytes=320, max_answer_tokens=32, k_tokens=4)
    rng = random.Random(batch_size)
    for _ in range(5):
        index = rng.sample(range(len(exs)), batch_size)
        fly = collate([_tok(exs[i]) for i in index], index, pad_id=TOK.pad_id, k_tokens=4)
        cached = cache.batch(index)
        for name, t in fly.tensors().items():
            assert torch.equal(cached.tensors()[name], t), name


def test_index_stream_shards_epochs_without_overlap():
    a = IndexStream(20, 3, seed=1, rank=0, world=2)
    b = IndexStream(20, 3, seed=1, rank=1, world=2)
    ea = [i for _ in range(3) for i in a.next()]
    eb = [i for _ in range(3) for i in b.next()]
    assert len(set(ea) | set(eb)) == 18 and not set(ea) & set(eb)  # one epoch: 18 of 20 (ragged tail dropped)
    with pytest.raises(ValueError, match="cannot fill one batch"):
        IndexStream(5, 3, seed=0, world=2)


def test_empty_answer_is_refused():
    with pytest.raises(ValueError, match="empty answer"):
        _tok(QAExample("ctx", "q?", "  ", id="e1"))


def test_prompt_longer_than_the_encoder_limit_is_refused():
    ex = QAExample("x" * 400, "q?", "a", id="long")
    with pytest.raises(ValueError, match=r"'long': prompt is 4\d\d bytes, longer than the encoder's limit of 320"):
        _tok(ex)
    with pytest.raises(ValueError, match="example 1 'long'"):
        PretokenizedCache([make_examples(1)[0], ex], TOK, max_bytes=320, max_answer_tokens=32, k_tokens=4)


def test_answer_longer_than_the_limit_is_refused():
    with pytest.raises(ValueError, match="more than max_answer_tokens=2"):
        tokenize_example(QAExample("c", "q", "Paris Lima Oslo"), TOK, max_bytes=320, max_answer_tokens=2)
