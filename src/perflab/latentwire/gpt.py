"""The default frozen decoder LM: a small GPT with seeded weights (no downloads).

It stands in for the origin's frozen Llama/Qwen: a causal LM that takes `inputs_embeds` (the latent
prefix is a sequence of vectors, not tokens) and returns logits. `forward_calls` counts LM forwards,
the quantity the single-pass losses cut by K+1 per step.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attention = "manual"  # "manual" (softmax(QK^T)V, the eager path) or "sdpa"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)  # 3 x [B, H, T, hd]
        if self.attention == "sdpa":
            # one fused kernel (flash / memory-efficient on CUDA): no [B, H, T, T] scores in memory
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])            # [B, H, T, T]
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v          # [B, H, T, hd]
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_head)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """GPT-2-shaped causal LM. Weights drawn from `seed` (N(0, 1/fan_in), tied embeddings), then frozen."""

    def __init__(self, vocab_size: int, d: int = 128, n_layer: int = 2, n_head: int = 4, max_pos: int = 96,
                 seed: int = 1234):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d)
        self.wpe = nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList(Block(d, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        self.max_pos = max_pos
        self.checkpointing = False
        self.forward_calls = 0
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif p.dim() >= 2:  # N(0, 1/fan_in): logits span a few nats, so a prefix can steer them
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        self.requires_grad_(False)
        self.eval()

    def set_attention(self, attention: str) -> None:
        if attention not in ("manual", "sdpa"):
            raise ValueError(f"attention must be 'manual' or 'sdpa', got {attention!r}")
        for blk in self.blocks:
            blk.attn.attention = attention

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.wte(ids)

    def embed_rms(self) -> float:
        """RMS of the token embeddings: the adapter scales its output to it."""
        return float(self.wte.weight.detach().float().pow(2).mean().sqrt())

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        """[B, T, d] embeddings -> [B, T, V] logits."""
        if not torch.compiler.is_compiling():  # an int attribute read in a graph would be a guard: recompiles
            self.forward_calls += 1
        t = inputs_embeds.shape[1]
        if t > self.max_pos:
            raise ValueError(f"LM input of {t} positions exceeds the GPT's {self.max_pos} (ModelConfig.lm_max_pos)")
        x = inputs_embeds + self.wpe.weight[:t]
        for blk in self.blocks:
            if self.checkpointing and torch.is_grad_enabled():
                # recompute the block in backward instead of keeping its activations
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied output head
