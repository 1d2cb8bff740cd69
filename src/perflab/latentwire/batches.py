"""From examples to tensors: tokenizing one example (with the input checks), collating a batch, the
pre-tokenized cache that replaces per-step tokenization, and the sample order every trainer shares.

A batch holds, per example b (shapes with B examples):
    enc_ids [B, Lb] int64   prompt bytes (0..255), padded with PAD_BYTE      enc_pad [B, Lb] bool (True = pad)
    pre_ids [B, Lp] int64   chat template before the latent prefix          post_ids [B, Lq] int64 after it
    ans_ids [B, La] int64   answer + <eos>, padded with <pad> to La >= K     labels  [B, La] int64 (-100 = pad)
    index   [B] int64       which examples (for checks; never used by the model)
"""
from __future__ import annotations

import dataclasses

import torch

from ..kit.syncs import pin_memory
from .data import QAExample, prompt_text
from .tokenizer import Tokenizer, answer_ids

PAD_BYTE = 256   # byte vocabulary: 0..255 and the pad
IGNORE = -100    # F.cross_entropy's ignore_index


@dataclasses.dataclass
class TokenizedExample:
    enc: list[int]
    pre: list[int]
    post: list[int]
    ans: list[int]


def tokenize_example(ex: QAExample, tok: Tokenizer, *, max_bytes: int, max_answer_tokens: int,
                     where: str = "example") -> TokenizedExample:
    """Tokenize one example, refusing what the model cannot take (clear errors, nothing truncated)."""
    name = f"{where} {ex.id!r}" if ex.id else where
    if not ex.answer or not ex.answer.strip():
        raise ValueError(f"{name}: empty answer; every example needs a non-empty answer (the LM is trained "
                         "to produce it)")
    enc = list(prompt_text(ex).encode("utf-8"))
    if len(enc) > max_bytes:
        raise ValueError(f"{name}: prompt is {len(enc)} bytes, longer than the encoder's limit of {max_bytes} "
                         "bytes (ModelConfig.max_bytes); shorten the context or raise the limit")
    ans = answer_ids(tok, ex.answer)
    if len(ans) - 1 > max_answer_tokens:
        raise ValueError(f"{name}: answer is {len(ans) - 1} tokens, more than max_answer_tokens={max_answer_tokens}")
    pre, post = tok.scaffold()  # rendered per example, as the origin applies its chat template per example
    return TokenizedExample(enc=enc, pre=tok.encode(pre), post=tok.encode(post), ans=ans)


@dataclasses.dataclass
class Batch:
    enc_ids: torch.Tensor
    enc_pad: torch.Tensor
    pre_ids: torch.Tensor
    post_ids: torch.Tensor
    ans_ids: torch.Tensor
    labels: torch.Tensor
    index: torch.Tensor

    def tensors(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to(self, device, non_blocking: bool = False) -> Batch:
        """Every tensor moved (index stays on the host: it is bookkeeping)."""
        return Batch(**{k: v if k == "index" else v.to(device, non_blocking=non_blocking)
                        for k, v in self.tensors().items()})

    def pin_memory(self) -> Batch:
        """Page-locked copies (DataLoader(pin_memory=True) calls this), so .to(cuda, non_blocking=True)
        is a real asynchronous DMA instead of a staged copy (`perflab.kit.syncs.pin_memory`: marked on a CPU host)."""
        return Batch(**{k: pin_memory(v) for k, v in self.tensors().items()})

    @property
    def size(self) -> int:
        return self.enc_ids.shape[0]

    @property
    def widths(self) -> tuple[int, int]:
        """(prompt bytes, answer columns): the two lengths that vary from batch to batch."""
        return self.enc_ids.shape[1], self.ans_ids.shape[1]

    def pad_to(self, widths: tuple[int, int], pad_id: int) -> Batch:
        """The same batch with prompt bytes and answer columns padded to `widths` (a compiled step's fixed
        shapes). The losses do not change: padded bytes are masked out of every attention, padded answer
        columns are IGNORE labels placed after the real answer (causal: no real position sees them)."""
        enc, ans = widths[0] - self.enc_ids.shape[1], widths[1] - self.ans_ids.shape[1]
        if enc < 0 or ans < 0:
            raise ValueError(f"batch widths {self.widths} exceed the fixed widths {tuple(widths)}")
        if enc == 0 and ans == 0:
            return self
        pad = torch.nn.functional.pad
        return Batch(enc_ids=pad(self.enc_ids, (0, enc), value=PAD_BYTE), enc_pad=pad(self.enc_pad, (0, enc), value=True),
                     pre_ids=self.pre_ids, post_ids=self.post_ids, ans_ids=pad(self.ans_ids, (0, ans), value=pad_id),
                     labels=pad(self.labels, (0, ans), value=IGNORE), index=self.index)


def _pad(rows: list[list[int]], value: int, min_width: int = 0) -> torch.Tensor:
    width = max(min_width, max(len(r) for r in rows))
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def collate(items: list[TokenizedExample], index: list[int], *, pad_id: int, k_tokens: int) -> Batch:
    """Tensors of one batch, built from Python lists (the per-step work the cache removes)."""
    if len({len(t.pre) for t in items}) != 1 or len({len(t.post) for t in items}) != 1:
        raise ValueError("collate: scaffolds of different lengths in one batch (the chat template must be fixed)")
    enc_ids = _pad([t.enc for t in items], PAD_BYTE)
    ans_ids = _pad([t.ans for t in items], pad_id, min_width=k_tokens)  # >= K columns: one per K-token target
    labels = _pad([t.ans for t in items], IGNORE, min_width=k_tokens)
    return Batch(enc_ids=enc_ids, enc_pad=enc_ids == PAD_BYTE, pre_ids=_pad([t.pre for t in items], pad_id),
                 post_ids=_pad([t.post for t in items], pad_id), ans_ids=ans_ids, labels=labels,
                 index=torch.tensor(index, dtype=torch.long))


def batch_on_the_fly(examples, index: list[int], tok: Tokenizer, cfg) -> Batch:
    """Tokenize examples[index] now and collate them (`cfg`: a ModelConfig): the per-step data path."""
    items = [tokenize_example(examples[i], tok, max_bytes=cfg.max_bytes, max_answer_tokens=cfg.max_answer_tokens,
                              where=f"example {i}") for i in index]
    return collate(items, index, pad_id=tok.pad_id, k_tokens=cfg.k_tokens)


class PretokenizedCache:
    """Every example tokenized once into padded matrices; a batch is a row gather plus a slice.

    `batch(index)` equals `collate([tokenize_example(...) for i in index], index)` exactly (tested)."""

    def __init__(self, examples: list[QAExample], tok: Tokenizer, *, max_bytes: int, max_answer_tokens: int,
                 k_tokens: int, pin: bool = False):
        items = [tokenize_example(ex, tok, max_bytes=max_bytes, max_answer_tokens=max_answer_tokens,
                                  where=f"example {i}") for i, ex in enumerate(examples)]
        full = collate(items, list(range(len(items))), pad_id=tok.pad_id, k_tokens=k_tokens)
        self.enc_len = [len(t.enc) for t in items]    # Python ints: slicing a batch needs no host sync
        self.ans_len = [max(k_tokens, len(t.ans)) for t in items]
        self.k_tokens = k_tokens
        self.full = full.pin_memory() if pin else full
        self.pin = pin

    @classmethod
    def for_model(cls, examples, tok: Tokenizer, cfg, *, pin: bool = False) -> PretokenizedCache:
        """The cache for a ModelConfig's limits and K."""
        return cls(examples, tok, max_bytes=cfg.max_bytes, max_answer_tokens=cfg.max_answer_tokens,
                   k_tokens=cfg.k_tokens, pin=pin)

    def __len__(self) -> int:
        return len(self.enc_len)

    @property
    def widths(self) -> tuple[int, int]:
        """The longest prompt (bytes) and answer (columns) of the data: fixed widths that fit every batch."""
        return self.full.widths

    def batch(self, index: list[int], *, full_width: bool = False) -> Batch:
        """Rows `index`, cut to the batch's own longest prompt and answer (or kept at the data's widths,
        `full_width`: the fixed shapes of a compiled step)."""
        idx = torch.tensor(index, dtype=torch.long)
        lb = self.full.enc_ids.shape[1] if full_width else max(self.enc_len[i] for i in index)
        la = self.full.ans_ids.shape[1] if full_width else max(self.ans_len[i] for i in index)
        f = self.full
        b = Batch(enc_ids=f.enc_ids[idx, :lb], enc_pad=f.enc_pad[idx, :lb], pre_ids=f.pre_ids[idx],
                  post_ids=f.post_ids[idx], ans_ids=f.ans_ids[idx, :la], labels=f.labels[idx, :la], index=idx)
        return b.pin_memory() if self.pin else b  # a gather makes a new (pageable) tensor: pin it again


class IndexStream:
    """The sample order every trainer uses: a seeded permutation per epoch, cut into batches, sharded
    by rank (rank r takes every world-th batch position, like DistributedSampler)."""

    def __init__(self, n: int, batch_size: int, seed: int, *, rank: int = 0, world: int = 1):
        if batch_size * world > n:
            raise ValueError(f"{n} examples cannot fill one batch of {batch_size} on each of {world} rank(s)")
        self.n, self.batch_size, self.rank, self.world = n, batch_size, rank, world
        self.gen = torch.Generator().manual_seed(seed)
        self._order: list[int] = []

    def next(self) -> list[int]:
        if len(self._order) < self.batch_size:  # new epoch (drop the ragged tail, like drop_last=True)
            perm = torch.randperm(self.n, generator=self.gen).tolist()
            usable = self.n - self.n % (self.world * self.batch_size)
            self._order = perm[self.rank:usable:self.world]
        out, self._order = self._order[:self.batch_size], self._order[self.batch_size:]
        return out
