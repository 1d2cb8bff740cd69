"""LatentWire training throughput: a byte encoder pools a prompt into M latent vectors, an adapter maps them
into a frozen decoder LM's embedding space, and the LM is trained through to produce the answer
(seed 003; notebook 06_latentwire_amp). Every recommendation of the seed's report is a toggle of
`train(..., impl="optimized", **toggles)`; `impl="baseline"` is the report's starting point.
"""
from .batches import Batch, PretokenizedCache, collate, tokenize_example
from .config import ModelConfig, Toggles
from .data import QAExample, load_squad, make_examples, prompt_text, save_squad
from .model import LatentWire, LossParts, build_model, lm_forwards_per_step
from .params import LatentWireParams
from .tokenizer import Tokenizer
from .training import TrainResult, evaluate, make_trainer, train

__all__ = ["Batch", "PretokenizedCache", "collate", "tokenize_example", "LatentWireParams", "ModelConfig",
           "Toggles", "QAExample", "load_squad", "make_examples", "prompt_text", "save_squad", "LatentWire",
           "LossParts", "build_model", "lm_forwards_per_step", "Tokenizer", "TrainResult", "evaluate",
           "make_trainer", "train"]
