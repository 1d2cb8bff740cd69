"""Planted bugs (issue 48): each of mutation/planted.py's realistic bugs planted in a scratch copy of the checkout, then
its tests run until one fails: its named tests, the fast tier, the slow tier of its folder (nbval over the notebooks
is not run: make test's last leg, minutes a notebook).

    python mutation/plant.py                      # every bug; results in outputs/mutation/<short commit>/planted.json
    python mutation/plant.py fieller-over-rounds  # some, by name
    python mutation/plant.py --check              # only check that every bug still applies (exactly once)
    python mutation/plant.py --tests-at main      # the tests of another commit against today's code (a rate before:
                                                  # no named tests, only the tiers; the tests that fail with no bug
                                                  # planted, since today's code changed what they check, left out)

The scratch copy (.mutation/planted/<tree>/, ignored) holds the checkout's tracked and untracked, not ignored, files
as they are now, committed once into a git repository of its own (a clean clone, as CI sees one); each bug is
written into it, run, and taken out again. Its tests import the copy's src/ (PYTHONPATH), kernels and subprocesses
too. A bug is killed when a test fails (pytest exit 1); a run that errors otherwise (a collection error: exit 2-5)
is recorded as such, not as a kill.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planted import AREAS, PLANTED, Bug  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation" / "planted"
FAST = "not slow and not gpu and not wheel and not slurm and not browser"
SLOW = "slow and not gpu and not wheel and not slurm and not browser"
PYTEST = ["-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly", "-rf", "--tb=no"]


def short_commit(rev: str = "HEAD") -> str:
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def scratch(tests_at: str | None) -> Path:
    """A fresh copy of the checkout as it is now (with the tests of `tests_at` in place of today's, if given)."""
    tree = WORK / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    for f in tracked_files():
        dst = tree / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst)
    if tests_at:
        shutil.rmtree(tree / "tests")
        archive = subprocess.run(["git", "archive", tests_at, "tests"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    git = ["git", "-c", "user.name=plant", "-c", "user.email=plant@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "scratch copy for planted bugs"], cwd=tree, check=True)
    return tree


def applies(bug: Bug, root: Path = ROOT) -> str:
    """'' if `bug.old` occurs exactly once in its file, else why not."""
    text = (root / bug.file).read_text()
    n = text.count(bug.old)
    return "" if n == 1 else f"{bug.name}: its old text occurs {n} times in {bug.file} (update mutation/planted.py)"


def _pytest(tree: Path, args: list[str], timeout: float, first_failure: bool = True) -> tuple[int, list[str], float, str]:
    """pytest in the copy -> (exit status, the failed tests, seconds, the output's tail); stopping at the first failure
    unless `first_failure` is False."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("PERFLAB_OUT", None)
    t0 = time.monotonic()
    try:
        opts = PYTEST if first_failure else [o for o in PYTEST if o != "-x"]
        r = subprocess.run(["nice", "-n", "19", sys.executable, "-m", "pytest", *opts, *args], cwd=tree, env=env,
                           capture_output=True, text=True, timeout=timeout)
        code, out = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        code, out = -1, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED ")]
    return code, failed, round(time.monotonic() - t0, 1), out[-1500:]


def stages(bug: Bug, tree: Path, named_only: bool, tests_at: str | None,
           fast_only: bool = False) -> list[tuple[str, list[str]]]:
    """What is run, in order, until a test fails: the bug's named tests (not with another commit's tests, which need
    not have them: there the tiers alone say what that suite catches), the fast tier, the slow tier of its folder."""
    named = [] if tests_at else list(bug.kills)
    out = [("named", [*named, "-m", "not gpu and not wheel and not slurm and not browser"])] if named else []
    if not named_only:
        out += [("fast tier", ["-m", FAST, "tests"])]
    if not (named_only or fast_only):
        out += [(f"slow tier of {bug.folder}", ["-m", SLOW, bug.folder])]
    return out


# another commit's tests against today's code: the tests that fail with no bug planted (today's code changed what they
# check) are left out of every run of that stage, {stage's arguments: their node ids}, found once per stage
BROKEN: dict[tuple, list[str]] = {}


def broken(tree: Path, args: list[str], timeout: float) -> list[str]:
    key = tuple(args)
    if key not in BROKEN:
        code, failed, seconds, tail = _pytest(tree, args, timeout, first_failure=False)
        if code not in (0, 1, 5):
            raise RuntimeError(f"the tests fail to run with no bug planted ({' '.join(args)}): {tail}")
        BROKEN[key] = failed
        print(f"   (no bug planted, {' '.join(args)}: {len(failed)} test(s) fail and are left out, {seconds:.0f} s)",
              flush=True)
    return [x for t in BROKEN[key] for x in ("--deselect", t)]


def run_bug(bug: Bug, tree: Path, *, named_only: bool, timeout: float, tests_at: str | None = None,
            fast_only: bool = False) -> dict:
    path = tree / bug.file
    original = path.read_text()
    why_not = applies(bug, tree)
    if why_not:
        return {"status": "does not apply", "detail": why_not}
    runs = []
    try:
        for stage, args in stages(bug, tree, named_only, tests_at, fast_only):
            path.write_text(original)
            left_out = broken(tree, args, timeout) if tests_at else []
            path.write_text(original.replace(bug.old, bug.new))
            code, failed, seconds, tail = _pytest(tree, [*args, *left_out], timeout)
            runs.append({"stage": stage, "exit": code, "failed": failed, "seconds": seconds,
                         **({"left_out": left_out[1::2]} if left_out else {})})
            print(f"   {stage}: exit {code}, {seconds:.0f} s" + (f", failed {failed[0]}" if failed else ""), flush=True)
            if code == 1:
                return {"status": "killed", "by": stage, "test": failed[0] if failed else "", "runs": runs}
            if code not in (0, 5):   # 5: no tests collected (a folder without slow tests)
                return {"status": "error", "by": stage, "detail": tail, "runs": runs}
        return {"status": "survived", "runs": runs}
    finally:
        path.write_text(original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bugs", nargs="*", help=f"some of: {', '.join(b.name for b in PLANTED)} (default: all)")
    parser.add_argument("--check", action="store_true", help="only check that every bug applies")
    parser.add_argument("--named-only", action="store_true", help="run only each bug's named tests")
    parser.add_argument("--fast-only", action="store_true", help="leave out the slow tier (a survivor is then of the "
                        "fast tier only)")
    parser.add_argument("--tests-at", help="run the tests of this commit (e.g. main) against today's code")
    parser.add_argument("--out", type=Path, help="results folder (default outputs/mutation/<short commit>)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per pytest run (default 1800)")
    args = parser.parse_args()
    known = {b.name: b for b in PLANTED}
    unknown = [n for n in args.bugs if n not in known]
    if unknown:
        parser.error(f"unknown bug(s) {unknown}; choose from {', '.join(known)}")
    bad = [b for b in PLANTED if b.area not in AREAS] + [b for b in PLANTED if applies(b)]
    for b in bad:
        print(applies(b) or f"{b.name}: area {b.area!r} is not one of {AREAS}", file=sys.stderr)
    if args.check or bad:
        sys.exit(1 if bad else 0)
    bugs = [known[n] for n in args.bugs] if args.bugs else list(PLANTED)
    out = (args.out or ROOT / "outputs" / "mutation" / short_commit()).resolve()
    out.mkdir(parents=True, exist_ok=True)
    name = f"planted-tests-at-{short_commit(args.tests_at)}.json" if args.tests_at else "planted.json"
    results_file = out / name
    results = json.loads(results_file.read_text())["bugs"] if results_file.exists() else {}
    results = {k: v for k, v in results.items() if k in known}      # a bug since taken out of the table: dropped
    tree = scratch(args.tests_at)
    for i, bug in enumerate(bugs, 1):
        print(f"== {i}/{len(bugs)} {bug.name} ({bug.area}): {bug.file}", flush=True)
        results[bug.name] = {"area": bug.area, "file": bug.file, "why": bug.why, "kills": list(bug.kills),
                             **run_bug(bug, tree, named_only=args.named_only, timeout=args.timeout,
                                     tests_at=args.tests_at, fast_only=args.fast_only)}
        print(f"   -> {results[bug.name]['status']}", flush=True)
        results_file.write_text(json.dumps({
            "commit": short_commit(), "tests_at": short_commit(args.tests_at) if args.tests_at else None,
            "named_only": args.named_only, "fast_only": args.fast_only,
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "bugs": results}, indent=1) + "\n")
    print("results:", results_file)


if __name__ == "__main__":
    main()
