"""The list of CUDA-only branches in `src/perflab`, and the test that runs each one.

A line that runs only on CUDA is a line CI never runs. So the code keeps such branches few and small (only where
the mechanism is CUDA's own: graphs, events, streams, the caching allocator, sync debug mode, device properties),
everything else is written for any device, and each branch below names a test that runs it: a `-m gpu` test (run
on a GPU host: `pytest -m gpu tests`), or, where the branch only formats what a GPU run measured, a CPU test that
feeds it a GPU run's evidence. `test_the_list_is_complete` scans the source for CUDA-only constructs (a
comparison with "cuda" or a tuple holding it, `torch.cuda.*`, `torch.version.cuda`, `torch.backends.cuda`, `.is_cuda`,
`ProfilerActivity.CUDA` / `DeviceType.CUDA`, a `torch.accelerator.*` call other than `is_available`, and a branch on CUDA
graphs: an `if`/`while`/conditional expression on `.cudagraphs` or `uses_cudagraphs(...)`, whose CUDA side a CPU runs
only under `check_lifetimes()`, blind to part of it) and fails on a
function that has one and is not listed, or a listed one that no longer has one: add the branch here with its test,
or write it for any device.

What the list does not see: choices between an accelerator and the CPU written as `device.type != "cpu"` (sizes,
which profiler events to read), whose accelerator side runs on every notebook cell of `perflab gpu-check`'s smoke
preset; and it checks that the named test exists and runs on a GPU, not that it reaches every line of the function
(`latentwire/sweep.py::batch_sweep`'s out-of-memory `empty_cache` needs a real out-of-memory error).
"""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "perflab"
TESTS = Path(__file__).resolve().parents[1]

K, V, L = "tests/gpu/test_cuda_paths.py::", "tests/vae/test_vae_captured.py::", "tests/kit/test_launches.py::"
P03, P05, P06 = "tests/prover/test_prover_cuda.py::", "tests/vae/test_vae_cuda.py::", "tests/latentwire/test_latentwire_cuda.py::"
P01 = "tests/probe1d/test_probe1d_cuda.py::"

# function (path under src/perflab :: qualified name) -> the test that runs its CUDA branch
CUDA_BRANCHES = {
    "kit/cudagraphs.py::uses_cudagraphs": P03 + "test_cuda_03_search_under_cuda_graphs",
    "kit/env.py::pick_device": K + "test_cuda_environment_stamp",
    "kit/env.py::synchronize": K + "test_cuda_environment_stamp",
    "kit/env.py::device_name": K + "test_cuda_environment_stamp",
    "kit/env.py::device_kind": K + "test_cuda_environment_stamp",
    "kit/env.py::fingerprint": K + "test_cuda_environment_stamp",
    "latentwire/ddp.py::_device": P06 + "test_cuda_06_ddp_on_one_gpu",
    "latentwire/ddp.py::main": P06 + "test_cuda_06_ddp_on_one_gpu",
    "latentwire/sweep.py::batch_sweep": P06 + "test_cuda_06_a_variant_is_timed_with_events_and_swept",
    "latentwire/timing.py::time_blocks": P06 + "test_cuda_06_a_variant_is_timed_with_events_and_swept",
    "latentwire/timing.py::time_rounds": P06 + "test_cuda_06_a_variant_is_timed_with_events_and_swept",
    "kit/launches.py::LaunchCounter._sync": L + "test_cuda_kernels_are_counted_and_a_graph_replay_is_one_launch",
    "kit/diagnosing.py::_device_busy": "tests/kit/test_diagnose.py::test_cuda_diagnose_times_the_gpu_and_names_the_lines",
    "kit/memory.py::PeakMemory.__enter__": K + "test_cuda_memory_peak_and_free",
    "kit/memory.py::PeakMemory.__exit__": K + "test_cuda_memory_peak_and_free",
    "kit/memory.py::device_memory": K + "test_cuda_memory_peak_and_free",
    "prover/core/batching.py::cache_bytes": P03 + "test_cuda_03_step_profile",
    "kit/notebook.py::environment_line": K + "test_cuda_environment_stamp",
    "prover/evaluation/optimized.py::score_candidates": P03 + "test_cuda_03_out_of_memory_halves_the_batch",
    "kit/syncs.py::HostSyncCounter.__init__": P03 + "test_cuda_03_correctness_checks_pass",
    "kit/syncs.py::HostSyncCounter.__enter__": P03 + "test_cuda_03_correctness_checks_pass",
    "kit/syncs.py::HostSyncCounter.__exit__": P03 + "test_cuda_03_correctness_checks_pass",
    "kit/syncs.py::HostSyncCounter._patch_cuda_synchronize": K + "test_cuda_environment_stamp",
    "kit/syncs.py::HostSyncCounter._patch_cuda_synchronize.counted_synchronize": K + "test_cuda_environment_stamp",
    "vae/captured.py::inductor_options": P05 + "test_cuda_05_captured_step_with_random_draws_at_two_batch_sizes",
    "vae/captured.py::check_adam": V + "test_cuda_one_replay_per_step_same_math_no_sync",
    "vae/captured.py::CapturedStep.__init__": V + "test_cuda_one_replay_per_step_same_math_no_sync",
    "vae/captured.py::CapturedStep.__call__": V + "test_cuda_one_replay_per_step_same_math_no_sync",
    "vae/captured.py::CapturedStep._record": P05 + "test_cuda_05_captured_step_with_random_draws_at_two_batch_sizes",
    # branches on CUDA graphs (`.cudagraphs`, `uses_cudagraphs`): on a CPU only under check_lifetimes(), which is
    # blind to part of what they do (perflab.kit.cudagraphs); GPU tests compare their values with eager
    "prover/evaluation/sweep.py::batch_sweep": P03 + "test_cuda_03_sweep_peak_under_cuda_graphs_near_the_model",
    "prover/core/step.py::GreedyStep.__init__":
        "tests/prover/test_prover_eval.py::test_cuda_graphs_match_eager_without_recompiles_or_syncs",
    "prover/core/step.py::GreedyStep.compiled":
        "tests/prover/test_prover_eval.py::test_cuda_graphs_match_eager_without_recompiles_or_syncs",
    "prover/core/step.py::GreedyStep.buffers":
        "tests/prover/test_prover_eval.py::test_cuda_graphs_match_eager_without_recompiles_or_syncs",
    "prover/core/step.py::GreedyStep.__call__":
        "tests/prover/test_prover_eval.py::test_cuda_graphs_match_eager_without_recompiles_or_syncs",
    "prover/core/rollout.py::_call": "tests/prover/test_prover_eval.py::test_cuda_graphs_match_eager_without_recompiles_or_syncs",
    # every search's steps (BeamSearch.chunk and ClosingSearch's first steps); the closing search's own GPU test is
    # tests/prover/test_prover_links_speed.py::test_cuda_the_new_searches_under_cuda_graphs_find_todays_proofs
    "prover/links/search.py::BeamSearch._steps": P03 + "test_cuda_03_search_under_cuda_graphs",
    "probe1d/optimized.py::OptimizedSolver._graph_call": P01 + "test_cuda_probe1d_fit_under_cuda_graphs_equals_eager",
    "probe1d/optimized.py::OptimizedSolver._lm": P01 + "test_cuda_probe1d_fit_under_cuda_graphs_equals_eager",
    "latentwire/optimized.py::OptimizedTrainer.__init__": P06 + "test_cuda_06_gradients_under_cuda_graphs_equal_eager",
    "latentwire/optimized.py::OptimizedTrainer.step": P06 + "test_cuda_06_gradients_under_cuda_graphs_equal_eager",
    # the study `perflab new` writes: its tests take the GPU where there is one, its preset names it
    "template/tests/test_mystudy.py::<module>": "tests/runner/test_new_study.py::test_cuda_the_new_study_on_the_gpu",
    "template/tests/test_mystudy.py::test_the_gpu_preset_is_valid": "tests/runner/test_new_study.py::test_cuda_the_new_study_on_the_gpu",
    # sentences and verdicts from a GPU run's evidence: a CPU test gives them such evidence
    "vae/evidence.py::evidence": "tests/vae/test_vae_study.py::test_claims_table_and_verdicts",
    "vae/evidence.py::reading": "tests/vae/test_vae_study.py::test_claims_table_and_verdicts",
}


def _is_cuda(x) -> bool:
    return (isinstance(x, ast.Constant) and x.value == "cuda") or (
        isinstance(x, (ast.Tuple, ast.List, ast.Set)) and any(_is_cuda(e) for e in x.elts))


def _cudagraph_condition(test) -> bool:
    """A condition on CUDA graphs: `x.cudagraphs` or a call of `uses_cudagraphs(...)` (true only on CUDA, and on
    a CPU under `check_lifetimes()`, whose emulation does not see everything: `perflab.kit.cudagraphs`' blind spots)."""
    return any((isinstance(n, ast.Attribute) and n.attr == "cudagraphs")
               or (isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == "uses_cudagraphs")
               for n in ast.walk(test))


def _cuda_construct(node) -> bool:
    if isinstance(node, (ast.If, ast.IfExp, ast.While)) and _cudagraph_condition(node.test):
        return True
    if isinstance(node, ast.Compare):
        return any(_is_cuda(x) for x in (node.left, *node.comparators))
    if isinstance(node, ast.Attribute):
        if node.attr == "is_cuda" or (node.attr == "CUDA" and ast.unparse(node.value).endswith(("ProfilerActivity",
                                                                                                 "DeviceType"))):
            return True
        if isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name) \
                and node.value.value.id == "torch":
            return node.value.attr == "cuda" or (node.value.attr == "accelerator" and node.attr != "is_available") \
                or (node.value.attr in ("version", "backends") and node.attr == "cuda")
    return False


def _visit(node, stack: list[str], hit) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _visit(child, [*stack, child.name], hit)
            continue
        if _cuda_construct(child):
            hit(stack)
        _visit(child, stack, hit)


def cuda_sites(root: Path = SRC) -> set[str]:
    """Every function (path::qualified name) of `root` holding a CUDA-only construct (module doc)."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()

        _visit(ast.parse(path.read_text()), [], lambda stack, rel=rel: found.add(f"{rel}::{'.'.join(stack) or '<module>'}"))
    return found


def _test_function(nodeid: str) -> ast.FunctionDef | None:
    path, name = nodeid.split("::")
    tree = ast.parse((TESTS.parent / path).read_text())
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _gpu_marked(nodeid: str, fn: ast.FunctionDef) -> bool:
    tree = ast.parse((TESTS.parent / nodeid.split("::")[0]).read_text())
    module_mark = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                      and "gpu" in ast.unparse(n.value) for n in tree.body)
    return module_mark or any("mark.gpu" in ast.unparse(d) for d in fn.decorator_list)


def test_the_list_is_complete():
    found = cuda_sites()
    assert not found - CUDA_BRANCHES.keys(), ("CUDA-only code with no test listed here: write it for any device, "
                                              f"or list it with the -m gpu test that runs it: {sorted(found - CUDA_BRANCHES.keys())}")
    assert not CUDA_BRANCHES.keys() - found, f"listed but no longer CUDA-only: {sorted(CUDA_BRANCHES.keys() - found)}"


@pytest.mark.parametrize("site", sorted(CUDA_BRANCHES))
def test_each_branch_names_a_test_that_exists(site):
    nodeid = CUDA_BRANCHES[site]
    fn = _test_function(nodeid)
    assert fn is not None, f"{site}: {nodeid} does not exist"
    if site not in ("vae/evidence.py::evidence", "vae/evidence.py::reading"):  # the rest run on a GPU only
        assert _gpu_marked(nodeid, fn), f"{site}: {nodeid} is not marked gpu"


def test_the_scan_finds_each_kind_of_construct(tmp_path):
    (tmp_path / "m.py").write_text(
        "import torch\n"
        "def a(d):\n    return d.type == 'cuda'\n"
        "def b():\n    torch.cuda.synchronize()\n"
        "class C:\n    def c(self):\n        torch.accelerator.synchronize()\n"
        "def d():\n    return torch.accelerator.is_available() and torch.device('cpu').type != 'cpu'\n"
        "def e(t):\n    return t.is_cuda or torch.version.cuda\n"
        "def f(d):\n    return d in ('cuda', 'xpu')\n"
        "def g(p):\n    return p.ProfilerActivity.CUDA\n"
        "class H:\n    def h(self):\n        if self.cudagraphs:\n            pass\n"
        "    def i(self, f):\n        return tracked(f) if self.step.cudagraphs else f\n"
        "    def j(self):\n        self.cudagraphs = uses_cudagraphs('reduce-overhead', 'inductor', 'cpu')\n"
        "def k(m, b, d):\n    while cudagraphs.uses_cudagraphs(m, b, d):\n        break\n")
    # a branch on CUDA graphs is one; the assignment of uses_cudagraphs' answer (H.j) is not
    assert cuda_sites(tmp_path) == {"m.py::a", "m.py::b", "m.py::C.c", "m.py::e", "m.py::f", "m.py::g", "m.py::H.h",
                                    "m.py::H.i", "m.py::k"}
