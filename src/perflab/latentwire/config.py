"""Configuration of the LatentWire study: the model's sizes, the optimized trainer's toggles, and the
notebook's parameters (the same names, types and defaults as the notebook's `parameters` cell)."""
from __future__ import annotations

import dataclasses

from ..params import ParameterError, check_value, require

COMPILE_CHOICES = ("off", "eager", "aot_eager", "inductor")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Sizes of the encoder, pooler, adapter and the default frozen LM (a small GPT).

    The origin runs a 6-layer byte encoder (d_z=256, M=8..32) into a frozen 8B LM; the CPU defaults
    keep every stage but shrink the widths so one training step takes milliseconds."""
    d_enc: int = 64              # byte encoder width (d_z)
    enc_layers: int = 2          # TransformerEncoder layers
    enc_heads: int = 4
    max_bytes: int = 320         # the encoder's limit: longer prompts are refused, not truncated
    latent_len: int = 8          # M learned queries of the pooler = latent prefix length
    adapter_hidden: int = 256    # adapter MLP width
    d_lm: int = 128              # frozen GPT width
    lm_layers: int = 2
    lm_heads: int = 4
    lm_max_pos: int = 96         # GPT positions: scaffold + M + answer must fit
    max_answer_tokens: int = 32  # origin: answers <= 32 tokens
    k_tokens: int = 4            # K of the K-token CE (origin K=4)
    first_weight: float = 0.5    # weight of the first-token CE (origin 0.5)
    k_weight: float = 0.5        # weight of the K-token CE
    lm_seed: int = 1234          # seed of the frozen GPT's weights (fixed: the LM is a given, not trained)

    def __post_init__(self):
        for name in ("d_enc", "enc_layers", "enc_heads", "max_bytes", "latent_len", "adapter_hidden", "d_lm",
                     "lm_layers", "lm_heads", "lm_max_pos", "max_answer_tokens", "k_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"ModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_enc % self.enc_heads or self.d_lm % self.lm_heads:
            raise ValueError("ModelConfig: d_enc must divide by enc_heads and d_lm by lm_heads")


@dataclasses.dataclass(frozen=True)
class Toggles:
    """The optimized trainer's switches, one per recommendation. All off = the baseline's behaviour."""
    pin_memory: bool = False          # pinned host batches + .to(non_blocking=True) (report 1)
    dataloader: bool = False          # torch DataLoader instead of manual indexing (report 2)
    num_workers: int = 0              # DataLoader worker processes (needs dataloader)
    persistent_workers: bool = True   # keep workers across epochs (only with num_workers > 0)
    pretokenize: bool = False         # tokenize bytes, scaffolds and answers once (report 3)
    grad_accum: bool = False          # backward per micro-batch + zero_grad(set_to_none=True) (report 4)
    batch_size: int = 1               # samples per micro-batch (report 5; the origin's default is 1)
    amp: bool = False                 # bf16 autocast over encoder, adapter AND the LM (report 7)
    fused_adamw: bool = False         # AdamW(fused=True) (report: quick win 4)
    sdpa: bool = False                # F.scaled_dot_product_attention in the LM and pooler (report: flash attention)
    compile: str = "off"              # torch.compile backend for the loss: off | eager | aot_eager | inductor
    checkpointing: bool = False       # activation checkpointing of encoder layers and LM blocks
    single_pass: bool = False         # first-token and K-token CE read from the teacher-forced pass
    no_step_sync: bool = False        # keep losses on device: no .item()/synchronize each step

    def __post_init__(self):
        require(self.batch_size >= 1, f"toggle batch_size must be >= 1, got {self.batch_size}")
        require(self.num_workers >= 0, f"toggle num_workers must be >= 0, got {self.num_workers}")
        require(self.num_workers == 0 or self.dataloader,
                f"toggle num_workers={self.num_workers} needs dataloader=True (workers belong to a DataLoader)")
        require(self.compile in COMPILE_CHOICES,
                f"toggle compile must be one of {COMPILE_CHOICES}, got {self.compile!r}")

    @classmethod
    def from_kwargs(cls, **toggles) -> "Toggles":
        """Toggles from keyword arguments; an unknown name or a wrong type is a ParameterError naming it."""
        errors = []
        values = {}
        for name, value in toggles.items():
            try:
                values[name] = check_value(name, value, cls)
            except ParameterError as e:
                errors.append(str(e).replace("parameter", "toggle", 1))
        if errors:
            raise ParameterError("bad training toggles:\n  " + "\n  ".join(errors))
        return cls(**values)

    @classmethod
    def all_on(cls, batch_size: int = 16, num_workers: int = 0, compile: str = "off", amp: bool = True,
               checkpointing: bool = False) -> "Toggles":
        """Every recommendation at once (compile and checkpointing stay optional)."""
        return cls(pin_memory=True, dataloader=True, num_workers=num_workers, pretokenize=True, grad_accum=True,
                   batch_size=batch_size, amp=amp, fused_adamw=True, sdpa=True, compile=compile,
                   checkpointing=checkpointing, single_pass=True, no_step_sync=True)


@dataclasses.dataclass
class LatentWireParams:
    """The notebook's parameters (06_latentwire_amp): the same names, types and defaults as its
    parameters cell (tests/test_latentwire_notebook.py checks they agree)."""
    device: str = "auto"
    out_dir: str = ""
    seed: int = 0
    lm: str = "gpt"
    n_examples: int = 256
    n_heldout: int = 64
    d_enc: int = 64
    enc_layers: int = 2
    d_lm: int = 128
    lm_layers: int = 2
    latent_len: int = 8
    k_tokens: int = 4
    lr: float = 0.001
    accum_steps: int = 2
    ablation_batch: int = 8
    num_workers: int = 1
    amp: bool = False
    compile: str = "off"
    torch_threads: int = 1
    max_batch: int = 64
    mem_budget_gb: float = 4.0
    curve_samples: int = 96
    curve_batch: int = 16
    rounds: int = 3
    min_run_time: float = 0.3
    max_run_time: float = 1.0

    def check(self) -> None:
        for name in ("n_examples", "n_heldout", "d_enc", "enc_layers", "d_lm", "lm_layers", "latent_len",
                     "k_tokens", "accum_steps", "ablation_batch", "max_batch", "curve_samples", "curve_batch", "rounds"):
            require(getattr(self, name) >= 1, f"parameter {name!r} must be >= 1, got {getattr(self, name)}")
        require(self.num_workers >= 0 and self.torch_threads >= 0,
                "parameters 'num_workers' and 'torch_threads' must be >= 0")
        require(self.compile in COMPILE_CHOICES, f"parameter 'compile' must be one of {COMPILE_CHOICES}")
        require(self.lr > 0 and self.mem_budget_gb > 0, "parameters 'lr' and 'mem_budget_gb' must be > 0")
        require(0 < self.min_run_time <= self.max_run_time, "need 0 < min_run_time <= max_run_time")
        require(self.n_examples >= max(self.ablation_batch * self.accum_steps, self.curve_batch, self.max_batch),
                "parameter 'n_examples' must fill one optimizer step of the largest batch")
        require(self.d_enc % 4 == 0 and self.d_lm % 4 == 0, "d_enc and d_lm must divide by the 4 attention heads")

    def model_config(self) -> ModelConfig:
        return ModelConfig(d_enc=self.d_enc, enc_layers=self.enc_layers, d_lm=self.d_lm, lm_layers=self.lm_layers,
                           latent_len=self.latent_len, k_tokens=self.k_tokens)
