"""Link prediction's parameters: `LinkParams`, notebooks/03b_links' (the only schema: `perflab run`, the notebook's
setup), and `LinkConfig`, what `predict.evaluate_link_prediction` runs with, read from them by `LinkConfig.of`.

Two batches, named for what runs at them: `search_batch` rows per step of the search (what scores every candidate)
and `greedy_batch` slots of the greedy loop the search is compared with (coverage, cost per candidate). A logged row
names the one that ran. LinkConfig's defaults are LinkParams' (declared once, there): a `LinkConfig()` runs what
`perflab run 03b_links` runs on the CPU defaults, compiles included."""
from __future__ import annotations

import dataclasses

from ...kit.params import Backend, CompileMode, RunParams, require
from ..core.params import check_graph
from .combine import PROCEDURES
from .embeddings import EmbeddingConfig


@dataclasses.dataclass
class LinkParams(RunParams):
    """notebooks/03b_links.ipynb"""
    verdict_time: float = 10.0       # seconds of rounds per timed claim at most: a whole split's rate needs several passes
    compile: CompileMode = "default"  # torch.compile mode of the search and the greedy step: off, default, reduce-overhead or max-autotune
    backend: Backend = "eager"       # torch.compile backend: inductor, eager (the graphs without inductor's ~60 s) or aot_eager
    kg: str = "nations"              # the graph: kinship, nations, umls, family (synthetic), or a folder (relative: from where you ran)
    n_queries: int = 0               # test triples ranked; 0 means the whole test split (the targets' setup)
    max_depth: int = 20              # the greedy loop's proof steps (the comparison the search is measured against)
    max_derived: int = 16            # successor slots per state: rules mined per head relation + 1
    n_families: int = 6              # size of the synthetic family knowledge graph (the family graph only)
    train_updates: int = 30          # policy-gradient updates before evaluating
    search_batch: int = 2048         # rows per search step (beam rows per candidate)
    greedy_batch: int = 128          # slots of the greedy loop the search is compared with
    beam: int = 16                   # proofs the search keeps per candidate per step (16 - 1 rules and facts per goal)
    search_depth: int = 2            # steps of the search; a mined rule proves in 2 (the rule, then its facts)
    n_fit: int = 0                   # valid triples the score combination is fitted on (all their corruptions); 0 means all of valid
    emb_rank: int = 100              # ComplEx dimensions of the learned score every candidate gets
    emb_epochs: int = 50             # ComplEx passes over the training facts

    def check(self) -> None:
        super().check()
        check_graph(self)
        require(self.search_batch >= 1 and self.greedy_batch >= 1,
                f"need search_batch >= 1 and greedy_batch >= 1, got {self.search_batch}, {self.greedy_batch}")
        require(self.beam >= 1 and self.search_depth >= 1,
                f"need beam >= 1 and search_depth >= 1, got {self.beam}, {self.search_depth}")
        require(self.n_fit >= 0 and self.emb_rank >= 1 and self.emb_epochs >= 0,
                "need n_fit >= 0, emb_rank >= 1 and emb_epochs >= 0")


def _default(name: str):
    """LinkParams' default of field `name` (read from the dataclass: no instance, no second declaration)."""
    return next(f.default for f in dataclasses.fields(LinkParams) if f.name == name)


@dataclasses.dataclass(frozen=True)
class LinkConfig:
    n_queries: int = _default("n_queries")        # test triples ranked; 0: the whole test split
    n_fit: int = _default("n_fit")                # valid triples the combination is fitted on (both sides, all corruptions); 0: all
    search_batch: int = _default("search_batch")  # rows per search step
    greedy_batch: int = _default("greedy_batch")  # slots of the greedy loop (coverage, cost comparison); 0: search_batch
    beam: int = _default("beam")                  # proofs kept per candidate per step
    search_depth: int = _default("search_depth")  # steps of the search
    max_depth: int = _default("max_depth")        # the greedy loop's, for the comparison
    compile: str = _default("compile")            # torch.compile mode of the search and the greedy step ("off": eager)
    backend: str = _default("backend")
    emb: EmbeddingConfig = EmbeddingConfig(rank=_default("emb_rank"), epochs=_default("emb_epochs"))
    seed: int = _default("seed")
    n_cost: int = 8                # test triples whose candidates time the search against the greedy loop
    # how the combination is fitted on valid (combine.PROCEDURES): per rule had the best valid-halves MRR of the three
    # on Nations, UMLS and Kinship (predict.fits_table's column from valid only; outputs/kg/fc5456b)
    fit: str = "per rule"

    def __post_init__(self):
        if self.fit not in PROCEDURES:
            raise ValueError(f"fit must be one of {sorted(PROCEDURES)}, got {self.fit!r}")

    @classmethod
    def of(cls, p: LinkParams) -> LinkConfig:
        """What a run of notebooks/03b_links with parameters `p` evaluates with (each batch the parameter's own)."""
        return cls(n_queries=p.n_queries, n_fit=p.n_fit, search_batch=p.search_batch, greedy_batch=p.greedy_batch,
                   beam=p.beam, search_depth=p.search_depth, max_depth=p.max_depth, compile=p.compile,
                   backend=p.backend, emb=EmbeddingConfig(rank=p.emb_rank, epochs=p.emb_epochs), seed=p.seed)

    @property
    def greedy_slots(self) -> int:
        return self.greedy_batch or self.search_batch
