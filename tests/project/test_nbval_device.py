"""How nbval treats a CUDA host (issue 26, part 5): `make nbval` runs the notebooks' kernels with CUDA hidden, so
the checked cells are compared with outputs recorded on the device they were recorded on (the CPU defaults). The
fixture notebook prints what its kernel sees; its committed output says: no CUDA."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "nbval" / "device.ipynb"


def _make_nbval():
    if shutil.which("make") is None:
        pytest.skip("no make on this host: `make nbval` is what is tested")
    pytest.importorskip("nbval", reason="nbval is not installed (the GPU image lacks it: gpu-session.sh prepare brings it)")
    return subprocess.run(["make", "-s", "--no-print-directory", "nbval", f"NOTEBOOKS={FIXTURE}", f"PY={sys.executable}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_make_nbval_hides_cuda_from_the_notebooks():
    r = _make_nbval()
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.gpu
def test_on_a_gpu_host_the_notebooks_under_nbval_still_run_on_the_cpu():
    assert torch.cuda.is_available()                    # this process sees the GPU; the notebook's kernel does not
    r = _make_nbval()
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
