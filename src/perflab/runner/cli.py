"""The `perflab` command: list, run, report and refresh the study notebooks.

    perflab list
    perflab new NAME [--into DIR]   (a study of your own: package, notebook, GPU preset, tests, in DIR/NAME/)
    perflab run [NAME ...] [--params PRESET] [-p key=value ...] [--out DIR]
    perflab gpu-check [NAME ...] [--params gpu-smoke] [--redo]   (on a GPU host: pytest -m gpu + notebooks + REPORT.md;
                                                                  what is already done at this commit is skipped;
                                                                  --tests-only: the GPU tests alone)
    perflab report DIR
    perflab refresh [NAME ...]
    perflab pages [RUN_DIR] [--check]   (README's headlines and docs/results.md's evidence, from a recorded refresh)
    perflab sweep NAME --grid key=v1,v2 [--grid ...] [--params PRESET] --executor local|slurm --out DIR
    perflab compare A B [--out DIR]
    perflab battery [--reps N] [--budget S] [--load N] [--short] [--simulate N] [--far N] [--out DIR]   (verdicts)
    perflab diagnose MODULE:FUNCTION [--setup MODULE:FUNCTION] [--calls N] [--device D] [--json FILE] [--figure FILE]
                                     (why a step is slow: each cause at its line, ranked by cost)

Unknown notebooks, presets and parameters, names given where there are no notebooks, and a folder perflab must
write into that is not writable are refused before anything runs, with one line (exit 2). A failing
notebook is reported with its cell and error, the others still run, and the exit status is 1. Ctrl-C stops
the command with one line (exit 130): the notebook it interrupted is recorded as interrupted, at its cell.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ..kit.params import ParameterError
from ..kit.paths import NotWritable, check_writable, notebooks_dir, project_of, repo_root
from . import catalog as nbs  # imports neither torch nor nbformat: `perflab --help` answers at once


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--notebooks", type=Path, default=None,
                   help="notebook folder (default: the project's notebooks/, or the study folder you are in)")
    p.add_argument("--kernel", default=None, help="Jupyter kernel (default: the notebook's, i.e. this Python)")
    p.add_argument("--no-progress", action="store_true", help="no per-cell progress bar")
    p.add_argument("--cell-timeout", type=int, default=None, help="seconds before a cell is stopped")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="perflab", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("list", help="notebooks and their parameters (types, defaults, help)")
    p.add_argument("names", nargs="*")
    p.add_argument("--notebooks", type=Path, default=None)

    p = sub.add_parser("new", help="write a study of your own into a new folder: package, notebook, preset, tests")
    p.add_argument("name", help="the study's name: its folder, its package (a Python identifier) and its notebook")
    p.add_argument("--into", type=Path, default=Path("."), help="where its folder goes (default: here)")
    p.add_argument("--no-execute", action="store_true",
                   help="write the files only (the notebook keeps no outputs for nbval until `perflab refresh`)")
    p.add_argument("--kernel", default=None, help="Jupyter kernel for the first execution (default: the notebook's)")

    p = sub.add_parser("run", help="execute notebooks with papermill into a run folder")
    p.add_argument("names", nargs="*", help="notebook names or unique prefixes (default: all)")
    p.add_argument("--params", dest="preset", default=None, help="preset: params/PRESET/<notebook>.yaml")
    p.add_argument("-p", dest="assign", action="append", default=[], metavar="KEY=VALUE",
                   help="override one parameter (typed like papermill's -p)")
    p.add_argument("--out", type=Path, default=None, help="run folder (default: $PERFLAB_OUT, else outputs/local)")
    p.add_argument("--params-dir", type=Path, default=None,
                   help="preset root (default: the params/ beside the notebooks)")
    p.add_argument("--no-report", action="store_true", help="do not write REPORT.md afterwards")
    _common(p)

    p = sub.add_parser("gpu-check", help="on a GPU host: pytest -m gpu, then the notebooks on a preset, one report")
    p.add_argument("names", nargs="*", help="notebook names or unique prefixes (default: all)")
    p.add_argument("--params", dest="preset", default="gpu-smoke", help="preset (default: gpu-smoke; gpu: full size)")
    p.add_argument("-p", dest="assign", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, default=None, help="default: <root>/<gpu kind>/<commit>/")
    p.add_argument("--root", type=Path, default=None, help="where the run folder goes (default: outputs/)")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds from now: no notebook starts that its estimate says would not end by then, the one "
                        "running then is stopped at its cell (cut); the per-cell limit, unless --cell-timeout, is "
                        "sized from params/gpu-smoke/ESTIMATE.md")
    p.add_argument("--no-tests", action="store_true", help="skip pytest -m gpu")
    p.add_argument("--tests-only", action="store_true",
                   help="the GPU tests alone ($PERFLAB_GPU_TESTS's part: quick, compiled or all), no notebooks")
    p.add_argument("--redo", action="store_true",
                   help="run again what already ran ok in the folder at this commit (tests and notebooks)")
    p.add_argument("--params-dir", type=Path, default=None)
    _common(p)

    p = sub.add_parser("report", help="write DIR/REPORT.md from DIR/results.jsonl")
    p.add_argument("dir", type=Path)
    p.add_argument("--all", action="store_true", help="every execution in the log, not each study's latest")

    p = sub.add_parser("refresh", help="re-execute committed notebooks in place on their defaults")
    p.add_argument("names", nargs="*")
    p.add_argument("--out", type=Path, default=None,
                   help="where their results go (default: $PERFLAB_OUT, else outputs/local)")
    _common(p)

    p = sub.add_parser("pages", help="write README.md's headlines and docs/results.md's evidence from a recorded run")
    p.add_argument("dir", type=Path, nargs="?", default=None,
                   help="the run folder of a refresh whose evidence to keep (outputs/refresh/); without it, the pages "
                        "are written from the evidence kept there")
    p.add_argument("--check", action="store_true", help="write nothing: exit 1 where a page differs from the evidence")

    p = sub.add_parser("sweep", help="one papermill run per grid point, through submitit (local or Slurm)")
    p.add_argument("name", help="the notebook to sweep")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="a swept parameter")
    p.add_argument("--params", dest="preset", default=None, help="preset for the fixed parameters")
    p.add_argument("-p", dest="assign", action="append", default=[], metavar="KEY=VALUE", help="a fixed parameter")
    p.add_argument("--executor", choices=("local", "slurm"), default="local")
    p.add_argument("--out", type=Path, required=True, help="sweep folder (re-use it to resume)")
    p.add_argument("--max-parallel", type=int, default=1, help="points running at once (default 1)")
    p.add_argument("--timeout-min", type=int, default=60, help="time limit per point, minutes (Slurm's granularity)")
    p.add_argument("--slurm-partition", default=None)
    p.add_argument("--gpus-per-node", type=int, default=None)
    p.add_argument("--cpus-per-task", type=int, default=None)
    p.add_argument("--mem-gb", type=float, default=None, help="memory per point (Slurm kills a point over it)")
    p.add_argument("--params-dir", type=Path, default=None)
    p.add_argument("--notebooks", type=Path, default=None)
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("compare", help="two result sets side by side, with ratios (Markdown + plot)")
    p.add_argument("a", type=Path, help="run folder or results.jsonl (A, the reference)")
    p.add_argument("b", type=Path, help="run folder or results.jsonl (B)")
    p.add_argument("--out", type=Path, default=None, help="write COMPARE.md and compare.png here")

    p = sub.add_parser("battery", help="how often each verdict rule is right, wrong or undecided on claims of known "
                                       "truth that behave as real code does, under a load it starts and stops; and "
                                       "at the threshold on a simulated machine")
    p.add_argument("--reps", type=int, default=6, help="verdicts per case and rule (default 6)")
    p.add_argument("--budget", type=float, default=2.0, help="seconds of wall time per verdict (default 2)")
    p.add_argument("--load", type=int, default=None, help="busy processes (default: one per CPU core)")
    p.add_argument("--short", action="store_true", help="make test's four cases only")
    p.add_argument("--rules", default="mean,median,criterion",
                   help="comma-separated, of mean, median, criterion (default: all three)")
    p.add_argument("--truth-seconds", type=float, default=10.0,
                   help="seconds of long rounds per case's truth, at the start (thresholds) and again across the "
                        "battery (scoring)")
    p.add_argument("--simulate", type=int, default=0, metavar="N",
                   help="N simulated verdicts at the threshold per simulated case (0: none; the real cases skip "
                        "with --reps 0)")
    p.add_argument("--far", type=int, default=0, metavar="N",
                   help="N simulated verdicts per case of claims 25%% and 15%% from their threshold, with "
                        "max_run_time=\"auto\" (how often each class decides, and right)")
    p.add_argument("--out", type=Path, default=None, help="where BATTERY.md and battery.jsonl go "
                                                          "(default: outputs/local/battery)")

    from .diagnose import add_parser
    add_parser(sub)
    return ap


def cmd_list(args) -> int:
    """Each notebook's parameters as its schema types them (choices spelled out), with the cell's help;
    the defaults go through the same `validate` as a run, so a notebook whose defaults it refuses says so."""
    import typing

    from ..kit.params import ParameterError, default_of, type_name, validate
    from .schemas import declared, schema_for

    found = _found(args, "no notebooks yet in {}")
    if not found:
        return 0
    bad = 0
    for name in nbs.resolve(args.names, found):
        schema = schema_for(name, found[name])
        hints, cell = typing.get_type_hints(schema), nbs.inspect(found[name])
        d = declared(found[name])  # a class named by the notebook's setup call, not one built from its cell
        print(f"{name}  ({schema.__module__}.{schema.__qualname__})" if d and d.module else name)
        for f in dataclasses.fields(schema):
            help_ = (cell.get(f.name) or {}).get("help")
            print(f"    {f.name}: {type_name(hints[f.name])} = {default_of(f)!r}" + (f"  # {help_}" if help_ else ""))
        try:
            validate({}, schema)
        except ParameterError as e:
            print(f"    DEFAULTS REFUSED: {e}")
            bad += 1
    return 1 if bad else 0


def _found(args, nothing: str) -> dict[str, Path]:
    """The notebooks where the command looks. None there: with names given, an error naming them and the folder;
    without, `nothing` (formatted with the folder) is printed and {} returned (nothing to do is no error)."""
    found = nbs.discover(args.notebooks)
    if not found:
        where = Path(args.notebooks).resolve() if args.notebooks else notebooks_dir()
        if args.names:
            raise nbs.NotebookError(f"no notebook {', '.join(map(repr, args.names))}: no notebooks in {where} (run "
                                    "the command in a study folder or a perflab checkout, or give --notebooks DIR)")
        print(nothing.format(where))
    return found


def _out(args) -> Path:
    """--out, else $PERFLAB_OUT, else outputs/local in the checkout (what `make run` reports on)."""
    import os

    if args.out or os.environ.get("PERFLAB_OUT"):
        return Path(args.out or os.environ["PERFLAB_OUT"]).resolve()
    nb_dir = getattr(args, "notebooks", None)
    root = project_of(nb_dir) if nb_dir else None  # --notebooks DIR from elsewhere: DIR's project, not the cwd's
    return ((root or repo_root()) / "outputs" / "local").resolve()


def _checked_out(args) -> Path:
    """`_out`, refused in one line (`NotWritable`) before any notebook runs where it cannot be written."""
    import os

    hint = "" if args.out else (" ($PERFLAB_OUT; give --out DIR)" if os.environ.get("PERFLAB_OUT")
                                else " (give --out DIR, or set $PERFLAB_OUT)")
    return check_writable(_out(args), "the results", hint)


def _report(out: Path) -> Path:
    from . import report

    return report.write(out)


def cmd_run(args) -> int:
    if not nbs.discover(args.notebooks):  # nothing to run is a failure here: a wrong folder, a typo
        where = Path(args.notebooks).resolve() if args.notebooks else notebooks_dir()
        if args.names:
            _found(args, "")  # raises, naming them
        print(f"perflab run: no notebooks in {where}: nothing to run (run it in a study folder or a perflab "
              "checkout, or give --notebooks DIR)", file=sys.stderr)
        return 1
    jobs = nbs.plan(args.names, preset=args.preset, overrides=args.assign, nb_dir=args.notebooks,
                    p_dir=args.params_dir)
    out = _checked_out(args)
    print(f"perflab run: {len(jobs)} notebook(s) -> {out}")
    outcomes, stop = nbs.run_all(jobs, out, preset=args.preset, p_dir=args.params_dir, kernel_name=args.kernel,
                                 progress=not args.no_progress, cell_timeout=args.cell_timeout)
    report = None if args.no_report else _report(out)
    return nbs.run_summary(outcomes, stop, jobs, out, report)


def cmd_gpu_check(args) -> int:
    from . import gpucheck

    if args.tests_only:
        if args.names or args.no_tests:
            raise nbs.NotebookError("--tests-only runs no notebooks: give no names and no --no-tests")
        return gpucheck.tests_alone(args.out, args.redo, args.root, args.deadline)
    return gpucheck.check(args.names, preset=args.preset, overrides=args.assign, nb_dir=args.notebooks,
                          p_dir=args.params_dir, out=args.out, redo=args.redo, no_tests=args.no_tests,
                          kernel_name=args.kernel, progress=not args.no_progress, cell_timeout=args.cell_timeout,
                          root=args.root, deadline=args.deadline)


def cmd_new(args) -> int:
    from . import new

    target = new.write(args.name, args.into, kernel_name=None if args.no_execute else args.kernel)
    print(new.describe(target, args.name))
    if args.no_execute:
        print(f"not executed: the notebook has no outputs yet; `perflab refresh` in {target} executes it")
        return 0
    print(f"executing {args.name}.ipynb once on its CPU defaults, so that nbval has outputs to compare "
          "(what `perflab refresh` does)", flush=True)
    o = new.execute_once(target, args.name, kernel_name=args.kernel)
    if not o.ok:
        print(f"perflab new: {o.describe()}\nthe files are written; fix the cause, then `perflab refresh` in {target}",
              file=sys.stderr)
        return 1
    print(f"    ok in {o.seconds:.1f} s\n{new.next_steps(target, args.name)}")
    return 0


def cmd_report(args) -> int:
    from . import report

    if not args.dir.is_dir():
        raise nbs.NotebookError(f"no run folder {args.dir}")
    check_writable(args.dir, "REPORT.md and the claims figures")
    print(report.write(args.dir, all_runs=args.all))
    return 0


def cmd_refresh(args) -> int:
    found = _found(args, "no notebooks to refresh in {}")
    if not found:
        return 0
    names = nbs.resolve(args.names, found)
    for folder in dict.fromkeys(found[name].parent for name in names):  # before any notebook runs
        check_writable(folder, "the refreshed notebooks (written back in place)")
    out = _checked_out(args)
    # the tree as it was before the first notebook is written back: each later notebook is stamped with it, not with
    # the dirty tree its predecessors' rewrites make
    import os

    from perflab.kit.env import git_commit

    c, before = git_commit(), os.environ.get("PERFLAB_COMMIT_AT_START")
    if c["commit"] and not before:
        os.environ["PERFLAB_COMMIT_AT_START"] = c["commit"] + ("-dirty" if c["dirty"] else "")
    try:
        return _refresh_each(args, found, names, out)
    finally:
        if before is None:
            os.environ.pop("PERFLAB_COMMIT_AT_START", None)


def _refresh_each(args, found, names, out) -> int:
    failed = 0
    for name in names:
        print(f"refresh {name}", flush=True)
        try:
            o = nbs.refresh(name, found[name], out_dir=out, kernel_name=args.kernel,
                            progress=not args.no_progress, cell_timeout=args.cell_timeout)
        except nbs.Interrupted as e:
            print(f"\nperflab refresh: {e.outcome.describe()}; {found[name]} is unchanged", file=sys.stderr)
            return 130
        print("   ", o.describe() if not o.ok else f"{name}: rewritten in place ({o.seconds:.1f} s)", flush=True)
        failed += not o.ok
    return 1 if failed else 0


def cmd_pages(args) -> int:
    from . import pages

    root = repo_root()
    try:
        if args.dir is not None and not args.check:
            print(f"kept {pages.keep(args.dir, root).relative_to(root)}: each study's latest judged execution of {args.dir}")
        differ = pages.write(root, check=args.check)
    except pages.PagesError as e:
        raise nbs.NotebookError(str(e)) from None
    if args.check:
        if differ:
            print("perflab pages --check: not what the kept evidence says: " + "; ".join(differ)
                  + " (write them with `perflab pages`)", file=sys.stderr)
            return 1
        print("perflab pages --check: README.md and docs/results.md say what outputs/refresh/ holds")
        return 0
    print("written: " + ("; ".join(differ) if differ else "nothing changed"))
    return 0


def cmd_sweep(args) -> int:
    from . import sweep as sw

    check_writable(args.out, "the sweep's points, results and report")
    res = sw.sweep(args.name, args.grid, out=args.out, executor=args.executor, preset=args.preset,
                   overrides=args.assign, max_parallel=args.max_parallel,
                   timeout_min=args.timeout_min, slurm_partition=args.slurm_partition,
                   gpus_per_node=args.gpus_per_node, cpus_per_task=args.cpus_per_task, mem_gb=args.mem_gb,
                   nb_dir=args.notebooks,
                   p_dir=args.params_dir, progress=not args.no_progress)
    print(f"sweep {res.out}: {len(res.finished)} finished, {len(res.skipped)} already done (skipped), "
          f"{len(res.failed)} failed")
    for p, st in res.failed:
        print(f"  {(st.get('status') or 'failed').upper()} {p.slug}: {st.get('error')} (re-run the same command "
              "to retry)", file=sys.stderr)
    print("report:", _report(res.out))
    return 1 if res.failed else 0


def cmd_compare(args) -> int:
    from . import compare as cmp
    from .report import folder_label

    a_rows, b_rows = cmp.load(args.a), cmp.load(args.b)
    a, b = folder_label(args.a), folder_label(args.b)   # in the project, or the name: never a path of this machine
    claims = cmp.load_claims(args.a), cmp.load_claims(args.b)
    c = cmp.compare(a_rows, b_rows)
    figures = None
    if args.out:
        check_writable(args.out, "COMPARE.md and its figures")
        args.out.mkdir(parents=True, exist_ok=True)
        figures = cmp.claims_figures(*claims, args.out, a, b)  # one per study, A and B
    md = cmp.to_markdown(c, a_rows, b_rows, a, b, claims=claims, figures=figures)
    print(md)
    if args.out:
        (args.out / "COMPARE.md").write_text(md + ("\n![B / A](compare.png)\n" if c.paired else ""))
        cmp.plot(c, args.out / "compare.png", a, b)
        print("written:", args.out / "COMPARE.md")
    return 0


def cmd_battery(args) -> int:
    """Run the battery of claims of known truth (perflab.runner.battery, real timings under a load it starts) and the
    simulated one at the threshold (perflab.runner.simulate), and write their tables."""
    import os

    from . import battery as bt

    rules = tuple(r.strip() for r in args.rules.split(",") if r.strip())
    bad = [r for r in rules if r not in bt.RULES]
    if bad or not rules:
        raise ParameterError(f"--rules: unknown rule(s) {bad or rules}; rules: {', '.join(bt.RULES)}")
    if args.reps < 0 or not args.budget > 0 or (args.load is not None and args.load < 0) or args.simulate < 0 \
            or not args.truth_seconds > 0:
        raise ParameterError(f"need --reps >= 0, --budget > 0, --load >= 0, --simulate >= 0 and --truth-seconds > 0, "
                             f"got {args.reps}, {args.budget}, {args.load}, {args.simulate}, {args.truth_seconds}")
    if args.far < 0:
        raise ParameterError(f"need --far >= 0, got {args.far}")
    if not args.reps and not args.simulate and not args.far:
        raise ParameterError("nothing to run: --reps 0 and no --simulate or --far")
    out = args.out or (repo_root() / "outputs" / "local" / "battery")
    out.mkdir(parents=True, exist_ok=True)
    if not os.access(out, os.W_OK):
        raise ParameterError(f"--out: {out} is not writable")
    load = (os.cpu_count() or 1) if args.load is None else args.load
    parts = []
    if args.reps:
        parts.append(_battery_real(args, bt, rules, load, out))
    if args.simulate:
        parts.append(_battery_simulated(args, out))
    if args.far:
        parts.append(_battery_far(args, out))
    md = "\n\n".join(parts) + "\n"
    (out / "BATTERY.md").write_text(md)
    print(md)
    print("written:", out / "BATTERY.md")
    return 0


def _battery_real(args, bt, rules, load: int, out: Path) -> str:
    import json

    from ..kit.env import fingerprint

    cases = bt.SHORT if args.short else bt.CASES
    print(f"{len(cases)} cases x {args.reps} reps x {len(rules)} rules, {args.budget:g} s per verdict, "
          f"{load} busy processes; truths first ({args.truth_seconds:g} s each)", flush=True)
    rows, partial = [], out / "battery.partial.jsonl"
    with bt.background_load(load), open(partial, "w") as f:
        truths = bt.measure_truths(cases, args.truth_seconds,
                                   progress=lambda name, v: print(f"truth {v:10.4g}  {name}", flush=True))
        (out / "truths.json").write_text(json.dumps({"start": truths}, indent=1) + "\n")

        def progress(r):    # scored against the truth at the start until the battery's own is known
            f.write(json.dumps({**r, "load": load}) + "\n")
            f.flush()
            print(f"{r['rule']:9s} {r['verdict']:14s} {r['outcome']:9s} {r['seconds']:.2f} s  {r['case']}", flush=True)
        rows = bt.run_battery(cases, truths, reps=args.reps, budget=args.budget, rules=rules,
                              truth_seconds=args.truth_seconds, progress=progress)
    across = {r["case"]: r["truth"] for r in rows}
    (out / "truths.json").write_text(json.dumps({"start": truths, "across": across}, indent=1) + "\n")
    with open(out / "battery.jsonl", "a") as f:
        f.writelines(json.dumps({**r, "load": load}) + "\n" for r in rows)
    partial.unlink()
    moved = [(n, truths[n], across[n]) for n in across if abs(across[n] / truths[n] - 1) > 0.05]
    env = fingerprint("cpu")
    return (f"# Verdict rules on claims of known truth\n\n{len(rows)} verdicts: {len(cases)} cases x {args.reps} reps "
            f"x the rules that apply, {args.budget:g} s of wall time per verdict, {load} busy processes started by "
            f"the battery (plus whatever else ran), on {env.get('device_name', 'this CPU')}, torch {env.get('torch')}, "
            f"commit {str(env.get('commit') or '')[:10]}. Truths (truths.json), under the same load: "
            f"{args.truth_seconds:g} s of long rounds each at the start, which set the relative cases' thresholds, "
            f"and {args.truth_seconds:g} s more across the battery, in slices between its repetitions, which every "
            f"verdict is scored against (the load of the time the verdicts ran).\n\n"
            f"{bt.markdown(bt.summary_table(rows))}\n\nBy kind of case:\n\n"
            f"{bt.markdown(bt.summary_table(rows, by='group'))}\n\n"
            + ("Truths that moved by more than 5% between the start and the battery: "
               + "; ".join(f"{n}: {a:.4g} -> {b:.4g}" for n, a, b in moved) + "." if moved else
               "No truth moved by more than 5% between the start and the battery."))


def _battery_simulated(args, out: Path) -> str:
    import json

    from . import simulate as sim

    rows = []
    with open(out / "simulated.jsonl", "a") as f:
        for case in sim.SIM_CASES:
            truth = sim.case_truth(case)
            got = sim.at_threshold(case, args.simulate, budget=args.budget, value=truth)
            for r in got:
                f.write(json.dumps(r) + "\n")
            rows += got
            w = sum(r["wrong"] for r in got)
            print(f"simulated {case.name}: truth {truth:.4g}, {w} wrong of {len(got)}", flush=True)
    return (f"# At the threshold, simulated\n\n{len(rows)} verdicts of the kit's rule on a simulated machine "
            f"(perflab.runner.simulate), {args.simulate} per case, the threshold a hair above or below the truth "
            f"(every decided verdict right or wrong), {args.budget:g} s of simulated time each.\n\n"
            f"{sim.markdown(sim.summary(rows))}")


def _battery_far(args, out: Path) -> str:
    import json

    from . import simulate as sim

    tables = []
    with open(out / "far.jsonl", "a") as f:
        for distance in (0.25, 0.15):
            rows = []
            for case in sim.FAR_CASES:
                got = sim.far(case, args.far, distance=distance, budget="auto", value=sim.case_truth(case))
                for r in got:
                    f.write(json.dumps(r) + "\n")
                rows += got
                print(f"far {distance:.0%} {case.name}: {sum(r['right'] for r in got)} right, "
                      f"{sum(r['wrong'] for r in got)} wrong of {len(got)}", flush=True)
            tables.append(f"## {distance:.0%} from the threshold\n\n{sim.markdown(sim.far_summary(rows))}")
    return (f"# Away from the threshold, simulated\n\n{args.far} verdicts per case and distance of the kit's rule "
            f"with max_run_time=\"auto\" (2 s, then up to 8 s where the spread says more would decide), the "
            f"threshold below the truth (\"holds\" is right) and above it (\"does not hold\" is right) in turn.\n\n"
            + "\n\n".join(tables))


def cmd_diagnose(args) -> int:
    from . import diagnose

    return diagnose.run(args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cmds = {"list": cmd_list, "run": cmd_run, "gpu-check": cmd_gpu_check, "report": cmd_report, "refresh": cmd_refresh,
            "sweep": cmd_sweep, "compare": cmd_compare, "new": cmd_new, "battery": cmd_battery, "pages": cmd_pages,
            "diagnose": cmd_diagnose}
    from .diagnose import DiagnoseError
    from .gpucheck import NoGPU
    from .sweep import SweepError

    try:
        return cmds[args.cmd](args)
    except (nbs.NotebookError, ParameterError, SweepError, FileNotFoundError, NoGPU, NotWritable, DiagnoseError) as e:
        print(f"perflab {args.cmd}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 (diagnose's step or setup raised: its traceback from the user's frame)
        if type(e).__name__ != "StepError":
            raise
        print(f"perflab {args.cmd}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a notebook's execution (those are recorded where they stop)
        hint = "; finished points are kept: run the same command again to resume" if args.cmd == "sweep" else ""
        print(f"\nperflab {args.cmd}: interrupted (Ctrl-C){hint}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
