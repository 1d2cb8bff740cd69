"""A GPU window in calls of one command each: the lent host's limits as code, and what a call says at its end.

A lent GPU host runs one command at most 10 minutes (`CALL_S`) and goes back after 30 s idle, so each step of a window
(`tools/gpu-session.sh smoke | tests | full ...`) is one command that starts, runs and packs before a deadline below
that limit (`DEADLINE_S`); nothing waits for a second call. The runner (`perflab gpu-check`, with `--tests-only` for
the GPU tests alone) writes one row per part of the call into the run folder's `window.jsonl` (the plan
first, then each test part and notebook: ok, failed, skipped, cut), and the call ends with `summary`, read from those
rows: a part planned but never reported was cut by the deadline.

    python -m perflab.runner.window summary /tmp/res --window ID   # the one-screen table a call ends with
    python -m perflab.runner.window carry                          # what the next call carries, against 64 MiB
    python -m perflab.runner.window cache-budget OUT/res.tgz       # there: MiB left for the caches in the next carry
    python -m perflab.runner.window travel DEST                    # the tree as it travels, for the rehearsal
    python -m perflab.runner.window comeback OUT                   # does every file in OUT come back?
    python -m perflab.runner.window wheels .whl                    # one version of each wheel (gpu-session.sh prepare)
    python -m perflab.runner.window pack-cache /tmp/res OUT        # the folder's compile caches into OUT/cache*.tgz

A hard stop for everything: the call's deadline (`Deadline`: a notebook is started only when its estimate fits in
what is left, and one running at the deadline is stopped as Ctrl-C stops it, recorded at its cell), a limit per cell
(papermill's execution_timeout) and per test (`perflab.runner.testguard`), both sized by `perflab.runner.estimate`.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import sys
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


# ---- what travels in: the tree, the wheels, the last call's results and caches, under CARRY_MIB -------------------

CARRY_MIB = 64         # the working tree that travels to the host: tracked and untracked-not-ignored files + carry
CARRY_MARGIN_MIB = 4   # kept free under it: the next call's run folder grows the outputs/ that bring unpacks
CARRIED = (".whl", ".gpu-res")


def tree_files(root: Path) -> list[Path]:
    """The files of the tree that travel: git's tracked and untracked-not-ignored ones in a checkout, every file but
    .git's in a copy without it (the lent host's)."""
    import subprocess

    root = Path(root)
    if (root / ".git").exists():
        names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=root, capture_output=True,
                               check=True).stdout.decode().split("\0")
        return [root / n for n in dict.fromkeys(names) if n and ((root / n).is_file() or (root / n).is_symlink())]
    return [f for f in root.rglob("*") if (f.is_file() or f.is_symlink()) and ".git" not in f.relative_to(root).parts[:1]]


def _bytes(paths) -> int:
    return sum(p.lstat().st_size for p in paths)


def _folder_bytes(folder: Path) -> int:
    return _bytes(f for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


def carry(root: Path, carried: tuple[str, ...] = CARRIED) -> dict:
    """What a call from `root` carries: {"tree": bytes, "files": n, "carried": {folder: bytes}, "total": bytes,
    "margin": bytes under CARRY_MIB (negative: over)}."""
    root = Path(root)
    files = [f for f in tree_files(root) if f.relative_to(root).parts[0] not in carried]
    sizes = {c: _folder_bytes(root / c) for c in carried}
    total = _bytes(files) + sum(sizes.values())
    return {"tree": _bytes(files), "files": len(files), "carried": sizes, "total": total,
            "margin": CARRY_MIB * 2**20 - total}


def carry_text(c: dict) -> str:
    mib = lambda b: f"{b / 2**20:.1f} MiB"  # noqa: E731
    parts = " + ".join([f"tree {mib(c['tree'])} ({c['files']} files)"] + [f"{k} {mib(v)}" for k, v in c["carried"].items()])
    head = f"what travels: {parts} = {mib(c['total'])} of {CARRY_MIB} MiB"
    if c["margin"] < 0:
        return (f"{head}: OVER by {mib(-c['margin'])}; the call would be refused (trim .gpu-res/cache*.tgz, or "
                "commit or remove what outputs/ holds untracked)")
    return f"{head}; margin {mib(c['margin'])}"


def cache_budget(here: Path, res_tgz: Path) -> float:
    """On the lent host, after packing res.tgz: MiB the compile caches may take so that the next call's carry stays
    CARRY_MARGIN_MIB under CARRY_MIB. The next carry is this copy (without its .gpu-res, which bring replaces), the
    new res.tgz, what bring unpacks from it into outputs/ beyond what the copy already holds there, and the caches."""
    import tarfile

    here, res_tgz = Path(here), Path(res_tgz)
    tree = _bytes(f for f in tree_files(here) if f.relative_to(here).parts[0] != ".gpu-res")
    unpacked = 0
    with tarfile.open(res_tgz) as tar:
        for m in tar.getmembers():
            if m.isfile() and len(Path(m.name).parts) > 2:  # res/<kind>/...: into outputs/<kind>/...
                there = here / "outputs" / Path(*Path(m.name).parts[1:])
                unpacked += max(0, m.size - (there.stat().st_size if there.is_file() else 0))
    left = CARRY_MIB * 2**20 - CARRY_MARGIN_MIB * 2**20 - tree - res_tgz.stat().st_size - unpacked
    return left / 2**20


def travel(root: Path, dest: Path, carried: tuple[str, ...] = CARRIED) -> dict:
    """Copy what a call from `root` carries into `dest`, as the lent host receives it (the tree's files that travel
    and the carried folders; no .git): the rehearsal's tree. -> `carry(root)`"""
    import shutil

    root, dest = Path(root), Path(dest)
    files = tree_files(root) + [f for c in carried for f in sorted((root / c).rglob("*")) if f.is_file()]
    for f in files:
        to = dest / f.relative_to(root)
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, to, follow_symlinks=False)
    return carry(root, carried)


WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-.*\.whl$")


def wheel_versions(folder: Path) -> dict[str, list[str]]:
    """{project name (normalized): [wheel files]} of the wheels in `folder`."""
    found: dict[str, list[str]] = {}
    for f in sorted(Path(folder).glob("*.whl")):
        m = WHEEL_NAME.match(f.name)
        name = re.sub(r"[-_.]+", "-", m["name"] if m else f.name).lower()
        found.setdefault(name, []).append(f.name)
    return found


def duplicate_wheels(folder: Path) -> dict[str, list[str]]:
    """The projects with more than one wheel in `folder`: pip refuses the whole install (ResolutionImpossible)."""
    return {name: files for name, files in wheel_versions(folder).items() if len(files) > 1}



# ---- what comes back from $OUT ---------------------------------------------------------------------------------

BACK_FILES, BACK_FILE_MIB, BACK_MIB, BACK_DEPTH = 8, 16, 64, 2   # files, MiB a file, MiB in all, folders down
BACK_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def comeback(out: Path) -> list[str]:
    """What in `out` would not come back from the lent host (the device tool's limits), one line each: [] when all
    of it does."""
    out = Path(out)
    files = sorted(f for f in out.rglob("*") if f.is_file() or f.is_symlink())
    bad = [f"{f.relative_to(out)}: over {BACK_FILE_MIB} MiB ({f.stat().st_size / 2**20:.1f} MiB)"
           for f in files if f.stat().st_size > BACK_FILE_MIB * 2**20]
    bad += [f"{f.relative_to(out)}: a link" for f in files if f.is_symlink()]
    bad += [f"{f.relative_to(out)}: more than {BACK_DEPTH} folders down" for f in files
            if len(f.relative_to(out).parts) > BACK_DEPTH + 1]
    bad += [f"{f.relative_to(out)}: a name with other characters than letters, digits, '.', '_', '-'" for f in files
            if not all(BACK_NAME.match(part) for part in f.relative_to(out).parts)]
    if len(files) > BACK_FILES:
        bad.append(f"{len(files)} files: at most {BACK_FILES} come back")
    if sum(f.stat().st_size for f in files) > BACK_MIB * 2**20:
        bad.append(f"{sum(f.stat().st_size for f in files) / 2**20:.1f} MiB in all: at most {BACK_MIB} come back")
    return bad


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


def summary(root: Path, window: str) -> tuple[int, str]:
    """The call's outcome, one line per planned part, and its exit status: 0 all ok or skipped, 1 a part failed, 3 a
    part was cut by the deadline (nothing failed: the next call goes on from there), 2 nothing was planned (the run
    stopped before its plan: the log says why)."""
    found = rows(root, window)
    plans = [r for r in found if "plan" in r]
    if not plans:
        return 2, "nothing planned: the runner stopped before its plan (see log.txt above)"
    folder = plans[-1]["folder"]
    latest = {r["part"]: r for r in found if "part" in r}
    lines = [f"{'part':28s} {'status':8s} {'seconds':>8s}  note", "-" * 72]
    statuses = []
    for part in plans[-1]["plan"]:
        r = latest.get(part) or {"status": "cut", "seconds": 0.0, "note": "not reached: the call ended first"}
        statuses.append(r["status"])
        lines.append(f"{part:28s} {r['status']:8s} {r['seconds']:8.1f}  {r['note']}"[:140])
    lines.append(f"folder: {folder}")
    rc = 1 if "failed" in statuses else 3 if "cut" in statuses else 0
    return rc, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m perflab.runner.window", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="this call's outcome from the run folders' window.jsonl; exit 0/1/2/3")
    s.add_argument("root", type=Path, help="the folder of run folders (/tmp/res)")
    s.add_argument("--window", default=os.environ.get(WINDOW_ENV, ""))
    c = sub.add_parser("carry", help=f"what a call from here carries, against {CARRY_MIB} MiB; exit 1 when over")
    c.add_argument("--root", type=Path, default=Path("."))
    b = sub.add_parser("cache-budget", help="there: MiB left for the compile caches in the next call's carry")
    b.add_argument("res", type=Path, help="the res.tgz this call packed")
    b.add_argument("--root", type=Path, default=Path("."))
    t = sub.add_parser("travel", help="copy what a call carries into DEST, as the host receives it (no .git)")
    t.add_argument("dest", type=Path)
    t.add_argument("--root", type=Path, default=Path("."))
    k = sub.add_parser("comeback", help="whether every file in OUT comes back from the host; exit 1 if not")
    k.add_argument("out", type=Path)
    w = sub.add_parser("wheels", help="refuse a wheel folder holding two versions of a project")
    w.add_argument("folder", type=Path)
    p = sub.add_parser("pack-cache", help="the run folders' compile caches into OUT/cache*.tgz, each under the limit")
    p.add_argument("root", type=Path, help="the folder of run folders (/tmp/res)")
    p.add_argument("dest", type=Path)
    p.add_argument("--limit-mib", type=float, default=16.0)
    p.add_argument("--parts", type=int, default=2)
    p.add_argument("--total-mib", type=float, default=None, help="all parts together at most (the carry's room)")
    args = ap.parse_args(argv)
    if args.cmd == "wheels":
        found, dups = wheel_versions(args.folder), duplicate_wheels(args.folder)
        for name, files in dups.items():
            print(f"two versions of {name} in {args.folder}: {', '.join(files)} (pip refuses the install)", file=sys.stderr)
        print(f"{args.folder}: {len(found)} projects, {sum(map(len, found.values()))} wheels")
        return 1 if dups or not found else 0
    if args.cmd == "pack-cache":
        return _pack_cache(args)
    if args.cmd == "travel":
        found = travel(args.root, args.dest)
        print(carry_text(found))
        return 1 if found["margin"] < 0 else 0
    if args.cmd == "comeback":
        bad = comeback(args.out)
        files = sorted(f for f in args.out.rglob("*") if f.is_file())
        print(f"$OUT: {len(files)} files, {sum(f.stat().st_size for f in files) / 2**20:.2f} MiB: "
              + ("all come back" if not bad else "NOT ALL COME BACK"))
        for line in bad:
            print("  " + line)
        return 1 if bad else 0
    if args.cmd == "carry":
        found = carry(args.root)
        print(carry_text(found))
        return 1 if found["margin"] < 0 else 0
    if args.cmd == "cache-budget":
        print(f"{max(0.0, cache_budget(args.root, args.res)):.1f}")
        return 0
    rc, text = summary(args.root, args.window)
    print(text)
    return rc



def _pack_cache(args) -> int:
    from .compile_cache import pack_cache

    total = None if args.total_mib is None else int(args.total_mib * 2**20)
    r = pack_cache(args.root, args.dest, limit=int(args.limit_mib * 2**20), parts=args.parts, total=total)
    for name, size, n in r["parts"]:
        print(f"{name}: {size / 2**20:.1f} MiB ({n} cache entries; the limit is {args.limit_mib:g} MiB a file)")
    print(f"compile caches: {r['mib']:.1f} MiB before compression, {r['kept']} entries kept"
          + (f", {r['left_out']} left out ({r['left_out_mib']:.1f} MiB, the oldest first: the next window compiles "
             "them again)" if r["left_out"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
