"""An append-only results log (JSON Lines), one row per fact a study establishes.

    log = ResultsLog(run_dir() / "results.jsonl", study="03_eval", params=cfg)
    log.measurement(m, metric="time per chunk", impl="optimized")   # a Measurement: median, IQR, p20/p80
    log.value("ms per candidate", 0.41, unit="ms", impl="optimized")
    log.check("engine equals reference", passed=True)
    log.claim("recompile per batch size", claimed="20-30 s per new batch size",
              measured="0 recompiles after warm-up", verdict="fixed")
    log.table()   # a pandas DataFrame of every row

Every row carries the study, its kind, a `run_id` (one per execution of a study: `perflab run` hands its id to
the notebook through $PERFLAB_RUN_ID, so the runner's status rows and the notebook's rows share it; readers such
as `perflab report` show one execution and never mix two), the parameters of the run and the environment
fingerprint (torch, CUDA, device, host, git commit, time). Rows are written with one `write` on a file opened for
appending and fsync'd, so a crash can at worst leave one partial last line: readers skip it (and count it in
`.skipped`), and the next append starts on a fresh line. Earlier rows are never lost.

The writers return the row written as a `Row` (a dict whose repr is one line), so a notebook cell that ends with
`run.log.value(...)` shows `<value row: metric=..., value=1.68>` (floats to three significant figures) rather than
the whole row with its parameters and environment.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import uuid
import warnings
from pathlib import Path
from typing import Any

import torch

from .env import fingerprint
from .judge import VERDICTS

KINDS = ("measurement", "value", "check", "claim", "run", "note", "diagnosis")
# how a sweep point's job ended when its notebook did not end it (perflab.runner.slurm names them from Slurm's word)
JOB_ENDS = ("terminated", "cancelled", "preempted", "timed out", "out of memory", "node failed", "vanished")
RUN_STATUSES = ("started", "ok", "failed", "interrupted", *JOB_ENDS)  # a "run" row: how one execution ended


def new_run_id() -> str:
    """A fresh execution id that sorts by start time and names a folder: '20261123-091743-3fa2'."""
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]


class Row(dict):
    """A row as written: a plain dict with a one-line repr (the kind and its main fields, no environment)."""
    SHOWN = ("study", "metric", "value", "unit", "name", "passed", "claim", "verdict", "label", "sub_label",
             "impl", "median_s", "status", "text")

    def __repr__(self) -> str:
        from .formatting import sig

        shown = ", ".join(f"{k}={sig(v) if isinstance(v, float) else repr(v)}" for k in self.SHOWN
                          if (v := self.get(k)) not in (None, ""))
        return f"<{self.get('kind')} row: {shown}>"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython would otherwise pretty-print it as a dict
        p.text(repr(self))


def _jsonable(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {k: _jsonable(x) for k, x in dataclasses.asdict(v).items()}
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:  # numpy / torch scalars
        return _jsonable(v.item())
    return str(v)


class ResultsLog:
    """Append-only JSON Lines log of a study's results. See the module doc for the row kinds."""

    def __init__(self, path: str | os.PathLike, *, study: str = "", params: Any = None,
                 device: Any = None, stamp: dict | None = None, run_id: str | None = None):
        self.path = Path(path)
        self.study = study
        self.params = _jsonable(params) if params is not None else {}
        self.env = stamp if stamp is not None else fingerprint(device)
        self.run_id = run_id or new_run_id()  # one execution of a study: reports show a study's latest
        self.params_set: dict | None = None  # set by a notebook's setup: the values it read that differ from defaults
        self.skipped = 0

    # ---- writing ----------------------------------------------------------------------------
    def append(self, kind: str, **fields: Any) -> Row:
        """Write one row; returns it. `kind` is one of KINDS."""
        if kind not in KINDS:
            raise ValueError(f"unknown row kind {kind!r}; expected one of {KINDS}")
        if kind == "run" and fields.get("status") not in RUN_STATUSES:
            raise ValueError(f"a run row's status must be one of {RUN_STATUSES}, got {fields.get('status')!r}")
        env = self.env
        if "torch_threads" in env:  # read at write time: notebooks set their thread count after opening the run
            env = {**env, "torch_threads": torch.get_num_threads()}
        row = Row({"study": fields.pop("study", self.study), "kind": kind, **_jsonable(fields),
                   "run_id": self.run_id, "params": self.params, "env": env})
        if self.params_set is not None:
            row["params_set"] = _jsonable(self.params_set)
        line = (json.dumps(row, allow_nan=False) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if self._ends_mid_line(fd):
                line = b"\n" + line  # a crash left a partial row: start on a fresh line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        return row

    @staticmethod
    def _ends_mid_line(fd: int) -> bool:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"

    def measurement(self, m, *, metric: str | None = None, unit: str = "s", **fields: Any) -> Row:
        """A timing: the Measurement's median and spread (seconds), with its label/sub_label/description."""
        from .bench import summary

        ts = m.task_spec
        return self.append("measurement", metric=metric or ts.label, unit=unit, label=ts.label,
                           sub_label=ts.sub_label, description=ts.description, **summary(m), **fields)

    def value(self, metric: str, value: Any, *, unit: str = "", **fields: Any) -> Row:
        """A number (or count) that is not a timing distribution: a ratio, a count, a memory peak."""
        return self.append("value", metric=metric, value=value, unit=unit, **fields)

    def check(self, name: str, passed: bool, detail: str = "", **fields: Any) -> Row:
        """A correctness check's outcome."""
        return self.append("check", name=name, passed=bool(passed), detail=detail, **fields)

    def claim(self, claim: str, *, claimed: str, measured: str, verdict: str, **fields: Any) -> Row:
        """A claim (its number as claimed: a seed report's, or yours) beside what was measured here, with a verdict
        from VERDICTS (`perflab.kit.claims.ClaimRow.to_log` gives the fields; rows written before `claimed=`
        say "seed", and `ClaimRow.from_log` reads them)."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
        return self.append("claim", claim=claim, claimed=claimed, measured=measured, verdict=verdict, **fields)

    def note(self, text: str, **fields: Any) -> Row:
        return self.append("note", text=text, **fields)

    def headline(self, text: str, **fields: Any) -> Row:
        """The study's one-line finding for the top of `perflab report` (a note marked as the headline; the
        last one an execution writes is shown). Without one the report shows the first claim's measurement."""
        return self.append("note", text=text, headline=True, **fields)

    # ---- reading ----------------------------------------------------------------------------
    def rows(self, **match: Any) -> list[dict]:
        """Every complete row (optionally those whose fields equal `match`); partial lines are skipped."""
        return [r for r in read_rows(self.path, self) if all(r.get(k) == v for k, v in match.items())]

    def table(self, **match: Any):
        """The rows as a pandas DataFrame (params and env flattened as params.* / env.* columns)."""
        return to_table(self.rows(**match))


def results_file(path: str | os.PathLike) -> Path:
    """The rows file a path names: `path` itself, or beside it `path.gz` where only that is there (committed evidence
    is kept gzipped: `results.jsonl.gz`); a folder stands for its `results.jsonl`."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.jsonl"
    gz = path.with_name(path.name + ".gz")
    return gz if not path.exists() and gz.exists() else path


def read_rows(path: str | os.PathLike, counter: ResultsLog | None = None) -> list[dict]:
    """Parse a results file (`results_file`: a gzipped one too), skipping (and counting) lines a crash left
    incomplete."""
    path = results_file(path)
    if not path.exists():
        return []
    rows, bad = [], 0
    if path.suffix == ".gz":
        import gzip

        text = gzip.decompress(path.read_bytes()).decode(errors="replace")
    else:
        text = path.read_text(errors="replace")
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
    if bad:
        warnings.warn(f"{path}: skipped {bad} incomplete line(s) (an interrupted write)", stacklevel=2)
    if counter is not None:
        counter.skipped = bad
    return rows


def executions(rows: list[dict]) -> dict[tuple, list[dict]]:
    """The log's executions in the order they started: {(study, sweep point, run id): rows}.

    Logs written before the runner shared its run id with the notebook hold status rows under an id of their
    own, with no "started" row: such a row joins the execution of the same study written just before it."""
    ids_with_rows = {r.get("run_id") for r in rows if r["kind"] != "run" or r.get("status") == "started"}
    last: dict = {}
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        where = (r.get("study"), r.get("sweep_point"))
        rid = r.get("run_id")
        if r["kind"] == "run" and rid not in ids_with_rows and where in last:
            rid = last[where]  # an old-style status row
        last[where] = rid
        out.setdefault((*where, rid), []).append(r)
    return out


def latest(rows: list[dict]) -> tuple[list[dict], int]:
    """Each study's rows from its latest execution only (per sweep point in a sweep folder).
    -> (rows kept, number of earlier executions left out)."""
    execs = executions(rows)
    last = {}
    for key in execs:  # in the order they started; a later start wins
        last[key[:2]] = key
    kept = {id(r) for key in last.values() for r in execs[key]}
    return [r for r in rows if id(r) in kept], len(execs) - len(last)


def latest_judged(rows: list[dict]) -> dict[tuple, tuple[str | None, list[dict]]]:
    """Each (study, sweep point)'s latest execution that judged claims (wrote claim rows):
    {(study, point): (run id, its rows)}. A later execution that judged none (one that failed before its claims
    cell) is shown beside it, so verdicts already computed stay in view."""
    out = {}
    for (study, point, rid), rs in executions(rows).items():  # in the order they started: a later one wins
        if any(r["kind"] == "claim" for r in rs):
            out[(study, point)] = (rid, rs)
    return out


def to_table(rows: list[dict]):
    import pandas as pd

    return pd.json_normalize(rows, max_level=1) if rows else pd.DataFrame()
