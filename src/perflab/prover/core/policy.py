"""The policy that picks one successor per step, and a short policy-gradient trainer.

Atoms are embedded TransE-style (predicate + first argument - second argument; every variable shares
one embedding), a state is the mean of its atoms (one `embedding_bag` with weights +1/n, +1/n, -1/n), an MLP turns the
current state into a query vector, and each successor's score is its dot product with it (scaled by 1/sqrt(E)), masked beyond `counts`.
Evaluation is greedy (argmax); training samples.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F

from .kg import FIRST_PRED, TRUE


@dataclasses.dataclass
class PolicyConfig:
    embed_dim: int = 64   # E: atom, state and successor embeddings
    hidden: int = 256     # MLP width
    n_blocks: int = 2     # residual blocks in the MLP


class Policy(nn.Module):
    def __init__(self, n_predicates: int, n_constants: int, cfg: PolicyConfig = PolicyConfig()):
        super().__init__()
        self.cfg, self.C, self.P = cfg, n_constants, n_predicates
        E, H = cfg.embed_dim, cfg.hidden
        # one table: predicates first, then terms (0 pad, 1..C constants, C+1 any variable)
        self.table = nn.Embedding(n_predicates + n_constants + 2, E)
        with torch.no_grad():
            self.table.weight[self.P].zero_()                         # the padding term
        self.inp = nn.Linear(E, H)
        self.blocks = nn.ModuleList(nn.Linear(H, H) for _ in range(cfg.n_blocks))
        self.out = nn.Linear(H, E)
        self.scale = 1.0 / math.sqrt(E)
        # per atom column: the cap (a predicate as is, a term capped at "any variable"), the row offset in
        # the table and the sign of pred + arg1 - arg2 (buffers: they follow .to(device), not saved)
        self.register_buffer("_cap", torch.tensor([n_predicates, n_constants + 1, n_constants + 1]), persistent=False)
        self.register_buffer("_shift", torch.tensor([0, n_predicates, n_predicates]), persistent=False)
        self.register_buffer("_sign", torch.tensor([1.0, 1.0, -1.0]), persistent=False)

    def embed(self, states: torch.Tensor) -> torch.Tensor:
        """[..., A, 3] -> [..., E]: mean over non-padding atoms of pred + arg1 - arg2."""
        lead, A = states.shape[:-2], states.shape[-2]
        real = states[..., 0] != 0
        w = real.to(self.table.weight.dtype) / real.sum(-1, keepdim=True).clamp(min=1)  # [..., A]
        idx = torch.minimum(states, self._cap) + self._shift       # pred; args (any variable: C + 1) after the preds
        # one embedding_bag gathers and sums the 3A rows of a state: no [..., A, E] tensor in memory (8x
        # fewer bytes than three embedding lookups and a sum)
        out = F.embedding_bag(idx.reshape(-1, 3 * A), self.table.weight,
                              per_sample_weights=(w[..., None] * self._sign).reshape(-1, 3 * A),
                              mode="sum", padding_idx=self.P)
        return out.reshape(*lead, -1)

    def query(self, states: torch.Tensor) -> torch.Tensor:
        """[B, A, 3] -> [B, E]: the query vector each successor's embedding is dotted with."""
        h = torch.relu(self.inp(self.embed(states)))
        for blk in self.blocks:
            h = h + torch.relu(blk(h))
        return self.out(h)

    def forward(self, states: torch.Tensor, succ: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Logits [B, S] of the successors succ [B, S, A, 3] of states [B, A, 3]; -inf beyond counts [B]."""
        q = self.query(states)                                         # [B, E]
        logits = (self.embed(succ) @ q[:, :, None])[..., 0] * self.scale  # [B, S]
        valid = torch.arange(succ.shape[1], device=succ.device)[None] < counts[:, None]
        return logits.masked_fill(~valid, float("-inf"))


def make_policy(kg, cfg: PolicyConfig = PolicyConfig(), seed: int = 0, device="cpu") -> Policy:
    with torch.random.fork_rng(devices=[]):  # weights depend on the seed only; global RNG untouched
        torch.manual_seed(seed)
        return Policy(kg.n_predicates, kg.n_constants, cfg).to(device)


@dataclasses.dataclass
class TrainLog:
    success: list  # fraction of sampled rollouts that ended in a proof, per update
    seconds: float = 0.0


def train_policy(policy: Policy, engine, queries: torch.Tensor, *, updates: int = 60, batch: int = 128,
                 max_depth: int = 10, lr: float = 3e-3, entropy: float = 0.01, seed: int = 0) -> TrainLog:
    """REINFORCE with a running-mean baseline: reward 1 when a sampled rollout proves its query.
    Host syncs are fine here (training is not the measured loop)."""
    import time

    g = torch.Generator(device=engine.device).manual_seed(seed)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    baseline, log, t0 = 0.0, TrainLog(success=[]), time.perf_counter()
    policy.train()
    for _ in range(updates):
        idx = torch.randint(len(queries), (batch,), generator=g, device=engine.device)
        states, nv = engine.initial(queries.to(engine.device)[idx])
        done = torch.zeros(batch, dtype=torch.bool, device=engine.device)
        logp_sum = torch.zeros(batch, device=engine.device)
        ent_sum = torch.zeros((), device=engine.device)
        for _ in range(max_depth):
            with torch.no_grad():
                d = engine.derive(states, nv)
            logits = policy(states, d.states, d.counts)
            logp = torch.log_softmax(logits, -1)
            a = torch.multinomial(logp.exp(), 1, generator=g)[:, 0]
            logp_sum = logp_sum + torch.where(done, 0.0, logp.gather(1, a[:, None])[:, 0])
            finite = torch.where(torch.isfinite(logp), logp, 0.0)  # masked successors: no -inf * 0 = nan in the gradient
            ent_sum = ent_sum - ((logp.exp() * finite).sum(-1) * ~done).mean()
            b = torch.arange(batch, device=engine.device)
            states = torch.where(done[:, None, None], states, d.states[b, a])
            nv = torch.where(done, nv, d.next_var[b, a])
            done = done | (states[:, 0, 0] < FIRST_PRED)
            if bool(done.all()):
                break
        reward = (states[:, 0, 0] == TRUE).float()
        loss = -((reward - baseline) * logp_sum).mean() - entropy * ent_sum
        opt.zero_grad()
        loss.backward()
        opt.step()
        r = float(reward.mean())
        baseline = 0.9 * baseline + 0.1 * r
        log.success.append(r)
    policy.eval()
    log.seconds = time.perf_counter() - t0
    return log
