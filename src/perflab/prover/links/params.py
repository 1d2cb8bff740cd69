"""Link prediction's parameters: `LinkConfig`, what `predict.evaluate_link_prediction` runs with, read from
notebooks/03_eval's parameters (`evaluation.params.EvalParams`: beam, search_depth, search_batch, n_fit, emb_rank,
emb_epochs are this room's) by `LinkConfig.of`. Its defaults are the notebook's (one place declares them): a
`LinkConfig()` runs what `perflab run 03` runs on the CPU defaults, compiles included."""
from __future__ import annotations

import dataclasses

from ..evaluation.params import EvalParams
from .combine import PROCEDURES
from .embeddings import EmbeddingConfig

_NOTEBOOK = EvalParams()  # notebooks/03_eval's defaults, which LinkConfig's are


@dataclasses.dataclass(frozen=True)
class LinkConfig:
    n_queries: int = _NOTEBOOK.n_queries          # test triples ranked; 0: the whole test split
    n_fit: int = _NOTEBOOK.n_fit                  # valid triples the combination is fitted on (both sides, all corruptions); 0: all
    batch: int = _NOTEBOOK.search_batch or _NOTEBOOK.batch   # rows per search step
    beam: int = _NOTEBOOK.beam                    # proofs kept per candidate per step
    search_depth: int = _NOTEBOOK.search_depth    # steps of the search
    max_depth: int = _NOTEBOOK.max_depth          # the greedy loop's, for the comparison
    compile: str = _NOTEBOOK.compile              # torch.compile mode of the search and the greedy step ("off": eager)
    backend: str = _NOTEBOOK.backend
    emb: EmbeddingConfig = EmbeddingConfig(rank=_NOTEBOOK.emb_rank, epochs=_NOTEBOOK.emb_epochs)
    seed: int = _NOTEBOOK.seed
    n_cost: int = 8                # test triples whose candidates time the search against the greedy loop
    greedy_batch: int = _NOTEBOOK.batch           # slots of the greedy loop (coverage, cost comparison); 0: batch
    # how the combination is fitted on valid (combine.PROCEDURES): per rule had the best valid-halves MRR of the three
    # on Nations, UMLS and Kinship (predict.fits_table's column from valid only; outputs/kg/fc5456b)
    fit: str = "per rule"

    def __post_init__(self):
        if self.fit not in PROCEDURES:
            raise ValueError(f"fit must be one of {sorted(PROCEDURES)}, got {self.fit!r}")

    @classmethod
    def of(cls, cfg, batch: int) -> LinkConfig:
        """From a notebook's EvalParams and the run's resolved batch: the greedy loop's, and the search's unless
        search_batch is set (the GPU preset's 65,536 search rows would pad a greedy loop over a few thousand
        candidates 16-39 times: each way runs at its own batch)."""
        return cls(cfg.n_queries, cfg.n_fit, cfg.search_batch or batch, cfg.beam, cfg.search_depth, cfg.max_depth, cfg.compile,
                   cfg.backend, EmbeddingConfig(rank=cfg.emb_rank, epochs=cfg.emb_epochs), cfg.seed, greedy_batch=batch)

    @property
    def greedy_slots(self) -> int:
        return self.greedy_batch or self.batch
