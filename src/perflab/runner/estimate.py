"""How long a notebook and a part of the GPU tests take on a GPU, from what they run, and the limits gpu-check applies.

Counted here, from the code as it is (nothing executed): each smoke notebook's code cells, the claims it judges on
CUDA at its preset (`Claim.off_setup(cfg, "cuda")` empty; the "GPU-only" ones name `device: cuda`, so a CPU proxy
never decides them), the preset's `verdict_time` (a timed claim's budget, its warm-up included), and the GPU tests
of each part (`deadline.QUICK_GPU_TESTS`, and every other `-m gpu` test). The unit costs below are estimates with
their basis (nothing has run on a GPU since 1a70d9c): the first smoke's REPORT.md and window.jsonl replace them.

A smoke notebook: KERNEL_S + its imports cell + its work (WORK_S: the hand estimate's cells after the imports,
verdicts left out) + each claim judged on CUDA at most `verdict_time` (an upper bound: a claim decided by a count
costs no rounds). A full notebook: FULL_S[preset], the hand estimate with its verdicts, one table per card's preset
(`params/gpu/`: an H100's; `params/gpu-h200/`: an H200's). `perflab gpu-check` starts a notebook only where its estimate
fits before the deadline (`perflab.runner.deadline`) and stops a cell at CELL_FACTOR x the largest notebook of its
call, a test at its part's estimate. The calls of a window, packed from these numbers (params/gpu-smoke/ESTIMATE.md's
table), are the window tooling's: `python -m gpuwindow estimate` beside tools/gpu-session.sh.
"""
from __future__ import annotations

import ast
import functools
import importlib
import math
import re
from pathlib import Path

# ---- unit costs: seconds on one H100, cold (estimates, with their basis) -------------------------------------------
KERNEL_S = 4.8        # a notebook's kernel start and papermill: 1a70d9c, each duration minus the sum of its cells (4.5-5.1)
IMPORTS_S = {"01_profile_probe1d": 6.8, "02_slab_stats": 9.9, "03_eval": 11.1, "03b_links": 11.1, "04_early_exit": 9.8,
             "05_vae_sync": 6.7, "06_latentwire_amp": 6.6}   # 1a70d9c: each notebook's imports cell (03b: 03's, the
#                                                              same prover imports)
IMPORTS_DEFAULT_S = 11.1                                   # the slowest of them, for a notebook not listed
WORK_S = {"01_profile_probe1d": 11, "02_slab_stats": 27, "03_eval": 16, "03b_links": 22, "04_early_exit": 24,
          "05_vae_sync": 31, "06_latentwire_amp": 43}  # ESTIMATE.md at e2394dc, "the smoke, step by step", fixed costs
# and verdicts out; 03's 32 s split in two (its link cells' ~5 D of the closing searches, and a second graph, engine and
# policy training, go to 03b: estimates, not measured)
CELL_S = 3.0          # a code cell after the imports, for a smoke notebook WORK_S does not list (assumed)
FULL_H100_S = {"03b_links": 150, "03_eval": 165, "01_profile_probe1d": 235, "05_vae_sync": 340, "04_early_exit": 190,
               "02_slab_stats": 440, "06_latentwire_amp": 420}  # ESTIMATE.md's full presets, window by window (hand,
# verdicts included); 03's 285 s split in two: 03_eval 1a70d9c's 154 s and its sweep's rounds, 03b_links link prediction
# at full size, its compiles and its verdict, each with its own kernel, imports and policy training; 02, 06
# re-estimated from 1a70d9c's H100 run after their presets were cut to fit one call's runner (473 s): 02 took 473 s
# there with max_run_time 10, 231 s of it in the two sweep cells that max_run_time bounds; at 5 s they take about half
# (-115 s), its 4 timed verdicts at 20 s add ~80 s: ~440. 06 took 422 s with min/max_run_time 1/5 (its preset now 1/4),
# 210 s of it in loss curves of 1,024 samples (256 now: ~53 s); its verdicts (~10 timed, 8 s) and the compiled
# variant's inductor compile add ~140 s: ~420. Estimates, not measured.
# params/gpu-h200/: the H100's presets where memory does not bound the work (01, 03, 03b but its search, 04, 05: the same
# seconds: an H200 computes at an H100's rates, its memory 1.4x faster), and what its memory adds: 02 one more row
# point (524,288 rows: a baseline slab ~2.4 s, twice 262,144's ~1.2 s, over ~4 rounds a side and the optimized side,
# +40 s) at max_run_time 4 instead of 5 (its two sweep cells ~115 s at 5 s, ~92 at 4: -23 s); 03b's search at twice
# the rows per step (the same candidates in half the chunks: +0 s, assumed); 06 one more sweep batch (1024: ~2x
# batch 512's step of ~0.1 s, timed 4 s a bf16 setting, 2 settings, +10 s with its warm-up). Estimates, not measured.
FULL_H200_S = {**FULL_H100_S, "02_slab_stats": FULL_H100_S["02_slab_stats"] + 40 - 23,
               "06_latentwire_amp": FULL_H100_S["06_latentwire_amp"] + 10}
FULL_S = {"gpu": FULL_H100_S, "gpu-h200": FULL_H200_S}   # the full presets by name: seconds of each notebook
RUNNER_S = 11         # gpu_kind's child (torch import, CUDA init), the plan, the report: 1a70d9c's imports
COLLECT_S = 5         # pytest's collection of the quick part's files (1a70d9c: 9.5 s for the whole suite's)
CUDA_INIT_S = 2       # the tests' CUDA context
TEST_S = 2.1          # a quick test's body: ESTIMATE.md's ~30 s for 14
COMPILED_S = 280      # the compiled part (inductor, CUDA graphs, torchrun, the new study, nbval): ESTIMATE.md's table
CELL_FACTOR = 2.0     # a cell's limit: twice the largest notebook of its call (a cell is at most its notebook's work)
MIN_TEST_S = 60.0     # a test's limit, at least (the first test of a part pays CUDA's start)

CUDA = "cuda"         # the device type a call runs on, as a claim's setup names it (data here, on every device)


def _claims_of(code: str) -> list:
    """The `Claims` a notebook judges: its `*CLAIMS` names, found in the claims modules it imports."""
    from ..kit.claims import Claims

    tree = ast.parse("\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perflab"):
            if node.module.endswith(".claims"):
                modules.add(node.module)
            modules |= {f"{node.module}.claims" for a in node.names if a.name == "claims"}
    names = set(re.findall(r"\b([A-Z_]*CLAIMS)\b", code))
    found = [getattr(importlib.import_module(m), n, None) for m in sorted(modules) for n in sorted(names)]
    return [c for c in found if isinstance(c, Claims)]


@functools.lru_cache(maxsize=4)
def counts(preset: str = "gpu-smoke") -> dict[str, dict]:
    """{notebook: {"cells", "judged", "gpu_only", "verdict_time"}} for the project's notebooks on `preset`, on CUDA."""
    import nbformat

    from ..kit.params import validate
    from . import catalog
    from .schemas import schema_for

    found = {}
    for name, path, params in catalog.plan([], preset=preset):
        code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        cfg = validate(params, schema_for(name, path))
        judged = [c for cl in _claims_of("\n".join(code)) for c in cl.claims if not c.off_setup(cfg, CUDA)]
        found[name] = {"cells": len(code), "judged": len(judged),
                       "gpu_only": sum(dict(c.setup).get("device") == CUDA for c in judged),
                       "verdict_time": float(getattr(cfg, "verdict_time", 0.0) or 0.0)}
    return found


def smoke_seconds(name: str, c: dict) -> float:
    work = WORK_S.get(name, CELL_S * max(c["cells"] - 1, 0))
    return KERNEL_S + IMPORTS_S.get(name, IMPORTS_DEFAULT_S) + work + c["judged"] * c["verdict_time"]


def notebook_estimate(preset: str | None, name: str) -> float | None:
    """A notebook's estimated seconds on a preset (gpu-smoke: counted; gpu, gpu-h200: FULL_S), None where none is
    made."""
    if preset in FULL_S:
        return FULL_S[preset].get(name)
    if preset == "gpu-smoke":
        c = counts("gpu-smoke").get(name)
        return smoke_seconds(name, c) if c else None
    return None


def part_counts() -> dict[str, tuple[int, int]]:
    """{part: (tests, files)}: the quick part by node id, the compiled part every other `-m gpu` test function."""
    from .deadline import QUICK_GPU_TESTS

    quick = (len(QUICK_GPU_TESTS), len({n.split("::")[0] for n in QUICK_GPU_TESTS}))
    names = {n.split("[")[0] for n in QUICK_GPU_TESTS}
    compiled = [t for t in gpu_tests() if t not in names]
    return {"quick": quick, "compiled": (len(compiled), len({t.split("::")[0] for t in compiled}))}


def gpu_tests(root: Path | None = None) -> list[str]:
    """Every `-m gpu` test function of the project's tests/ by node id (marked itself or by its module)."""
    from ..kit.paths import repo_root

    root = Path(root or repo_root())
    found = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_gpu = any(isinstance(n, ast.Assign) and "pytest.mark.gpu" in ast.unparse(n.value) for n in tree.body)
        found += [f"{path.relative_to(root).as_posix()}::{n.name}" for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                  and (module_gpu or any("mark.gpu" in ast.unparse(d) for d in n.decorator_list))]
    return found


def tests_seconds(part: str) -> float:
    n, files = part_counts()["quick"]
    quick = COLLECT_S + CUDA_INIT_S + n * TEST_S
    return {"quick": quick, "compiled": COMPILED_S, "": quick + COMPILED_S}[part]


def limit_per_cell(preset: str | None, names: list[str]) -> float | None:
    """A cell's limit for these notebooks: CELL_FACTOR x the largest estimate (None: none estimated)."""
    found = [e for e in (notebook_estimate(preset, n) for n in names) if e]
    return math.ceil(CELL_FACTOR * max(found)) if found else None


def limit_per_test(part: str) -> float:
    """A test's limit in a part: the part's whole estimate (no one test should take as long), at least MIN_TEST_S."""
    return float(max(MIN_TEST_S, math.ceil(tests_seconds(part))))
