"""Study 1-2: sparse 1D probes (seed 000, "Probe1D performance").

For every (latent, class) pair of sparse SAE activations and one-hot labels, a 1D logistic regression fit
by Levenberg-Marquardt. `Sparse1DProbe(impl="baseline")` is the seed's slow solver, reproduced;
`impl="optimized"` is the rework; `Reference1DProbe` is the dense float64 oracle. Notebooks:
01_profile_probe1d (where the time goes) and 02_slab_stats (how fast now, and against what floor).
"""
from .config import ProbeConfig
from .data import load_dataset, make_activations, save_dataset
from .probe import Sparse1DProbe
from .reference import Reference1DProbe

__all__ = ["ProbeConfig", "Sparse1DProbe", "Reference1DProbe", "make_activations", "load_dataset", "save_dataset"]
