"""What the prover's tests share."""
import pytest


@pytest.fixture
def warned_counter():
    """Make a host-sync counter that does what CUDA's sync-debug mode adds on a GPU: `warned_counter(real, n)` wraps
    the real `count_host_syncs` so that its counter reports `n` sync-debug warnings (a second witness); monkeypatch a
    checks module's `count_host_syncs` with it."""
    def make(real, n: int = 2):
        class Warned:
            def __init__(self, dev):
                self.counter = real(dev)

            def __enter__(self):
                return self.counter.__enter__()

            def __exit__(self, *exc):
                self.counter.__exit__(*exc)
                self.counter.cuda_debug_warnings = n
        return Warned
    return make
