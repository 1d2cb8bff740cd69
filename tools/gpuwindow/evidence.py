"""Committed evidence kept small: the tree travels to the GPU host whole (64 MiB with the wheels), and the host reads
none of outputs/. A data file of outputs/ over BULKY_KIB (results and battery rows, mutation runs, executed
per-point notebooks, logs) is committed gzipped (`results.jsonl.gz`: `perflab.kit.results.read_rows`, `perflab
report` and `perflab compare` read it as they read `results.jsonl`); a mutation report keeps its summary (the table
and the notes the docs quote) as REPORT.md and its list of mutants not killed, with their diffs, as NOT-KILLED.md.gz
(`python mutation/mutate.py --report --out DIR` writes both again from the runs' `<module>.json.gz`).

    python -m gpuwindow compact            # compress what is bulky under outputs/ (git mv'd files: commit them)
    python -m gpuwindow compact --check    # list what is bulky and uncompressed; exit 1 if anything is
"""
from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

BULKY_KIB = 64                      # a data file over this is committed gzipped
DATA = (".jsonl", ".json", ".ipynb", ".txt", ".log", ".csv")
SPLIT = "\n## Not killed\n"         # a mutation report's bulk, after its summary
MARKDOWN_KIB = 96                   # a committed Markdown report over this keeps its summary only


def committed(root: Path, under: str = "outputs") -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z", under], cwd=root, capture_output=True, check=True).stdout
    return [Path(root) / n for n in names.decode().split("\0") if n]


def bulky(root: Path) -> list[str]:
    """Committed files of outputs/ that should be compressed, one line each."""
    bad = []
    for f in committed(root):
        if not f.is_file():
            continue
        size = f.stat().st_size
        if f.suffix in DATA and size > BULKY_KIB * 1024:
            bad.append(f"{f.relative_to(root)}: {size / 1024:.0f} KiB uncompressed (over {BULKY_KIB} KiB: gzip it)")
        elif f.suffix == ".md" and size > MARKDOWN_KIB * 1024:
            bad.append(f"{f.relative_to(root)}: {size / 1024:.0f} KiB of Markdown (over {MARKDOWN_KIB} KiB: keep the "
                       "summary, the bulk in a .md.gz beside it)")
    return bad


def _gzip(f: Path, data: bytes | None = None) -> Path:
    to = f.with_name(f.name + ".gz")
    with gzip.GzipFile(to, "wb", mtime=0) as z:   # mtime 0: the same bytes for the same text
        z.write(f.read_bytes() if data is None else data)
    return to


def compact(root: Path) -> list[str]:
    """Compress the bulky committed files (git rm the original, git add the .gz). -> what was done, one line each."""
    root = Path(root)
    done = []
    for f in committed(root):
        if not f.is_file():
            continue
        size = f.stat().st_size
        if f.suffix in DATA and size > BULKY_KIB * 1024:
            to = _gzip(f)
        elif f.suffix == ".md" and size > MARKDOWN_KIB * 1024 and SPLIT in f.read_text():
            text = f.read_text()
            head, tail = text.split(SPLIT, 1)
            to = f.with_name("NOT-KILLED.md.gz")
            rel = f.parent.relative_to(root).as_posix()
            with gzip.GzipFile(to, "wb", mtime=0) as z:
                z.write((f"# Not killed\n\nThe mutants of {rel}/REPORT.md that no test killed, with their diffs.\n\n"
                         + tail.lstrip("\n")).encode())
            n = sum(line.startswith("### ") for line in tail.splitlines())
            f.write_text(head.rstrip() + f"\n\n## Not killed\n\n{n} mutants, each with its diff: `NOT-KILLED.md.gz` beside "
                         "this report (`zcat`), written with it by `mutation/mutate.py --report`.\n")
            subprocess.run(["git", "add", str(f), str(to)], cwd=root, check=True)
            done.append(f"{f.relative_to(root)}: {size / 1024:.0f} -> {f.stat().st_size / 1024:.0f} KiB, "
                        f"+ {to.name} {to.stat().st_size / 1024:.0f} KiB")
            continue
        else:
            continue
        subprocess.run(["git", "rm", "-q", "--cached", str(f)], cwd=root, check=True)
        f.unlink()
        subprocess.run(["git", "add", str(to)], cwd=root, check=True)
        done.append(f"{f.relative_to(root)}: {size / 1024:.0f} KiB -> {to.name} {to.stat().st_size / 1024:.0f} KiB")
    return done
