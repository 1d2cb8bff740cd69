"""`perflab sweep`: one papermill execution per point of a parameter grid, submitted through submitit
(Slurm on a cluster, its local executor here), resumable.

    perflab sweep 03_eval --grid batch=128,256,512 --grid mode=head,tail --executor local --out outputs/sweeps/eval

Layout of the sweep folder:
    sweep.json                 what was asked (notebook, grid, fixed parameters): a re-run must ask the same
    points/<slug>/             one folder per point: the executed notebook, its results.jsonl, status.json
    results.jsonl              every point's rows merged (rebuilt from the points after each sweep)
    submitit/                  submitit's job files and logs
A point is finished when its status.json says ok; the job itself writes it, so a sweep interrupted
at any moment keeps every finished point. Re-running the same command skips finished points and
retries the others.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from . import notebooks as nbs
from .params import ParameterError, parse_assignment, split_assignment, validate
from .results import latest, read_rows
from .studies import schema_for


class SweepError(ValueError):
    """A bad grid or a sweep folder that holds a different sweep: refused before anything is submitted."""


@dataclasses.dataclass
class Point:
    params: dict      # the swept values of this point
    dir: Path

    @property
    def slug(self) -> str:
        return self.dir.name


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


def _slug(params: dict) -> str:
    text = "__".join(f"{k}-{v}" for k, v in params.items())
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:150]


def points(grid: dict[str, list], out: Path) -> list[Point]:
    """The grid's points, in the order the keys and values were given."""
    keys = list(grid)
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*grid.values())]
    return [Point(params=c, dir=out / "points" / _slug(c)) for c in combos]


def read_status(point_dir: Path) -> dict | None:
    """A point's status.json, or None when it has none or it cannot be read (a point killed while writing it,
    a disk error): such a point is run again, like an unfinished one."""
    f = Path(point_dir) / "status.json"
    try:
        st = json.loads(f.read_text())
    except (OSError, ValueError):  # missing, unreadable, not JSON (UnicodeDecodeError is a ValueError)
        return None
    return st if isinstance(st, dict) else None


def status(point: Point) -> dict | None:
    return read_status(point.dir)


def run_point(nb_path: str, name: str, params: dict, point_dir: str, user_cwd: str | None = None) -> dict:
    """Execute one point (runs inside the submitit job) and record its status.json atomically."""
    d = Path(point_dir)
    o = nbs.execute(name, Path(nb_path), params, d, progress=False, user_cwd=user_cwd)
    st = {"ok": o.ok, "status": o.status, "seconds": round(o.seconds, 2), "cell": o.cell, "error": o.error,
          "run_id": o.run_id, "params": params, "host": os.uname().nodename, "time": time.time()}
    tmp = d / ".status.json.tmp"
    tmp.write_text(json.dumps(st))
    os.replace(tmp, d / "status.json")
    return st


def make_executor(kind: str, folder: Path, *, name: str, timeout_min: int, max_parallel: int,
                  slurm_partition: str | None = None, gpus_per_node: int | None = None,
                  cpus_per_task: int | None = None):
    """A submitit executor: 'slurm' submits one array job; 'local' runs points as local subprocesses."""
    import submitit

    if kind not in ("local", "slurm"):
        raise SweepError(f"--executor must be local or slurm, got {kind!r}")
    try:
        ex = submitit.AutoExecutor(folder=str(folder), cluster=kind)
    except RuntimeError as e:  # e.g. no srun on PATH: not a Slurm host
        raise SweepError(f"--executor {kind} is not usable here: {e}") from None
    opts: dict[str, Any] = {"name": name, "timeout_min": timeout_min}
    if gpus_per_node is not None:
        opts["gpus_per_node"] = gpus_per_node
    if cpus_per_task is not None:
        opts["cpus_per_task"] = cpus_per_task
    if kind == "slurm":
        opts["slurm_array_parallelism"] = max_parallel
        if slurm_partition:
            opts["slurm_partition"] = slurm_partition
    ex.update_parameters(**opts)
    return ex


@dataclasses.dataclass
class SweepResult:
    out: Path
    finished: list[Point]
    skipped: list[Point]
    failed: list[tuple[Point, str]]


def _check_spec(out: Path, spec: dict) -> None:
    f = out / "sweep.json"
    if f.is_file():
        old = json.loads(f.read_text())
        if {k: old.get(k) for k in ("notebook", "grid", "fixed")} != {k: spec[k] for k in ("notebook", "grid", "fixed")}:
            raise SweepError(f"{out} holds a different sweep ({old.get('notebook')}, grid {old.get('grid')}, "
                             f"fixed {old.get('fixed')}): use another --out, or the same arguments to resume it")
    out.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(spec, indent=1))


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


def sweep(notebook: str, grid_specs: list[str], *, out: Path, executor: str = "local",
          preset: str | None = None, overrides: dict | list[str] | None = None, max_parallel: int = 1,
          timeout_min: int = 60, slurm_partition: str | None = None, gpus_per_node: int | None = None,
          cpus_per_task: int | None = None, nb_dir: Path | None = None, p_dir: Path | None = None,
          progress: bool = True) -> SweepResult:
    """Plan and check every point, then submit the unfinished ones and wait for them."""
    from tqdm.auto import tqdm

    if max_parallel < 1:
        raise SweepError("--max-parallel must be >= 1")
    available = nbs.discover(nb_dir)
    [name] = nbs.resolve([notebook], available)
    path = available[name]
    schema = schema_for(name, path)
    grid = parse_grid(grid_specs, schema)
    fixed = nbs.collect(name, path, preset=preset, overrides=overrides, p_dir=p_dir)
    overlap = set(fixed) & set(grid)
    if overlap:
        raise SweepError(f"{', '.join(sorted(overlap))} is both swept (--grid) and fixed (-p/--params)")
    out = Path(out).resolve()
    pts = points(grid, out)
    errors = []
    for p in pts:  # every point checked by the notebook's own validate before anything is submitted
        try:
            validate({**fixed, **p.params}, schema)
        except ParameterError as e:
            errors.append(f"{name}: {e}")
    if errors:
        raise ParameterError("\n".join(sorted(set(errors))))
    ex = make_executor(executor, out / "submitit", name=f"perflab-{name}", timeout_min=timeout_min,
                       max_parallel=max_parallel, slurm_partition=slurm_partition,
                       gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task)
    _check_spec(out, {"notebook": name, "grid": grid, "fixed": fixed, "executor": executor})
    todo = [p for p in pts if not (status(p) or {}).get("ok")]
    skipped = [p for p in pts if p not in todo]
    finished, failed = [], []
    bar = tqdm(total=len(pts), initial=len(skipped), desc=f"sweep {name}", unit="point", disable=not progress)
    cwd = os.getcwd()  # relative paths given as parameters resolve from here, wherever the job runs
    args = [(str(path), name, {**fixed, **p.params}, str(p.dir), cwd) for p in todo]
    # local: waves of max_parallel (each point is a whole notebook; on a small box, parallel points
    # would time each other); slurm: one array job, throttled by slurm_array_parallelism.
    wave = len(todo) if executor == "slurm" else max_parallel
    for start in range(0, len(todo), wave or 1):
        chunk = list(zip(todo[start:start + wave], args[start:start + wave]))
        for p, _ in chunk:
            p.dir.mkdir(parents=True, exist_ok=True)
        jobs = ex.map_array(run_point, *zip(*(a for _, a in chunk))) if chunk else []
        for (p, _), job in zip(chunk, jobs):
            try:
                st = job.result()
                if st["ok"]:
                    finished.append(p)
                else:
                    failed.append((p, st["error"]))
            except Exception as e:  # the job itself died (timeout, pre-emption, OOM kill)
                failed.append((p, f"job {job.job_id} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"))
            bar.update(1)
    bar.close()
    merge(out, pts)
    return SweepResult(out=out, finished=finished, skipped=skipped, failed=failed)


def swept_parameters(out: Path) -> dict[str, list]:
    """The grid of the sweep in `out` ({} when `out` is not a sweep folder)."""
    f = Path(out) / "sweep.json"
    return json.loads(f.read_text())["grid"] if f.is_file() else {}
