"""05's GPU path on tiny configs (`pytest -m gpu`: skipped without CUDA)."""
import warnings

import pytest
import torch

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")



# ---- 05_vae_sync -----------------------------------------------------------------------------------------------

def test_cuda_05_captured_step_with_random_draws_at_two_batch_sizes():
    # dropout and the reparameterization noise: every replay launches the two RNG-state fills (PR #143777);
    # each batch size its own static graph (review findings 6 and 8)
    from perflab.kit.compiles import count_compiles
    from perflab.kit.launches import count_launches
    from perflab.kit.syncs import assert_no_host_syncs
    from perflab.vae import ModelConfig, TrainConfig, make_batches, optimized
    from perflab.vae.captured import Captured, traced_backward_problem, unsupported_message
    from perflab.vae.trainers import captured, eager, trainer

    if (problem := traced_backward_problem()) is not None:  # this torch: 05 runs the eager form (docs/gpu-hosts.md)
        pytest.skip(unsupported_message(problem))

    kw = dict(model_cfg=ModelConfig(hidden=(32, 16), latent=8), train_cfg=TrainConfig(), seed=0, device=CUDA)
    sc = optimized.step_config(log_every=4)
    torch._dynamo.reset()
    for batch in (16, 32):
        data = make_batches(6, batch=batch, group=1, seed=0, per_kind=12, device=CUDA)
        ref = trainer(eager(sc), **kw)
        ref.epoch(data)
        tr = trainer(captured(Captured(sc, compile="default")), **kw)
        with count_compiles() as cc:
            tr.epoch(data[:2])                                   # compiles and records at its first batch
        with count_launches(CUDA) as c, assert_no_host_syncs(CUDA) as s:
            for x, y in data[2:]:
                tr(x, y)
        assert cc.compiles == 1 and cc.graphs == 1, cc.as_dict()
        assert (c.graph_launches, c.copy_calls) == (4, 8), c.as_dict()
        # the two RNG-state fills per replay: 8 kernel launches, unless CUDA 13's CUPTI reports a launch under two
        # names that do not nest in time (gpu-review-2026-11-26 T9, N6): then up to 16, said in the test report,
        # not a failure; more would be the step's own kernels outside the replay
        assert 8 <= c.kernel_launches <= 16, c.as_dict()
        if c.kernel_launches != 8:
            warnings.warn(f"captured step: {c.kernel_launches} kernel launches for 4 replays (expected 8); "
                          f"runtime calls seen: {c.as_dict()}", stacklevel=1)
        assert s.total == 0 and s.cuda_debug_warnings == 0
        # inductor's kernels and the traced Adam (float32 scalars): rounding, carried by Adam over 6 steps
        for p, q in zip(ref.model.parameters(), tr.model.parameters()):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()
