"""What notebooks 01 and 02 call: the seed's profile beside ours, one LM iteration as a timed callable,
the floor of an iteration, and the seed's job extrapolated from a measured per-(event, class) cost.

"One LM iteration" means: every (latent, class) coordinate advanced by one LM iteration, i.e. for the
baseline one iteration of every class slab, for the optimized solver one iteration of every class pass,
from a fresh start (all coordinates active: the most work an iteration ever does).
"""
from __future__ import annotations

import contextlib
import logging
import warnings

import torch

from .data import make_activations
from .probe import Sparse1DProbe

# The seed's pyinstrument breakdown (share of Sparse1DProbe.fit), and the names to look for in ours
SEED_BREAKDOWN = (
    ("compute_slab_stats", "compute_slab_stats", 0.999),
    ("_iter_event_chunks", "_iter_event_chunks", 0.642),
    ("torch.repeat_interleave", "torch.repeat_interleave", 0.135),
    ("Tensor.item", ".item", 0.093),
    ("Tensor.to", ".to", 0.026),
    ("torch.arange", "torch.arange", 0.019),
)

# The seed's job (research note, "Real scale"): ADE20K, ~2.25e9 nonzeros, 151 classes, 100 iterations,
# slabs of 8 classes at ~35 s per LM iteration on an A100 -> 19 slabs x 100 iterations ~ 18 h.
SEED_JOB = dict(nnz=2.25e9, n_classes=151, max_iter=100, slab=8, seconds_per_slab_iter=35.0, hours=18.0)


def breakdown(profiles: dict) -> object:
    """The seed's frames, its shares, and ours for each named profile ({label: Profile})."""
    import pandas as pd

    rows = []
    for seed_name, needle, seed_share in SEED_BREAKDOWN:
        row = {"frame": seed_name, "seed (A100)": f"{100 * seed_share:.1f}%"}
        for label, prof in profiles.items():
            row[label] = f"{100 * prof.share(needle):.1f}%"   # perflab.profiling.Profile.share
        rows.append(row)
    return pd.DataFrame(rows)


@contextlib.contextmanager
def debug_logging(enabled: bool):
    """Turn the solvers' debug logging on for the block (to a null handler: the cost is in formatting)."""
    log = logging.getLogger("perflab.probe1d")
    old_level, handler = log.level, logging.NullHandler()
    if enabled:
        log.setLevel(logging.DEBUG)
        log.addHandler(handler)
    try:
        yield
    finally:
        log.setLevel(old_level)
        log.removeHandler(handler)


def quiet_fit(probe: Sparse1DProbe, x, y) -> Sparse1DProbe:
    """fit() with the baseline's repeated "LM step fallback" warning silenced (it is counted instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return probe.fit(x, y)


def iteration_callable(impl: str, x, y, baseline_slabs: int = 0, **config):
    """(setup, one_iteration, scale): `setup()` does what a fit does once (the optimized plan; nothing for
    the baseline); `one_iteration()` advances every coordinate by one LM iteration from a fresh start,
    or, for the baseline with `baseline_slabs` > 0, only the first slabs (all slabs cost the same: same
    events, same rows); multiply its time by `scale` for a whole iteration."""
    probe = Sparse1DProbe(impl, **config)
    s = probe.solver
    x, y = x.to(probe.device), y.to(probe.device)
    n_lat, n_cls = x.shape[1], y.shape[1]
    if impl == "baseline":
        nnz, qx = s._latent_scale(x, n_lat)
        starts = list(range(0, n_cls, s.slab))
        timed = starts[:baseline_slabs] if baseline_slabs else starts

        def one_iteration():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                for c0 in timed:
                    s.iterate(s.init_slab(x, y, c0, min(c0 + s.slab, n_cls), nnz, qx))
        scale = sum(min(s.slab, n_cls - c) for c in starts) / sum(min(s.slab, n_cls - c) for c in timed)
        return (lambda: None), one_iteration, scale

    state = {}

    def setup():
        s._plan_key = None
        state["plan"] = s.plan(x, y)

    def one_iteration():
        plan = state["plan"]
        step = s.classes_per_pass(n_lat, n_cls)
        for c0 in range(0, n_cls, step):
            s.iterate(plan, s.init_pass(plan, c0, min(c0 + step, n_cls)))
    setup()
    return setup, one_iteration, 1.0


def sums_callable(x, y, **config):
    """The optimized solver's tile sums alone (`event_stats`: the kernel calls and the index_add_ of their
    results) for every class pass from a fresh start: the kernel's part of `iteration_callable`'s iteration
    (the rest is the LM update and the per-pass setup)."""
    s = Sparse1DProbe("optimized", **config).solver
    plan = s.plan(x.to(s.device), y.to(s.device))
    step = s.classes_per_pass(plan.n_lat, plan.n_cls)
    states = [s.init_pass(plan, c0, min(c0 + step, plan.n_cls)) for c0 in range(0, plan.n_cls, step)]
    return lambda: [s.event_stats(st) for st in states]


def sigmoid_throughput(device, n: int = 2**24, **measure_kw) -> tuple[float, object]:
    """Measured sigmoid evaluations per second on `device` (float32, out of place, all torch threads)."""
    from ..bench import measure

    dev = torch.device(device)
    n = n if dev.type == "cuda" else min(n, 2**22)
    z, out = torch.randn(n, device=dev), torch.empty(n, device=dev)
    m = measure(lambda: torch.sigmoid(z, out=out), label="floor", sub_label=f"sigmoid {n}", description=str(dev),
                device=dev, **measure_kw)
    return n / m.median, m


def iteration_floor(n_events: int, n_lat: int, n_cls: int, bandwidth: float, sigmoid_rate: float) -> dict:
    """Least time one LM iteration can take: read every value once (4 B) and read/write each
    coordinate's (b, w) and its six sums once (32 B per float32 coordinate), and evaluate one sigmoid
    per (event, class) pair. The iteration is bound by the larger of the two."""
    nbytes = 4 * n_events + 32 * n_lat * n_cls
    sigmoids = n_events * n_cls
    t_bytes, t_sig = nbytes / bandwidth, sigmoids / sigmoid_rate
    return dict(bytes=nbytes, sigmoids=sigmoids, t_bytes=t_bytes, t_sigmoid=t_sig, floor_s=max(t_bytes, t_sig),
                bound="sigmoid throughput" if t_sig >= t_bytes else "memory bandwidth")


def extrapolate_job(seconds_per_pair_event: float, job: dict = SEED_JOB) -> float:
    """Hours for the seed's whole job (nnz x classes x iterations) at a measured cost per (event, class)."""
    return seconds_per_pair_event * job["nnz"] * job["n_classes"] * job["max_iter"] / 3600.0


def syncs_per_iteration(impl: str, x, y, **config):
    """Host syncs (perflab.syncs counter) of one LM iteration over every class, after setup."""
    from ..syncs import count_host_syncs

    _, one_iteration, _ = iteration_callable(impl, x, y, **config)
    with count_host_syncs() as syncs:
        one_iteration()
    return syncs


def agreement(a, b, x, y, tol: float = 1e-4) -> dict:
    """Do two fitted probes (or a probe and a Reference1DProbe) give the same losses (mean BCE, within
    `tol`) and the same confusion counts at threshold 0.5? Counts are compared exactly."""
    import numpy as np

    la, *ca = [np.asarray(t.cpu() if hasattr(t, "cpu") else t, dtype=np.float64) for t in a.loss_matrix_with_aux(x, y)]
    lb, *cb = [np.asarray(t.cpu() if hasattr(t, "cpu") else t, dtype=np.float64) for t in b.loss_matrix_with_aux(x, y)]
    loss_diff = float(np.abs(la - lb).max())
    count_diff = int(max(np.abs(p - q).max() for p, q in zip(ca, cb)))
    return dict(loss_ok=loss_diff <= tol, counts_equal=count_diff == 0, loss_max_diff=loss_diff,
                count_max_diff=count_diff, n=int(la.size))


def scaled(m, factor: float):
    """A Measurement whose times are multiplied by `factor` (a baseline timed on some slabs, scaled)."""
    if factor == 1.0:
        return m
    from torch.utils.benchmark.utils.common import Measurement

    return Measurement(number_per_run=m.number_per_run, raw_times=[t * factor for t in m.raw_times],
                       task_spec=m.task_spec)


def measure_iterations(variants: dict, x, y, *, label: str, sub_label: str, min_run_time: float,
                       max_run_time: float, rounds: int = 3, device=None, extra: dict | None = None) -> dict:
    """One LM iteration of each variant ({key: (impl, config)}, see iteration_callable; a baseline's config
    may hold baseline_slabs) and any `extra` callables ({key: fn}), timed side by side in `rounds` rounds
    (perflab.bench.measure_interleaved): a machine whose speed drifts slows them alike, so their ratios
    hold. The optimized plans are built before timing. -> {key: Measurement}, baselines scaled to all slabs."""
    from ..bench import measure_interleaved

    fns, scales = {}, {}
    for key, (impl, config) in variants.items():
        _, fns[key], scales[key] = iteration_callable(impl, x, y, device=device, **config)
    fns.update(extra or {})
    ms = measure_interleaved(fns, label=label, rounds=rounds, sub_labels={k: sub_label for k in fns},
                             descriptions={k: k for k in fns}, min_run_time=min_run_time, max_run_time=max_run_time,
                             device=device)
    return {k: scaled(m, scales.get(k, 1.0)) for k, m in ms.items()}


def fit_summary(probe, seconds: float) -> dict:
    """What a whole fit did: iterations, time per iteration, fallbacks, frozen share."""
    n_iter = probe.n_iter_.double()
    c = probe.counters_
    # per iteration = fit time / mean iterations per class: a class that stopped early costs nothing after
    return dict(fit_s=seconds, max_iter_run=int(n_iter.max()), mean_class_iters=float(n_iter.mean()),
                s_per_iter=seconds / max(1.0, float(n_iter.mean())), fallbacks=c["fallback_coord_iters"],
                zero_grad_fallbacks=c["zero_grad_fallback_coord_iters"],
                frozen_share=c.get("frozen_coords", 0) / probe.coef_.numel())


class DataSource:
    """The notebooks' data: generated SAE-like activations, or the user's own files in the original format
    (`activations`: scipy CSR .npz, `labels`: labels.bin, one uint8 class per row), cut to a size."""

    def __init__(self, device, n_latents: int, l0: int, seed: int, activations: str = "", labels: str = ""):
        from .data import load_dataset

        if bool(activations) != bool(labels):
            raise ValueError("give both activations (.npz) and labels (labels.bin), or neither")
        self.device, self.n_latents, self.l0, self.seed = device, n_latents, l0, seed
        self.loaded = load_dataset(activations, labels, device=device) if activations else None
        self._cache: dict = {}

    @property
    def kind(self) -> str:
        return "your files" if self.loaded is not None else "generated"

    def get(self, n_rows: int, n_classes: int, seed_offset: int = 0):
        """(x, y) with n_rows rows and n_classes classes (the first ones of the files, capped at their size)."""
        key = (n_rows, n_classes, seed_offset)
        if key not in self._cache:
            if self.loaded is None:
                self._cache[key] = make_activations(n_rows, self.n_latents, n_classes, l0=self.l0,
                                                    seed=self.seed + seed_offset, device=self.device)
            else:
                from .data import make_csr

                x, y = self.loaded
                r, c = min(n_rows, x.shape[0]), min(n_classes, y.shape[1])
                crow = x.crow_indices()[:r + 1]
                end = int(crow[-1])
                self._cache[key] = (make_csr(crow, x.col_indices()[:end], x.values()[:end], (r, x.shape[1])),
                                    y[:r, :c])
        return self._cache[key]
