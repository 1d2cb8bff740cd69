"""The notebook's other experiments: FLOPs per sample (the prediction), the attention-layer benchmark
(the report's "Flash Attention 2: 2-4x on attention layers"), and the loss curves (same quality?)."""
from __future__ import annotations

import dataclasses
import itertools
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..bench import Measurement, measure, speedup, speedup_range
from ..env import synchronize
from .batches import PretokenizedCache, batch_on_the_fly
from .config import Toggles
from .gpt import CausalSelfAttention
from .model import LatentWire, build_model
from .optimized import make_loader
from .params import LatentWireParams
from .tokenizer import Tokenizer
from .training import evaluate, make_trainer


def step_flops(model: LatentWire, examples, *, batch_size: int, single_pass: bool, device) -> dict[str, float]:
    """FLOPs per sample of one forward+backward (torch's FlopCounterMode: matmuls and attention),
    split into the byte encoder + pooler + adapter and the frozen LM."""
    batch = PretokenizedCache.for_model(examples[:batch_size], model.tokenizer, model.cfg).batch(
        list(range(batch_size))).to(device)
    with FlopCounterMode(display=False) as fc:
        model(batch, single_pass=single_pass).total.backward()
    model.zero_grad(set_to_none=True)
    by_module = fc.get_flop_counts()
    lm = sum(by_module.get("LatentWire.lm", {}).values())
    total = fc.get_total_flops()
    return {"total": total / batch_size, "lm": lm / batch_size, "encoder_side": (total - lm) / batch_size}


def lm_sequence_length(model: LatentWire, examples) -> int:
    """Positions of the teacher-forced LM input for a typical example (scaffold + M + answer - 1)."""
    cache = PretokenizedCache.for_model(examples, model.tokenizer, model.cfg)
    b = cache.batch([0])
    median_answer = sorted(cache.ans_len)[len(cache) // 2]
    return b.pre_ids.shape[1] + model.cfg.latent_len + b.post_ids.shape[1] + median_answer - 1


def attention_layer(p: LatentWireParams, *, batch: int, seq: int, device) -> tuple[float, tuple, list[Measurement]]:
    """Forward+backward of one LM attention layer, eager softmax(QK^T)V vs scaled_dot_product_attention,
    at [batch, seq, d_lm]. Returns (gain, (p20/p80 range), [manual, sdpa] measurements)."""
    cfg = p.model_config()
    attn = CausalSelfAttention(cfg.d_lm, cfg.lm_heads).to(device)
    x = torch.randn(batch, seq, cfg.d_lm, device=device, requires_grad=True)

    def run(impl: str):
        attn.impl = impl
        attn(x).sum().backward()

    ms = [measure(lambda impl=impl: run(impl), label="attention layer fwd+bwd", sub_label=f"[{batch}, {seq}, {cfg.d_lm}]",
                  description=impl, min_run_time=p.min_run_time, max_run_time=p.max_run_time, device=device)
          for impl in ("manual", "sdpa")]
    return speedup(*ms), speedup_range(*ms), ms


@dataclasses.dataclass
class Curve:
    name: str
    samples: list[int]      # samples seen after each step
    losses: list[float]     # training loss of each step
    seconds: float          # wall time of the run (device synchronized at the end)
    heldout: dict           # evaluate() on the held-out examples after the run


def loss_curve(name: str, examples, heldout, *, p: LatentWireParams, device, impl: str, toggles: dict) -> Curve:
    """Train a fresh model (same seed) on `p.curve_samples` samples, one micro-batch per step."""
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    trainer = make_trainer(model, examples, impl=impl, device=device, lr=p.lr, accum_steps=1, seed=p.seed, **toggles)
    steps = max(1, p.curve_samples // trainer.samples_per_step)
    t0 = time.perf_counter()
    try:
        for _ in range(steps):
            trainer.step()
        synchronize(device)
        seconds = time.perf_counter() - t0
        rows = trainer.losses()
    finally:
        trainer.close()
    per = trainer.samples_per_step
    return Curve(name, [per * (i + 1) for i in range(steps)], [r[0] for r in rows], seconds,
                 evaluate(model, heldout, device=device))


def curve_runs(p: LatentWireParams) -> list[tuple[str, str, dict]]:
    """(name, impl, toggles): the baseline; every recommendation at batch 1 in the baseline's sample order
    (manual indexing), so only numerics differ; and every recommendation at p.curve_batch."""
    same_order = dataclasses.asdict(Toggles.all_on(batch_size=1, amp=p.amp, compile=p.compile))
    same_order.update(dataloader=False, num_workers=0)
    batched = dataclasses.asdict(Toggles.all_on(batch_size=p.curve_batch, num_workers=p.num_workers, amp=p.amp,
                                                compile=p.compile))
    return [("baseline", "baseline", {}), ("optimized, batch 1", "optimized", same_order),
            (f"optimized, batch {p.curve_batch}", "optimized", batched)]


def data_path(p: LatentWireParams, examples, device) -> dict:
    """What the data recommendations can remove, measured directly: preparing one sample on the fly
    (tokenize bytes, scaffolds and answer, collate, move) vs gathering it from the pre-tokenized cache
    (and move), and the bytes one sample moves host-to-device."""
    model_cfg = p.model_config()
    tok = Tokenizer()
    cache = PretokenizedCache.for_model(examples, tok, model_cfg)
    order = itertools.cycle(range(len(examples)))  # a different example each call, as in training

    def on_the_fly():
        return batch_on_the_fly(examples, [next(order)], tok, model_cfg).to(device)

    def cached():
        return cache.batch([next(order)]).to(device)

    kw = dict(label="data path, one sample", min_run_time=p.min_run_time / 2, max_run_time=p.max_run_time / 2,
              device=device)
    fly, gather = measure(on_the_fly, description="tokenize+collate", **kw), measure(cached, description="cache", **kw)
    sample = cache.batch([0])
    nbytes = sum(t.numel() * t.element_size() for k, t in sample.tensors().items() if k != "index")
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
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=device)
    params = model.trainable_parameters()
    for q in params:
        q.grad = torch.randn_like(q) * 1e-3
    ms = []
    for fused in (False, True):
        opt = torch.optim.AdamW(params, lr=p.lr, **({"fused": True} if fused else {}))
        ms.append(measure(opt.step, label="AdamW.step", sub_label=f"{len(params)} tensors",
                          description="fused" if fused else "default", min_run_time=p.min_run_time / 2,
                          max_run_time=p.max_run_time / 2, device=device))
    return speedup(*ms), ms
