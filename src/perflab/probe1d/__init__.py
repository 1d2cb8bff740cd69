"""Study 1-2: sparse 1D probes (seed 000, "Probe1D performance").

For every (latent, class) pair of sparse SAE activations and one-hot labels, a 1D logistic regression fit by
Levenberg-Marquardt. Notebooks: 01_profile_probe1d (where the time goes) and 02_slab_stats (how fast now, and
against what floor).

    params.py     the notebooks' parameters (ProfileParams, SlabStatsParams)
    data.py       generator, the original file format, the notebooks' DataSource
    reference.py  Reference1DProbe: the dense float64 oracle
    probe.py      Sparse1DProbeBase: the front both versions share (arguments, fit, loss matrices)
    baseline.py   Sparse1DProbe with the seed's solver, reproduced (BaselineSolver)
    optimized.py  Sparse1DProbe with the rework (OptimizedSolver); its parts: plan, kernels, evaluate
    config.py     ProbeConfig (the solver's settings, either version) and the LM constants
    checks.py     the notebooks' correctness checks (and 02's first compiled fit)
    claims.py     PROFILE_CLAIMS (01) and SLAB_CLAIMS (02): the seed's claims and the issue's targets, as data, each
                  with its unit and the function that measures it (measured_by)
    study.py      IMPLS = {"baseline": baseline.Sparse1DProbe, "optimized": ...}, one LM iteration as a timed
                  callable, the floor, the paired rounds of 02's timed claims, 02's Findings and evidence(run, found)
    profiles.py   01's measurements (profiles, shares, fallbacks, host syncs), its Findings and evidence(run, found)
    benchmarks.py 02's tables: the size sweep, whole fits, the job extrapolated, eager against compiled, slab widths
    figures.py    both notebooks' figures, in the study's colours (the cards' figures and 02's slab sweep)

`perflab.probe1d.Sparse1DProbe` is the optimized version; the baseline is `study.IMPLS["baseline"]`.
"""
from .config import ProbeConfig
from .data import load_dataset, make_activations, save_dataset
from .optimized import Sparse1DProbe
from .reference import Reference1DProbe

__all__ = ["ProbeConfig", "Sparse1DProbe", "Reference1DProbe", "make_activations", "load_dataset", "save_dataset"]
