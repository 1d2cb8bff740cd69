"""A GPU window's compile caches packed to come back from the lent host: newest entries first, in at most a few
files each under the limit on a file that comes back, and within the room the next call's carry leaves
(`carry.cache_budget`). `perflab gpu-check` keeps inductor's and Triton's caches in the run folder's
`compile-cache/` (`perflab.runner.gpucheck.compile_cache`); `tools/gpu-session.sh` packs them with
`python -m gpuwindow pack-cache`, and the next call unpacks them before it runs.
"""
from __future__ import annotations

from pathlib import Path

CACHE_DIR = "compile-cache"  # in the run folder (perflab.runner.gpucheck.CACHE_DIR): inductor's and Triton's caches


def _cache_entries(cache: Path) -> list[Path]:
    """What can be left out of a compile cache one piece at a time: an FX graph cache entry, an AOTAutograd entry,
    any other top-level file or folder (generated code, C++ builds); not triton/ (inductor's FX graph cache bundles
    each graph's Triton kernels and writes them back on a hit) nor locks/."""
    entries = []
    for top in sorted(cache.iterdir()):
        if top.name in ("triton", "locks"):
            continue
        if top.name == "fxgraph" and top.is_dir():
            entries += [e for d in sorted(top.iterdir()) if d.is_dir() for e in sorted(d.iterdir())]
        elif top.name == "aotautograd" and top.is_dir():
            entries += sorted(top.iterdir())
        else:
            entries.append(top)
    return entries


def _files(entry: Path) -> list[Path]:
    return [entry] if entry.is_file() else sorted(f for f in entry.rglob("*") if f.is_file())


def _gz_bytes(files: list[Path]) -> int:
    """About what these files add to a .tgz: their deflated bytes and a tar header each."""
    import zlib

    total = 0
    for f in files:
        z = zlib.compressobj(6)
        total += len(z.compress(f.read_bytes())) + len(z.flush()) + 120
    return total


def pack_cache(root: Path, dest: Path, *, limit: int = 16 * 2**20, parts: int = 2, total: int | None = None) -> dict:
    """The compile caches of the run folders under `root` (root/<kind>/<commit>/compile-cache/) into dest/cache.tgz,
    dest/cache-2.tgz ..., each under `limit` bytes (what can come back from the lent host), at most `parts` files.
    `total`: the parts together at most that (what the next call's carry leaves: `window.cache_budget`).
    Newest entries first: the notebook a window cut off compiled them last, and what finished is not run again at
    this commit; what does not fit is left out (the next window compiles it again). Paths in the archives start at
    root's name, as `tar -C root/.. root` writes them. -> {"parts": [(file, bytes, entries)], "kept": n,
    "left_out": n, "left_out_mib": MiB before compression, "mib": MiB of the caches before compression}."""
    root, dest = Path(root), Path(dest)
    for old in dest.glob("cache*.tgz"):
        old.unlink()
    caches = sorted(root.glob(f"*/*/{CACHE_DIR}"))
    entries = [e for c in caches for e in _cache_entries(c)]
    sized = []
    for e in entries:
        files = _files(e)
        if files:
            sized.append((max(f.stat().st_mtime for f in files), e, files, sum(f.stat().st_size for f in files)))
    sized.sort(key=lambda t: -t[0])
    target = int(limit * 0.94)  # room for the estimate's error; checked after writing
    room = int((limit * parts if total is None else total) * 0.94)
    bins: list[list] = [[] for _ in range(parts)]
    used = [0] * parts
    left = []
    for _, e, files, raw in sized:
        est = _gz_bytes(files)
        fits = sum(used) + est <= room
        i = next((i for i in range(parts) if fits and used[i] + est <= target), None)
        if i is None:
            left.append(raw)
            continue
        bins[i].append((e, raw))
        used[i] += est
    written = []
    for i, items in enumerate(b for b in bins if b):
        name = dest / ("cache.tgz" if i == 0 else f"cache-{i + 1}.tgz")
        while True:
            _write_tgz(name, root, [e for e, _ in items])
            if name.stat().st_size <= limit or len(items) == 1:
                break
            left.append(items.pop()[1])  # the estimate was short: the oldest entry of this part goes
        if name.stat().st_size > limit:
            left.append(items.pop()[1])
            name.unlink()
            continue
        written.append((name.name, name.stat().st_size, len(items)))
    kept = sum(n for *_, n in written)
    return {"parts": written, "kept": kept, "left_out": len(left), "left_out_mib": sum(left) / 2**20,
            "mib": sum(raw for *_, raw in sized) / 2**20}


def _write_tgz(name: Path, root: Path, entries: list[Path]) -> None:
    import tarfile

    with tarfile.open(name, "w:gz") as tar:
        for e in entries:
            tar.add(e, arcname=str(Path(root.name) / e.relative_to(root)))
