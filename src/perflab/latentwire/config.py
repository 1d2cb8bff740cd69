"""Configuration of the LatentWire study: the model's sizes and the optimized trainer's toggles (the
notebook's parameters are in `params.py`)."""
from __future__ import annotations

import dataclasses

from ..kit.params import Backend, CompileMode, require, validate


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
    compile: CompileMode = "off"      # torch.compile mode of the loss (forward + backward); off = eager
    compile_backend: Backend = "inductor"  # torch.compile backend when compile is not off
    checkpointing: bool = False       # activation checkpointing of encoder layers and LM blocks
    single_pass: bool = False         # first-token and K-token CE read from the teacher-forced pass
    no_step_sync: bool = False        # keep losses on device: no .item()/synchronize each step

    def __post_init__(self):
        require(self.batch_size >= 1, f"toggle batch_size must be >= 1, got {self.batch_size}")
        require(self.num_workers >= 0, f"toggle num_workers must be >= 0, got {self.num_workers}")
        require(self.num_workers == 0 or self.dataloader,
                f"toggle num_workers={self.num_workers} needs dataloader=True (workers belong to a DataLoader)")

    @classmethod
    def from_kwargs(cls, **toggles) -> Toggles:
        """Toggles from keyword arguments, checked by the kit's `validate` (unknown names, wrong types and
        the rules above, each named in a ParameterError)."""
        return validate(toggles, cls)

    @classmethod
    def all_on(cls, batch_size: int = 16, num_workers: int = 0, compile: str = "off", backend: str = "inductor",
               amp: bool = True, checkpointing: bool = False) -> Toggles:
        """Every recommendation at once (compile and checkpointing stay optional)."""
        return cls(pin_memory=True, dataloader=True, num_workers=num_workers, pretokenize=True, grad_accum=True,
                   batch_size=batch_size, amp=amp, fused_adamw=True, sdpa=True, compile=compile,
                   compile_backend=backend, checkpointing=checkpointing, single_pass=True, no_step_sync=True)
