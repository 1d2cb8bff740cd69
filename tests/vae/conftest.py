import pytest

from perflab.vae.trainers import torch_threads


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # tests/conftest.py's one thread per test, held for a module here: the modules' own module-scoped fixtures (the
    # batches, a trained model) run before a per-test setting, and eager results compare bit for bit only at one thread
    # count (another splits the matmuls differently); tiny tensors gain nothing from a second thread
    with torch_threads(1):
        yield
