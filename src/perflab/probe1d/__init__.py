"""Study 1-2: sparse 1D probes (seed 000, "Probe1D performance").

For every (latent, class) pair of sparse SAE activations and one-hot labels, a 1D logistic regression fit
by Levenberg-Marquardt. `Sparse1DProbe(impl="baseline")` is the seed's slow solver, reproduced;
`impl="optimized"` is the rework; `Reference1DProbe` is the dense float64 oracle. Notebooks:
01_profile_probe1d (where the time goes) and 02_slab_stats (how fast now, and against what floor).

Rooms, as in every study: `params` (the notebooks' parameters), `data` (generator, the original file format,
the notebooks' DataSource), `reference` (the float64 oracle), `baseline`, `optimized` (behind `probe`'s
Sparse1DProbe), `checks` (the notebooks' correctness checks), `study` (their measurements), `claims` (the
seed's claims and the issue's targets with their verdict rules). `config` holds the solver's configuration
(ProbeConfig) and LM constants; `plan`, `kernels` and `evaluate` are the optimized solver's parts.
"""
from .config import ProbeConfig
from .data import load_dataset, make_activations, save_dataset
from .probe import Sparse1DProbe
from .reference import Reference1DProbe

__all__ = ["ProbeConfig", "Sparse1DProbe", "Reference1DProbe", "make_activations", "load_dataset", "save_dataset"]
