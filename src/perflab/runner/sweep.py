"""`perflab sweep`: one papermill execution per point of a parameter grid, submitted through submitit
(Slurm on a cluster, its local executor here), resumable.

    perflab sweep 03_eval --grid batch=128,256,512 --grid mode=head,tail --executor local --out outputs/sweeps/eval

Layout of the sweep folder (`perflab.runner.sweep_dir`):
    sweep.json                 what was asked (notebook, grid, fixed parameters): a re-run must ask the same
    points/<slug>/             one folder per point: the executed notebook, its results.jsonl, status.json
    results.jsonl              every point's rows merged (rebuilt from the points after each sweep)
    submitit/                  submitit's job files and logs
A point is finished when its status.json says ok; the job itself writes it, so a sweep interrupted
at any moment keeps every finished point. Re-running the same command skips finished points and
retries the others.

On Slurm, a point's job can end without its notebook ending it: cancelled, pre-empted, at its time limit, killed for
memory. The job notes the signal it received; the sweep asks Slurm (`perflab.runner.slurm`) and records the end by name.
It waits on `squeue` (and `sacct` through submitit, where the cluster keeps accounting), never on a state nobody
can give: a task Slurm no longer knows that wrote no end is recorded as vanished after `vanish_s`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from ..kit.params import ParameterError, parse_assignment, split_assignment, validate
from ..kit.results import latest, new_run_id, read_rows
from . import catalog as nbs
from . import slurm
from .schemas import schema_for
from .sweep_dir import Point, ended_now, points, record_end, status, write_status


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


# ---- waiting (Slurm: perflab.runner.slurm.wait) ----------------------------------------------------------

def _wait_local(tasks: list[slurm.Task], ended) -> None:
    for t in tasks:
        try:
            st = t.job.result()
        except Exception as e:  # the job process itself died
            error = f"job {t.job.job_id} died: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            base = status(t.point) or {"params": t.params, "job_id": t.job.job_id}
            st = record_end(t.point.dir, t.study, base, "failed", error)
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
          p_dir: Path | None = None, progress: bool = True, vanish_s: float = slurm.VANISH_S) -> SweepResult:
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

    def ended(t: slurm.Task, st: dict) -> None:
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
        tasks = [slurm.Task(p, job, pp, name) for p, job, pp in zip(chunk, jobs, params)]
        if executor == "slurm":
            slurm.wait(tasks, vanish_s, ended)
        else:
            _wait_local(tasks, ended)
    bar.close()
    merge(out, pts)
    return SweepResult(out=out, finished=finished, skipped=skipped, failed=failed)
