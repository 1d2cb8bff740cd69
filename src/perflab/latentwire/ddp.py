"""Data-parallel training through torchrun (the report's 4x H100), on the same `train` entry point.

    torchrun --nproc_per_node=4 -m perflab.latentwire.ddp --device cuda --steps 50 --batch-size 64 \\
        --toggle amp=True --toggle single_pass=True --toggle pretokenize=True --toggle dataloader=True
    torchrun --nproc_per_node=2 -m perflab.latentwire.ddp --device cpu --steps 3 --out /tmp/ddp   # gloo, CI

Every rank builds the same model from the same seed, DistributedDataParallel all-reduces the gradients
of the trainable parts (the frozen LM has none), and each rank reads its own shard of the samples
(DistributedSampler with dataloader=True; a rank stride of the same permutation otherwise). Backend:
nccl on CUDA, gloo on CPU. With --out each rank saves its trainable parameters and the sample indices
it read to <out>/rank<r>.pt, so a test can check the replicas stayed identical.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..kit.params import parse_assignment, validate
from .ablation import IMPLS
from .config import ModelConfig, Toggles
from .data import make_examples
from .model import build_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="torchrun --nproc_per_node=N -m perflab.latentwire.ddp",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda (each rank uses cuda:LOCAL_RANK)")
    ap.add_argument("--impl", default="optimized", choices=tuple(IMPLS), help="the version to train (study.IMPLS)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--n-examples", type=int, default=256)
    ap.add_argument("--accum-steps", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", action="append", default=[], metavar="NAME=VALUE",
                    help="a ModelConfig field, e.g. --model d_lm=512 (repeatable)")
    ap.add_argument("--toggle", action="append", default=[], metavar="NAME=VALUE",
                    help="an optimized-trainer toggle, e.g. --toggle amp=True (repeatable)")
    ap.add_argument("--batch-size", type=int, default=None, help="shorthand for --toggle batch_size=N")
    ap.add_argument("--out", default="", help="folder for per-rank parameter files (optional)")
    return ap.parse_args(argv)


def _device(spec: str, local_rank: int) -> torch.device:
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {spec} asked for CUDA but none is visible; use --device cpu (gloo)")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        raise SystemExit("run me under torchrun: torchrun --nproc_per_node=N -m perflab.latentwire.ddp ...")
    device = _device(args.device, int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        cfg = validate(dict(parse_assignment(a, ModelConfig) for a in args.model), ModelConfig)
        toggles = dict(parse_assignment(a, Toggles) for a in args.toggle)
        if args.batch_size is not None:
            toggles["batch_size"] = args.batch_size
        if args.impl == "baseline":
            toggles = {}  # the baseline version has no toggles: they are the optimized version's knobs
        model = build_model(cfg, seed=args.seed, device=device)  # same seed: identical replicas to start
        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        examples = make_examples(args.n_examples, seed=args.seed, max_prompt_bytes=cfg.max_bytes)
        trainer = IMPLS[args.impl](ddp, examples, device=device, lr=args.lr, accum_steps=args.accum_steps,
                                   seed=args.seed, **toggles)
        trainer.seen = []  # note which samples this rank reads
        t0 = time.perf_counter()
        for _ in range(args.steps):
            trainer.step()
        losses = [r[0] for r in trainer.losses()]
        seconds = time.perf_counter() - t0
        trainer.close()
        if rank == 0:
            rate = args.steps * trainer.samples_per_step * world / seconds
            print(f"ddp: {world} rank(s) on {device.type}, {args.steps} steps, {rate:.1f} samples/s "
                  f"(incl. the first steps' warm-up), last loss {losses[-1]:.4f}", flush=True)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            params = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
            torch.save({"params": params, "indices": trainer.seen, "losses": losses, "world": world,
                        "toggles": toggles, "config": dataclasses.asdict(cfg)}, Path(args.out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
