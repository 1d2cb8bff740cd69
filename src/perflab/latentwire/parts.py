"""The parts of the step timed alone, where a recommendation acts on one part: one LM attention layer, eager
softmax(QK^T)V against scaled_dot_product_attention (a model option, not a version: "Flash Attention 2: 2-4x on
attention layers"); one sample prepared on the fly against a gather from the pre-tokenized cache (the most
pre-tokenization or a DataLoader can remove); and AdamW.step default against fused. Each hands out its callables
too (`attention_fns`, `data_fns`), for the claims' paired rounds (`study.decide_attention`, `study.decide_data`).
"""
from __future__ import annotations

import itertools

import torch

from ..kit.bench import Measurement, measure, measure_interleaved, speedup
from ..kit.verdicts import Measured
from .batches import PretokenizedCache, batch_on_the_fly
from .gpt import CausalSelfAttention
from .model import LatentWire, build_model
from .optimized import make_loader
from .params import LatentWireParams
from .tokenizer import Tokenizer


def lm_sequence_length(model: LatentWire, examples) -> int:
    """Positions of the teacher-forced LM input for a typical example (scaffold + M + answer - 1)."""
    cache = PretokenizedCache.for_model(examples, model.tokenizer, model.cfg)
    b = cache.batch([0])
    median_answer = sorted(cache.ans_len)[len(cache) // 2]
    return b.pre_ids.shape[1] + model.cfg.latent_len + b.post_ids.shape[1] + median_answer - 1


def attention_fns(p: LatentWireParams, *, batch: int, seq: int, device) -> dict:
    """{"manual": eager softmax(QK^T)V, "sdpa": scaled_dot_product_attention}: each a call of one LM attention
    layer's forward+backward at [batch, seq, d_lm], on the same layer and input."""
    cfg = p.model_config()
    attn = CausalSelfAttention(cfg.d_lm, cfg.lm_heads).to(device)
    x = torch.randn(batch, seq, cfg.d_lm, device=device, requires_grad=True)

    def run(attention: str):
        attn.attention = attention
        attn(x).sum().backward()
    return {a: (lambda a=a: run(a)) for a in ("manual", "sdpa")}


def attention_layer(p: LatentWireParams, *, batch: int, seq: int, device) -> tuple[Measured, list[Measurement]]:
    """Forward+backward of one LM attention layer, eager vs SDPA (`attention_fns`), timed side by side
    (`measure_interleaved`: a drifting machine slows both alike).
    Returns (manual / sdpa: the ratio of mean times with its 99% interval (`Measured.ratio`), [manual, sdpa]
    measurements)."""
    fns = attention_fns(p, batch=batch, seq=seq, device=device)
    ms = measure_interleaved(fns, label="attention layer fwd+bwd", descriptions={k: k for k in fns},
                             sub_labels={k: f"[{batch}, {seq}, {p.d_lm}]" for k in fns},
                             min_run_time=p.min_run_time, max_run_time=p.max_run_time, device=device)
    ms = [ms["manual"], ms["sdpa"]]
    return Measured.ratio(*ms), ms


def data_fns(p: LatentWireParams, examples, device) -> dict:
    """{"on_the_fly": prepare one sample (tokenize bytes, scaffolds and answer, collate, move), "cache": gather one
    from the pre-tokenized cache (and move)}: each call takes the next example (as in training)."""
    model_cfg, tok = p.model_config(), Tokenizer()
    cache = PretokenizedCache.for_model(examples, tok, model_cfg)
    order = itertools.cycle(range(len(examples)))  # a different example each call, as in training
    return {"on_the_fly": lambda: batch_on_the_fly(examples, [next(order)], tok, model_cfg).to(device),
            "cache": lambda: cache.batch([next(order)]).to(device)}


def data_path(p: LatentWireParams, examples, device) -> dict:
    """What the data recommendations can remove, measured directly: one sample on the fly vs from the cache
    (`data_fns`), each timed on its own, and the bytes one sample moves host-to-device."""
    model_cfg, tok = p.model_config(), Tokenizer()
    cache = PretokenizedCache.for_model(examples, tok, model_cfg)
    kw = dict(label="data path, one sample", min_run_time=p.min_run_time / 2, max_run_time=p.max_run_time / 2,
              device=device)
    fns = data_fns(p, examples, device)
    fly = measure(fns["on_the_fly"], description="tokenize+collate", **kw)
    gather = measure(fns["cache"], description="cache", **kw)
    nbytes = sum(t.numel() * t.element_size() for k, t in cache.batch([0]).tensors().items() if k != "index")
    out = {"on_the_fly": fly, "cache": gather, "bytes_per_sample": nbytes}
    if p.num_workers:  # what a non-persistent DataLoader pays at every epoch: start workers, get the first batch
        loader, _ = make_loader(examples, tok, model_cfg, cache, batch_size=p.ablation_batch, num_workers=p.num_workers,
                                persistent_workers=False, pin_memory=False, seed=p.seed)
        out["worker_startup"] = measure(lambda: next(iter(loader)), label="DataLoader first batch",
                                        description=f"{p.num_workers} worker(s)", min_run_time=p.min_run_time / 2,
                                        max_run_time=p.max_run_time / 2)
    return out


def optimizer_step(p: LatentWireParams, device) -> tuple[float, list[Measurement]]:
    """AdamW.step() alone over the trainable parameters: the default kernels vs fused=True."""
    params = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device).trainable_parameters()
    for q in params:
        q.grad = torch.randn_like(q) * 1e-3
    ms = []
    for fused in (False, True):
        opt = torch.optim.AdamW(params, lr=p.lr, **({"fused": True} if fused else {}))
        ms.append(measure(opt.step, label="AdamW.step", sub_label=f"{len(params)} tensors",
                          description="fused" if fused else "default", min_run_time=p.min_run_time / 2,
                          max_run_time=p.max_run_time / 2, device=device))
    return speedup(*ms), ms

