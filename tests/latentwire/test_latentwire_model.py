"""The model: padding a batch to fixed widths keeps its losses, and the frozen LM it is built on (a seeded GPT, or a
local Hugging Face model) is refused with a reason when it cannot be had."""
import importlib.util

import pytest
import torch

from perflab.latentwire import ModelConfig, PretokenizedCache, build_model, make_examples

TINY = ModelConfig(d_enc=16, enc_layers=1, d_lm=32, lm_layers=2, latent_len=4, adapter_hidden=32)
EXAMPLES = make_examples(24, seed=0)


def test_padding_to_fixed_widths_keeps_the_losses():
    model = build_model(TINY, seed=0)
    cache = PretokenizedCache.for_model(EXAMPLES, model.tokenizer, TINY)
    batch = cache.batch([3, 7, 11])
    padded = batch.pad_to(cache.widths, model.tokenizer.pad_id)
    assert padded.widths == cache.widths and batch.widths != cache.widths
    assert padded.tensors().keys() == cache.batch([3, 7, 11], full_width=True).tensors().keys()
    assert all(torch.equal(v, cache.batch([3, 7, 11], full_width=True).tensors()[k]) for k, v in padded.tensors().items())
    for single_pass in (False, True):
        a, b = model(batch, single_pass=single_pass), model(padded, single_pass=single_pass)
        torch.testing.assert_close(torch.stack(list(b)), torch.stack(list(a)), rtol=1e-5, atol=1e-6)  # masked: rounding only
    with pytest.raises(ValueError, match="exceed the fixed widths"):
        padded.pad_to((1, 1), 0)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="transformers is installed")
def test_hf_lm_without_transformers_says_what_to_install():
    with pytest.raises(ImportError, match=r"needs the optional package `transformers`.*lm='gpt'"):
        build_model(TINY, lm="hf:/models/llama")


def test_a_relative_hf_lm_path_is_resolved_from_where_the_user_ran(monkeypatch, tmp_path):
    import perflab.latentwire.hf as hf

    seen = []

    def fake_load(path):
        seen.append(path)
        raise RuntimeError("stop here")

    monkeypatch.setattr(hf, "load_hf_lm", fake_load)
    monkeypatch.setenv("PERFLAB_CWD", str(tmp_path))  # perflab run sets it; kernels run in notebooks/
    with pytest.raises(RuntimeError, match="stop here"):
        build_model(TINY, lm="hf:models/llama")
    assert seen == [(tmp_path / "models" / "llama").resolve()]


def test_unknown_lm_is_refused():
    with pytest.raises(ValueError, match="unknown lm 'llama'"):
        build_model(TINY, lm="llama")


def test_the_attention_kernel_is_a_model_option_and_an_unknown_one_is_refused():
    model = build_model(TINY, seed=0)
    model.set_options(attention="sdpa")
    assert model.pooler.attention == "sdpa" and {b.attn.attention for b in model.lm.blocks} == {"sdpa"}
    with pytest.raises(ValueError, match="attention must be 'manual' or 'sdpa', got 'flash'"):
        model.set_options(attention="flash")
