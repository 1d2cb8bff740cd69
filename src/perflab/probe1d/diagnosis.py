"""Steps of the probe study for `perflab diagnose` (and `perflab.kit.diagnose`): one LM iteration over every class
slab, from a fresh start, as notebook 02 times it (`solver.timed_iteration`), on generated data.

    perflab diagnose --setup perflab.probe1d.diagnosis:baseline_step
    diagnose(setup=baseline_step)                     # in a notebook: diagnose(setup=lambda: baseline_step(run))

Both builders take the run (its `cfg`: n_rows, n_latents, n_classes, l0, seed; `run.device`) or the sizes by name;
without either, notebook 02's CPU defaults (4096 rows, 512 latents, 32 classes, 32 active latents per row) with the
seed's chunking (row_batch_size 1024: chunks of 32,768 events, four per pass here) and slabs of 8 classes.
`REPORT` lists seed 000's findings, each with the kind and line diagnose should name on the baseline
(`perflab.runner.reports` checks them: docs/diagnose.md).
"""
from __future__ import annotations

from ..kit.env import pick_device
from . import baseline, optimized
from .data import make_activations

SIZES = {"n_rows": 4096, "n_latents": 512, "n_classes": 32, "l0": 32, "seed": 0}


def _data(run=None, device=None, **sizes):
    cfg = run.cfg if run is not None else None
    size = {k: getattr(cfg, k, v) if cfg is not None else sizes.get(k, v) for k, v in SIZES.items()}
    dev = pick_device(run.device if run is not None else device or "auto")
    x, y = make_activations(size["n_rows"], size["n_latents"], size["n_classes"], size["l0"], seed=size["seed"])
    return x.to(dev), y.to(dev), dev


def baseline_step(run=None, *, device=None, row_batch_size: int = 1024, class_slab_size: int = 8, **sizes):
    """One LM iteration of the seed's solver over every class slab (`baseline.BaselineSolver`)."""
    x, y, dev = _data(run, device, **sizes)
    probe = baseline.Sparse1DProbe(device=dev, row_batch_size=row_batch_size, class_slab_size=class_slab_size)
    setup, one_iteration, _ = probe.solver.timed_iteration(x, y)
    setup()
    return one_iteration


def optimized_step(run=None, *, device=None, compile: str = "off", backend: str = "inductor", **sizes):
    """One LM iteration of the optimized solver (its plan built once, as a fit does; eager unless `compile`)."""
    x, y, dev = _data(run, device, **sizes)
    probe = optimized.Sparse1DProbe(device=dev, compile=compile, backend=backend)
    setup, one_iteration, _ = probe.solver.timed_iteration(x, y)
    setup()
    return one_iteration


# seed 000's findings: (key, the report's words, kind diagnose should name, where: "file:function" or a line's text)
REPORT = [
    dict(key="slab_stats", words="compute_slab_stats accounts for 99.9 percent of Sparse1DProbe.fit runtime.",
         mechanism=False, kind=None, where="probe1d/baseline.py:compute_slab_stats",
         why="a profile's share (where the time is), not a mechanism: diagnose's findings at the lines of "
             "compute_slab_stats and _iter_event_chunks hold it"),
    dict(key="iter_chunks", words="_iter_event_chunks accounts for 64.2 percent of fit.",
         mechanism=True, kind="Python loop of small ops", where="probe1d/baseline.py:while row_end < n_rows"),
    dict(key="repeat_interleave", words="torch.repeat_interleave alone consumes 13.5 percent.",
         mechanism=True, kind="host sync", where="probe1d/baseline.py:row_idx_chunk = torch.repeat_interleave"),
    dict(key="item", words="Tensor.item calls consume 9.3 percent.",
         mechanism=True, kind="host sync", where="probe1d/baseline.py:end = int(crow[row_end].item())"),
    dict(key="to", words="Tensor.to inside the loop consumes 2.6 percent.",
         mechanism=True, kind="host-to-device copy", where="probe1d/baseline.py:lengths = (crow_host"),
    dict(key="arange", words="torch.arange consumes 1.9 percent.",
         mechanism=True, kind="Python loop of small ops", where="probe1d/baseline.py:while row_start < n_rows"),
    dict(key="per_chunk", words="The remaining time is largely absorbed by binary cross entropy and index_add kernels "
                                "that are launched per chunk.",
         mechanism=True, kind="Python loop of small ops", where="probe1d/baseline.py:for row_idx, idx, v in self._chunks"),
    dict(key="fallback", words="many coordinates still enter the Levenberg-Marquardt fallback loop despite having zero "
                               "gradients.",
         mechanism=False, kind=None, where="probe1d/baseline.py:_lm_step",
         why="the algorithm: which coordinates take the fallback depends on their gradients, a value diagnose does "
             "not read; it sees the tries' host check (bool(accepted.all()) per try) as a host sync at its line"),
]
