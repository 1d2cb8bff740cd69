"""Optional: a Hugging Face causal LM from a LOCAL path as the frozen decoder (the origin's Llama/Qwen).

`transformers` is an optional extra, imported only when this is called: without it the call fails with
a message saying what to install. Nothing is downloaded (`local_files_only=True`).
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def _require_transformers():
    try:
        import transformers  # noqa: F401  (optional extra)
    except ImportError:
        raise ImportError("lm='hf:<path>' needs the optional package `transformers`, which is not installed here; "
                          "install it (pip install transformers) or use the default lm='gpt' "
                          "(perflab's seeded small GPT, no downloads)") from None
    return transformers


class HFTokenizer:
    """The subset of perflab's Tokenizer the trainers use, over a Hugging Face tokenizer."""

    def __init__(self, hf_tok):
        self.hf = hf_tok
        self.eos_id = hf_tok.eos_token_id
        self.bos_id = hf_tok.bos_token_id if hf_tok.bos_token_id is not None else hf_tok.eos_token_id
        self.pad_id = hf_tok.pad_token_id if hf_tok.pad_token_id is not None else hf_tok.eos_token_id
        self.vocab_size = len(hf_tok)

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False)

    def scaffold(self) -> tuple[str, str]:
        """The model's own chat template split around the user's message (where the latent goes)."""
        from .tokenizer import SYSTEM_PROMPT

        marker = "\u241fLATENT\u241f"
        text = self.hf.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT},
                                            {"role": "user", "content": marker}],
                                           tokenize=False, add_generation_prompt=True)
        pre, post = text.split(marker)
        return pre, post + "Answer:"

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode(ids)


class HFCausalLM(nn.Module):
    """Frozen HF causal LM with the TinyGPT interface: embed(ids), forward(inputs_embeds) -> logits,
    embed_rms(), set_attention(), checkpointing, forward_calls."""

    def __init__(self, model, tokenizer: HFTokenizer):
        super().__init__()
        self.model = model.requires_grad_(False).eval()
        self.tokenizer = tokenizer
        self.forward_calls = 0
        self.checkpointing = False

    def set_attention(self, attention: str) -> None:
        # HF picks the kernel at load time (attn_implementation); "manual" maps to HF's "eager"
        self.model.config._attn_implementation = {"manual": "eager", "sdpa": "sdpa"}[attention]

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)

    def embed_rms(self) -> float:
        return float(self.model.get_input_embeddings().weight.detach().float().pow(2).mean().sqrt())

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            self.forward_calls += 1
        if self.checkpointing and not self.model.is_gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return self.model(inputs_embeds=inputs_embeds, use_cache=False).logits


def load_hf_lm(path: str | Path, *, dtype: torch.dtype = torch.bfloat16) -> HFCausalLM:
    """Load a causal LM and its tokenizer from a local folder (no network)."""
    transformers = _require_transformers()
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"lm path {str(path)!r} is not a folder holding a Hugging Face model")
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype, local_files_only=True)
    return HFCausalLM(model, HFTokenizer(tok))
