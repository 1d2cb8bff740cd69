"""`perflab sweep`: one papermill execution per point of a parameter grid, submitted through submitit
(Slurm on a cluster, its local executor here), resumable.

    perflab sweep 03_eval --grid batch=128,256,512 --grid mode=head,tail --executor local --out outputs/sweeps/eval

Layout of the sweep folder (`perflab.points`):
    sweep.json                 what was asked (notebook, grid, fixed parameters): a re-run must ask the same
    points/<slug>/             one folder per point: the executed notebook, its results.jsonl, status.json
    results.jsonl              every point's rows merged (rebuilt from the points after each sweep)
    submitit/                  submitit's job files and logs
A point is finished when its status.json says ok; the job itself writes it, so a sweep interrupted
at any moment keeps every finished point. Re-running the same command skips finished points and
retries the others.

On Slurm, a point's job can end without its notebook ending it: cancelled, pre-empted, at its time limit, killed for
memory. The job notes the signal it received; the sweep asks Slurm (`perflab.slurm`) and records the end by name.
It waits on `squeue` (and `sacct` through submitit, where the cluster keeps accounting), never on a state nobody
can give: a task Slurm no longer knows that wrote no end is recorded as vanished after `vanish_s`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import notebooks as nbs
from . import slurm
from .params import ParameterError, parse_assignment, split_assignment, validate
from .points import Point, ended_now, log_end, points, status, write_status
from .results import latest, new_run_id, read_rows
from .studies import schema_for

_SAID: set[str] = set()  # notes printed once per process
VANISH_S = 120.0   # a task Slurm no longer knows, that wrote no end, is given up after this long
STATUS_LAG_S = 10  # after Slurm says a job ended, how long its status.json may take to show (a shared file system)


class SweepError(ValueError):
    """A bad grid, a sweep folder that holds a different sweep, or a job Slurm refuses: refused before anything
    is submitted."""


def parse_grid(specs: list[str], schema=None) -> dict[str, list]:
    """['batch=128,256', 'mode=head'] -> {'batch': [128, 256], 'mode': ['head']}: each value typed as
    `-p` types it (by the schema's field type when `schema` is given)."""
    grid: dict[str, list] = {}
    for spec in specs:
        try:
            key, raw = split_assignment(spec)
        except ParameterError as e:
            raise SweepError(f"--grid {spec!r}: expected key=v1,v2,... ({e})") from None
        if key in grid:
            raise SweepError(f"--grid {key!r} is given twice")
        items = raw.split(",")
        if not raw or any(not i.strip() for i in items):
            raise SweepError(f"--grid {spec!r}: empty value (write key=v1,v2 with no empty item)")
        values = [parse_assignment(f"{key}={i.strip()}", schema)[1] for i in items]
        if len({json.dumps(v) for v in values}) != len(values):
            raise SweepError(f"--grid {spec!r}: a value is repeated")
        grid[key] = values
    if not grid:
        raise SweepError("a sweep needs at least one --grid key=v1,v2")
    return grid


# ---- inside the job -----------------------------------------------------------------------------

def _job_id() -> str | None:
    import submitit

    try:
        return submitit.JobEnvironment().job_id  # "812_3" for task 3 of array job 812
    except RuntimeError:  # not inside a submitit job (called directly)
        return None


@contextlib.contextmanager
def _signals_noted():
    """SIGTERM (what Slurm sends to cancel, pre-empt or stop a job at its limit) is noted, not obeyed: the kernel
    dies of it, and the job still writes its end. SIGUSR2, submitit's warning ahead of the time limit, is ignored,
    by the kernel too (it inherits SIG_IGN): a notebook cannot checkpoint, so the point keeps all its time.
    -> the list of signals received."""
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR2)}
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signal.Signals(signum).name))
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        yield received
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run_point(nb_path: str, name: str, params: dict, point_dir: str, user_cwd: str | None = None) -> dict:
    """Execute one point (runs inside the submitit job) and record its status.json atomically: "running" first,
    then its end ("terminated" when a signal stopped it: the sweep names it from Slurm)."""
    d = Path(point_dir)
    base = {"params": params, "host": os.uname().nodename, "job_id": _job_id(), "run_id": new_run_id(),
            "started": time.time()}
    write_status(d, {**base, "ok": False, "status": "running"})
    interrupted = None
    with _signals_noted() as received:
        try:
            o = nbs.execute(name, Path(nb_path), params, d, progress=False, user_cwd=user_cwd, run_id=base["run_id"])
        except nbs.Interrupted as e:  # Ctrl-C (local executor): recorded, then passed on
            o, interrupted = e.outcome, e
    st = {**base, "ok": o.ok, "status": o.status, "seconds": round(o.seconds, 2), "cell": o.cell, "cells": o.cells,
          "error": o.error, "signal": received[0] if received else None}
    if received and not o.ok:
        st.update(status="terminated", error=f"{received[0]} received at {o.where()}: {o.error}")
    st = write_status(d, ended_now(st))
    if interrupted is not None:
        raise interrupted
    return st


# ---- submitting -----------------------------------------------------------------------------------

def make_executor(kind: str, folder: Path, *, name: str, timeout_min: int, max_parallel: int,
                  slurm_partition: str | None = None, gpus_per_node: int | None = None,
                  cpus_per_task: int | None = None, mem_gb: float | None = None):
    """A submitit executor: 'slurm' submits one array job; 'local' runs points as local subprocesses."""
    import submitit

    if kind not in ("local", "slurm"):
        raise SweepError(f"--executor must be local or slurm, got {kind!r}")
    try:
        ex = submitit.AutoExecutor(folder=str(folder), cluster=kind)
    except RuntimeError as e:  # e.g. no srun on PATH: not a Slurm host
        raise SweepError(f"--executor {kind} is not usable here: {e}") from None
    opts: dict[str, Any] = {"name": name, "timeout_min": timeout_min}
    for key, value in (("gpus_per_node", gpus_per_node), ("cpus_per_task", cpus_per_task), ("mem_gb", mem_gb)):
        if value is not None:
            opts[key] = value
    if kind == "slurm":
        opts["slurm_array_parallelism"] = max_parallel
        if slurm_partition:
            opts["slurm_partition"] = slurm_partition
    ex.update_parameters(**opts)
    return ex


def _refused_by_slurm(ex, folder: Path, n: int) -> None:
    """Ask Slurm whether it would take the array job (`sbatch --test-only` on the script submitit would submit):
    a bad partition, time limit or GPU count is refused here, in Slurm's words, before anything is written."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = dict(ex._executor.parameters)  # what submitit passes to sbatch (the pinned submitit's own names)
    if n > 1:
        params["map_count"] = n
    why = slurm.refusal(_make_sbatch_string(command="true", folder=folder, **params))
    if why:
        raise SweepError(f"Slurm refuses the job, nothing was submitted:\n{why}")


def _submit(ex, chunk_args: list[tuple]) -> list:
    try:
        return ex.map_array(run_point, *zip(*chunk_args))
    except Exception as e:  # sbatch said no after all (the controller changed its mind, or went away)
        raise SweepError(f"submission failed: {type(e).__name__}: {e}") from None


def _check_spec(out: Path, spec: dict) -> None:
    f = out / "sweep.json"
    if f.is_file():
        old = json.loads(f.read_text())
        if {k: old.get(k) for k in ("notebook", "grid", "fixed")} != {k: spec[k] for k in ("notebook", "grid", "fixed")}:
            raise SweepError(f"{out} holds a different sweep ({old.get('notebook')}, grid {old.get('grid')}, "
                             f"fixed {old.get('fixed')}): use another --out, or the same arguments to resume it")
    out.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(spec, indent=1))


# ---- waiting --------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Task:
    point: Point
    job: Any
    params: dict
    study: str
    started: bool = False           # it ran (Slurm said so, or it wrote "running", or it has a log)
    running: dict | None = None     # the "running" status it wrote when it started (its run id, start time)
    gone_polls: int = 0             # polls in a row where Slurm did not know it
    gone_since: float | None = None
    ended_since: float | None = None


def _own_status(t: _Task) -> dict | None:
    st = status(t.point)
    return st if st and st.get("job_id") == t.job.job_id else None


def _record(t: _Task, st: dict | None, status_: str, error: str, slurm_state: str = "") -> dict:
    """Write the end the sweep named (over the job's own, or where it wrote none) and log it with its execution."""
    base = st or t.running or {"params": t.params, "job_id": t.job.job_id, "host": None}
    out = write_status(t.point.dir, ended_now({**base, "ok": False, "status": status_, "error": error,
                                               "slurm_state": slurm_state or None}))
    log_end(t.point.dir, t.study, out)
    return out


def _job_error(job) -> str:
    """The last line of the exception a job's function raised (submitit pickles it), or ''."""
    from submitit.core.utils import pickle_load

    with contextlib.suppress(Exception):
        outcome, trace = pickle_load(job.paths.result_pickle)
        if outcome == "error":
            return str(trace).strip().splitlines()[-1][:300]
    return ""


def _ended(t: _Task, st: dict | None, state: str, reason: str, log: str) -> dict:
    """The point's end, once Slurm's word (or its silence) is in: the job's own status, renamed when Slurm names
    what stopped it."""
    name = slurm.name_end(state, log)
    if st is not None and (st["ok"] or not name):
        return st
    told = slurm.telling_line(log)
    said = "; ".join(x for x in (f"Slurm: {state}" + (f" ({reason})" if reason and reason != "None" else "")
                                 if state else "", f"job log: {told[1]!r}" if told else "") if x)
    if st is not None:
        return _record(t, st, name, f"{name} ({said}); the job saw: {st['error']}", state)
    error = _job_error(t.job) or ("the job ended without writing its status (killed outright)" if t.started
                                  else "it never started")
    return _record(t, None, name or "failed", f"{name or 'failed'} ({said or 'Slurm has no record'}): {error}", state)


def _sacct_state(job) -> str:
    """The job's state from sacct (submitit's watcher), '' where there is none (no accounting, not yet recorded)."""
    why = slurm.no_accounting()
    if why:  # submitit would call sacct on every poll, and sacct and submitit would each say so every time
        if why not in _SAID:
            _SAID.add(why)
            print(f"perflab sweep: sacct has nothing here ({why}): a job's end is named from squeue and its log",
                  file=sys.stderr)
        return ""
    state = slurm.state_word(job.watcher.get_state(job.job_id, mode="force"))
    return "" if state == "UNKNOWN" else state


def _slurm_end(t: _Task, states: dict | None, now: float, vanish_s: float) -> dict | None:
    """One look at one task: its end (written to status.json), or None while it may still run."""
    st = _own_status(t)
    if st and st.get("status") == "running":
        t.started, t.running, st = True, st, None
    if st and st["ok"]:
        return st
    if states is None:  # squeue failed this time: conclude nothing
        return None
    state, reason = states.get(t.job.job_id) or (_sacct_state(t.job), "")
    if state in slurm.ACTIVE:
        t.started |= state != "PENDING"
        t.gone_polls, t.gone_since = 0, None
        return None
    log = t.job.stderr() or ""
    t.started |= bool(log)
    if state:  # Slurm says it ended; its status.json may lag a little behind on a shared file system
        t.ended_since = t.ended_since or now
        if st is None and not t.job.paths.result_pickle.exists() and now - t.ended_since < STATUS_LAG_S \
                and not slurm.name_end(state, log):
            return None
        return _ended(t, st, state, reason, log)
    t.gone_polls += 1
    t.gone_since = t.gone_since or now
    if st is not None:  # it wrote its end, and Slurm has forgotten it since
        return _ended(t, st, "", "", log)
    if not t.started and t.gone_polls >= 2:
        return _record(t, None, "cancelled", "left Slurm's queue before it started; Slurm keeps no record of why "
                       "(no accounting: sacct has nothing), and a pending task leaves the queue when cancelled")
    if now - t.gone_since >= vanish_s:
        return _record(t, None, "vanished", f"Slurm no longer knows task {t.job.job_id} (not in squeue, nothing "
                       f"in sacct) and it wrote no end within {vanish_s:.0f} s")
    return None


def _wait_slurm(tasks: list[_Task], vanish_s: float, ended) -> None:
    """Poll squeue until every task has ended, calling `ended(task, status)` for each as it does."""
    slurm.quiet_submitit()
    open_ = {t.job.job_id: t for t in tasks}
    pause = 1.0
    while open_:
        states = slurm.queue(list(open_))
        now = time.monotonic()
        for job_id, t in list(open_.items()):
            st = _slurm_end(t, states, now, vanish_s)
            if st is not None:
                del open_[job_id]
                ended(t, st)
        if open_:
            time.sleep(pause)
            pause = min(5.0, pause * 1.2)  # a long sweep asks the controller every 5 s at most


def _wait_local(tasks: list[_Task], ended) -> None:
    for t in tasks:
        try:
            st = t.job.result()
        except Exception as e:  # the job process itself died
            st = _own_status(t)
            error = f"job {t.job.job_id} died: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            st = _record(t, st, "failed", error)
        ended(t, st)


@dataclasses.dataclass
class SweepResult:
    out: Path
    finished: list[Point]
    skipped: list[Point]
    failed: list[tuple[Point, dict]]  # with its status: how it ended and why


def merge(out: Path, pts: list[Point]) -> Path:
    """Rebuild <out>/results.jsonl from the points' own logs (the points' files are the truth): each point's
    latest execution (a point run again keeps its earlier executions in its own log only)."""
    lines = []
    for p in pts:
        for row in latest(read_rows(p.dir / "results.jsonl"))[0]:
            row["sweep_point"] = p.slug
            lines.append(json.dumps(row))
    tmp = out / ".results.jsonl.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, out / "results.jsonl")
    return out / "results.jsonl"


def _plan(notebook: str, grid_specs: list[str], out: Path, preset, overrides, nb_dir, p_dir):
    """-> (name, path, grid, fixed parameters, points), every point checked by the notebook's own validate."""
    available = nbs.discover(nb_dir)
    [name] = nbs.resolve([notebook], available)
    path = available[name]
    schema = schema_for(name, path)
    grid = parse_grid(grid_specs, schema)
    fixed = nbs.collect(name, path, preset=preset, overrides=overrides, p_dir=p_dir)
    overlap = set(fixed) & set(grid)
    if overlap:
        raise SweepError(f"{', '.join(sorted(overlap))} is both swept (--grid) and fixed (-p/--params)")
    pts = points(grid, out)
    errors = []
    for p in pts:
        try:
            validate({**fixed, **p.params}, schema)
        except ParameterError as e:
            errors.append(f"{name}: {e}")
    if errors:
        raise ParameterError("\n".join(sorted(set(errors))))
    return name, path, grid, fixed, pts


def sweep(notebook: str, grid_specs: list[str], *, out: Path, executor: str = "local",
          preset: str | None = None, overrides: dict | list[str] | None = None, max_parallel: int = 1,
          timeout_min: int = 60, slurm_partition: str | None = None, gpus_per_node: int | None = None,
          cpus_per_task: int | None = None, mem_gb: float | None = None, nb_dir: Path | None = None,
          p_dir: Path | None = None, progress: bool = True, vanish_s: float = VANISH_S) -> SweepResult:
    """Plan and check every point (Slurm too checks the job), then submit the unfinished ones and wait for them."""
    from tqdm.auto import tqdm

    if max_parallel < 1:
        raise SweepError("--max-parallel must be >= 1")
    out = Path(out).resolve()
    name, path, grid, fixed, pts = _plan(notebook, grid_specs, out, preset, overrides, nb_dir, p_dir)
    ex = make_executor(executor, out / "submitit", name=f"perflab-{name}", timeout_min=timeout_min,
                       max_parallel=max_parallel, slurm_partition=slurm_partition,
                       gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task, mem_gb=mem_gb)
    todo = [p for p in pts if not (status(p) or {}).get("ok")]
    if executor == "slurm" and todo:
        _refused_by_slurm(ex, out / "submitit", len(todo))
    _check_spec(out, {"notebook": name, "grid": grid, "fixed": fixed, "executor": executor})
    skipped = [p for p in pts if p not in todo]
    finished, failed = [], []
    bar = tqdm(total=len(pts), initial=len(skipped), desc=f"sweep {name}", unit="point", disable=not progress)

    def ended(t: _Task, st: dict) -> None:
        if st.get("ok"):
            finished.append(t.point)
        else:
            failed.append((t.point, st))
        bar.update(1)

    cwd = os.getcwd()  # relative paths given as parameters resolve from here, wherever the job runs
    # local: waves of max_parallel (each point is a whole notebook; on a small box, parallel points
    # would time each other); slurm: one array job, throttled by slurm_array_parallelism.
    wave = len(todo) if executor == "slurm" else max_parallel
    for start in range(0, len(todo), wave or 1):
        chunk = todo[start:start + wave]
        for p in chunk:
            p.dir.mkdir(parents=True, exist_ok=True)
        params = [{**fixed, **p.params} for p in chunk]
        jobs = _submit(ex, [(str(path), name, pp, str(p.dir), cwd) for p, pp in zip(chunk, params)])
        tasks = [_Task(p, job, pp, name) for p, job, pp in zip(chunk, jobs, params)]
        if executor == "slurm":
            _wait_slurm(tasks, vanish_s, ended)
        else:
            _wait_local(tasks, ended)
    bar.close()
    merge(out, pts)
    return SweepResult(out=out, finished=finished, skipped=skipped, failed=failed)
