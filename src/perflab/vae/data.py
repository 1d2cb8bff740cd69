"""The original task's data: 256-bit integers of three kinds, as noisy bit vectors.

Kind 0: a 256-bit prime. Kind 1: a hard composite p*q of two ~128-bit primes. Kind 2: an easy
composite (a 256-bit integer with a factor below 1000). Each integer is encoded as its 256 bits
(most significant first) as float32 plus N(0, 0.05^2) noise. Labels are the kinds (group 0: 0, 1, 2)
or the kinds plus 3 (group 1: 3, 4, 5), the two label sets the original trained on; a batch of 64
therefore holds at most 3 distinct labels.

The original generated fresh integers for every batch, live. Drawing a 256-bit prime costs a few
ms in Python, so here each seed first draws a pool of integers per kind (cached), and every batch
picks kinds uniformly, integers from the pools and fresh noise. The step cost does not depend on
which integers a batch holds; the shapes, the encoding and the labels are the original's.
"""
from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterator

import torch

BITS = 256
NOISE_SIGMA = 0.05
KINDS = ("prime", "hard composite", "easy composite")
GROUPS = {0: 0, 1: 3}  # group -> label offset: labels 0-2 or 3-5

_SMALL_PRIMES = [p for p in range(3, 1000) if all(p % q for q in range(2, math.isqrt(p) + 1))]
_SMALL_PRODUCT = 2 * math.prod(_SMALL_PRIMES)  # one gcd rejects any candidate with a factor < 1000
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _strong_probable_prime(n: int, a: int) -> bool:
    d, s = n - 1, 0
    while not d & 1:
        d >>= 1
        s += 1
    x = pow(a, d, n)
    if x in (1, n - 1):
        return True
    for _ in range(s - 1):
        x = x * x % n
        if x == n - 1:
            return True
    return False


def is_probable_prime(n: int) -> bool:
    """Miller-Rabin with the first 12 prime bases (error below 4^-12 for a random input)."""
    if n < 1000:
        return n in _SMALL_PRIMES or n == 2
    return math.gcd(n, _SMALL_PRODUCT) == 1 and all(_strong_probable_prime(n, a) for a in _MR_BASES)


def random_prime(bits: int, rng: random.Random, top_bits: int = 1) -> int:
    """An odd `bits`-bit integer with its `top_bits` highest bits set, drawn uniformly otherwise and
    redrawn until it is a probable prime."""
    top = ((1 << top_bits) - 1) << (bits - top_bits)
    while True:
        n = rng.getrandbits(bits) | top | 1
        if is_probable_prime(n):
            return n


def hard_composite(rng: random.Random, bits: int = BITS) -> int:
    """p * q with p, q primes of bits/2 bits each; both have their two top bits set, so
    p * q >= (1.5 * 2^(bits/2 - 1))^2 > 2^(bits - 1): the product has exactly `bits` bits."""
    return random_prime(bits // 2, rng, top_bits=2) * random_prime(bits // 2, rng, top_bits=2)


def easy_composite(rng: random.Random, bits: int = BITS) -> int:
    """A `bits`-bit integer with a factor below 1000 (most random integers have one)."""
    while True:
        n = rng.getrandbits(bits) | (1 << (bits - 1))
        if math.gcd(n, _SMALL_PRODUCT) > 1:
            return n


def to_bits(n: int, bits: int = BITS) -> list[int]:
    """Most significant bit first."""
    if n < 0 or n.bit_length() > bits:
        raise ValueError(f"{n} does not fit in {bits} bits")
    return [(n >> (bits - 1 - i)) & 1 for i in range(bits)]


@functools.lru_cache(maxsize=8)
def integer_pool(seed: int, per_kind: int) -> tuple[tuple[int, ...], ...]:
    """`per_kind` integers of each kind, drawn with `random.Random(seed)` (cached: ~1 s for 192)."""
    if per_kind < 1:
        raise ValueError(f"per_kind must be >= 1, got {per_kind}")
    rng = random.Random(seed)
    makers = (lambda: random_prime(BITS, rng), lambda: hard_composite(rng), lambda: easy_composite(rng))
    return tuple(tuple(make() for _ in range(per_kind)) for make in makers)


@functools.lru_cache(maxsize=8)
def bit_pool(seed: int, per_kind: int) -> torch.Tensor:
    """The pool as clean bits: [3, per_kind, 256] float32 (kind, integer, bit)."""
    pools = integer_pool(seed, per_kind)
    return torch.tensor([[to_bits(n) for n in pool] for pool in pools], dtype=torch.float32)


def stream(n_batches: int | None = None, *, batch: int = 64, group: int = 0, seed: int = 0,
           per_kind: int = 192, device: torch.device | str = "cpu") -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield `n_batches` batches (None: forever) of (x [batch, 256] float32, y [batch] int64).

    Kinds are uniform per sample; labels are kind + 3 * group. Built on the CPU with a seeded
    generator, then copied to `device` (an ordinary blocking copy, as the original streamed them)."""
    if group not in GROUPS:
        raise ValueError(f"group must be 0 (labels 0-2) or 1 (labels 3-5), got {group!r}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    pool = bit_pool(seed, per_kind)  # [3, P, 256]
    gen = torch.Generator().manual_seed(seed + 1)
    i = 0
    while n_batches is None or i < n_batches:
        kind = torch.randint(0, 3, (batch,), generator=gen)             # [B]
        pick = torch.randint(0, per_kind, (batch,), generator=gen)      # [B]
        x = pool[kind, pick] + NOISE_SIGMA * torch.randn(batch, BITS, generator=gen)  # [B, 256]
        y = kind + GROUPS[group]
        yield x.to(device), y.to(device)
        i += 1


def make_batches(n_batches: int, **kw) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`stream(n_batches, **kw)` as a list, already on the device (for timing steps without the copy)."""
    return list(stream(n_batches, **kw))
