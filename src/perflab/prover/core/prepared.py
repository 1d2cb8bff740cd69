"""What a prover notebook measures on: the graph its `kg` parameter names, the engine over it, and a policy trained by
REINFORCE for a few seconds (so that ranks mean something), its weights saved with the run.

    p = prepare(run)        # run.cfg: kg, n_families, seed, max_derived, max_depth, train_updates
    p.kg, p.bench, p.engine, p.policy, p.lines()
"""
from __future__ import annotations

import dataclasses

import torch

from .data import training_queries
from .datasets import knowledge_graph
from .engine import UnificationEngine
from .policy import TrainLog, make_policy, train_policy


@dataclasses.dataclass
class Prepared:
    kg: object                 # KnowledgeGraph
    bench: object | None       # datasets.Benchmark (names, mined rules) of a benchmark or a folder; None: family
    engine: UnificationEngine
    policy: torch.nn.Module
    train_log: TrainLog

    @property
    def dataset(self) -> str | None:
        """The benchmark's name (its published rows), None for the synthetic graph."""
        return self.bench.name if self.bench is not None else None

    @property
    def rules(self):
        """The mined rules (None: the graph's own, hand-written)."""
        return self.bench.mining.rules if self.bench is not None and self.bench.mining is not None else None

    def lines(self) -> list[str]:
        e, log = self.engine, self.train_log
        rate = lambda xs: sum(xs) / max(1, len(xs))  # noqa: E731
        return [self.kg.summary(),
                f"engine: A={e.A} atoms/state, S={e.S} successors, K={e.K} fact matches, R={e.R} rules per goal",
                f"policy trained in {log.seconds:.1f} s: sampled proof rate {rate(log.success[:5]):.2f} -> "
                f"{rate(log.success[-5:]):.2f}"]


@dataclasses.dataclass
class OnPrepared:
    """What a prover notebook's measurements run on: its `Prepared` (graph, engine, policy) and what the study adds
    (a subclass's fields), read through as `.kg`, `.engine`, `.policy`, `.dataset`."""
    prepared: Prepared

    @property
    def kg(self):
        return self.prepared.kg

    @property
    def engine(self):
        return self.prepared.engine

    @property
    def policy(self):
        return self.prepared.policy

    @property
    def dataset(self) -> str | None:
        return self.prepared.dataset


def prepare(run) -> Prepared:
    """The graph, its engine and the trained policy of `run` (its parameters and device); the policy's weights are
    saved in the run's folder (`policy.pt`)."""
    cfg, device = run.cfg, run.device
    kg, bench = knowledge_graph(cfg.kg, cfg.n_families, cfg.seed, cfg.max_derived, device)
    engine = UnificationEngine(kg, max_derived=cfg.max_derived, device=device)
    policy = make_policy(kg, seed=cfg.seed, device=device)
    log = train_policy(policy, engine, training_queries(kg), updates=cfg.train_updates, batch=64,
                       max_depth=min(cfg.max_depth, 10), seed=cfg.seed)
    torch.save(policy.state_dict(), run.dir / "policy.pt")
    return Prepared(kg, bench, engine, policy, log)
