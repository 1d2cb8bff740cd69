"""Steps of study 6 for `perflab diagnose` (and `perflab.kit.diagnose`): one optimizer step of a trainer, its
`.step()` (the training loop's body), on notebook 06's CPU defaults (seeded SQuAD-style triples, the small GPT).

    perflab diagnose --setup perflab.latentwire.diagnosis:baseline_step
    diagnose(setup=lambda: baseline_step(run))

`baseline_step`: the report's loop (`baseline.make_trainer`: batch size 1, batches tokenized and built by hand in the
step, blocking copies, 1 + 1 + K LM forwards, synchronize and .item() every step); `optimized_step`: every
recommendation on (`config.Toggles.all_on`: pinned batches and non-blocking copies, a DataLoader with one worker,
pre-tokenized once, per-micro-batch backward, batches of 8, fused AdamW, SDPA, the single-pass losses, no per-step
host read; bf16 autocast and compile as given, off by default: the CPU's own choices, notebook 06's). Both take
`accum_steps` micro-batches per step (2, the ablation's). `REPORT`: seed 003's findings, each with the kind and line
diagnose should name (docs/diagnose.md).
"""
from __future__ import annotations

import dataclasses

from ..kit.env import pick_device
from . import baseline, optimized
from .config import ModelConfig, Toggles
from .data import make_examples
from .model import build_model


def _model(run, device, n_examples: int, seed: int):
    dev = pick_device(run.device if run is not None else device or "auto")
    cfg = run.cfg.model_config() if run is not None else ModelConfig()
    n, seed, lm = (run.cfg.n_examples, run.cfg.seed, run.cfg.lm) if run is not None else (n_examples, seed, "gpt")
    examples = make_examples(n, seed=seed, max_prompt_bytes=cfg.max_bytes)
    return build_model(cfg, seed=seed, lm=lm, device=dev), examples, dev


def baseline_step(run=None, *, device=None, accum_steps: int = 2, n_examples: int = 256, seed: int = 0):
    """`.step` of the report's trainer (`baseline.make_trainer`)."""
    model, examples, dev = _model(run, device, n_examples, seed)
    return baseline.make_trainer(model, examples, device=dev, accum_steps=accum_steps, seed=seed).step


def optimized_step(run=None, *, device=None, accum_steps: int = 2, n_examples: int = 256, seed: int = 0,
                   batch_size: int = 8, num_workers: int = 1, amp: bool = False, compile: str = "off",
                   backend: str = "inductor"):
    """`.step` of the optimized trainer with every recommendation on (`Toggles.all_on`)."""
    model, examples, dev = _model(run, device, n_examples, seed)
    toggles = Toggles.all_on(batch_size=batch_size, num_workers=num_workers, compile=compile, backend=backend, amp=amp)
    return optimized.make_trainer(model, examples, device=dev, accum_steps=accum_steps, seed=seed,
                                  **dataclasses.asdict(toggles)).step


# seed 003's findings: the kind diagnose should name, and where ("file:text of the line", or "file:function")
REPORT = [
    dict(key="blocking_to", words="Multiple `.to(device)` calls with `non_blocking=False` (default) ... ~20-30% "
                                  "performance overhead from blocking transfers",
         mechanism=True, kind="host-to-device copy", where="latentwire/batches.py:return Batch(**{k: v if k == \"index\""),
    dict(key="no_dataloader", words="No DataLoader usage - manual batch indexing ... CPU bottleneck during data "
                                    "preparation",
         mechanism=True, kind="data loading", where="latentwire/baseline.py:batch = self._batch(index)"),
    dict(key="retokenize", words="Tokenization happens every batch iteration ... Re-tokenizing chat templates every "
                                 "iteration",
         mechanism=True, kind="data loading", where="latentwire/baseline.py:batch = self._batch(index)",
         hot="tokenize"),
    dict(key="batch_1", words="Default batch size of 1 severely underutilizes GPUs",
         mechanism=True, kind="launch-bound", where=None),
    dict(key="k_loop", words="Loop over K tokens instead of parallel computation",
         mechanism=True, kind="Python loop of small ops", where="latentwire/reference.py:for t in range(k):"),
    dict(key="no_amp", words="No automatic mixed precision (AMP) ... 2-3x speedup possible with AMP",
         mechanism=False, kind=None, where=None,
         why="a precision choice: diagnose reads no dtype policy and cannot tell whether bf16 keeps the model's "
             "accuracy; on a CPU without bf16 units it would not pay (notebook 06 measures both)"),
    dict(key="accumulation", words="Creating new tensors instead of in-place operations (total_loss += loss) ... "
                                   "memory fragmentation leading to OOMs",
         mechanism=False, kind=None, where=None,
         why="memory over a step's micro-batches: every micro-batch's graph alive until the one backward; diagnose "
             "measures the step's peak, not which graphs stay alive, and a finding needs a peak near the device's "
             "memory"),
    dict(key="kv_cache", words="KV cache not properly reused across steps",
         mechanism=False, kind=None, where=None,
         why="the report names no line; what a cache would save here is the K-token loop's recomputation of the "
             "context, one LM forward per token (the k_loop row), which diagnose names and the single-pass losses "
             "remove"),
]
