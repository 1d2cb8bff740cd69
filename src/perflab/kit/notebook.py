"""A notebook's run: its parameters, device, folder and results log, set up by one call in one order.

    run = setup("03_eval", globals(), EvalParams)   # the first cell after the parameters cell, in every notebook
    cfg, device = run.cfg, run.device

`setup` validates the parameters against the notebook's dataclass, named as its third argument (the same
`validate` as `perflab run`, which finds the class from this very call: `perflab.runner.schemas`), refuses a setup
that runs before the parameters cell or a parameters cell off the dataclass's defaults (`perflab.kit.params.as_run`:
either would make the run record values it did not use), sets torch's CPU
threads, picks the device, opens the run folder and its results log (stamped with the parameters and the
environment as it now is), and prints one environment line.

Where an execution writes: rows go to `<out>/results.jsonl` (appended, tagged with the execution's run id), files
(plots, profiles, weights) to `<out>/<study>/<run id>/`, a folder of its own, so no later execution (another
`perflab run`, a direct papermill run, JupyterLab) overwrites a plot that an earlier report links. `<out>` is the
`out_dir` parameter, else $PERFLAB_OUT (set by `perflab run --out`), else `outputs/local/` in the project
(`perflab.kit.paths.repo_root`: the perflab checkout, or a study folder of your own).
"""
from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import torch

from .figures import clear_labels
from .formatting import num
from .results import ResultsLog


@dataclasses.dataclass
class Run:
    """What a notebook writes into: its folder, its results log, and where its plots go."""
    study: str
    dir: Path            # <out>/<study>/<run id>/ : plots, profiles, saved weights of this execution only
    log: ResultsLog      # <out>/results.jsonl, shared by the studies of one run folder (rows carry the run id)
    cfg: Any = None      # the validated parameters
    device: torch.device | None = None

    def savefig(self, fig, name: str, **kw) -> Path | None:
        """Save a matplotlib figure as <out>/<study>/<run id>/<name>.png (this execution's own) and return the path;
        None for no figure (`claims_figure` when no claim has an interval to draw)."""
        if fig is None:
            return None
        clear_labels(fig)   # a line drawn through a label hides behind it
        path = self.dir / f"{name}.png"
        fig.savefig(path, dpi=kw.pop("dpi", 120), bbox_inches=kw.pop("bbox_inches", "tight"), **kw)
        return path


def open_run(study: str, params: Any = None, *, out_dir: str = "", device: Any = None,
             run_id: str | None = None) -> Run:
    """Open this execution's results log (in the run folder, created if missing) and its own files folder.

    The log is stamped with `params` and the environment of `device` (default: `params.device` when the
    parameters name one, else "auto"). The run id is `run_id`, else $PERFLAB_RUN_ID (`perflab run` sets it so
    that its status rows join the notebook's), else a fresh one."""
    from .paths import run_dir

    if device is None:
        device = getattr(params, "device", None) if not isinstance(params, dict) else params.get("device")
    out = run_dir(out_dir or getattr(params, "out_dir", "") or "")
    log = ResultsLog(out / "results.jsonl", study=study, params=params, device=device,
                     run_id=run_id or os.environ.get("PERFLAB_RUN_ID") or None)
    files = out / study / log.run_id
    files.mkdir(parents=True, exist_ok=True)
    return Run(study=study, dir=files, log=log, cfg=params)


def environment_line(device: torch.device) -> str:
    from .env import device_name, git_commit

    commit = git_commit()
    sha = (commit["commit"] or "no git")[:10] + (" (dirty tree)" if commit["dirty"] else "")
    return (f"{device_name(device)} ({device}) | torch {torch.__version__}"
            + (f", CUDA {torch.version.cuda}" if device.type != "cpu" and torch.version.cuda else "")
            + f" | {torch.get_num_threads()} CPU thread(s) | commit {sha}")


def setup(study: str, namespace: dict, schema: type | None = None, *, card=None) -> Run:
    """Validate, set threads, pick the device, open the run, print the environment line (module doc); `card`: the
    notebook's `perflab.kit.card.VerdictCard`, which then shows this run's device and judges in it.

    `study` is the notebook's name (its file stem: the runner's rows and the notebook's are joined by it), `schema`
    its parameters dataclass (a `perflab.kit.params.RunParams` subclass). Threads come before the device and the run,
    so the environment stamp and every timing see the thread count they ran with."""
    from .env import pick_device
    from .params import as_run

    if schema is None:
        raise TypeError(f"setup({study!r}, globals(), Params): name the notebook's parameters dataclass as the third "
                        "argument (`perflab run` reads it from this call too)")
    cfg, set_ = as_run(namespace, schema)  # refuses a setup above the parameters cell, or a cell off the defaults
    cfg, set_, scaled, scale = _time_scaled(cfg, set_)
    threads = getattr(cfg, "threads", 0)
    if threads:
        torch.set_num_threads(threads)  # small ops on a shared CPU: extra OpenMP threads mostly wait
    device = pick_device(getattr(cfg, "device", "auto"))
    run = open_run(study, cfg, device=device)
    run.log.params_set = set_  # what the report's run table shows: the values setup read, where not the defaults
    run.device = device
    print(environment_line(device))
    if scaled:
        print(scaled)
        run.log.note(scaled, time_scale=scale)
    if card is not None:
        card.attach(run)
    return run


TIME_SCALE = "PERFLAB_TIME_SCALE"


def _time_scaled(cfg, set_: dict):
    """`PERFLAB_TIME_SCALE=s` (0 < s <= 1): every timed claim's budget, `verdict_time`, times s, for a check that the
    notebook runs (make nbval sets it: its checked cells print counts and pass/fail, which no budget changes), not for
    numbers to quote. The run records the budget it ran with (as set), and says so. -> (cfg, set_, the line or '',
    the scale)"""
    raw = os.environ.get(TIME_SCALE, "").strip()
    if not raw or not hasattr(cfg, "verdict_time"):
        return cfg, set_, "", 1.0
    try:
        scale = float(raw)
    except ValueError:
        scale = math.nan
    if not 0 < scale <= 1:
        raise ValueError(f"{TIME_SCALE}={raw!r}: give a number in (0, 1], the share of each timed claim's budget "
                         "(verdict_time) to spend, or unset it")
    if scale == 1:
        return cfg, set_, "", 1.0
    t = cfg.verdict_time * scale
    line = (f"{TIME_SCALE}={raw}: every timed claim's budget {num(cfg.verdict_time)} s -> {num(t)} s (a check that "
            "the notebook runs, not numbers to quote: the verdicts decide less)")
    return dataclasses.replace(cfg, verdict_time=t), {**set_, "verdict_time": t}, line, scale
