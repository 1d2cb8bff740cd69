"""Execute one notebook with papermill, and say honestly how it ended: ok, failed at a cell, or interrupted.

    o = execute("03_eval", Path("notebooks/03_eval.ipynb"), {"batch": 512}, Path("outputs/local"))
    print(o.describe())   # 03_eval: ok in 52.3 s -> outputs/local/03_eval.ipynb

One execution has one run id. The kernel gets it as $PERFLAB_RUN_ID (with $PERFLAB_OUT, the run folder, and
$PERFLAB_CWD, where the user ran the command, for `perflab.kit.paths.user_path`), so the notebook's rows and the
runner's status rows ("started", then "ok" / "failed" / "interrupted") carry the same id and a report never
pairs one execution's status with another's results.

Ctrl-C (KeyboardInterrupt) while a notebook runs: the executed notebook is marked at the cell it reached (an
error output on that cell, the cells after it left pending, a banner on top), an "interrupted" status row is
written, the rows the notebook already wrote stay, and `Interrupted` is raised for the caller to stop on. A kernel
that dies or a cell that times out is marked the same way, as "failed" (papermill alone would call every cell
completed). Cells are numbered from 1 as in the source notebook: papermill's injected-parameters cell is not
counted.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

STOPPED_TAG = "perflab-stopped"  # the banner put on top of a notebook interrupted, or failed outside a cell
_PAPERMILL_BANNER = "papermill-error-cell-tag"  # the banner papermill puts on top of a failed notebook
_INJECTED = "injected-parameters"


@dataclasses.dataclass
class Outcome:
    name: str
    output: Path
    status: str            # "ok" | "failed" | "interrupted"
    seconds: float
    run_id: str = ""
    cell: int | None = None         # the cell it stopped at, counted from 1 in the source notebook
    cells: int | None = None        # how many cells the source notebook has
    prompt: int | None = None       # that cell's In [n] in the executed notebook
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def where(self) -> str:
        if self.cell is None:
            return "before the first cell"
        shown = f"cell {self.cell} of {self.cells}" if self.cells else f"cell {self.cell}"
        return shown + (f" (In [{self.prompt}] in the executed notebook)" if self.prompt else "")

    def describe(self) -> str:
        if self.ok:
            return f"{self.name}: ok in {self.seconds:.1f} s -> {self.output}"
        if self.status == "interrupted":
            return f"{self.name}: INTERRUPTED at {self.where()} after {self.seconds:.1f} s (executed notebook: {self.output})"
        return f"{self.name}: FAILED at {self.where()}: {self.error} (executed notebook: {self.output})"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during an execution, after it was recorded (status row written, notebook marked)."""

    def __init__(self, outcome: Outcome):
        super().__init__(outcome.describe())
        self.outcome = outcome


def _kernel_manager_class(stderr, sockets: str):
    """The kernel's own stderr (ipykernel's log lines, not the cells' output, which goes into the notebook) is
    written to `stderr`, an open file, instead of the terminal: a Ctrl-C that stops a kernel mid-reply makes it
    log a traceback, which belongs in a file. Where the OS has them, kernels talk to us over local IPC sockets
    in `sockets`, a private folder of this execution's: no TCP port is opened (ipykernel has no reason to warn
    that it "is running over TCP without encryption"), and kernels running side by side never share a socket."""
    from jupyter_client.manager import AsyncKernelManager

    class PerflabKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            if os.name == "posix":
                kw.setdefault("transport", "ipc")
                kw.setdefault("ip", os.path.join(sockets, "kernel"))  # sockets kernel-1, kernel-2, ...
            super().__init__(**kw)

        async def start_kernel(self, **kw):
            kw.setdefault("stderr", stderr)
            return await super().start_kernel(**kw)

    return PerflabKernelManager


@contextlib.contextmanager
def _env(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _sigint_ignored():
    """A second Ctrl-C while the first is being recorded is ignored (main thread only: signals live there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _executed_cells(nb) -> list:
    """The cells as they were executed (papermill's error banner, added afterwards, left out)."""
    return [c for c in nb.cells if _PAPERMILL_BANNER not in c.metadata.get("tags", [])]


def _locate(cells: list, index: int) -> tuple[int, int, int | None]:
    """Executed-notebook index -> (cell number from 1 in the source notebook, source cell count, In [n])."""
    source = [c for c in cells if _INJECTED not in c.metadata.get("tags", [])]
    number = sum(1 for c in cells[:index + 1] if _INJECTED not in c.metadata.get("tags", []))
    return number, len(source), cells[index].get("execution_count")


def _mark_stopped(output: Path, status: str, ename: str, evalue: str) -> tuple[int, int, int | None] | None:
    """Mark the executed notebook as stopped ("interrupted", or "failed" when the kernel died or a cell timed out)
    at the last cell that started, with `ename: evalue` as that cell's error; the cells after it never ran
    (papermill's own bookkeeping calls them completed). -> the cell's place (see `_locate`), or None."""
    import nbformat

    if not output.is_file():
        return None
    nb = nbformat.read(output, as_version=4)
    cells = _executed_cells(nb)
    started = [i for i, c in enumerate(cells) if (c.metadata.get("papermill") or {}).get("start_time")]
    at = started[-1] if started else None
    for i, c in enumerate(cells):
        if at is None or i > at:
            c.metadata.setdefault("papermill", {}).update(status="pending", start_time=None, end_time=None,
                                                          duration=None, exception=None)
    place = _locate(cells, at) if at is not None else None
    if at is not None:
        cell = cells[at]
        cell.metadata.setdefault("papermill", {}).update(status=status, exception=True)
        if cell.cell_type == "code" and not any(o.get("output_type") == "error" for o in cell.outputs):
            cell.outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                                       traceback=[f"{ename}: {evalue}"]))
    nb.metadata.setdefault("papermill", {})["exception"] = True
    nb.metadata["perflab"] = {"status": status, "cell": place[0] if place else None}
    where = f"cell {place[0]} of {place[1]}" if place else "before the first cell"
    why = "(Ctrl-C)" if status == "interrupted" else f"({ename}: {evalue})"
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(
        f"**{status.capitalize()}** {why} at {where}: the cells after it did not run, and the outputs below are"
        " those of the cells that ran.", metadata={"tags": [STOPPED_TAG]}))
    nbformat.write(nb, output)
    return place


def execute(name: str, path: Path, params: dict, out_dir: Path, *, kernel_name: str | None = None,
            progress: bool = True, cell_timeout: int | None = None, log_results: bool = True,
            run_id: str | None = None, user_cwd: str | os.PathLike | None = None) -> Outcome:
    """Execute one notebook with papermill into `<out_dir>/<name>.ipynb` (cwd: the notebook's folder).

    Failures are returned, not raised; Ctrl-C is recorded, then raised as `Interrupted`. With `log_results`,
    status rows go to `<out_dir>/results.jsonl` under the execution's run id (`run_id`, else a fresh one).
    `user_cwd` (default: the current directory) is where relative paths given as parameters resolve from."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from ..kit.env import host_stamp
    from ..kit.results import ResultsLog, new_run_id

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / f"{name}.ipynb"
    outcome = Outcome(name=name, output=output, status="ok", seconds=0.0, run_id=run_id or new_run_id())
    log = ResultsLog(out_dir / "results.jsonl", study=name, params=params, run_id=outcome.run_id,
                     stamp=host_stamp()) if log_results else None
    if log:
        log.append("run", status="started", notebook=output.name)  # a killed runner leaves only this row
    kernel_log = out_dir / name / outcome.run_id / "kernel.log"  # the execution's own folder (perflab.kit.notebook)
    kernel_log.parent.mkdir(parents=True, exist_ok=True)
    stopped = None  # (ename, evalue) when it stopped outside a cell's own error: Ctrl-C, a dead kernel, a timeout
    ctrl_c = _CtrlC()
    t0 = time.perf_counter()
    try:
        with ctrl_c, _env(PERFLAB_OUT=str(out_dir), PERFLAB_RUN_ID=outcome.run_id,
                  PERFLAB_CWD=str(Path(user_cwd or os.getcwd()).resolve())), open(kernel_log, "ab") as stderr, \
                tempfile.TemporaryDirectory(prefix="perflab-kernel-") as sockets:
            papermill.execute_notebook(str(path), str(output), parameters=params or None, cwd=str(path.parent),
                                       kernel_name=kernel_name, progress_bar=progress,
                                       execution_timeout=cell_timeout,
                                       kernel_manager_class=_kernel_manager_class(stderr, sockets))
    except PapermillExecutionError as e:
        _failed(outcome, e)
        if outcome.status == "interrupted":  # Ctrl-C reached the kernel's cell before it reached us
            stopped = ("KeyboardInterrupt", "interrupted (Ctrl-C) while this cell ran")
    except KeyboardInterrupt:
        outcome.status, stopped = "interrupted", ("KeyboardInterrupt", "interrupted (Ctrl-C) while this cell ran")
    except Exception as e:  # kernel died, a cell timed out, no such kernel: still report, still go on
        outcome.status, stopped = "failed", (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e) else "")
        if kernel_log.is_file() and kernel_log.stat().st_size:
            stopped = (stopped[0], stopped[1] + f" (kernel log: {kernel_log})")
    outcome.seconds = time.perf_counter() - t0
    if kernel_log.is_file() and not kernel_log.stat().st_size:
        kernel_log.unlink()
        with contextlib.suppress(OSError):
            kernel_log.parent.rmdir()  # only when the notebook wrote nothing there either
    with _sigint_ignored():
        if outcome.status == "interrupted" or ctrl_c.levels is not None:
            ctrl_c.settle()
        if stopped:
            place = _mark_stopped(output, outcome.status, *stopped)
            if place:
                outcome.cell, outcome.cells, outcome.prompt = place
            outcome.error = ": ".join(x for x in stopped if x)
        if log:
            log.append("run", status=outcome.status, seconds=round(outcome.seconds, 2), cell=outcome.cell,
                       cells=outcome.cells, error=outcome.error, notebook=output.name)
    if outcome.status == "interrupted":
        raise Interrupted(outcome)
    return outcome


class _CtrlC:
    """While a notebook runs, Ctrl-C also quiets the loggers that would print the teardown's noise (nbclient's
    abandoned wait for the cell's reply: "Kernel died while waiting for execute reply", asyncio's "Task exception
    was never retrieved" with ~40 lines of traceback) before it raises KeyboardInterrupt as Python's own handler
    does. `settle()` collects that abandoned task while they are quiet, then gives them back their levels."""
    LOGGERS = ("asyncio", "papermill", "nbclient", "traitlets")

    def __init__(self):
        self.old, self.levels = None, None

    def __enter__(self):
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
            self.old = None

    def _handler(self, signum, frame):
        self.quiet()
        raise KeyboardInterrupt

    def quiet(self) -> None:
        import logging

        if self.levels is None:
            self.levels = {n: logging.getLogger(n).level for n in self.LOGGERS}
            for n in self.LOGGERS:
                logging.getLogger(n).setLevel(logging.CRITICAL)

    def settle(self) -> None:
        import gc
        import logging

        self.quiet()
        gc.collect()  # the abandoned task, finished with an error nobody reads, goes now, silently
        for n, level in (self.levels or {}).items():
            logging.getLogger(n).setLevel(level)
        self.levels = None


def _failed(outcome: Outcome, e) -> None:
    """Fill `outcome` from papermill's error: the cell counted as in the source notebook, the error, and
    whether the error is in fact Ctrl-C reaching the kernel first (then: interrupted)."""
    import nbformat

    outcome.status = "interrupted" if e.ename == "KeyboardInterrupt" else "failed"
    first_line = (e.source or "").strip().splitlines()[:1]
    outcome.error = f"{e.ename}: {e.evalue}" + (f" (cell starts: {first_line[0][:60]!r})" if first_line else "")
    try:
        cells = _executed_cells(nbformat.read(outcome.output, as_version=4))
        outcome.cell, outcome.cells, outcome.prompt = _locate(cells, e.cell_index)
    except (OSError, ValueError, IndexError):
        outcome.cell = e.cell_index + 1
