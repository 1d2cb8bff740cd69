"""The GPU window's estimate from what runs (issue 38 item 7): the smoke's cells, its claims judged on CUDA and its
tests counted from the code by `perflab.runner.estimate`, and params/gpu-smoke/ESTIMATE.md's calls table (one per
card's full preset: an H100's params/gpu/, an H200's params/gpu-h200/) is what `python -m gpuwindow estimate --write`
writes."""
import shutil

import pytest
from gpuwindow import estimate as window_estimate

from perflab.runner import estimate
from perflab.runner.deadline import QUICK_GPU_TESTS

ROOT = estimate.Path(__file__).resolve().parents[2]


@pytest.mark.slow  # imports four studies' claims: ~1.7 s alone
def test_the_claims_a_notebook_judges_are_found_as_it_imports_them():
    from perflab.latentwire import claims as lw
    from perflab.prover.evaluation import claims as ev
    from perflab.prover.links import claims as lc
    from perflab.vae import claims as vae

    code = ("from perflab.vae.claims import (\n    CLAIMS,\n    headline,\n)\nCLAIMS.judge(found)\n"
            "from perflab.prover.evaluation.claims import CLAIMS\nfrom perflab.prover.links.claims import CLAIMS as LINK_CLAIMS\n"
            "rows = CLAIMS.judge(f) + LINK_CLAIMS.judge(g)\n%time x = 1\n")
    assert {id(c) for c in estimate._claims_of(code)} == {id(vae.CLAIMS), id(ev.CLAIMS), id(lc.CLAIMS)}
    assert estimate._claims_of("from perflab.latentwire import claims\nclaims.CLAIMS.log(run, rows)\n") == [lw.CLAIMS]
    assert estimate._claims_of("from perflab.kit.claims import claims_figure\n") == []


def test_each_claim_judged_on_cuda_costs_at_most_its_verdict_time():
    c = {"cells": 14, "judged": 4, "gpu_only": 1, "verdict_time": 0.5}
    base = estimate.smoke_seconds("02_slab_stats", {**c, "judged": 0})
    assert base == estimate.KERNEL_S + estimate.IMPORTS_S["02_slab_stats"] + estimate.WORK_S["02_slab_stats"]
    assert estimate.smoke_seconds("02_slab_stats", c) == base + 4 * 0.5
    assert estimate.smoke_seconds("new_study", {**c, "judged": 0}) == \
        estimate.KERNEL_S + estimate.IMPORTS_DEFAULT_S + 13 * estimate.CELL_S   # cells after the imports


def test_the_test_parts_are_counted_from_the_tests():
    counts = estimate.part_counts()
    assert counts["quick"] == (len(QUICK_GPU_TESTS), len({n.split("::")[0] for n in QUICK_GPU_TESTS}))
    quick = {n.split("[")[0] for n in QUICK_GPU_TESTS}
    assert quick <= set(estimate.gpu_tests())                                 # every quick test is a GPU test
    assert counts["compiled"][0] == len(set(estimate.gpu_tests()) - quick) >= 10


@pytest.mark.slow  # counts every smoke notebook's claims (imports the studies, reads the seven notebooks): ~6 s here
def test_the_committed_table_is_what_the_command_writes(tmp_path):
    copy = tmp_path / "ESTIMATE.md"
    shutil.copy(ROOT / window_estimate.ESTIMATE_MD, copy)
    changed = window_estimate.write(copy)
    assert not changed, ("params/gpu-smoke/ESTIMATE.md's calls table is not what the code gives: run "
                         "`PYTHONPATH=tools python -m gpuwindow estimate --write` and commit it")
    smoke = estimate.counts("gpu-smoke")
    assert len(smoke) == 7 and all(c["cells"] > 0 and c["judged"] >= c["gpu_only"] for c in smoke.values())
    assert sum(c["gpu_only"] for c in smoke.values()) > 0                      # the decisions a CPU proxy never makes
    for preset in ("gpu", "gpu-h200"):
        calls = window_estimate.calls(preset)
        assert [c["call"] for c in calls[:2]] == ["smoke", "tests"] and calls[0]["over"] <= 0
        assert sorted(n for c in calls[2:] for n in c["names"]) == sorted(estimate.FULL_S[preset])
        assert {c["preset"] for c in calls[2:]} == {preset}


def test_each_card_has_its_full_presets_estimated():
    # params/gpu-h200/ is the H100's presets with what an H200's memory adds: every notebook of both estimated, the
    # H200's never under the H100's (the same rates, more work)
    assert set(estimate.FULL_S) == {"gpu", "gpu-h200"}
    h100, h200 = estimate.FULL_S["gpu"], estimate.FULL_S["gpu-h200"]
    assert set(h100) == set(h200) == {p.stem for p in (ROOT / "params" / "gpu-h200").glob("*.yaml")}
    assert all(h200[n] >= h100[n] for n in h100)
    assert estimate.notebook_estimate("gpu-h200", "06_latentwire_amp") == h200["06_latentwire_amp"]
