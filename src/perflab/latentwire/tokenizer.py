"""The default LM's tokenizer and the chat template whose scaffolds surround the latent prefix.

A small pure-Python word/subword tokenizer with byte fallback: the text is split into pieces (special
tokens, words with their leading space, digits, punctuation), each piece is a vocabulary word if it is
one, else greedy longest-match subwords, else UTF-8 bytes. It does per-piece Python work as a real
tokenizer + chat template does per example, which is the cost the report's "re-tokenized every step"
is about. Ids: specials first, then 256 bytes, then words and subwords (fixed lists, no training).
"""
from __future__ import annotations

import re

from .data import CITIES, INSTRUMENTS, ORG_SUFFIXES, PROFESSIONS, SYLLABLES, TEMPLATE_WORDS

SPECIALS = ("<pad>", "<bos>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
SYSTEM_PROMPT = "You answer questions about the given text briefly."

_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")
_PIECE_RE = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9\s]|\s")


class Tokenizer:
    """encode(text) -> list[int]; decode(ids) -> str. `pad_id`, `bos_id`, `eos_id`, `vocab_size`."""

    def __init__(self):
        words = sorted(set(TEMPLATE_WORDS + CITIES + PROFESSIONS + ORG_SUFFIXES + INSTRUMENTS))
        subwords = sorted(set(SYLLABLES) | {s.capitalize() for s in SYLLABLES})
        strings = [*words, *(" " + w for w in words), *subwords, *(" " + s for s in subwords)]
        self.id_to_str: list[str | bytes] = [*SPECIALS, *(bytes([b]) for b in range(256)), *strings]
        self.special_ids = {s: i for i, s in enumerate(SPECIALS)}
        self.vocab = {s: i for i, s in enumerate(self.id_to_str) if isinstance(s, str) and s not in self.special_ids}
        self.max_len = max(len(s) for s in self.vocab)
        self.pad_id, self.bos_id, self.eos_id = (self.special_ids[s] for s in ("<pad>", "<bos>", "<eos>"))
        self.byte_offset = len(SPECIALS)

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_str)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for part in _SPECIAL_RE.split(text):
            if part in self.special_ids:
                ids.append(self.special_ids[part])
            elif part:
                for piece in _PIECE_RE.findall(part):
                    ids.extend(self._piece(piece))
        return ids

    def _piece(self, piece: str) -> list[int]:
        hit = self.vocab.get(piece)
        if hit is not None:
            return [hit]
        out, i = [], 0
        while i < len(piece):  # greedy longest match, byte fallback
            for j in range(min(len(piece), i + self.max_len), i, -1):
                hit = self.vocab.get(piece[i:j])
                if hit is not None:
                    out.append(hit)
                    i = j
                    break
            else:
                out.extend(self.byte_offset + b for b in piece[i].encode())
                i += 1
        return out

    def scaffold(self) -> tuple[str, str]:
        return chat_scaffold()

    def decode(self, ids: list[int]) -> str:
        buf = bytearray()
        for i in ids:
            s = self.id_to_str[i]
            buf += s if isinstance(s, bytes) else s.encode()
        return buf.decode(errors="replace")


def chat_scaffold(system: str = SYSTEM_PROMPT) -> tuple[str, str]:
    """The chat template around the latent prefix: (text before it, text after it).

    The LM reads [before] [M latent vectors] [after] [answer]: the latent takes the place of the user's
    message, and "Answer:" anchors the first answer token (origin: per-model chat template + anchor)."""
    return f"<bos><|system|>{system}<|end|><|user|>", "<|end|><|assistant|>Answer:"


def answer_ids(tok: Tokenizer, answer: str) -> list[int]:
    """Answer tokens as the LM must produce them after "Answer:", ending with <eos>."""
    return tok.encode(" " + answer.strip()) + [tok.eos_id]
