"""The CPU run sees the GPU's copies from the host (issue 21, part 2).

At 7e47ac6 two notebooks passed their sync checks on every CPU and would have stopped on an H100
(`../shared/research/gpu-review-2026-11-24.md`, findings 1 and 2): 03's `step_syncs` moved its inputs to the
device inside the counted block, and 06's `host_sync_check` ran the optimized step without pinned batches, so
each micro-batch was 6 blocking copies. `count_host_syncs` now counts a move of host data to the compute device
on every device, the CPU included, blocking unless it is non-blocking from pinned memory. The tests below run
7e47ac6's own check functions (read from git) under today's counter on a CPU: they fail; head's pass.
"""
import importlib
import sys
import types

import pytest
import torch
from old_code import old_module

from perflab.kit.syncs import count_host_syncs, is_pinned, pin_memory

OLD = "7e47ac6"


# ---- the counting rule -------------------------------------------------------------------------------------

def test_a_move_to_the_compute_device_is_counted_on_a_cpu_run():
    host = torch.arange(6.0)
    with count_host_syncs("cpu") as c:
        host.to("cpu")                                   # a GPU run's .to(device): a blocking copy
        host.to(torch.zeros(1))                          # .to(other): the other's device
        host.to(torch.float64)                           # a dtype only: no device named, no copy across
        host.to("cpu", non_blocking=True)                # non-blocking from pageable memory: still blocks
        pin_memory(host).to("cpu", non_blocking=True)    # pinned + non-blocking: asynchronous
        pin_memory(host).to("cpu")                       # pinned but blocking
    assert c.by_op == {"to(device) from host": 4}, c.by_op


def test_on_a_gpu_run_only_a_real_crossing_counts():
    # the rule as a GPU run applies it (meta stands in for the GPU's tensors: a device without data)
    from perflab.kit.syncs import _classify

    host, dev, gpu = torch.arange(4.0), torch.zeros(2, device="meta"), torch.device("cuda")
    to = torch.Tensor.to
    assert _classify(to, (host, "cpu"), {}, gpu) is None                     # a no-op there
    assert _classify(to, (host, "cuda"), {}, gpu) == "to(device) from host"  # pageable: blocks
    assert _classify(to, (host, "cuda"), {"non_blocking": True}, gpu) == "to(device) from host"
    assert _classify(to, (pin_memory(host), "cuda"), {"non_blocking": True}, gpu) is None
    assert _classify(to, (dev, "cpu"), {}, gpu) == "to(cpu)"                 # device to host: a read
    assert _classify(to, (dev, "meta"), {}, gpu) is None                     # device to device
    assert _classify(to, (host, "cuda", torch.float32, False, True), {}, gpu) == "to(device) from host"  # copy=True
    assert _classify(to, (pin_memory(host), "cuda", torch.float32, True), {}, gpu) is None   # non_blocking=True
    assert _classify(torch.Tensor.cuda, (host,), {}, gpu) == "to(device) from host"
    assert _classify(torch.Tensor.copy_, (dev, host), {}, gpu) is None       # meta: count_host_operands' job


@pytest.mark.skipif(torch.accelerator.is_available(), reason="a host with an accelerator pins for real (a copy)")
def test_pin_memory_marks_where_it_cannot_pin():
    x = torch.ones(3)
    p = pin_memory(x)
    assert is_pinned(p) and not is_pinned(x)           # a marked view; the caller's tensor is left as it was
    assert p.data_ptr() == x.data_ptr() and torch.equal(p, x)


def test_default_device_is_the_run_default():
    assert count_host_syncs().device == torch.device("cuda" if torch.cuda.is_available() else "cpu")


# ---- 7e47ac6's checks against head's ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def prover():
    from perflab.prover.core.data import family_kg
    from perflab.prover.core.engine import UnificationEngine
    from perflab.prover.core.policy import PolicyConfig, make_policy

    kg = family_kg(n_families=2, seed=2)
    engine = UnificationEngine(kg, max_derived=12)
    policy = make_policy(kg, PolicyConfig(embed_dim=8, hidden=16, n_blocks=1), seed=0)
    return kg, engine, policy, kg.queries["test"][:8]


def old_prover_names(monkeypatch):
    """7e47ac6's prover modules import their neighbours by their names then (`.data`, `.rollout`, ...): today's
    modules of perflab.prover.core and .evaluation under those names (the rollout with the strategy names it had)."""
    for old, new in {"data": "core.data", "engine": "core.engine", "policy": "core.policy", "step": "core.step",
                     "reference": "core.reference", "evaluate": "evaluation.evaluate"}.items():
        monkeypatch.setitem(sys.modules, f"perflab.prover.{old}", importlib.import_module(f"perflab.prover.{new}"))
    rollout = types.ModuleType("perflab.prover.rollout")
    rollout.__dict__.update(vars(importlib.import_module("perflab.prover.core.rollout")))
    rollout.STRATEGIES = tuple(importlib.import_module("perflab.prover.early_exit.study").IMPLS)
    monkeypatch.setitem(sys.modules, "perflab.prover.rollout", rollout)


def test_03_step_syncs_of_7e47ac6_fail_and_heads_pass(prover, monkeypatch):
    from perflab.prover.evaluation import checks

    old_prover_names(monkeypatch)
    old = old_module(OLD, "src/perflab/prover/checks.py", "perflab.prover")
    before = old.step_syncs(*prover, max_depth=4)
    assert before["syncs"] == 2 and before["by_op"] == {"to(device) from host": 2}, before  # states, nv
    now = checks.step_syncs(*prover, max_depth=4)
    assert now["syncs"] == 0 and now["host_operands"] == 0, now


@pytest.fixture(scope="module")
def latentwire():
    from perflab.latentwire import make_examples
    from perflab.latentwire.params import LatentWireParams

    p = LatentWireParams(n_examples=24, d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4,
                         ablation_batch=4, max_batch=4, curve_batch=4, num_workers=0, compile="off")
    return p, make_examples(p.n_examples, seed=0)


def test_06_host_sync_check_of_7e47ac6_fails_and_heads_passes(latentwire, monkeypatch):
    from perflab.latentwire import checks, training
    from perflab.latentwire.study import IMPLS

    # 7e47ac6 picked a version by name, `training.make_trainer(..., impl=name)`: today it is IMPLS[name]
    monkeypatch.setattr(training, "make_trainer", lambda *a, impl, **kw: IMPLS[impl](*a, **kw), raising=False)
    old = old_module(OLD, "src/perflab/latentwire/checks.py", "perflab.latentwire")
    (name, ok, detail), counts = old.host_sync_check(*latentwire, "cpu")
    # 6 tensors per micro-batch x accum_steps 2, copied from pageable memory: what the H100 would have blocked on
    assert not ok and counts["optimized"] == {"to(device) from host": 12}, detail
    (name, ok, detail), counts = checks.host_sync_check(*latentwire, "cpu")
    assert ok and counts["optimized"] == {} and counts["baseline"]["to(device) from host"] == 12, detail
