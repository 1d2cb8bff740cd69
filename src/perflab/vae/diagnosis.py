"""Steps of study 5 for `perflab diagnose` (and `perflab.kit.diagnose`): one training step of a version, as its epoch
loop runs it (`train.run_epoch`'s body: the step, then the host reads its metrics need), on the next of a list of
seeded batches already on the device.

    perflab diagnose --setup perflab.vae.diagnosis:baseline_step
    diagnose(setup=lambda: baseline_step(run))

`baseline_step`: the original's step (labels remapped through the host, the class loop, four `.cpu().item()` and
a progress postfix every step); `optimized_step`: the sync-free one (its metrics into a device buffer, read every
`log_every` steps); `captured_step`: the optimized step as one compiled function (`captured.CapturedStep`:
forward, backward and Adam; inductor's first compile of it costs ~30 s on a CPU). Batches of notebook 05's CPU
default (64 samples, label group 1); the metrics' progress bar writes to a null file (its cost kept, its text
dropped). `REPORT`: seed 002's findings, each with the kind and line diagnose should name (docs/diagnose.md).
"""
from __future__ import annotations

import os

from tqdm import tqdm

from ..kit.env import pick_device
from . import baseline, optimized
from .captured import Captured, CapturedStep
from .config import ModelConfig, TrainConfig
from .data import make_batches
from .model import build_model
from .train import EpochLog, _DeferredReads, _PerStepReads, make_optimizer, train_step


def _parts(run, device, batch: int, n_batches: int, seed: int, capturable: bool = False):
    dev = pick_device(run.device if run is not None else device or "auto")
    kind, batch, seed = (run.cfg.model, run.cfg.batch, run.cfg.seed) if run is not None else ("real", batch, seed)
    model = build_model(ModelConfig(kind=kind), seed=seed, device=dev)
    batches = make_batches(n_batches, batch=batch, group=1, seed=seed, device=dev)
    return model, make_optimizer(model, capturable=capturable), batches


def _loop_step(sc, run, device, batch, n_batches, seed):
    model, opt, batches = _parts(run, device, batch, n_batches, seed)
    tc = TrainConfig()
    bar = tqdm(total=None, file=open(os.devnull, "w"), leave=False)   # noqa: SIM115 (the bar lives with the step)
    reads = (_PerStepReads if sc.metrics == "item" else _DeferredReads)(EpochLog(), bar, sc, tc.num_labels)
    state = {"i": 0}

    def train_one():
        """One step of the epoch loop: the step, then its metrics' host reads (train.run_epoch's body)."""
        i = state["i"]
        x, y = batches[i % len(batches)]
        reads.after_step(i, train_step(model, opt, x, y, i, sc, tc))
        state["i"] = i + 1
    return train_one


def baseline_step(run=None, *, device=None, batch: int = 64, n_batches: int = 32, seed: int = 0):
    """One step of the original's loop (`baseline.step_config()`)."""
    return _loop_step(baseline.step_config(), run, device, batch, n_batches, seed)


def optimized_step(run=None, *, device=None, batch: int = 64, n_batches: int = 32, seed: int = 0,
                   log_every: int = 50):
    """One step of the sync-free loop (`optimized.step_config()`: metrics read every `log_every` steps)."""
    return _loop_step(optimized.step_config(log_every=log_every), run, device, batch, n_batches, seed)


def captured_step(run=None, *, device=None, batch: int = 64, n_batches: int = 32, seed: int = 0,
                  log_every: int = 50, compile: str = "default", backend: str = "inductor"):
    """One call of the captured step (`captured.CapturedStep`): the whole step as one compiled function."""
    model, opt, batches = _parts(run, device, batch, n_batches, seed, capturable=True)
    step = CapturedStep(model, opt, Captured(optimized.step_config(log_every=log_every), compile=compile,
                                             backend=backend))
    state = {"i": 0}

    def train_one():
        """One captured step on the next batch."""
        x, y = batches[state["i"] % len(batches)]
        step(x, y)
        state["i"] += 1
    return train_one


# seed 002's findings: the kind diagnose should name, and where ("file:text of the line")
REPORT = [
    dict(key="remap_to_host", words="CPU round-trip: y_cpu = labels.detach().to(\"cpu\").numpy() ... "
                                    "unique_labels = sorted(set(y_cpu.tolist()))  # Python loop!",
         mechanism=True, kind="host sync", where="vae/step_ops.py:y_host = y.detach().tolist()"),
    dict(key="remap_to_device", words="y_remapped = torch.tensor([label_map[int(v)] for v in y_cpu], ...)",
         mechanism=True, kind="host-to-device copy", where="vae/step_ops.py:labels = torch.tensor([label_map[v]"),
    dict(key="item_metrics", words="\"loss\": float(loss.detach().cpu().item()),  # GPU->CPU sync (x3, every batch)",
         mechanism=True, kind="host sync", where="vae/step_ops.py:return {k: float(v.detach().cpu().item())"),
    dict(key="class_loop", words="Per-class tracking - Vectorize class-wise metric computation; label remapping still "
                                 "uses loop over unique_labels",
         mechanism=True, kind="host sync", where="vae/step_ops.py:groups = [z[labels == c] for c in range(n_classes)]"),
]
