import pytest
import torch

from perflab.env import device_kind, fingerprint, pick_device


def test_auto_and_cpu():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a host without CUDA")
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_on_a_cpu_host_is_a_clear_error(spec):
    with pytest.raises(ValueError, match="no CUDA device is visible"):
        pick_device(spec)


@pytest.mark.parametrize("spec", ["gpu", "tpu", "", 3])
def test_unknown_device_names_the_choices(spec):
    with pytest.raises(ValueError, match="device"):
        pick_device(spec)


def test_fingerprint_has_what_a_result_needs():
    fp = fingerprint("cpu")
    for key in ("time", "host", "torch", "cuda", "device", "device_name", "commit", "dirty", "torch_threads"):
        assert key in fp
    assert fp["torch"] == torch.__version__ and fp["device"] == "cpu"
    assert device_kind("cpu") == "cpu"
