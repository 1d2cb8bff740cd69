"""RealMixtureVAE and its ComplexLinear variant, with the mixture likelihood and the KL term.

An MLP encoder and decoder (Linear -> LayerNorm -> SiLU -> Dropout blocks), latent Z = 36, prior
N(0, I). The "mixture" is the likelihood: each of the 256 input bits is pi * N(1, s^2) +
(1 - pi) * N(0, s^2) with s = 0.05 and pi = sigmoid(decoder logit). The complex variant replaces
each hidden Linear with a ComplexLinear (A + iB held as two Linear layers, activations as
[real | imag] halves), as the original's ComplexMixtureVAE did.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


class ComplexLinear(nn.Module):
    """y = (A + iB) h + (a + ib) on h = re + i im; input and output as [..., 2 * features] = [re | im]."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.real = nn.Linear(in_features, out_features)  # A, a
        self.imag = nn.Linear(in_features, out_features)  # B, b

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        re, im = h[..., :self.in_features], h[..., self.in_features:]                  # [..., in] each
        out_re = self.real(re) - F.linear(im, self.imag.weight)                       # A re - B im + a
        out_im = F.linear(im, self.real.weight) + self.imag(re)                       # A im + B re + b
        return torch.cat([out_re, out_im], dim=-1)                                    # [..., 2 * out]


def _block(layer: nn.Module, width: int, dropout: float) -> list[nn.Module]:
    return [layer, nn.LayerNorm(width), nn.SiLU(), nn.Dropout(dropout)]


def _mlp(dims: list[int], complex_: bool, dropout: float) -> nn.Sequential:
    """Hidden blocks over `dims` ([in, h1, h2, ...]); widths double in the complex variant."""
    mult = 2 if complex_ else 1
    layers: list[nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:]):
        lin = ComplexLinear(a, b) if complex_ else nn.Linear(a, b)
        layers += _block(lin, mult * b, dropout)
    return nn.Sequential(*layers)


class MixtureVAE(nn.Module):
    """`RealMixtureVAE` (cfg.kind == "real") or the ComplexLinear variant (cfg.kind == "complex")."""

    def __init__(self, cfg: ModelConfig = ModelConfig()):
        super().__init__()
        cfg.check()
        self.cfg = cfg
        cplx = cfg.kind == "complex"
        self.mult = 2 if cplx else 1
        h = list(cfg.hidden)
        self.encoder = _mlp([cfg.input_dim, *h], cplx, cfg.dropout)
        self.to_stats = nn.Linear(self.mult * h[-1], 2 * cfg.latent)        # -> [mu | logvar]
        self.decoder = _mlp([cfg.latent, *h[::-1]], cplx, cfg.dropout)
        self.to_logits = nn.Linear(self.mult * h[0], cfg.input_dim)         # -> per-bit mixture logit

    def _lift(self, x: torch.Tensor) -> torch.Tensor:
        # the complex variant reads a real input as re = x, im = 0
        return torch.cat([x, torch.zeros_like(x)], dim=-1) if self.mult == 2 else x

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, D] -> mu, logvar [B, Z]."""
        mu, logvar = self.to_stats(self.encoder(self._lift(x))).chunk(2, dim=-1)
        return mu, logvar

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z [B, Z] -> mixture logits [B, D]."""
        return self.to_logits(self.decoder(self._lift(z)))

    def forward(self, x: torch.Tensor):
        """-> (logits [B, D], mu [B, Z], logvar [B, Z]); z = mu + sigma * eps drawn from the global RNG."""
        mu, logvar = self.encode(x)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        return self.decode(z), mu, logvar


def RealMixtureVAE(cfg: ModelConfig | None = None, **kw) -> MixtureVAE:
    """The original's real-valued model (ModelConfig fields may be passed as keywords)."""
    return MixtureVAE(cfg or ModelConfig(kind="real", **kw))


def ComplexMixtureVAE(cfg: ModelConfig | None = None, **kw) -> MixtureVAE:
    return MixtureVAE(cfg or ModelConfig(kind="complex", **kw))


def build_model(cfg: ModelConfig, *, seed: int = 0, device: torch.device | str = "cpu") -> MixtureVAE:
    """A model initialized from `seed` without touching the global RNG, in training mode, on `device`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MixtureVAE(cfg)
    return model.to(device).train()


def mixture_nll(x: torch.Tensor, logits: torch.Tensor, sigma: float) -> torch.Tensor:
    """-log p(x), summed over bits, mean over the batch, for p = pi N(1, s^2) + (1 - pi) N(0, s^2).

    log pi = -softplus(-l), log(1 - pi) = -softplus(l): stable for any logit."""
    log_norm = -math.log(sigma * math.sqrt(2 * math.pi))
    log_one = -0.5 * ((x - 1.0) / sigma) ** 2 + log_norm - F.softplus(-logits)   # [B, D]
    log_zero = -0.5 * (x / sigma) ** 2 + log_norm - F.softplus(logits)          # [B, D]
    return -torch.logaddexp(log_one, log_zero).sum(dim=1).mean()


def kl_standard_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, exp(logvar)) || N(0, I)), summed over Z, mean over the batch."""
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(dim=1).mean()


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matmul_flops(model: MixtureVAE, batch: int) -> dict[str, int]:
    """Forward matmul FLOPs (2 * B * in * out per Linear) of the encoder and of the whole model."""
    def flops(mod: nn.Module) -> int:
        inside = {id(c) for m in mod.modules() if isinstance(m, ComplexLinear) for c in m.children()}
        total = 0
        for m in mod.modules():
            if isinstance(m, ComplexLinear):
                total += 4 * 2 * batch * m.in_features * m.out_features  # four real matmuls
            elif isinstance(m, nn.Linear) and id(m) not in inside:
                total += 2 * batch * m.in_features * m.out_features
        return total
    enc = flops(model.encoder) + flops(model.to_stats)
    return {"encoder": enc, "forward": enc + flops(model.decoder) + flops(model.to_logits)}
