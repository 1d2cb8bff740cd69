"""LatentWire: bytes -> byte encoder -> latent pooler (M queries) -> adapter -> frozen LM -> answer losses.

    model = build_model(ModelConfig(), seed=0)           # default LM: perflab's seeded small GPT
    parts = model(batch, single_pass=True)                 # LossParts(total, tf, first, k)

Only encoder, pooler and adapter train; the LM is frozen but trained through (gradients flow through
it into the latent prefix), as in the origin.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import losses, reference
from .batches import PAD_BYTE, Batch
from .config import ModelConfig
from .gpt import TinyGPT
from .tokenizer import Tokenizer


class LossParts(NamedTuple):
    total: torch.Tensor
    tf: torch.Tensor       # teacher-forced CE of the whole answer
    first: torch.Tensor    # first-token CE
    k: torch.Tensor        # K-token CE


class ByteEncoder(nn.Module):
    """UTF-8 bytes [B, L] -> states [B, L, d] (a TransformerEncoder; the origin's has 6 layers)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.emb = nn.Embedding(PAD_BYTE + 1, cfg.d_enc)
        self.pos = nn.Embedding(cfg.max_bytes, cfg.d_enc)
        layer = nn.TransformerEncoderLayer(cfg.d_enc, cfg.enc_heads, 4 * cfg.d_enc, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.enc_layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(cfg.d_enc)
        self.max_bytes = cfg.max_bytes
        self.checkpointing = False

    def forward(self, ids: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        if ids.shape[1] > self.max_bytes:
            raise ValueError(f"encoder input of {ids.shape[1]} bytes exceeds its limit of {self.max_bytes}")
        x = self.emb(ids) + self.pos.weight[:ids.shape[1]]  # [B, L, d]
        if self.checkpointing and torch.is_grad_enabled():
            for layer in self.encoder.layers:  # recompute each layer in backward instead of storing it
                x = checkpoint(layer, x, src_key_padding_mask=pad, use_reentrant=False)
        else:
            x = self.encoder(x, src_key_padding_mask=pad)
        return self.ln(x)


class LatentPooler(nn.Module):
    """M learned queries cross-attend to the byte states: [B, L, d] -> latent [B, M, d]."""

    def __init__(self, d: int, m: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.queries = nn.Parameter(torch.randn(m, d) * 0.02)
        self.ln_q, self.ln_kv = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.attention = "manual"  # "manual" or "sdpa" (LatentWire.set_options)

    def forward(self, h: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        b, n, d = h.shape
        m, nh, hd = self.queries.shape[0], self.n_head, d // self.n_head
        q = self.q(self.ln_q(self.queries)).view(m, nh, hd).transpose(0, 1).expand(b, nh, m, hd)  # [B, H, M, hd]
        k, v = self.kv(self.ln_kv(h)).view(b, n, 2, nh, hd).permute(2, 0, 3, 1, 4)               # 2 x [B, H, L, hd]
        keep = ~pad[:, None, None, :]                                                            # [B, 1, 1, L]
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        else:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)                                        # [B, H, M, L]
            y = s.masked_fill(~keep, float("-inf")).softmax(-1) @ v
        x = self.queries + self.o(y.transpose(1, 2).reshape(b, m, d))                            # [B, M, d]
        return x + self.mlp(x)


class Adapter(nn.Module):
    """Latent [B, M, d_enc] -> LM embedding space [B, M, d_lm]: LayerNorm, MLP with a skip, then scaled
    so each vector's RMS is the LM's token-embedding RMS (times a learned scale, 1 at init)."""

    def __init__(self, d_in: int, hidden: int, d_out: int, target_rms: float):
        super().__init__()
        self.ln = nn.LayerNorm(d_in)
        self.mlp = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, d_out))
        self.skip = nn.Linear(d_in, d_out, bias=False)
        self.out_norm = nn.LayerNorm(d_out, elementwise_affine=False)
        self.scale = nn.Parameter(torch.ones(()))
        self.register_buffer("target_rms", torch.tensor(float(target_rms)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.ln(z)
        return self.out_norm(self.mlp(h) + self.skip(h)) * (self.scale * self.target_rms)


class LatentWire(nn.Module):
    def __init__(self, cfg: ModelConfig, lm: nn.Module, tokenizer):
        super().__init__()
        self.cfg = cfg
        self.encoder = ByteEncoder(cfg)
        self.pooler = LatentPooler(cfg.d_enc, cfg.latent_len, cfg.enc_heads)
        self.adapter = Adapter(cfg.d_enc, cfg.adapter_hidden, lm.embed(torch.zeros(1, dtype=torch.long)).shape[-1],
                               lm.embed_rms())
        self.lm = lm
        self.tokenizer = tokenizer

    def train(self, mode: bool = True) -> LatentWire:
        super().train(mode)
        self.lm.eval()  # frozen: never in training mode (no dropout)
        return self

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def set_options(self, *, attention: str = "manual", checkpointing: bool = False) -> None:
        """Attention kernel ("manual" or "sdpa") of the LM and pooler; activation checkpointing on/off."""
        self.lm.set_attention(attention)
        self.pooler.attention = attention
        self.encoder.checkpointing = self.lm.checkpointing = checkpointing

    def prefix(self, batch: Batch) -> torch.Tensor:
        """The latent prefix in the LM's embedding space: [B, M, d_lm]."""
        return self.adapter(self.pooler(self.encoder(batch.enc_ids, batch.enc_pad), batch.enc_pad))

    def lm_inputs(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(ctx [B, P, d_lm] = scaffold + latent + scaffold, answer embeddings [B, La, d_lm])."""
        pre, post, ans = (self.lm.embed(i) for i in (batch.pre_ids, batch.post_ids, batch.ans_ids))
        ctx = torch.cat([pre, self.prefix(batch).to(pre.dtype), post], dim=1)  # an HF LM may hold bf16 weights
        return ctx, ans

    def answer_logits(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced logits predicting each answer token: [B, La, V] (one LM forward)."""
        return reference.teacher_forced_logits(self.lm, *self.lm_inputs(batch))

    def forward(self, batch: Batch, *, single_pass: bool = False) -> LossParts:
        k = self.cfg.k_tokens
        ctx, ans_emb = self.lm_inputs(batch)
        ans_logits = reference.teacher_forced_logits(self.lm, ctx, ans_emb)  # [B, La, V]
        tf = reference.ce_mean(ans_logits, batch.labels)
        if single_pass:  # 1 LM forward per step
            first = losses.first_token_ce(ans_logits, batch.labels)
            kce = losses.k_token_ce(ans_logits, batch.labels, k)
        else:            # 1 + 1 + K LM forwards per step (the origin)
            first = reference.first_token_ce_loop(self.lm, ctx, batch.labels)
            kce = reference.k_token_ce_loop(self.lm, ctx, ans_emb, batch.labels, k)
        total = tf + self.cfg.first_weight * first + self.cfg.k_weight * kce
        return LossParts(total, tf, first, kce)


def lm_forwards_per_step(k_tokens: int, single_pass: bool) -> int:
    """LM forwards per micro-batch: 1 teacher-forced (+ 1 first-token + K K-token in the loop version)."""
    return 1 if single_pass else k_tokens + 2


def build_model(cfg: ModelConfig | None = None, *, seed: int = 0, lm: str = "gpt",
                device: torch.device | str = "cpu") -> LatentWire:
    """A LatentWire with trainable parts drawn from `seed` (global RNG untouched) and a frozen LM:
    lm="gpt" (perflab's small GPT, weights from cfg.lm_seed) or "hf:<local path>" (needs transformers)."""
    cfg = cfg or ModelConfig()
    if lm == "gpt":
        tok = Tokenizer()
        frozen = TinyGPT(tok.vocab_size, cfg.d_lm, cfg.lm_layers, cfg.lm_heads, cfg.lm_max_pos, seed=cfg.lm_seed)
    elif lm.startswith("hf:"):
        from ..kit.paths import user_path
        from .hf import load_hf_lm

        frozen = load_hf_lm(user_path(lm[3:]))  # relative: from where the user ran the command, not notebooks/
        tok = frozen.tokenizer
    else:
        raise ValueError(f"unknown lm {lm!r}: use 'gpt' (default, no downloads) or 'hf:<local path>'")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LatentWire(cfg, frozen, tok)
    return model.to(device)
