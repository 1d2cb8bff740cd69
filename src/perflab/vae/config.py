"""Configuration of the VAE study: the model, the training schedule, the step's switches, and the
notebook's parameters (VAEParams: same names, types and defaults as the notebook's parameters cell)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from ..params import require


@dataclass(frozen=True)
class ModelConfig:
    kind: Literal["real", "complex"] = "real"   # RealMixtureVAE or the ComplexLinear variant
    input_dim: int = 256                         # bits per integer
    hidden: tuple[int, ...] = (384, 192)         # encoder widths (the decoder mirrors them): ~0.37M params
    latent: int = 36                             # Z
    dropout: float = 0.12
    sigma: float = 0.05                          # s of the per-bit mixture N(1, s^2) / N(0, s^2)

    def check(self) -> None:
        require(self.kind in ("real", "complex"), f"model kind must be 'real' or 'complex', got {self.kind!r}")
        require(len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden), f"bad hidden widths {self.hidden}")
        require(self.latent >= 1 and self.input_dim >= 1, "latent and input_dim must be >= 1")
        require(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout}")
        require(self.sigma > 0, f"sigma must be > 0, got {self.sigma}")


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 1e-3
    beta_max: float = 1.0          # KL weight after warm-up
    beta_warmup: int = 2000        # steps to ramp beta from 0 (KL annealing)
    lam_max: float = 0.025         # separability weight after warm-up (the original's 0.025)
    lam_warmup: int = 1000         # steps to ramp lambda from 0
    num_labels: int = 6            # declared label range [0, num_labels): both groups, 0-2 and 3-5
    eps: float = 1e-6              # tr(S_B) / (tr(S_W) + eps)

    def beta(self, step: int) -> float:
        # a Python float from the host's step counter: no device value is read
        return self.beta_max * min(1.0, step / self.beta_warmup) if self.beta_warmup > 0 else self.beta_max

    def lam(self, step: int) -> float:
        return self.lam_max * min(1.0, step / self.lam_warmup) if self.lam_warmup > 0 else self.lam_max


@dataclass(frozen=True)
class StepConfig:
    """What one training step does, switch by switch (see IMPLS and SINGLE_CHANGES)."""
    remap: Literal["host", "unique", "presence"] = "host"  # labels -> 0..n-1: CPU dict | torch.unique | table
    metrics: Literal["item", "device"] = "item"            # .cpu().item() per metric per step | on device
    log_every: int = 1                                     # progress postfix (and device read) every N steps
    separability: Literal["loop", "vectorized"] = "loop"   # Python loop over classes | one-hot matmuls
    sep_grad: bool = False     # False: J from a second, no_grad encoder pass (the original); True: from mu

    def check(self) -> None:
        require(self.remap in ("host", "unique", "presence"), f"unknown remap {self.remap!r}")
        require(self.metrics in ("item", "device"), f"unknown metrics {self.metrics!r}")
        require(self.separability in ("loop", "vectorized"), f"unknown separability {self.separability!r}")
        require(isinstance(self.log_every, int) and self.log_every >= 1,
                f"log_every must be an int >= 1, got {self.log_every!r}")


BASELINE = StepConfig()
OPTIMIZED = StepConfig(remap="presence", metrics="device", log_every=50, separability="vectorized")


def step_config(impl: str, *, log_every: int = 50, sep_grad: bool | None = None) -> StepConfig:
    """The StepConfig of `impl` ("baseline" or "optimized"). `sep_grad=None` keeps the impl's default:
    False for the baseline (the original's no_grad pass), True for the optimized step (the fix);
    pass False to compare both on identical math. `log_every` applies to the optimized step only
    (the baseline shows its postfix every step, as the original did)."""
    if impl == "baseline":
        cfg = BASELINE
        grad = False if sep_grad is None else sep_grad
    elif impl == "optimized":
        cfg = dataclasses.replace(OPTIMIZED, log_every=log_every)
        grad = True if sep_grad is None else sep_grad
    else:
        raise ValueError(f"impl must be 'baseline' or 'optimized', got {impl!r}")
    cfg = dataclasses.replace(cfg, sep_grad=grad)
    cfg.check()
    return cfg


def single_changes(log_every: int = 50) -> dict[str, StepConfig]:
    """Baseline, each change alone, the seed's three together, and all of ours together (same math
    unless the name says "sep grad"), in the order the notebook shows them."""
    r = dataclasses.replace
    return {
        "baseline": BASELINE,
        "remap torch.unique (seed 1)": r(BASELINE, remap="unique"),
        "remap presence table": r(BASELINE, remap="presence"),
        "metrics on device, read every step (seed 2)": r(BASELINE, metrics="device"),
        "metrics on device, read every N (seed 3)": r(BASELINE, metrics="device", log_every=log_every),
        "separability vectorized": r(BASELINE, separability="vectorized"),
        "seed's three together": r(BASELINE, remap="unique", metrics="device", log_every=log_every),
        "optimized": r(OPTIMIZED, log_every=log_every),
        "optimized + sep grad": r(OPTIMIZED, log_every=log_every, sep_grad=True),
    }


@dataclass
class VAEParams:
    """The notebook's parameters (05_vae_sync): same names, types and defaults as its parameters cell."""
    device: str = "auto"
    out_dir: str = ""
    seed: int = 0
    threads: int = 1
    model: str = "real"
    batch: int = 64
    group: int = 1
    log_every: int = 10
    curve_steps: int = 100
    rounds: int = 2
    clock: str = "auto"
    min_run_time: float = 0.1
    max_run_time: float = 0.3
    sweep_batches: list = field(default_factory=lambda: [16, 64, 256, 1024])
    sweep_steps: int = 2
    epoch_batches: int = 5000

    def check(self) -> None:
        require(self.threads >= 0, f"threads must be >= 0 (0 keeps torch's default), got {self.threads}")
        require(self.model in ("real", "complex"), f"model must be 'real' or 'complex', got {self.model!r}")
        require(self.batch >= 1, f"batch must be >= 1, got {self.batch}")
        require(self.group in (0, 1), f"group must be 0 (labels 0-2) or 1 (labels 3-5), got {self.group}")
        require(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")
        require(self.curve_steps >= 2 and self.sweep_steps >= 1, "curve_steps must be >= 2 and sweep_steps >= 1")
        require(self.clock in ("auto", "wall", "cpu"), f"clock must be 'auto', 'wall' or 'cpu', got {self.clock!r}")
        require(self.rounds >= 1, f"rounds must be >= 1, got {self.rounds}")
        require(0 < self.min_run_time <= self.max_run_time, "need 0 < min_run_time <= max_run_time")
        require(len(self.sweep_batches) >= 2 and all(isinstance(b, int) and b >= 1 for b in self.sweep_batches),
                f"sweep_batches must list at least two batch sizes >= 1, got {self.sweep_batches!r}")
        require(self.epoch_batches >= 1, f"epoch_batches must be >= 1, got {self.epoch_batches}")
