"""The parameters of notebook 06_latentwire_amp: the same names, types and defaults as its `parameters`
cell (tests/runner/test_notebook_params.py checks that they agree)."""
from __future__ import annotations

import dataclasses

from ..kit.params import Backend, CompileMode, RunParams, require
from .config import ModelConfig


@dataclasses.dataclass
class LatentWireParams(RunParams):
    """notebooks/06_latentwire_amp.ipynb"""
    min_run_time: float = 0.3     # seconds, per timed variant
    # 4 s, not the kit's 2: a round of the batch-8 variants' steps takes ~0.2 s on the CPU defaults, the blocks are
    # sized from 3 steps a side, and the first 99% interval needs 9 rounds
    verdict_time: float = 8.0     # seconds of paired rounds per timed claim at most (a verdict stops once decided)
    lm: str = "gpt"               # frozen LM: gpt (seeded small GPT) or hf:/local/path (needs transformers)
    n_examples: int = 256         # generated training triples
    n_heldout: int = 64           # generated held-out triples for the quality check
    d_enc: int = 64               # byte encoder width
    enc_layers: int = 2           # byte encoder layers
    d_lm: int = 128               # frozen GPT width
    lm_layers: int = 2            # frozen GPT layers
    latent_len: int = 8           # M latent vectors (pooler queries)
    k_tokens: int = 4             # K of the K-token CE
    lr: float = 0.001             # AdamW learning rate
    accum_steps: int = 2          # micro-batches per optimizer step in the ablation
    ablation_batch: int = 8       # micro-batch of the batch_size toggle, quick wins and all together
    num_workers: int = 1          # DataLoader workers (this machine has 2 cores)
    amp: bool = False             # bf16 autocast inside quick wins, all together and the loss curves
    compile: CompileMode = "default"  # torch.compile mode of the compiled step: off, default, reduce-overhead, max-autotune
    backend: Backend = "inductor"     # torch.compile backend of the compiled step: inductor, eager or aot_eager
    max_batch: int = 16           # largest batch of the sweep (1, 4, 16, ...)
    mem_budget_gb: float = 4.0    # the sweep stops at the first batch whose peak memory exceeds this
    curve_samples: int = 96       # training samples per loss curve
    curve_batch: int = 16         # micro-batch of the batched loss curve
    rounds: int = 3               # timing rounds of the ablation, each variant in turn (a drifting machine slows all alike)
    block_s: float = 0.1          # seconds of optimizer steps per timed block (at least one step per block)

    def check(self) -> None:
        super().check()
        for name in ("n_examples", "n_heldout", "d_enc", "enc_layers", "d_lm", "lm_layers", "latent_len",
                     "k_tokens", "accum_steps", "ablation_batch", "max_batch", "curve_samples", "curve_batch", "rounds"):
            require(getattr(self, name) >= 1, f"parameter {name!r} must be >= 1, got {getattr(self, name)}")
        require(self.num_workers >= 0, f"num_workers must be >= 0, got {self.num_workers}")
        require(self.lr > 0 and self.mem_budget_gb > 0 and self.block_s > 0,
                "parameters 'lr', 'mem_budget_gb' and 'block_s' must be > 0")
        require(self.n_examples >= max(self.ablation_batch * self.accum_steps, self.curve_batch, self.max_batch),
                "parameter 'n_examples' must fill one optimizer step of the largest batch")
        require(self.d_enc % 4 == 0 and self.d_lm % 4 == 0, "d_enc and d_lm must divide by the 4 attention heads")

    def model_config(self) -> ModelConfig:
        return ModelConfig(d_enc=self.d_enc, enc_layers=self.enc_layers, d_lm=self.d_lm, lm_layers=self.lm_layers,
                           latent_len=self.latent_len, k_tokens=self.k_tokens)
