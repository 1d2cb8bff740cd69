"""Parameters of notebooks/04_early_exit.ipynb: the prover's shared fields (`core.params.ProverParams`) and this room's."""
from __future__ import annotations

import dataclasses

from ...kit.params import require
from ..core.params import ProverParams


@dataclasses.dataclass
class EarlyExitParams(ProverParams):
    """notebooks/04_early_exit.ipynb"""
    # a paired round here is two whole ladder runs (~1 s together on the CPU defaults) and a 99% interval needs 9:
    # 2 s would leave every timed claim "within noise"
    verdict_time: float = 45.0  # seconds of paired rounds per timed claim at most (a verdict stops once decided)
    batch: int = 128                 # slots per step
    n_candidates: int = 2560         # ladder candidates with seed-like proof lengths (20 batches, like the seed)
    min_bucket: int = 8              # smallest bucket of the bucketed strategy
    rounds: int = 5                  # timed rounds of whole runs per strategy, interleaved (the table's spread)

    def check(self) -> None:
        super().check()
        require(self.rounds >= 1, f"rounds must be >= 1, got {self.rounds}")
        require(self.batch >= 1, f"batch must be >= 1, got {self.batch}")
        require(self.n_candidates >= 1, f"n_candidates must be >= 1, got {self.n_candidates}")
        require(1 <= self.min_bucket <= self.batch, f"min_bucket must be in 1..batch, got {self.min_bucket}")
