"""What a call carries to the lent host and what comes back from it: the device tool's limits as code.

The device tool sends the working tree (git's tracked and untracked-not-ignored files) and the carried folders
(`.whl`, `.gpu-res`), 64 MiB at most, and brings back what the command leaves in $OUT: 8 files, 16 MiB each, 2 folders
down, plain names. `carry` sums what travels (`prepare` and `bring` print it, and refuse an over-limit carry),
`cache_budget` is what the compile caches may take in the next call's carry, `travel` copies the tree as it travels
(the rehearsal's), `comeback` says what in $OUT would not come back.
"""
from __future__ import annotations

import re
from pathlib import Path

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
