"""Oracles in float64, written for clarity (small inputs only): the remap, the separability ratio,
ComplexLinear, the mixture likelihood and the KL term."""
from __future__ import annotations

import math

import numpy as np
import torch

from .model import ComplexLinear


def remap_reference(labels: list[int]) -> list[int]:
    """Each label's rank among the distinct labels present (0 for the smallest)."""
    rank = {lab: i for i, lab in enumerate(sorted(set(labels)))}
    return [rank[v] for v in labels]


def fisher_ratio_reference(z: torch.Tensor, labels: torch.Tensor, eps: float = 1e-6) -> float:
    """tr(S_B) / (tr(S_W) + eps) over rows with a label >= 0, per class with NumPy in float64."""
    z64 = z.detach().cpu().double().numpy()
    lab = labels.detach().cpu().numpy()
    keep = lab >= 0
    z64, lab = z64[keep], lab[keep]
    if len(lab) == 0:
        return 0.0
    mean = z64.mean(axis=0)
    s_w = s_b = 0.0
    for c in np.unique(lab):
        zc = z64[lab == c]
        m_c = zc.mean(axis=0)
        s_w += float(((zc - m_c) ** 2).sum())
        s_b += len(zc) * float(((m_c - mean) ** 2).sum())
    return s_b / (s_w + eps)


def complex_linear_reference(layer: ComplexLinear, h: torch.Tensor) -> torch.Tensor:
    """(A + iB) h + (a + ib) with complex128 arithmetic; h and the result as [..., 2 * n] = [re | im]."""
    n = layer.in_features
    w = torch.complex(layer.real.weight.double(), layer.imag.weight.double())   # [out, in]
    b = torch.complex(layer.real.bias.double(), layer.imag.bias.double())       # [out]
    hc = torch.complex(h[..., :n].double(), h[..., n:].double())                # [..., in]
    out = hc @ w.T + b
    return torch.cat([out.real, out.imag], dim=-1)


def mixture_nll_reference(x: torch.Tensor, logits: torch.Tensor, sigma: float) -> float:
    """-mean_b sum_d log(pi N(x; 1, s^2) + (1 - pi) N(x; 0, s^2)), directly, in float64."""
    x, z = x.double(), logits.double()
    pi = torch.sigmoid(z)
    norm = 1.0 / (sigma * math.sqrt(2 * math.pi))
    p = pi * norm * torch.exp(-0.5 * ((x - 1) / sigma) ** 2) + (1 - pi) * norm * torch.exp(-0.5 * (x / sigma) ** 2)
    return float(-torch.log(p).sum(dim=1).mean())


def kl_reference(mu: torch.Tensor, logvar: torch.Tensor) -> float:
    """KL(N(mu, var) || N(0, 1)) per dimension summed, mean over the batch, in float64."""
    mu, var = mu.double(), logvar.double().exp()
    return float((0.5 * (mu ** 2 + var - 1 - var.log())).sum(dim=1).mean())
