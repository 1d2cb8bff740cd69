"""The parameters the prover notebooks share (03_eval, 04_early_exit: `ProverParams`; 03b_links takes the graph's with
`check_graph`): each room's params.py adds its own, with the same names, types and defaults as the notebook's
`parameters` cell (tests/runner/test_notebook_params.py checks them)."""
from __future__ import annotations

import dataclasses

from ...kit.params import Backend, CompileMode, RunParams, require
from ...kit.paths import user_path

GRAPHS = ("family", "kinship", "nations", "umls")   # the names `kg` takes besides a folder (datasets.load_kg)


@dataclasses.dataclass
class ProverParams(RunParams):
    """The prover's fields shared by both notebooks (after the run fields)."""
    compile: CompileMode = "off"     # torch.compile mode: off, default, reduce-overhead or max-autotune
    backend: Backend = "inductor"    # torch.compile backend: inductor, eager (dynamo graphs, no codegen) or aot_eager
    kg: str = "family"               # the graph: family (synthetic), kinship, nations, umls, or a folder (relative: from where you ran)
    max_depth: int = 20              # proof steps before a candidate counts as failed
    max_derived: int = 16            # successor slots per state; the seed used 120
    n_queries: int = 24              # test queries evaluated; 0 means the whole test split
    n_corruptions: int = 24          # corruptions per query
    n_families: int = 6              # size of the synthetic family knowledge graph
    train_updates: int = 30          # policy-gradient updates before evaluating

    def check(self) -> None:
        super().check()
        check_graph(self)
        require(self.n_corruptions >= 0, f"need n_corruptions >= 0, got {self.n_corruptions}")


def check_graph(p) -> None:
    """The rules of the graph's and the policy's fields (kg, max_depth, max_derived, n_queries, n_families,
    train_updates), for every prover notebook's parameters."""
    require(p.kg in GRAPHS or (p.kg.strip() != "" and user_path(p.kg).is_dir()),
            f"kg={p.kg!r} is not a graph: choose one of {', '.join(GRAPHS)}, or a folder (facts.txt/rules.txt/"
            f"test.txt, or train/valid/test.txt as TSV)" + (f"; {user_path(p.kg)} is not a folder" if p.kg.strip() else ""))
    require(p.max_depth >= 1, f"max_depth must be >= 1, got {p.max_depth}")
    require(p.max_derived >= 2, f"max_derived must be >= 2, got {p.max_derived}")
    require(p.n_queries >= 0, f"need n_queries >= 0 (0: the whole test split), got {p.n_queries}")
    require(p.n_families >= 1 and p.train_updates >= 0, "need n_families >= 1 and train_updates >= 0")
