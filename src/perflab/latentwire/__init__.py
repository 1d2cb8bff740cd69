"""Study 6: LatentWire training throughput (seed 003; notebook 06_latentwire_amp). A byte encoder pools a prompt
into M latent vectors, an adapter maps them into a frozen decoder LM's embedding space, and the LM is trained
through to produce the answer.

    params.py         the notebook's parameters (LatentWireParams)
    config.py         ModelConfig (the model's sizes) and Toggles (the optimized version's knobs)
    data.py           seeded SQuAD-style triples and the SQuAD file format
    tokenizer.py, batches.py   the chat-template tokenizer; examples to batches, the pre-tokenized cache
    gpt.py, hf.py, model.py    the frozen LM (small GPT, or a local Hugging Face model) and LatentWire itself
    reference.py      the losses by their definitions: the oracle; losses.py: the single-pass readout
    trainer_base.py   what both versions' trainers share
    baseline.py       make_trainer: the report's training loop, reproduced
    optimized.py      make_trainer: the baseline's signature plus one toggle per recommendation
    training.py       train(version, model, examples, ...) and evaluate
    checks.py         the notebook's correctness checks
    claims.py         the seed's claims and issue 13's targets with their verdict rules, units and measured_by
    ablation.py       IMPLS = {"baseline": baseline.make_trainer, "optimized": optimized.make_trainer}, the ablation's
                      variants (TESTED_BY: the claim each tests), how one variant is prepared and timed
    parts.py, sweep.py, curves.py   the parts of the step timed alone; the batch sweep and the compiled step; the
                      loss curves
    study.py          the notebook's measurements by role and the claims' decisions (IMPLS, Findings and
                      evidence re-exported); findings.py: Findings, what the page and the claims read of it;
                      evidence.py: evidence(run, found), each claim's Evidence
    timing.py, floors.py, activations.py, display.py   step timing and VariantResult, FLOP floors, activation bytes,
                      tables and figures
    ddp.py            the same trainers under torchrun (--impl names a key of IMPLS)

Every recommendation of the seed's report is a toggle of `optimized.make_trainer`; `baseline.make_trainer` is the
report's starting point. The attention kernel ("manual" or "sdpa") is a model option (`LatentWire.set_options`).
"""
from .batches import Batch, PretokenizedCache, collate, tokenize_example
from .config import ModelConfig, Toggles
from .data import QAExample, load_squad, make_examples, prompt_text, save_squad
from .model import LatentWire, LossParts, build_model, lm_forwards_per_step
from .params import LatentWireParams
from .tokenizer import Tokenizer
from .training import TrainResult, evaluate, train

__all__ = ["Batch", "PretokenizedCache", "collate", "tokenize_example", "LatentWireParams", "ModelConfig",
           "Toggles", "QAExample", "load_squad", "make_examples", "prompt_text", "save_squad", "LatentWire",
           "LossParts", "build_model", "lm_forwards_per_step", "Tokenizer", "TrainResult", "evaluate",
           "train"]
