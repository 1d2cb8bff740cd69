"""`perflab gpu-check`'s deadline and its record: a hard stop for everything, and each part's outcome.

A host lent for minutes runs one command at most `CALL_S` seconds (10 minutes), so a call of `perflab gpu-check`
ends by a deadline below that limit (`--deadline SECONDS`; `DEADLINE_S` is the call's whole run in
`tools/gpu-session.sh`, which gives the runner its share). `Deadline` is that stop: a notebook is started only when
its estimate (`perflab.runner.estimate`) fits in what is left, and one running at the deadline is stopped as Ctrl-C
stops it, recorded at its cell; a cell has its own limit (papermill's execution_timeout) and a GPU test its part's
(pytest-timeout), both sized by `perflab.runner.estimate`.

The runner writes one row per part of the call into the run folder's `window.jsonl` (the plan first, then each test
part and notebook: ok, failed, skipped, cut); `rows` reads them back. The one-screen summary a call ends with, and
everything else about calls from a copy of the tree (what travels, what comes back, the compile caches packed, the
wheels), is the window tooling's beside `tools/gpu-session.sh` (`tools/gpuwindow/`), not the package's.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from pathlib import Path

CALL_S = 600          # one command on the lent host, at most
DEADLINE_S = 540      # a call's whole run (start, run, pack) ends by then: 60 s of margin under CALL_S
WINDOW_ENV = "PERFLAB_WINDOW"   # the call's id (tools/gpu-session.sh sets it): rows of earlier calls are not this one's
LOG = "window.jsonl"
STATUSES = ("ok", "failed", "skipped", "cut")
# The GPU tests that compile nothing with inductor and start no subprocess: seconds each on a cold H100 (the smoke's
# part). Every other `-m gpu` test is the "compiled" part, so a new GPU test lands there unless listed here.
QUICK_GPU_TESTS = (
    "tests/prover/test_prover_cuda.py::test_cuda_03_correctness_checks_pass",
    "tests/prover/test_prover_cuda.py::test_cuda_03_step_profile",
    "tests/prover/test_prover_cuda.py::test_cuda_03_out_of_memory_halves_the_batch",
    "tests/latentwire/test_latentwire_cuda.py::test_cuda_06_all_checks_pass",
    "tests/latentwire/test_latentwire_cuda.py::test_cuda_06_a_variant_is_timed_with_events_and_swept",
    "tests/gpu/test_cuda_paths.py::test_cuda_environment_stamp",
    "tests/gpu/test_cuda_paths.py::test_cuda_memory_peak_and_free",
    "tests/gpu/test_cuda_paths.py::test_cuda_sizes_of_the_floors",
    "tests/kit/test_launches.py::test_cuda_kernels_are_counted_and_a_graph_replay_is_one_launch",
    "tests/prover/test_prover_core_mining.py::test_sparse_counts_on_cuda_equal_cpu",
    "tests/vae/test_vae_captured.py::test_cuda_one_replay_per_step_same_math_no_sync[off]",
    "tests/vae/test_vae_remap.py::test_presence_remap_on_cuda_is_sync_free_and_correct",
    "tests/vae/test_vae_train.py::test_optimized_step_on_cuda_has_no_sync_warnings",
)


ALARM_FIRST_S = 2  # a cell limited only by the deadline stops this long after it: the alarm comes first


class Deadline:
    """The runner's share of a call: `left()` seconds until it ends (inf without one)."""

    def __init__(self, seconds: float | None):
        self.end = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float:
        return math.inf if self.end is None else self.end - time.monotonic()

    def cap(self, seconds: float | None) -> float | None:
        """A cell's limit: `seconds` where it ends before the deadline; else the deadline's own, a moment after it
        (`alarm` stops the cell there first, so it reads "cut", not a cell "failed" a second early)."""
        left = self.left()
        if math.isinf(left):
            return seconds
        if seconds is not None and seconds < left:
            return max(1, int(seconds))
        return max(1, math.ceil(left)) + ALARM_FIRST_S

    @contextlib.contextmanager
    def alarm(self):
        """While it lasts, the deadline sends this process SIGINT: a notebook executing then is stopped as Ctrl-C
        stops it (recorded at its cell as interrupted, its rows kept) and `Interrupted` is raised."""
        left = self.left()
        if math.isinf(left):
            yield
            return
        # Ctrl-C's own handler while it lasts, whatever a library left installed (one that ignores SIGINT or does not
        # raise would let the cell run on to its limit: "failed" instead of "cut")
        old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        old = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        signal.setitimer(signal.ITIMER_REAL, max(left, 0.01))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            signal.signal(signal.SIGINT, old_int)


def record(out: Path, part: str, status: str, seconds: float = 0.0, note: str = "") -> None:
    """One row of this call's outcome in out/window.jsonl: `part` ("tests-quick", "03_eval"), `status` (one of
    STATUSES), its seconds and a short note."""
    assert status in STATUSES, status
    row = {"window": os.environ.get(WINDOW_ENV, ""), "part": part, "status": status, "seconds": round(seconds, 1),
           "note": note}
    _append(out, row)


def plan(out: Path, parts: list[str]) -> None:
    """The parts this call means to run, in order, before any runs: what has no row at the end was cut."""
    _append(out, {"window": os.environ.get(WINDOW_ENV, ""), "plan": parts})


def _append(out: Path, row: dict) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOG, "a") as f:
        f.write(json.dumps(row) + "\n")


def rows(root: Path, window: str) -> list[dict]:
    """This call's rows from every run folder under `root` (root/<gpu kind>/<commit>/window.jsonl)."""
    found = []
    for f in sorted(Path(root).glob(f"*/*/{LOG}")):
        for line in f.read_text(errors="replace").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            if r.get("window") == window:
                found.append({**r, "folder": f.parent})
    return found
