"""One training step and one epoch, assembled from the switches of a StepConfig.

    opt = make_optimizer(model, lr=1e-3)
    log = run_epoch(model, batches, BASELINE, optimizer=opt)     # any StepConfig: a version's, or one change alone

The versions call it with their StepConfig (`baseline.train_epoch`, `optimized.train_epoch`). Both compute the same
losses with the same parameters in the same RNG order: for the same seed and data they give the same losses (to
float rounding in the separability term) and, with `sep_grad=False`, bit-identical parameters. How bad labels are
caught: the host remap raises at the bad batch (the labels are on the host anyway); the sync-free remaps count them
on the device, and the next host read (every `log_every` steps, or the end of the epoch) raises BadLabelsError
naming the steps, so the hot loop keeps zero syncs. Validate a dataset up front with `remap_presence(y, num_labels,
check=True)`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch
from tqdm import tqdm

from .config import StepConfig, TrainConfig
from .model import MixtureVAE, kl_standard_normal, mixture_nll
from .step_ops import (
    DeviceMetrics,
    fisher_ratio_loop,
    fisher_ratio_vectorized,
    host_metrics,
    remap_host,
    remap_presence,
    remap_unique,
)

REMAPS = {"host": remap_host, "unique": remap_unique, "presence": remap_presence}
METRICS = ("loss", "nll", "kl", "sep")


class BadLabelsError(ValueError):
    """Labels outside the declared range reached a sync-free step; raised at the next host read."""


def make_optimizer(model: torch.nn.Module, lr: float = 1e-3, *, capturable: bool = False) -> torch.optim.Optimizer:
    # fused: one kernel for all parameters, and no .item() on CPU step counters (the for-loop and
    # foreach Adams read them on the host each step: not a device sync, but noise in the counts).
    # capturable: safe inside a CUDA graph (the captured step); the fused kernel and its math are the same
    return torch.optim.Adam(model.parameters(), lr=lr, fused=True, capturable=capturable)


def check_batch(x: torch.Tensor, y: torch.Tensor, input_dim: int, step: int) -> None:
    """Shapes and dtypes only (host metadata, no sync)."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != input_dim:
        raise ValueError(f"step {step}: x must be [batch, {input_dim}], got {tuple(getattr(x, 'shape', ()))}")
    if x.shape[0] == 0:
        raise ValueError(f"step {step}: empty batch (x has shape {tuple(x.shape)})")
    if not isinstance(y, torch.Tensor) or y.shape != (x.shape[0],):
        raise ValueError(f"step {step}: labels must be [{x.shape[0]}] to match x, got {tuple(getattr(y, 'shape', ()))}")


def step_losses(model: MixtureVAE, x: torch.Tensor, y: torch.Tensor, step: int | torch.Tensor, sc: StepConfig,
                tc: TrainConfig) -> dict[str, torch.Tensor]:
    """Forward pass and losses of one step: loss = nll + beta * kl - lambda * J (J = separability).
    `step`: the host's step count, or a 0-d int64 device counter (the captured step: no host value)."""
    remapped = REMAPS[sc.remap](y, tc.num_labels)
    logits, mu, logvar = model(x)
    nll = mixture_nll(x, logits, model.cfg.sigma)
    kl = kl_standard_normal(mu, logvar)
    if sc.sep_grad:
        z_sep = mu  # J's gradient reaches the encoder; no second pass
    else:
        with torch.no_grad():  # the original: a second encoder pass without gradient (J steers nothing)
            z_sep = model.encode(x)[0]
    if sc.separability == "loop":
        sep = fisher_ratio_loop(z_sep, remapped.labels, remapped.n_classes, tc.eps)
    else:
        sep = fisher_ratio_vectorized(z_sep, remapped.labels, remapped.n_classes, tc.eps, num_labels=tc.num_labels)
    loss = nll + tc.beta(step) * kl - tc.lam(step) * sep
    return {"loss": loss, "nll": nll, "kl": kl, "sep": sep, "n_bad": remapped.n_bad}


def train_step(model: MixtureVAE, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               step: int, sc: StepConfig, tc: TrainConfig = TrainConfig()) -> dict[str, torch.Tensor]:
    """Losses, backward, optimizer step. Returns the step's values as device tensors (nothing read)."""
    check_batch(x, y, model.cfg.input_dim, step)
    values = step_losses(model, x, y, step, sc, tc)
    optimizer.zero_grad(set_to_none=True)
    values["loss"].backward()
    optimizer.step()
    return values


@dataclasses.dataclass
class EpochLog:
    """Per-step metrics as host floats, and how many host reads the loop made for them."""
    steps: list[int] = dataclasses.field(default_factory=list)
    values: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {k: [] for k in METRICS})
    reads: int = 0

    def add(self, step: int, row: dict[str, float]) -> None:
        self.steps.append(step)
        for k in METRICS:
            self.values[k].append(row[k])

    def __len__(self) -> int:
        return len(self.steps)


class _PerStepReads:
    """metrics "item" (the original): four .cpu().item() every step; a postfix every log_every steps
    (every step for the baseline). A sync-free remap's bad-label count is read once, at the end."""

    def __init__(self, log: EpochLog, bar, sc: StepConfig, num_labels: int):
        self.log, self.bar, self.sc, self.num_labels = log, bar, sc, num_labels
        self.bad_total = None

    def after_step(self, step: int, values: dict) -> None:
        row = host_metrics({k: values[k] for k in METRICS})  # SYNC x4: the original, every step
        self.log.add(step, row)
        self.log.reads += 1
        if isinstance(values["n_bad"], torch.Tensor):  # a device count: summed here, read in finish()
            self.bad_total = values["n_bad"] if self.bad_total is None else self.bad_total + values["n_bad"]
        if len(self.log) % self.sc.log_every == 0:
            self.bar.set_postfix({k: f"{v:.4f}" for k, v in row.items()})

    def finish(self, first: int, last: int) -> None:
        if self.bad_total is not None and int(self.bad_total):  # SYNC: once per epoch
            raise BadLabelsError(f"{int(self.bad_total)} labels outside the declared range [0, {self.num_labels}) "
                                 f"in steps {first}..{last} (found at the end of the epoch)")


class _DeferredReads:
    """metrics "device": each step's values go into a device buffer; the host reads it (one sync),
    checks the bad-label counts and updates the postfix every log_every steps and at the end."""

    def __init__(self, log: EpochLog, bar, sc: StepConfig, num_labels: int):
        self.log, self.bar, self.sc, self.num_labels = log, bar, sc, num_labels
        self.sink: DeviceMetrics | None = None
        self.pending: list[int] = []  # steps whose metrics sit in the buffer

    def after_step(self, step: int, values: dict) -> None:
        if self.sink is None:
            self.sink = DeviceMetrics(METRICS + ("n_bad",), self.sc.log_every, values["loss"].device)
        self.sink.write(values)
        self.pending.append(step)
        if self.sink.filled == self.sc.log_every:
            self._flush()

    def finish(self, first: int, last: int) -> None:
        if self.sink is not None and self.sink.filled:
            self._flush()

    def _flush(self) -> None:
        rows = self.sink.read()  # SYNC: the one host read per log_every steps
        self.log.reads += 1
        hit = [(s, int(r["n_bad"])) for s, r in zip(self.pending, rows) if r["n_bad"] > 0]
        if hit:
            where = ", ".join(f"step {s}: {c}" for s, c in hit[:5]) + (" ..." if len(hit) > 5 else "")
            raise BadLabelsError(
                f"labels outside the declared range [0, {self.num_labels}) ({where}). The sync-free remap gave "
                "them no class and this host read reports them; validate the data with "
                "remap_presence(y, num_labels, check=True), or declare num_labels to cover them")
        for s, r in zip(self.pending, rows):
            self.log.add(s, r)
        self.pending.clear()
        self.bar.set_postfix({k: f"{sum(r[k] for r in rows) / len(rows):.4f}" for k in METRICS})


def run_epoch(model: MixtureVAE, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], sc: StepConfig, *,
              optimizer: torch.optim.Optimizer, train: TrainConfig = TrainConfig(), start_step: int = 0,
              progress: bool = True, progress_file=None, desc: str = "train") -> EpochLog:
    """Train one pass over `batches` ((x [B, 256], y [B]) pairs on the model's device), each step as `sc` says:
    metrics "item" read every step (the original), "device" every `sc.log_every` steps.
    `progress_file`: where the bar writes (None: stderr; a null file keeps its cost, drops the text); `desc`: its
    label."""
    sc.check()
    log = EpochLog()
    total = len(batches) if hasattr(batches, "__len__") else None
    bar = tqdm(batches, total=total, file=progress_file, disable=not progress, leave=False, desc=desc)
    reads = (_PerStepReads if sc.metrics == "item" else _DeferredReads)(log, bar, sc, train.num_labels)
    step = start_step
    try:
        for x, y in bar:
            reads.after_step(step, train_step(model, optimizer, x, y, step, sc, train))
            step += 1
        reads.finish(start_step, step - 1)
    finally:
        bar.close()
    if step == start_step:
        raise ValueError("train_epoch: `batches` yielded no batch")
    return log
