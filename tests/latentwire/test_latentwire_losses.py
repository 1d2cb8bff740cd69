"""Single-pass first-token and K-token CE equal their definitions (one LM forward per prediction)."""
import random

import pytest
import torch

from perflab.latentwire import (
    ModelConfig,
    QAExample,
    build_model,
    collate,
    lm_forwards_per_step,
    losses,
    reference,
    tokenize_example,
)
from perflab.latentwire.data import CITIES, SYLLABLES

TINY = dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=2, latent_len=4, adapter_hidden=32)


def _batch(model, n, seed, k):
    """Fresh random examples with answers from 1 token to longer than K, so some K-token targets are padding."""
    rng = random.Random(seed)
    exs = []
    for i in range(n):
        words = rng.randint(1, 4)
        answer = " ".join(rng.choice(CITIES) if rng.random() < 0.5 else
                          "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(words))
        ctx = " ".join(rng.choice(CITIES) for _ in range(rng.randint(2, 30)))
        exs.append(QAExample(ctx, f"question {i}?", answer))
    items = [tokenize_example(e, model.tokenizer, max_bytes=320, max_answer_tokens=32) for e in exs]
    return collate(items, list(range(n)), pad_id=model.tokenizer.pad_id, k_tokens=k)


@pytest.mark.parametrize("k, n, attention", [(1, 1, "manual"), (4, 5, "manual"), (7, 3, "manual"), (4, 6, "sdpa")])
def test_single_pass_equals_the_k_forward_loop(k, n, attention):
    torch.manual_seed(k * 10 + n)
    model = build_model(ModelConfig(**TINY, k_tokens=k), seed=n)
    model.set_options(attention=attention)
    batch = _batch(model, n, seed=k + n, k=k)
    assert (batch.labels[:, :k] == -100).any() or n == 1 or k == 1  # awkward: padded K-token targets occur
    ctx, ans = model.lm_inputs(batch)
    logits = reference.teacher_forced_logits(model.lm, ctx, ans)
    # fp32, same weights: only the shapes of the matmuls differ between the two (summation order), so
    # agreement is to float rounding; 1e-5 relative is ~100 ulps of a loss near 6
    torch.testing.assert_close(losses.first_token_ce(logits, batch.labels),
                               reference.first_token_ce_loop(model.lm, ctx, batch.labels), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(losses.k_token_ce(logits, batch.labels, k),
                               reference.k_token_ce_loop(model.lm, ctx, ans, batch.labels, k), rtol=1e-5, atol=1e-6)


def test_a_readout_off_by_one_position_is_caught():
    # the check above can fail: reading the logits one position late gives a different loss
    model = build_model(ModelConfig(**TINY), seed=0)
    batch = _batch(model, 4, seed=1, k=4)
    ctx, ans = model.lm_inputs(batch)
    logits = reference.teacher_forced_logits(model.lm, ctx, ans)
    shifted = torch.cat([logits[:, 1:], logits[:, -1:]], dim=1)
    loop = reference.k_token_ce_loop(model.lm, ctx, ans, batch.labels, 4)
    assert not torch.allclose(losses.k_token_ce(shifted, batch.labels, 4), loop, rtol=1e-3)


@pytest.mark.parametrize("single_pass", [False, True])
def test_model_losses_and_gradients_agree_and_forwards_are_counted(single_pass):
    model = build_model(ModelConfig(**TINY), seed=2)
    batch = _batch(model, 3, seed=2, k=4)
    f0 = model.lm.forward_calls
    parts = model(batch, single_pass=single_pass)
    assert model.lm.forward_calls - f0 == lm_forwards_per_step(4, single_pass) == (1 if single_pass else 6)
    parts.total.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    assert all(p.grad is None for p in model.lm.parameters())  # the LM is frozen
    model.zero_grad(set_to_none=True)
    other = model(batch, single_pass=not single_pass)
    torch.testing.assert_close(other.total, parts.total, rtol=1e-5, atol=1e-6)
    other.total.backward()
    for n, p in model.named_parameters():
        if p.requires_grad:  # gradients through the frozen LM agree too (float rounding only)
            torch.testing.assert_close(p.grad, grads[n], rtol=1e-4, atol=1e-6)


def test_k_token_ce_needs_k_columns():
    model = build_model(ModelConfig(**TINY), seed=0)
    batch = _batch(model, 2, seed=0, k=1)
    logits = torch.zeros(2, batch.labels.shape[1], model.tokenizer.vocab_size)
    with pytest.raises(ValueError, match="needs >= K=40 answer columns"):
        losses.k_token_ce(logits, batch.labels, 40)
