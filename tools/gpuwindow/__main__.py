"""python -m gpuwindow COMMAND ...: the window tooling's commands (tools/gpu-session.sh runs them; see __init__)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from perflab.runner.deadline import WINDOW_ENV


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuwindow", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="this call's outcome from the run folders' window.jsonl; exit 0/1/2/3")
    s.add_argument("root", type=Path, help="the folder of run folders (/tmp/res)")
    s.add_argument("--window", default=os.environ.get(WINDOW_ENV, ""))
    c = sub.add_parser("carry", help="what a call from here carries, against 64 MiB; exit 1 when over")
    c.add_argument("--root", type=Path, default=Path("."))
    b = sub.add_parser("cache-budget", help="there: MiB left for the compile caches in the next call's carry")
    b.add_argument("res", type=Path, help="the res.tgz this call packed")
    b.add_argument("--root", type=Path, default=Path("."))
    t = sub.add_parser("travel", help="copy what a call carries into DEST, as the host receives it (no .git)")
    t.add_argument("dest", type=Path)
    t.add_argument("--root", type=Path, default=Path("."))
    k = sub.add_parser("comeback", help="whether every file in OUT comes back from the host; exit 1 if not")
    k.add_argument("out", type=Path)
    w = sub.add_parser("wheels", help="fetch the pinned wheels for each Python, check a folder of them, or write its "
                                      "lock (tools/gpu-wheels.lock: after a pin changes)")
    w.add_argument("action", choices=("fetch", "check", "lock"))
    w.add_argument("folder", type=Path)
    w.add_argument("--pins", type=Path, default=None)
    w.add_argument("--image", type=Path, default=None)
    w.add_argument("--python", action="append", default=None, help="only these Pythons (3.12 ...): default all")
    i = sub.add_parser("imports", help="import every module the notebooks and tests import; exit 1 naming the first "
                                       "that fails")
    i.add_argument("--root", type=Path, default=Path("."))
    i.add_argument("--list", action="store_true", help="only list them")
    p = sub.add_parser("pack-cache", help="the run folders' compile caches into OUT/cache*.tgz, each under the limit")
    p.add_argument("root", type=Path, help="the folder of run folders (/tmp/res)")
    p.add_argument("dest", type=Path)
    p.add_argument("--limit-mib", type=float, default=16.0)
    p.add_argument("--parts", type=int, default=2)
    p.add_argument("--total-mib", type=float, default=None, help="all parts together at most (the carry's room)")
    m = sub.add_parser("compact", help="compress the bulky committed evidence under outputs/ (--check: list it)")
    m.add_argument("--check", action="store_true")
    m.add_argument("--root", type=Path, default=Path("."))
    e = sub.add_parser("estimate", help="the window's calls table (params/gpu-smoke/ESTIMATE.md)")
    e.add_argument("--write", action="store_true", help="write it into params/gpu-smoke/ESTIMATE.md")
    args = ap.parse_args(argv)
    return globals()["_" + args.cmd.replace("-", "_")](args)


def _summary(args) -> int:
    from .summary import summary

    rc, text = summary(args.root, args.window)
    print(text)
    return rc


def _carry(args) -> int:
    from .carry import carry, carry_text

    found = carry(args.root)
    print(carry_text(found))
    return 1 if found["margin"] < 0 else 0


def _cache_budget(args) -> int:
    from .carry import cache_budget

    print(f"{max(0.0, cache_budget(args.root, args.res)):.1f}")
    return 0


def _travel(args) -> int:
    from .carry import carry_text, travel

    found = travel(args.root, args.dest)
    print(carry_text(found))
    return 1 if found["margin"] < 0 else 0


def _comeback(args) -> int:
    from .carry import comeback

    bad = comeback(args.out)
    files = sorted(f for f in args.out.rglob("*") if f.is_file())
    print(f"$OUT: {len(files)} files, {sum(f.stat().st_size for f in files) / 2**20:.2f} MiB: "
          + ("all come back" if not bad else "NOT ALL COME BACK"))
    for line in bad:
        print("  " + line)
    return 1 if bad else 0


def _wheels(args) -> int:
    from . import wheels

    root = Path(__file__).resolve().parents[2]
    pins = wheels.read_pins(args.pins or root / wheels.PINS)
    image = wheels.read_image(args.image or root / wheels.IMAGE)
    pythons = tuple(args.python or wheels.PYTHONS)
    if args.action == "fetch":
        try:
            got = wheels.fetch(args.folder, pins, pythons)
        except RuntimeError as e:
            print(f"wheels: {e}", file=sys.stderr)
            return 1
        print(f"{args.folder}: " + ", ".join(f"{n} in {d}" for d, n in got.items()))
    leave_out = wheels.left_out(args.pins or root / wheels.PINS)
    problems, assumed = wheels.check(args.folder, pins, image, pythons, leave_out)
    lock = root / wheels.LOCK
    if args.action == "lock":
        if problems:
            print("wheels: not locked: " + "; ".join(problems), file=sys.stderr)
            return 1
        lock.write_text("# tools/gpu-wheels.txt's wheels as fetched (python -m gpuwindow wheels lock .whl): folder/file, "
                        "bytes, sha256\n" + "\n".join(wheels.lock_lines(args.folder)) + "\n")
        print(f"{lock}: {len(wheels.read_lock(lock))} files")
        return 0
    if not args.pins and lock.exists() and set(pythons) == set(wheels.PYTHONS):
        problems += wheels.lock_problems(args.folder, wheels.read_lock(lock))
    for line in problems:
        print(f"wheels: {line}", file=sys.stderr)
    size = sum(f.stat().st_size for f in args.folder.rglob("*.whl")) / 2**20
    print(f"{args.folder}: {len(pins)} pinned projects for CPython {', '.join(pythons)} ({size:.1f} MiB): "
          + ("closed under their requirements with the image's packages" if not problems else
             f"{len(problems)} problem(s): the call would stop there"))
    if leave_out:
        print("  left out (required, imported only for what a call never does): "
              + "; ".join(f"{n}: {why}" for n, why in leave_out.items()))
    if assumed:
        print(f"  taken as met by the image at a version not read here: {', '.join(assumed)}")
    return 1 if problems else 0


def _imports(args) -> int:
    from .wheels import import_all, modules

    found = modules(args.root)
    if args.list:
        print(" ".join(found))
        return 0
    t0 = time.perf_counter()
    done, failed = import_all(list(found), found)
    if failed:
        print(f"imports: {failed}")
        return 1
    print(f"imports: {len(done)} modules in {time.perf_counter() - t0:.1f} s ({', '.join(done)})")
    return 0


def _pack_cache(args) -> int:
    from .cache import pack_cache

    total = None if args.total_mib is None else int(args.total_mib * 2**20)
    r = pack_cache(args.root, args.dest, limit=int(args.limit_mib * 2**20), parts=args.parts, total=total)
    for name, size, n in r["parts"]:
        print(f"{name}: {size / 2**20:.1f} MiB ({n} cache entries; the limit is {args.limit_mib:g} MiB a file)")
    print(f"compile caches: {r['mib']:.1f} MiB before compression, {r['kept']} entries kept"
          + (f", {r['left_out']} left out ({r['left_out_mib']:.1f} MiB, the oldest first: the next window compiles "
             "them again)" if r["left_out"] else ""))
    return 0


def _compact(args) -> int:
    from .evidence import bulky, compact

    if args.check:
        bad = bulky(args.root)
        print("\n".join(bad) or "outputs/: nothing bulky uncompressed")
        return 1 if bad else 0
    for line in compact(args.root):
        print(line)
    return 0


def _estimate(args) -> int:
    from . import estimate

    if args.write:
        path = Path(__file__).resolve().parents[2] / estimate.ESTIMATE_MD
        print(f"{path}: {'rewritten' if estimate.write(path) else 'already current'}")
    else:
        print(estimate.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
