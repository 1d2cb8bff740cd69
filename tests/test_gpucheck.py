"""`perflab gpu-check` (issue 21 part 5): what a CPU can check of the command for a lent GPU."""
import pytest
import torch

from perflab import gpucheck
from perflab.cli import main


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a host without CUDA")
def test_without_a_gpu_it_refuses_before_anything_runs(capsys, tmp_path):
    assert main(["gpu-check", "--out", str(tmp_path / "x")]) == 2
    assert "needs a GPU host" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_the_folder_is_named_for_the_gpu_and_the_commit():
    out = gpucheck.default_out("h100", {"commit": "0123456789abcdef", "dirty": True})
    assert out.parts[-3:] == ("outputs", "h100", "0123456-dirty")
    assert gpucheck.default_out("h200", {"commit": None, "dirty": None}).name == "unknown-commit"


def test_the_report_leads_with_the_gpu_tests(tmp_path):
    text = "tests/test_gpu_paths.py ..F\n=========== 1 failed, 20 passed, 480 deselected in 31.2s ===========\n"
    assert gpucheck.summary_line(text) == "1 failed, 20 passed, 480 deselected in 31.2s"
    assert gpucheck.summary_line("collecting ...") == "no summary line: see gpu-tests.txt"
    report = tmp_path / "REPORT.md"
    report.write_text("# perflab report\n")
    gpucheck.lead_report(report, 1, "1 failed, 20 passed in 31.2s")
    assert report.read_text().startswith(gpucheck.TESTS_HEADER + "\n\nFAILED (exit 1): 1 failed, 20 passed in 31.2s")
    assert report.read_text().endswith("# perflab report\n")


def test_a_later_run_without_tests_keeps_the_earlier_outcome(tmp_path):
    assert gpucheck.earlier_tests(tmp_path) == (0, "not run (--no-tests)")
    (tmp_path / "gpu-tests.txt").write_text("== 2 failed, 30 passed in 40.0s ==\n")
    assert gpucheck.earlier_tests(tmp_path) == (1, "2 failed, 30 passed in 40.0s (an earlier run, kept in this folder)")
