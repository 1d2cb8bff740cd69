"""A per-test time limit with no dependency: `PERFLAB_TEST_TIMEOUT=SECONDS pytest -p perflab.runner.testguard ...`

Each test (setup, call and teardown together) gets SECONDS. At the limit SIGALRM fails it (`pytest.fail`, as
pytest-timeout's signal method does) and the run goes on with the next test. A test stuck where no signal reaches
Python (a C call waiting on the device, a thread join) is ended `GRACE_S` later by `faulthandler`, which prints every
thread's stack into the log and ends the process: the log then says where it hung, and the runner goes on with the
notebooks. `perflab gpu-check` loads it for the GPU tests with a limit sized from params/gpu-smoke/ESTIMATE.md.
"""
from __future__ import annotations

import faulthandler
import os
import signal

import pytest

ENV = "PERFLAB_TEST_TIMEOUT"
GRACE_S = 30.0  # after the limit, for a test that the alarm cannot reach


def limit() -> float:
    return float(os.environ.get(ENV) or 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    seconds = limit()
    if not seconds or not hasattr(signal, "SIGALRM"):
        return (yield)

    def stop(signum, frame):
        pytest.fail(f"over the per-test limit of {seconds:g} s (${ENV})", pytrace=False)

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds + GRACE_S, exit=True)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)
