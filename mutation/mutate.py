"""Mutation testing (issue 39, "tests with teeth"): mutmut over one module at a time, its fast tests only.

    python mutation/mutate.py judge verdicts           # run these modules (MODULES below), then write the report
    python mutation/mutate.py --report                 # only rewrite the report from the runs kept
    python mutation/mutate.py --until 15:40 all        # start no module after 15:40 UTC

Each module runs in its own folder, .mutation/<module>/ (ignored): mutmut copies src/ and tests/ into its mutants/
there, so the checkout and anyone testing in it are untouched. A module's run keeps its results: run it again after
adding tests and only its survivors are tried again (mutmut keeps what was killed). Results go to
outputs/mutation/<short commit>/: <module>.json.gz (every mutant's status, a survivor's diff; gzipped: the tree travels
to GPU hosts), REPORT.md (the table and the notes) and NOT-KILLED.md.gz (each mutant not killed, with its diff), which
reads mutation/equivalent.toml (mutant name -> why no test can tell it from the original).
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
FAST = "not slow and not gpu and not wheel and not slurm and not browser"

# module -> (the file mutated, the fast tests that exercise it). mutmut runs, per mutant, only the tests that
# called the mutated function in a clean run.
MODULES = {
    "judge": ("src/perflab/kit/judge.py", ["tests/kit/test_judge.py", "tests/kit/test_verdicts.py", "tests/kit/test_claims.py",
                                           "tests/kit/test_decide.py", "tests/kit/test_intervals.py"]),
    "verdicts": ("src/perflab/kit/verdicts.py", ["tests/kit/test_verdicts.py", "tests/kit/test_decide.py", "tests/kit/test_claims.py"]),
    "claims": ("src/perflab/kit/claims.py", ["tests/kit/test_claims.py", "tests/kit/test_verdicts.py"]),
    "syncs": ("src/perflab/kit/syncs.py", ["tests/kit/test_syncs.py", "tests/kit/test_syncs_counter.py",
                                           "tests/kit/test_host_transfers.py"]),
    "launches": ("src/perflab/kit/launches.py", ["tests/kit/test_launches.py"]),
    "bench": ("src/perflab/kit/bench.py", ["tests/kit/test_bench.py", "tests/kit/test_results.py"]),
    # deciding's rounds come from rounds.py (tests/kit/test_rounds.py tests that module, not this one)
    "deciding": ("src/perflab/kit/deciding.py", ["tests/kit/test_decide.py", "tests/kit/test_intervals.py",
                                                 "tests/kit/test_verdicts.py"]),
    "latentwire.optimized": ("src/perflab/latentwire/optimized.py", ["tests/latentwire/test_latentwire_trainers.py",
                                                                     "tests/latentwire/test_latentwire_losses.py",
                                                                     "tests/latentwire/test_latentwire_timing.py"]),
    "latentwire.checks": ("src/perflab/latentwire/checks.py", ["tests/latentwire/test_latentwire_checks_fail.py",
                                                               "tests/kit/test_host_transfers.py"]),
    # the warning's frame: mutmut's trampolines (another package) stand between the user's line and fit
    "probe1d.optimized": ("src/perflab/probe1d/optimized.py", ["tests/probe1d/test_probe1d_fits_vs_reference.py",
                                                               "tests/probe1d/test_probe1d_kernels.py",
                                                               "tests/probe1d/test_probe1d_syncs.py", "--deselect",
                                                               "tests/probe1d/test_probe1d_fits_vs_reference.py::"
                                                               "test_the_fallback_warning_names_the_users_line_that_called_fit"]),
    "probe1d.checks": ("src/perflab/probe1d/checks.py", ["tests/probe1d/test_probe1d_checks_fail.py",
                                                         "tests/probe1d/test_probe1d_claims.py"]),
    "vae.optimized": ("src/perflab/vae/optimized.py", ["tests/vae/test_vae_train.py", "tests/vae/test_vae_captured.py"]),
    # vae/optimized.py is a wrapper: its step and epoch are train.py's run_epoch under the optimized StepConfig
    # torch.compile(fullgraph=True) cannot trace mutmut's trampolines (dynamo's Unsupported): the tests that capture
    # train.py's step whole fail on every mutant and on none (mutmut's stats run stopped, "runner returned 1"); they
    # run in make test, not here
    "vae.train": ("src/perflab/vae/train.py", ["tests/vae/test_vae_train.py", "tests/vae/test_vae_train_parts.py", "--deselect",
                                               "tests/vae/test_vae_train.py::test_dynamo_captures_the_optimized_losses_in_one_graph"]),
    "vae.checks": ("src/perflab/vae/checks.py", ["tests/vae/test_vae_checks_fail.py", "tests/vae/test_vae_captured.py"]),
    # 04's optimized version is core.rollout.recycle (early_exit/optimized.py calls it); the other loops live beside it
    "prover.core.rollout": ("src/perflab/prover/core/rollout.py", ["tests/prover/test_prover_early_exit.py",
                                                                   "tests/prover/test_prover_rollout_schedules.py",
                                                                   "tests/prover/test_prover_core_engine.py"]),
    # the studies' checks: the tests that call them (all of tests/prover made every mutant's stats run slow)
    "prover.early_exit.checks": ("src/perflab/prover/early_exit/checks.py", ["tests/prover/test_prover_early_exit.py",
                                                                             "tests/prover/test_prover_early_exit_claims.py",
                                                                             "tests/prover/test_early_exit_checks_fail.py"]),
    # 03's greedy loop: its own tests and the links baseline's (which scores through it); all of tests/prover made
    # every mutant's stats run slow and ran nothing more of it. The warning's frame: as probe1d's, mutmut's
    # trampoline stands between the caller and the loop
    "prover.evaluation.optimized": ("src/perflab/prover/evaluation/optimized.py", [
        "tests/prover/test_prover_eval.py", "tests/prover/test_prover_links.py", "tests/prover/test_evaluation_oom_retry.py",
        "--deselect", "tests/prover/test_evaluation_oom_retry.py::test_the_retry_warning_names_the_line_that_called_score_candidates"]),
    "prover.evaluation.checks": ("src/perflab/prover/evaluation/checks.py", ["tests/prover/test_evaluation_checks_fail.py",
                                                                             "tests/kit/test_host_transfers.py"]),
    # 03's Prover: built by predict.py's evaluate_link_prediction (the fit and graph tests) and the search tests
    "prover.links.optimized": ("src/perflab/prover/links/optimized.py", ["tests/prover/test_prover_links_fit.py",
                                                                         "tests/prover/test_prover_graphs_param.py",
                                                                         "tests/prover/test_prover_links_speed.py",
                                                                         "tests/prover/test_link_prover_search_choice.py"]),
    "prover.links.checks": ("src/perflab/prover/links/checks.py", ["tests/prover/test_prover_links.py",
                                                                   "tests/prover/test_prover_links_fit.py",
                                                                   "tests/prover/test_link_checks_fail.py"]),
}


def short_commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def prepare(name: str) -> Path:
    """The module's folder: src, tests and pyproject.toml linked from the checkout, and mutmut's setup.cfg."""
    source, tests = MODULES[name]
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    for link in ("src", "tests", "pyproject.toml"):
        if not (work / link).exists():
            (work / link).symlink_to(ROOT / link)
    lines = ["[mutmut]", "source_paths = src/perflab", f"only_mutate = {source}", "pytest_add_cli_args_test_selection ="]
    lines += [f"    {t}" for t in tests]
    lines += ["pytest_add_cli_args =", "    -m", f"    {FAST}", "    -p", "    no:cacheprovider",
              # torch is not fork-safe once its thread pools have run: workers forked from a server that ran no test
              "process_isolation = forkserver", "use_git_change_detection = false", ""]
    (work / "setup.cfg").write_text("\n".join(lines))
    return work


def statuses(work: Path, source: str) -> dict[str, int | None]:
    meta = work / "mutants" / (source + ".meta")
    return json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}


TIMEOUT = (36, -24, 24, 152, 255)  # mutmut's exit codes of a timed-out mutant (SIGXCPU, its wall-clock limit too)


def run_module(name: str, children: int, out: Path, retry_timeouts: bool = False, again_only: bool = False) -> None:
    source, _ = MODULES[name]
    work = prepare(name)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    mutmut = [sys.executable, "-m", "mutmut"]
    # A later run tries the survivors again by name (new tests), then runs whatever has no result yet (mutants of a
    # function changed since, or of an interrupted run); mutmut keeps what was killed.
    before = statuses(work, source)
    again = [k for k, code in before.items() if code in (0, 5, 33) or (retry_timeouts and code in TIMEOUT)]
    meta = work / "mutants" / (source + ".meta")
    changed = not before or (ROOT / source).stat().st_mtime > meta.stat().st_mtime
    for names in ([again] if again else []) + [[]]:
        # the second pass only where mutants have no result: new ones, an interrupted run, or results mutmut reset
        # (a changed test selection resets them all)
        if not names and (again_only or not changed and None not in statuses(work, source).values()):
            break
        cmd = ["nice", "-n", "19", *mutmut, "run", "--max-children", str(children), *names]
        what = f"again, {len(names)} survivors" if names else "mutants without a result"
        print(f"== {name}: mutmut run ({what}), log in {work / 'mutmut.log'}", flush=True)
        with open(work / "mutmut.log", "a") as log:  # mutmut draws a spinner: kept out of the terminal
            subprocess.run(cmd, cwd=work, env=env, check=False, stdout=log, stderr=subprocess.STDOUT)
    save(name, work, out)


def save(name: str, work: Path, out: Path) -> None:
    from mutmut.stats import status_by_exit_code
    source, tests = MODULES[name]
    codes = statuses(work, source)
    rows = {}
    for key, code in sorted(codes.items(), key=lambda kv: _order(kv[0])):
        status = status_by_exit_code[code]
        row = {"status": status}
        rows[key] = row
    left = [k for k, r in rows.items() if r["status"] not in ("killed", "timeout")]
    for key, diff in diffs(work, source, left).items():
        rows[key]["diff"] = diff
    out.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"module": name, "source": source, "tests": tests, "fast": FAST, "commit": short_commit(),
                       "mutants": rows}, indent=1) + "\n"
    with gzip.GzipFile(out / f"{name}.json.gz", "wb", mtime=0) as z:
        z.write(data.encode())
    (out / f"{name}.json").unlink(missing_ok=True)   # an earlier run's, before the runs were kept gzipped


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], sys.argv[2:]
print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))
"""


def diffs(work: Path, source: str, names: list[str]) -> dict[str, str]:
    """Each mutant's diff against the source, as `mutmut show` prints it (one process for all)."""
    if not names:
        return {}
    out = subprocess.run([sys.executable, "-c", _DIFFS, source, *names], cwd=work, capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {n: f"(no diff: {out.stderr[-300:]})" for n in names}


def _order(key: str):
    head, _, n = key.rpartition("__mutmut_")
    return head, int(n) if n.isdigit() else 0


# mutmut's modules by the areas of the planted bugs (mutation/planted.py's AREAS), and the areas only mutmut covers
MODULE_AREAS = {"judge": "intervals", "deciding": "decision budget", "verdicts": "decision budget",
                "claims": "the claims kit", "syncs": "counters", "launches": "counters", "bench": "counters"}
OTHER_AREA = "studies' optimized code and checks"


def module_results(folder: Path) -> list[dict]:
    """The mutmut results kept in `folder` (one <module>.json.gz, or an older <module>.json, each; the planted bugs'
    and the flakes' files are not)."""
    found = {}
    for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*.json.gz")):
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        data = json.loads(text)
        if isinstance(data, dict) and "module" in data and "mutants" in data:
            found[data["module"]] = data
    return [found[k] for k in sorted(found)]


def latest_mutmut(out: Path) -> tuple[Path, list[dict]]:
    """`out`'s mutmut results, or, where it has none (a planted-bugs pass), those of the newest folder beside it that
    has them (by its REPORT.md's commit time in git, else the folder's time)."""
    here = module_results(out)
    if here:
        return out, here
    folders = [d for d in out.parent.iterdir() if d.is_dir() and d != out and module_results(d)]

    def when(d: Path) -> float:
        r = subprocess.run(["git", "log", "-1", "--format=%ct", "--", str(d)], cwd=ROOT, capture_output=True, text=True)
        return float(r.stdout.strip() or d.stat().st_mtime)
    if not folders:
        return out, []
    best = max(folders, key=when)
    return best, module_results(best)


def _rate(count: dict, total: int) -> float:
    real = total - count["equivalent"] - count["cosmetic"] - count["not checked"]
    return (count["killed"] + count["timeout"]) / real if real else 1.0


def report(out: Path) -> Path:
    eq_file = ROOT / "mutation" / "equivalent.toml"
    equivalent = tomllib.loads(eq_file.read_text()) if eq_file.exists() else {}
    source, modules = latest_mutmut(out)
    borrowed = source != out
    lines = [f"# Mutation testing: {out.relative_to(ROOT)}", "",
             "mutmut 3 (`make mutate`, `mutation/mutate.py`), one module at a time, each with its fast tests only "
             f"(`-m \"{FAST}\"`); per mutant, the tests that called the mutated function in a clean run.",
             "Timed out (a mutant that loops: the suite would hang, then fail) counts as detected. Kill rate: (killed + "
             "timed out) / (mutants - equivalent - cosmetic). Equivalent mutants and why: mutation/equivalent.toml; 'cosmetic' "
             "ones (a figure's line width, marker or font size: what no reader's number depends on) are listed there "
             "too, counted apart and not scored.", "",
             "Each module's mutants are made from its source at the commit the module was last run at (column 'at'), "
             "and run against the tests of that moment.", "",
             "'not run': mutants a run stopped before (out of time); left out of the rate, which is then of those run.", "",
             "| module | at | tests | mutants | killed | timed out | survived | no tests | equivalent | cosmetic | not run "
             "| kill rate |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    if borrowed:
        lines[2:2] = [f"mutmut was not run in this pass: its table is {source.relative_to(ROOT)}'s (every survivor's "
                      f"diff: {source.relative_to(ROOT)}/REPORT.md); the planted bugs and the flake finder below are "
                      "this pass's.", ""]
    details, by_area = [], {}
    for data in modules:
        name, rows = data["module"], data["mutants"]
        eq = equivalent.get(name, {})
        count = {s: 0 for s in ("killed", "timeout", "survived", "no tests", "equivalent", "cosmetic", "not checked",
                                "other")}
        for key, row in rows.items():
            status = row["status"]
            if status in ("survived", "no tests") and key in eq:
                kind = "cosmetic" if eq[key].startswith("cosmetic:") else "equivalent"
                count[kind] += 1
                details.append((name, key, kind, eq[key], row.get("diff", "")))
                continue
            count[status if status in count else "other"] += 1
            if status not in ("killed", "timeout", "not checked"):
                details.append((name, key, status, "", row.get("diff", "")))
        real = len(rows) - count["equivalent"] - count["cosmetic"] - count["not checked"]
        rate = _rate(count, len(rows))
        area = by_area.setdefault(MODULE_AREAS.get(name, OTHER_AREA), [0, 0, []])
        area[0] += count["killed"] + count["timeout"]
        area[1] += real
        area[2].append(name)
        tests = ", ".join(t.removeprefix("tests/") for t in data["tests"])
        lines.append(f"| {name} | {data['commit']} | {tests} | {len(rows)} | {count['killed']} | "
                     f"{count['timeout']} | {count['survived'] + count['other']} | {count['no tests']} | "
                     f"{count['equivalent']} | {count['cosmetic']} | {count['not checked']} | "
                     f"{rate:.0%}{'' if rate >= 0.9 else ' (below 90%)'} |")
    lines += planted_section(out, by_area)
    lines += flakes_section(out)
    if borrowed:   # the survivors' diffs and the notes are the borrowed report's: this one stays small
        (out / "REPORT.md").write_text("\n".join(lines) + "\n")
        return out / "REPORT.md"
    notes = ROOT / "mutation" / "notes.md"   # what the table cannot say: runs not made, targets not met, planted bugs
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    bulk = ["# Not killed", "", f"The mutants of {out.relative_to(ROOT)}/REPORT.md that no test killed, with their diffs.", ""]
    for _name, key, status, reason, diff in details:
        bulk.append(f"### {key}: {status}" + (f" ({reason})" if reason else ""))
        bulk += ["```diff", diff.strip(), "```", ""]
    with gzip.GzipFile(out / "NOT-KILLED.md.gz", "wb", mtime=0) as z:
        z.write(("\n".join(bulk) + "\n").encode())
    lines += ["", "## Not killed", "", f"{len(details)} mutants, each with its diff: `NOT-KILLED.md.gz` beside this report "
              "(`zcat`), written with it by `mutation/mutate.py --report`."]
    (out / "REPORT.md").write_text("\n".join(lines) + "\n")
    return out / "REPORT.md"


def _planted(out: Path) -> tuple[dict, dict[str, dict]]:
    """This folder's planted bugs (planted.json) and the same bugs against other commits' tests ({commit: results})."""
    now = json.loads((out / "planted.json").read_text()) if (out / "planted.json").exists() else {}
    before = {}
    for path in sorted(out.glob("planted-tests-at-*.json")):
        data = json.loads(path.read_text())
        before[data["tests_at"]] = data
    return now, before


def _killed(r: dict | None) -> str:
    if not r:
        return "-"
    if r["status"] == "killed":
        test = r.get("test", "").removeprefix("tests/")
        by = "fast tier, its own test" if r["by"] == "named" else r["by"]    # every named test is of the fast tier
        return f"killed ({by}: `{test}`)" if test else f"killed ({by})"
    return f"**{r['status']}**" + (f" ({r['by']})" if r.get("by") else "")


def planted_section(out: Path, by_area: dict) -> list[str]:
    """The kill rates by area (mutmut's and the planted bugs'), then every planted bug with what killed it."""
    sys.path.insert(0, str(ROOT / "mutation"))
    from planted import AREAS, PLANTED

    now, before = _planted(out)
    bugs = now.get("bugs", {})
    lines = ["", "## Kill rates by area: mutmut's and the planted bugs'", "",
             "mutmut: its token flips in the modules it was run on (killed or timed out, of the non-equivalent). "
             "Planted: realistic bugs written by hand (mutation/planted.py: one per area and per study's claim glue, "
             "each with the test written for it), each planted alone in a scratch copy and run against its named "
             "tests, then the fast tier, then the slow tier of its folder (mutation/plant.py)"
             + (f"; at {now.get('commit')}" if now else ": not run in this pass") + ". "
             + "".join(f"'tests of {c}': the same bugs against that commit's tests (today's code; no named tests, the "
                       "tiers alone" + (", the fast tier only" if d.get("fast_only") else "") + ")."
                       for c, d in before.items()), "",
             "| area | mutmut modules | mutmut killed | planted killed" + "".join(f" | planted, tests of {c}" for c in before)
             + " |", "|---|---|---:|---:" + "|---:" * len(before) + "|"]

    def frac(rs: list[dict]) -> str:
        return f"{sum(r['status'] == 'killed' for r in rs)} of {len(rs)}" if rs else "-"
    for area in (*AREAS, "the claims kit", "counters", OTHER_AREA):
        k, n, names = by_area.get(area, (0, 0, []))
        mut = f"{k} of {n} ({k / n:.0%})" if n else "not run"
        rs = [r for r in bugs.values() if r["area"] == area]
        old = ["".join(frac([r for r in d["bugs"].values() if r["area"] == area])) for d in before.values()]
        lines.append(f"| {area} | {', '.join(names) or '-'} | {mut} | {frac(rs)}" + "".join(f" | {o}" for o in old)
                     + " |")
    k = sum(v[0] for v in by_area.values())
    n = sum(v[1] for v in by_area.values())
    lines.append(f"| **all** | | {k} of {n} ({k / n:.0%}) | {frac(list(bugs.values()))}" if n else
                 f"| **all** | | - | {frac(list(bugs.values()))}")
    lines[-1] += "".join(f" | {frac(list(d['bugs'].values()))}" for d in before.values()) + " |"
    lines += ["", "### The planted bugs", "",
              "| bug | area | file | now" + "".join(f" | tests of {c}" for c in before) + " | the bug |",
              "|---|---|---|---" + "|---" * len(before) + "|---|"]
    for b in PLANTED:
        r = bugs.get(b.name)
        cells = [f"`{b.name}`", b.area, f"`{b.file.removeprefix('src/perflab/')}`", _killed(r),
                 *(_killed(d["bugs"].get(b.name)) for d in before.values()), b.why]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def flakes_section(out: Path) -> list[str]:
    path = out / "flakes.json"
    if not path.exists():
        return ["", "## Flaky tests", "", "The flake finder (`make flakes`, mutation/flakes.py) was not run in this pass."]
    data = json.loads(path.read_text())
    lines = ["", "## Flaky tests", "",
             f"The fast tier (`-m \"{data['marker']}\"`, {', '.join(data['paths'])}) run {data['runs']} times at "
             f"{data['commit']}, each in another random order with another seed (pytest-randomly, mutation/flakes.py): "
             f"**{data['passed']} of {data['runs']} passed**, {data['in_a_row']} in a row.", "",
             "| run | seed | result | seconds | failed |", "|---:|---:|---|---:|---|"]
    for i, r in enumerate(data["detail"], 1):
        failed = "; ".join(f"`{t.removeprefix('tests/')}`" for t in r["failed"] + r["errors"])
        lines.append(f"| {i} | {r['seed']} | {r['summary'] or r['exit']} | {r['seconds']:.0f} | {failed or '-'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help=f"'all' or some of: {', '.join(MODULES)}")
    parser.add_argument("--report", action="store_true", help="only rewrite REPORT.md from the runs kept")
    parser.add_argument("--children", type=int, default=1, help="mutmut's worker processes (default 1)")
    parser.add_argument("--until", help="HH:MM UTC: start no module after it")
    parser.add_argument("--out", type=Path, help="results folder (default outputs/mutation/<short commit>)")
    parser.add_argument("--fresh", action="store_true", help="forget a module's earlier results")
    # mutmut's timeout is wall-clock as well as CPU time: a run paused (SIGSTOP, a suspended laptop) past a mutant's
    # limit records that mutant as timed out, i.e. detected; retry them to know
    parser.add_argument("--retry-timeouts", action="store_true", help="try timed-out mutants again too")
    parser.add_argument("--again-only", action="store_true",
                        help="only try the survivors again; leave the mutants an interrupted run did not reach unrun")
    args = parser.parse_args()
    out = (args.out or ROOT / "outputs" / "mutation" / short_commit()).resolve()
    names = list(MODULES) if args.modules in (["all"], []) and not args.report else args.modules
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose from {', '.join(MODULES)}")
    until = None
    if args.until:   # HH:MM UTC within 12 hours either side of now: 00:35 asked at 22:55 is tomorrow's, 15:40 at 16:00 past
        start = datetime.datetime.now(datetime.timezone.utc)
        hour, minute = map(int, args.until.split(":"))
        until = start.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if until < start - datetime.timedelta(hours=12):
            until += datetime.timedelta(days=1)
    for name in [] if args.report else names:
        if until:
            now = datetime.datetime.now(datetime.timezone.utc)
            if now >= until:
                print(f"== {now:%H:%M} UTC is past --until {args.until}: {name} and after not started")
                break
        if args.fresh:
            shutil.rmtree(WORK / name, ignore_errors=True)
        run_module(name, args.children, out, args.retry_timeouts, args.again_only)
    print("report:", report(out))


if __name__ == "__main__":
    main()
