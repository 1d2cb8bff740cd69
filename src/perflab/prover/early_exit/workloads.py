"""Study 4's workloads: the ladder (a knowledge graph whose proofs take designed, seed-like lengths whatever the
policy picks: the claims are judged on it) and study 3's candidates on the graph `kg` names (`workloads(run)`)."""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch

from ..core.data import ladder_kg, ladder_queries, seed_like_lengths, training_queries
from ..core.datasets import graph_label, knowledge_graph, test_queries
from ..core.engine import UnificationEngine
from ..core.policy import make_policy, train_policy
from ..core.ranking import CandidateSet, corruptions
from ..core.rollout import RolloutResult
from ..core.step import GreedyStep


@dataclasses.dataclass
class Workload:
    name: str
    step: GreedyStep
    candidates: torch.Tensor   # [N, 3]
    lengths: torch.Tensor | None = None  # [N] designed proof lengths (ladder), else None
    graph: str = ""            # the graph's short name (study 3's workload: the `kg` parameter)

    def head(self, n: int) -> Workload:
        return Workload(self.name, self.step, self.candidates[:n], None if self.lengths is None else self.lengths[:n],
                        self.graph)


class Workloads(NamedTuple):
    ladder: Workload        # seed-like proof lengths, designed: the claims are judged on it
    kg: Workload            # study 3's candidates on the graph `kg` names
    candidates: CandidateSet  # kg's candidates as queries and corruptions (for the ranks)


def ladder_workload(n: int, max_depth: int, max_derived: int, device, seed: int = 0, compile: str = "off",
                    backend: str = "inductor") -> Workload:
    """n ladder queries whose proofs take seed-like lengths (mean ~5, max = max_depth) whatever the policy picks."""
    g = torch.Generator().manual_seed(seed)
    kg = ladder_kg(levels=max_depth, n_pairs=64, seed=seed)
    lengths = seed_like_lengths(n, max_depth, g)
    engine = UnificationEngine(kg, max_derived=max_derived, end_action=False, device=device)
    step = GreedyStep(engine, make_policy(kg, seed=seed, device=device), max_depth, compile=compile, backend=backend)
    return Workload("ladder (seed-like lengths)", step, ladder_queries(kg, lengths, g).to(device), lengths)


def kg_workload(cfg, device):
    """Study 3's candidates on the graph `cfg.kg` names: its first test queries and their filtered
    corruptions, scored by a policy trained for a few seconds. -> (Workload, CandidateSet)."""
    kg, _ = knowledge_graph(cfg.kg, cfg.n_families, cfg.seed, cfg.max_derived, device)
    engine = UnificationEngine(kg, max_derived=cfg.max_derived, device=device)
    policy = make_policy(kg, seed=cfg.seed, device=device)
    train_policy(policy, engine, training_queries(kg), updates=cfg.train_updates, batch=64,
                 max_depth=min(cfg.max_depth, 10), seed=cfg.seed)
    cs = corruptions(kg, test_queries(kg, cfg.n_queries), cfg.n_corruptions, "both", seed=cfg.seed)
    step = GreedyStep(engine, policy, cfg.max_depth, compile=cfg.compile, backend=cfg.backend)
    label = graph_label(cfg.kg)
    return Workload(f"{label} (study 3 candidates)", step, cs.flat().to(device), graph=label), cs


def workloads(run) -> Workloads:
    """The run's two workloads (`ladder_workload` at n_candidates, `kg_workload`), each described in a line."""
    cfg, device = run.cfg, run.device
    ladder = ladder_workload(cfg.n_candidates, cfg.max_depth, cfg.max_derived, device, seed=cfg.seed,
                             compile=cfg.compile, backend=cfg.backend)
    lengths = ladder.lengths.float()
    print(f"ladder: {len(lengths)} candidates, proof length mean {lengths.mean():.2f}, max {int(lengths.max())}; done "
          f"after 1 step {(lengths <= 1).float().mean():.0%}, after 11 steps {(lengths <= 11).float().mean():.0%} "
          f"(the seed's batch: 57% and 98%, mean ~5, max 20)")
    kg, cs = kg_workload(cfg, device)
    print(f"{kg.graph}: {len(kg.candidates)} candidates ({cfg.n_queries} queries x (1 + {cfg.n_corruptions}))")
    return Workloads(ladder, kg, cs)



def outcomes(name: str, r: RolloutResult) -> str:
    """'family outcomes: 20 proved, 580 not; steps {1: 11, 2: 227} (steps: candidates)': a run's outcomes, counted."""
    steps, n = torch.unique(r.steps.cpu(), return_counts=True)
    return (f"{name} outcomes: {int(r.proven.sum())} proved, {int((~r.proven).sum())} not; steps "
            f"{dict(zip(steps.tolist(), n.tolist()))} (steps: candidates)")
