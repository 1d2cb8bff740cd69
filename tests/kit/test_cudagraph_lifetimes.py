"""CUDA-graph output lifetimes seen on a CPU (issue 26, parts 1 and 2).

Under `compile=reduce-overhead` or `max-autotune`, inductor replays CUDA graphs whose outputs live in a pool that
the next generation frees (`perflab.kit.cudagraphs`, with torch's rule). At b62ef7a the beam search fed step 1's
outputs to step 2 in a new generation after a `torch._dynamo.reset()`, and kept each chunk's results past the
next chunk: 03 would stop on an H100 (`../shared/research/gpu-review-2026-11-25.md`, N1). `check_lifetimes()`
frees outputs as a GPU does on any device; the studies' compiled paths run under it here with the eager backend
(the generation rule belongs to the mode, not to inductor's code). b62ef7a's search fails under it; 1a70d9c's
rollouts, which ran on an H100 under reduce-overhead, pass.
"""
import importlib
import sys
import warnings

import pytest
import torch
from old_code import old_module

from perflab.kit.compiles import reset
from perflab.kit.cudagraphs import CUDAGRAPH_MODES, check_lifetimes, tracked, uses_cudagraphs
from perflab.prover.core.data import family_kg
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import PolicyConfig, make_policy
from perflab.prover.core.ranking import corruptions
from perflab.prover.core.step import GreedyStep
from perflab.prover.early_exit.baseline import rollout
from perflab.prover.early_exit.study import variants
from perflab.prover.links.search import BeamSearch

FREED = "accessing tensor output of CUDAGraphs that has been overwritten"
SMALL = PolicyConfig(embed_dim=16, hidden=32, n_blocks=1)


def _compiled(fn):
    return tracked(torch.compile(fn, backend="eager", fullgraph=True, dynamic=False))


# ---- the rule ------------------------------------------------------------------------------------------------

def test_which_modes_record_cuda_graphs():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for mode in CUDAGRAPH_MODES:
        assert uses_cudagraphs(mode, "inductor", cuda) and not uses_cudagraphs(mode, "eager", cuda)
        assert not uses_cudagraphs(mode, "inductor", cpu)
    for mode in ("off", "default"):
        assert not uses_cudagraphs(mode, "inductor", cuda)
    with check_lifetimes():                        # under the check: the mode decides, on any device and backend
        assert all(uses_cudagraphs(m, b, cpu) for m in CUDAGRAPH_MODES for b in ("inductor", "eager"))
        assert not uses_cudagraphs("default", "inductor", cpu)


def test_a_graph_fed_another_graphs_output_in_a_new_generation_fails():
    # PyTorch issue #160281's pattern: g(f(x)) with no mark_step_begin after a reset: two generations
    x = torch.arange(4.0)
    with check_lifetimes():
        f, g = _compiled(lambda x: x * 2), _compiled(lambda x: x + 1)   # tracked when built under the check
        reset()
        with pytest.raises(RuntimeError, match=FREED):
            g(f(x))
        reset()
        torch.compiler.cudagraph_mark_step_begin()            # one generation: g may read f's output
        assert g(f(x)).tolist() == [1.0, 3.0, 5.0, 7.0]


def test_an_output_kept_past_the_next_generation_is_freed_unless_cloned():
    x = torch.arange(3.0)
    with check_lifetimes() as check:
        f = _compiled(lambda x: x * 2)
        reset()
        torch.compiler.cudagraph_mark_step_begin()
        kept, cloned = f(x), f(x).clone()
        torch.compiler.cudagraph_mark_step_begin()
        f(x)                                                   # the next generation's first call frees the pool
        assert kept.shape == (3,) and len(kept) == 3           # metadata stays readable, as on a GPU
        with pytest.raises(RuntimeError, match=FREED):
            kept.sum()
        with pytest.raises(RuntimeError, match=FREED):
            torch.cat([kept[:2], x])                           # a view reads the same memory
        assert cloned.tolist() == [0.0, 2.0, 4.0]
        assert check.generations == 2
    assert kept.sum().item() == 6.0                            # outside the check: an ordinary tensor again


def test_an_output_that_aliases_an_input_is_the_callers_memory():
    def bump(buf):
        buf.add_(1)
        return buf
    buf = torch.zeros(2)
    with check_lifetimes():
        f = _compiled(bump)
        reset()
        out = f(buf)
        f(torch.zeros(2))                                       # a new generation
        assert out.tolist() == [1.0, 1.0] and buf.sum().item() == 2.0


# ---- b62ef7a's search fails, head's passes ------------------------------------------------------------------

@pytest.fixture(scope="module")
def family():
    kg = family_kg(n_families=2, seed=4)
    engine = UnificationEngine(kg, max_derived=8)
    cands = corruptions(kg, kg.queries["test"][:3], 5, "both", seed=0).flat()   # 18 candidates
    return kg, engine, make_policy(kg, SMALL, seed=0), cands


def _search(module, engine, policy, mode, name="BeamSearch"):
    return getattr(module, name)(engine, policy, width=4, depth=2, compile=mode, backend="eager")


def old_prover_names(monkeypatch):
    """Old prover modules import their neighbours by their names then (`.kg`, `.step`, `.rollout`): today's modules
    of perflab.prover.core under those names."""
    for name in ("kg", "step", "rollout"):
        monkeypatch.setitem(sys.modules, f"perflab.prover.{name}", importlib.import_module(f"perflab.prover.core.{name}"))


def test_b62ef7a_search_fails_under_the_check(family, monkeypatch):
    _, engine, policy, cands = family
    old_prover_names(monkeypatch)
    old = old_module("b62ef7a", "src/perflab/prover/search.py", "perflab.prover")   # before prover/links/
    with check_lifetimes():
        reset()                                                 # as 03's time_variants leaves it (N1)
        with pytest.raises(RuntimeError, match=FREED):
            _search(old, engine, policy, "reduce-overhead").score(cands, batch=32)


# ClosingSearch: the search a device runs (its last step reads a slice of the steps before it in their generation)
@pytest.mark.parametrize("name", ["BeamSearch", "ClosingSearch"])
@pytest.mark.parametrize("mode", CUDAGRAPH_MODES)
def test_the_search_passes_under_the_check_and_equals_the_eager_search(family, mode, name):
    _, engine, policy, cands = family
    want = BeamSearch(engine, policy, width=4, depth=2).score(cands, batch=32)
    with check_lifetimes() as check:
        reset()
        search = _search(sys.modules["perflab.prover.links.search"], engine, policy, mode, name)
        assert search._step.cudagraphs
        got = search.score(cands, batch=32)                    # chunks of 32 // 4 = 8 candidates
        again = search.score(cands, batch=32)
        assert check.generations == 2 * -(-len(cands) // 8)     # one generation per chunk, both steps in it
        assert check.freed                                     # outputs were freed, and none was read after
    for res in (got, again):
        assert torch.equal(res.proven, want.proven) and torch.equal(res.depth, want.depth)
        tol = 0 if name == "BeamSearch" else 1e-5    # the same ops on the same rows; closing sums the logits otherwise
        torch.testing.assert_close(res.score, want.score, rtol=tol, atol=tol)
    reset()


@pytest.mark.slow
def test_link_prediction_passes_under_the_check():
    from perflab.prover.links.embeddings import EmbeddingConfig
    from perflab.prover.links.params import LinkConfig
    from perflab.prover.links.predict import evaluate_link_prediction

    kg = family_kg(n_families=2, seed=1)
    engine = UnificationEngine(kg, max_derived=8)
    cfg = LinkConfig(n_queries=2, n_fit=2, search_batch=32, beam=4, compile="reduce-overhead", backend="eager",
                     emb=EmbeddingConfig(rank=4, epochs=1), n_cost=1, greedy_batch=0)
    with check_lifetimes() as check:
        reset()
        lp = evaluate_link_prediction(kg, engine, make_policy(kg, SMALL, seed=0), cfg)
        assert check.calls > 0 and check.freed
    assert 0 < lp.results["fitted"].metrics["realistic"]["MRR"] <= 1
    reset()


# ---- every rollout strategy, today's and 1a70d9c's ----------------------------------------------------------

@pytest.mark.slow
def test_every_rollout_strategy_passes_under_the_check(family, mode="reduce-overhead"):
    # one mode: both take the same path (uses_cudagraphs; the search above runs under each)
    _, engine, policy, cands = family
    eager = GreedyStep(engine, policy, max_depth=5)
    with torch.inference_mode():
        want = rollout(eager, cands, 16)
    with check_lifetimes() as check:
        reset()
        step = GreedyStep(engine, policy, max_depth=5, compile=mode, backend="eager")
        with torch.inference_mode():
            got = {s: fn(step, cands, 16) for s, fn in variants(min_bucket=4).items()}
            one = step(*step.init(cands[:16]))                  # the step as a function (compact, memory model)
            two = step(*one)
        assert check.calls > 0
    for name, res in got.items():
        assert torch.equal(res.steps, want.steps) and torch.equal(res.proven, want.proven), name
        torch.testing.assert_close(res.score, want.score, rtol=1e-5, atol=1e-5, msg=name)
    assert torch.equal(two.depth, torch.where(one.done, one.depth, one.depth + 1))
    reset()


def test_1a70d9c_rollouts_that_ran_on_an_h100_pass_under_the_check(family, monkeypatch):
    # 1a70d9c's step and rollout loops ran on an H100 under reduce-overhead (../shared/gpu-runs/h100-2026-11-23/):
    # the check must not refuse them. Loaded as they were, compiled with the eager backend, with the flag the
    # H100 set (engine.device.type == "cuda" there).
    _, engine, policy, cands = family
    old_prover_names(monkeypatch)
    old_step = old_module("1a70d9c", "src/perflab/prover/step.py", "perflab.prover")
    old_step.compile_fn = lambda fn, mode: _compiled(fn) if mode != "off" else fn
    monkeypatch.setitem(sys.modules, "perflab.prover.step", old_step)
    old_rollout = old_module("1a70d9c", "src/perflab/prover/rollout.py", "perflab.prover")
    monkeypatch.undo()
    want = old_rollout.rollout(old_step.GreedyStep(engine, policy, 5), cands, 16, "full")
    with check_lifetimes() as check:
        reset()
        step = old_step.GreedyStep(engine, policy, 5, compile="reduce-overhead")
        step.cudagraphs = True
        with torch.inference_mode():
            got = {s: old_rollout.rollout(step, cands, 16, s) for s in old_rollout.STRATEGIES}
        assert check.calls > 0 and check.freed
    for name, res in got.items():
        assert torch.equal(res.proven, want.proven), name
    reset()


# ---- probe1d's compiled fit ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_probe1d_compiled_fit_passes_under_the_check():
    from perflab.probe1d import Sparse1DProbe, make_activations

    x, y = make_activations(300, 12, 5, l0=5, seed=4)
    kw = dict(device="cpu", max_iter=30, accum_dtype="float64", chunk_pair_events=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = Sparse1DProbe(**kw).fit(x, y)
        with check_lifetimes() as check:
            reset()
            compiled = Sparse1DProbe(compile="reduce-overhead", backend="eager", **kw).fit(x, y)
            assert check.calls > 0 and check.freed            # several chunks and iterations: outputs freed
    assert compiled.counters_["work_rebuilds"] >= 1            # compaction ran (LM state carried over)
    # as test_probe1d_syncs: compiled tile_sums vs the eager workspace twin agree to float rounding
    torch.testing.assert_close(compiled.loss_matrix(x, y), eager.loss_matrix(x, y), rtol=1e-5, atol=1e-6)
    reset()


# ---- 06's compiled training step -----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("grad_accum", [False, True])
def test_latentwire_compiled_step_passes_under_the_check(grad_accum):
    # one generation per optimizer step (mark_step_begin at its start): the micro-batches' losses, their backward and
    # the step read outputs of the same generation; the mean loss leaves it as an eager sum
    from perflab.latentwire import ModelConfig, build_model, make_examples, optimized

    tiny = ModelConfig(d_enc=16, enc_layers=1, d_lm=32, lm_layers=2, latent_len=4, adapter_hidden=32)
    examples = make_examples(24, seed=0)
    kw = dict(accum_steps=2, pretokenize=True, single_pass=True, batch_size=2, lr=3e-3,
              grad_accum=grad_accum, no_step_sync=True)
    eager = optimized.make_trainer(build_model(tiny, seed=0), examples, **kw)
    want = [float(eager.step()) for _ in range(3)]
    eager.close()
    with check_lifetimes() as check:
        reset()
        trainer = optimized.make_trainer(build_model(tiny, seed=0), examples, compile="reduce-overhead",
                                         compile_backend="eager", **kw)
        assert trainer.cudagraphs
        got = [trainer.step() for _ in range(3)]
        assert check.generations == 3 and check.freed
        got = [float(x) for x in got]                           # each step's mean loss outlives its generation
        trainer.close()
    # padding to the data's widths reorders sums only (test_latentwire_trainers): float rounding
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-5, atol=1e-5)
    reset()


# ---- what autograd keeps: saved activations and gradients (gpu-review-2026-11-26, T3) --------------------------
# A training forward under CUDA graphs leaves its saved activations in the pool of its generation and its backward
# writes the gradients there. e4bd822's check saw only the tracked call's returned tensors, so LatentWire's step
# with `cudagraph_mark_step_begin()` moved into the micro-batch loop passed it (E4) while it reads freed (later:
# overwritten) activations on an H100. Today's check tags autograd's saved tensors and a compiled module's gradients
# with their generation.

def _checks():
    today = sys.modules["perflab.kit.cudagraphs"]
    return {"today": today, "e4bd822": old_module("e4bd822", "src/perflab/cudagraphs.py", "perflab")}


def _tiny_steps(cg, mark_each: bool, grad_accum: bool, steps: int = 2) -> list[float]:
    """LatentWire's optimizer step (`latentwire/optimized.py::OptimizedTrainer.step`) on a tiny model compiled in a
    CUDA-graph mode under `cg`'s check: one mark per step, or (T3's regression) one per micro-batch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    loss_fn = cg.tracked(torch.compile(model, backend="eager", fullgraph=True))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    xs = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(1))
    losses = []
    for _ in range(steps):
        torch.compiler.cudagraph_mark_step_begin()
        total = 0.0
        for x in xs:                                              # two micro-batches
            if mark_each:
                torch.compiler.cudagraph_mark_step_begin()        # the regression: a generation per micro-batch
            out = loss_fn(x).pow(2).mean()
            if grad_accum:
                (out / len(xs)).backward()
            total = total + (out.detach() if grad_accum else out)
        if not grad_accum:
            (total / len(xs)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(total))
    return losses


@pytest.mark.parametrize("grad_accum", [False, True])
def test_a_backward_across_a_mark_fails_under_todays_check_only(grad_accum):
    checks = _checks()
    want = _tiny_steps(checks["today"], mark_each=False, grad_accum=grad_accum)   # no check: plain eager backend
    for name, cg in checks.items():
        reset()
        with cg.check_lifetimes():
            assert _tiny_steps(cg, mark_each=False, grad_accum=grad_accum) == want, name   # today's pattern passes
        reset()
        with cg.check_lifetimes() as check:
            if name == "today":
                # grad_accum=False: the backward unpacks micro-batch 0's activations; True: micro-batch 1's backward
                # accumulates into the gradient micro-batch 0's backward left in the pool of an ended generation
                what = "autograd saved" if not grad_accum else "a gradient of"
                with pytest.raises(RuntimeError, match=f"{FREED}.*{what}"):
                    _tiny_steps(cg, mark_each=True, grad_accum=grad_accum)
                assert check.saved > 0
            else:
                _tiny_steps(cg, mark_each=True, grad_accum=grad_accum)              # e4bd822: blind to it (E4)
    reset()


def test_a_gradient_kept_across_a_mark_is_read_from_an_ended_generation():
    # zero_grad(set_to_none=False) would accumulate into last step's gradients: the pool of an ended generation
    model = torch.nn.Linear(3, 1)
    with check_lifetimes():
        reset()
        f = tracked(torch.compile(model, backend="eager", fullgraph=True))
        x = torch.ones(2, 3)
        torch.compiler.cudagraph_mark_step_begin()
        f(x).sum().backward()
        grad = model.weight.grad
        assert grad.sum().item() == 6.0                           # read in its own generation: fine
        torch.compiler.cudagraph_mark_step_begin()
        y = f(x).sum()                                            # a new generation's first call
        with pytest.raises(RuntimeError, match=FREED):
            grad.sum()
        with pytest.raises(RuntimeError, match=f"{FREED}.*a gradient of"):
            y.backward()                                          # AccumulateGrad adds into the old gradient
    reset()


def test_without_marks_a_pending_backward_keeps_the_generation_open():
    # torch's rule without any mark: a generation does not end while a forward's backward is pending, so an unmarked
    # forward, a second compiled call, then the first's backward is fine on a GPU, and fine under the check
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    with check_lifetimes() as check:
        reset()
        f = tracked(torch.compile(model, backend="eager", fullgraph=True))
        x = torch.ones(2, 3)
        a = f(x).sum()
        b = f(x).sum()
        (a + b).backward()
        assert check.generations == 1 and check.saved > 0
        model.zero_grad(set_to_none=True)                         # the gradients are that generation's outputs
        f(x).sum().backward()                                     # after the backward: a new generation
        assert check.generations == 2
    reset()


@pytest.mark.slow
@pytest.mark.parametrize("grad_accum", [False, True])
def test_latentwire_with_a_mark_per_micro_batch_fails_under_the_check(grad_accum, monkeypatch):
    # T3's one-line regression on the real trainer, injected from outside: a mark before every micro-batch's
    # forward (as if `cudagraph_mark_step_begin()` had moved into the loop of OptimizedTrainer.step). Today's check
    # fails it; e4bd822's passed it (the review's E4)
    from perflab.latentwire import ModelConfig, build_model, make_examples, optimized

    tiny = ModelConfig(d_enc=16, enc_layers=1, d_lm=32, lm_layers=2, latent_len=4, adapter_hidden=32)
    kw = dict(accum_steps=2, pretokenize=True, single_pass=True, batch_size=2, lr=3e-3,
              grad_accum=grad_accum, no_step_sync=True)
    for name, cg in _checks().items():
        monkeypatch.setattr(optimized, "tracked", cg.tracked)
        monkeypatch.setattr(optimized, "uses_cudagraphs", cg.uses_cudagraphs)
        with cg.check_lifetimes() as check:
            reset()
            trainer = optimized.make_trainer(build_model(tiny, seed=0), make_examples(24, seed=0),
                                             compile="reduce-overhead", compile_backend="eager", **kw)
            assert trainer.cudagraphs
            inner = trainer.loss_fn

            def marked(*args, inner=inner, **kwargs):
                torch.compiler.cudagraph_mark_step_begin()
                return inner(*args, **kwargs)

            trainer.loss_fn = marked
            if name == "today":
                with pytest.raises(RuntimeError, match=FREED):
                    trainer.step()
                assert check.saved > 0
            else:
                for _ in range(2):
                    trainer.step()
                assert check.generations >= 4                     # a generation per micro-batch, unseen by it
            trainer.close()
        monkeypatch.undo()
    reset()
