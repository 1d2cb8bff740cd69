"""06's GPU path on tiny configs (`pytest -m gpu`: skipped without CUDA)."""
import dataclasses
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")



# ---- 06_latentwire_amp -------------------------------------------------------------------------------------------

def _latentwire_params(**over):
    from perflab.latentwire.params import LatentWireParams

    return LatentWireParams(n_examples=32, d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4,
                            ablation_batch=4, max_batch=4, curve_batch=4, num_workers=0, amp=True,
                            min_run_time=0.05, max_run_time=0.2, block_s=0.01, **over)


def test_cuda_06_all_checks_pass():
    # 7e47ac6: the optimized step without pinned batches made 12 blocking copies per step (review finding 2)
    from perflab.latentwire import make_examples
    from perflab.latentwire.checks import all_checks

    p = _latentwire_params(compile="default", backend="eager")
    checks, counts = all_checks(p, make_examples(p.n_examples, seed=0), CUDA)
    assert all(ok for _, ok, _ in checks), [(n, d) for n, ok, d in checks if not ok]
    assert counts["optimized"] == {} and counts["baseline"]["to(device) from host"] == 6 * p.accum_steps


def test_cuda_06_compiled_step_trains_like_eager():
    # the compiled step the notebook times for its MFU: inductor, bf16, SDPA with a key-padding mask, fullgraph
    from perflab.latentwire import make_examples
    from perflab.latentwire.checks import compiled_check

    p = _latentwire_params(compile="default", backend="inductor")
    name, ok, detail = compiled_check(p, make_examples(p.n_examples, seed=0), CUDA)
    assert ok, detail


def test_cuda_06_compiled_check_under_cuda_graphs():
    # gpu-review-2026-11-26 T3: the step under reduce-overhead keeps the micro-batches' saved activations and the
    # backward's gradients in the CUDA-graph pool of its generation; 5 steps: warm-up, recording, then replays, where
    # a lifetime bug reads overwritten memory without an error (only the losses tell)
    from torch._dynamo.utils import counters

    from perflab.kit.compiles import count_compiles
    from perflab.latentwire import make_examples
    from perflab.latentwire.checks import compiled_check

    p = _latentwire_params(compile="reduce-overhead", backend="inductor")
    skips0 = counters["inductor"]["cudagraph_skips"]
    with count_compiles() as cc:
        name, ok, detail = compiled_check(p, make_examples(p.n_examples, seed=0), CUDA, steps=5)
    assert ok, detail
    # CUDA graphs recorded and none skipped: inductor skips them silently on a CPU input or a mutated one (review W1),
    # and eager code would pass every check above
    assert cc.cudagraph_recordings >= 1 and counters["inductor"]["cudagraph_skips"] == skips0, cc.as_dict()


def _latentwire_grads(p, examples, compile: str, grad_accum: bool, steps: int) -> dict[str, list[torch.Tensor]]:
    """{parameter: every gradient AccumulateGrad left in its .grad} over `steps` optimizer steps of the optimized
    trainer with compiled_check's toggles (the same graph: inductor's FX cache serves it again), manual batches."""
    from perflab.latentwire import build_model, optimized
    from perflab.latentwire.config import Toggles

    toggles = {**dataclasses.asdict(Toggles.all_on(batch_size=p.ablation_batch, amp=p.amp)), "dataloader": False,
               "num_workers": 0, "grad_accum": grad_accum, "compile": compile, "compile_backend": "inductor"}
    model = build_model(p.model_config(), seed=p.seed, lm=p.lm, device=CUDA)
    tr = optimized.make_trainer(model, examples, device=CUDA, lr=1e-4, accum_steps=p.accum_steps, seed=p.seed, **toggles)
    assert tr.cudagraphs == (compile == "reduce-overhead")
    grads: dict[str, list[torch.Tensor]] = {}
    hooks = [q.register_post_accumulate_grad_hook(lambda q, n=n: grads.setdefault(n, []).append(q.grad.detach().clone()))
             for n, q in tr.core.named_parameters() if q.requires_grad]
    for _ in range(steps):
        tr.step()
    for h in hooks:
        h.remove()
    tr.close()
    return grads


@pytest.mark.parametrize("grad_accum", [False, True])
def test_cuda_06_gradients_under_cuda_graphs_equal_eager(grad_accum):
    # T3's regression (a mark per micro-batch) raises in the first generations on a GPU and, once the path replays,
    # silently reads the other micro-batch's activations (the gradients of one micro-batch twice: a difference of the
    # gradients' own size). Every accumulation over 5 steps (warm-up, recording, replays), all parameters together;
    # bf16 autocast rounds in other places fused than eager: about 1% apart, allowed 10%
    from torch._dynamo.utils import counters

    from perflab.kit.compiles import count_compiles
    from perflab.latentwire import make_examples

    p = _latentwire_params()
    examples = make_examples(p.n_examples, seed=0)
    want = _latentwire_grads(p, examples, "off", grad_accum, steps=5)
    skips0 = counters["inductor"]["cudagraph_skips"]
    with count_compiles() as cc:
        got = _latentwire_grads(p, examples, "reduce-overhead", grad_accum, steps=5)
    # CUDA graphs recorded and none skipped: inductor skips them silently on a CPU input or a mutated one (review W1),
    # and eager code would pass every check above
    assert cc.cudagraph_recordings >= 1 and counters["inductor"]["cudagraph_skips"] == skips0, cc.as_dict()
    assert got.keys() == want.keys() and want
    n = {len(v) for v in want.values()}
    assert n == {len(v) for v in got.values()} == {5 * (p.accum_steps if grad_accum else 1)}
    for k in range(n.pop()):
        diff = sum(float((got[name][k] - want[name][k]).double().norm() ** 2) for name in want) ** 0.5
        size = sum(float(want[name][k].double().norm() ** 2) for name in want) ** 0.5
        assert diff <= 0.1 * size, f"accumulation {k}: gradients {diff / size:.3f} apart (relative, allowed 0.1)"


def test_cuda_06_a_variant_is_timed_with_events_and_swept():
    from perflab.latentwire import make_examples
    from perflab.latentwire.ablation import IMPLS, measure_variant
    from perflab.latentwire.floors import floors
    from perflab.latentwire.sweep import batch_sweep

    p = _latentwire_params(compile="off")
    examples = make_examples(p.n_examples, seed=0)
    v = IMPLS.variant("optimized", "all", pin_memory=True, pretokenize=True, fused_adamw=True, no_step_sync=True,
                      batch_size=4)
    r = measure_variant(v, examples, p=p, device=CUDA)
    assert r.samples_per_s > 0 and r.launches["kernels"] > 0 and r.memory_method == "cuda_allocator"
    sweep = batch_sweep(examples, p=p, device=CUDA, toggles={"pretokenize": True}, amps=(True,))
    assert [row.samples_per_step for row in sweep[True]] == [1, 4]
    peaks = floors(p, CUDA)
    assert peaks["bf16"][0] > peaks["fp32"][0] > 1e12                 # FLOP/s: a GPU's tensor cores


def test_cuda_06_ddp_on_one_gpu(tmp_path):
    # torchrun, one rank, nccl (latentwire/ddp.py's CUDA branch)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
           "-m", "perflab.latentwire.ddp", "--device", "cuda", "--steps", "2", "--n-examples", "16",
           "--batch-size", "2", "--accum-steps", "2", "--out", str(tmp_path),
           *(f"--model={k}={v}" for k, v in dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4).items())]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "ddp: 1 rank(s) on cuda" in r.stdout
