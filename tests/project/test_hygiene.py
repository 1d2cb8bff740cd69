"""Committed Markdown carries nothing of the machine that wrote it (issue 47 item 5): no absolute path of a machine
(/work/..., /root/..., /home/..., /tmp/...), and no relative link or image to a file that is not committed (a
report's figures left behind, a path that moved). Every Markdown file git tracks, READMEs, docs and the reports under
outputs/ alike; fenced blocks and code spans count for the paths (a report's title is one), not for the links."""
import re
import subprocess
from pathlib import Path

import pytest
from test_docs import anchors, links

ROOT = Path(__file__).resolve().parents[2]
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|root|home|tmp)/[^\s)`'\"]*")


def _committed() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [n for n in out.decode().split("\0") if n]


COMMITTED = _committed() if (ROOT / ".git").exists() else []
FOLDERS = {p.as_posix() for n in COMMITTED for p in Path(n).parents}


def machine_paths(text: str) -> list[str]:
    return MACHINE_PATH.findall(text)


def dead_links(page: Path, committed: set[str], folders: set[str], root: Path = ROOT) -> list[str]:
    """Each relative link or image of `page` whose target is not a committed file or folder (or names a heading
    the committed Markdown file does not have)."""
    bad = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        file, _, anchor = target.partition("#")
        try:
            rel = (page.parent / file).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            bad.append(f"{target}: outside the repository")
            continue
        if rel not in committed and rel not in folders:
            bad.append(f"{target}: {rel} is not committed")
        elif anchor and rel.endswith(".md") and anchor not in anchors(root / rel):
            bad.append(f"{target}: no heading #{anchor} in {rel}")
    return bad


@pytest.mark.skipif(not COMMITTED, reason="not a git checkout")
def test_no_committed_markdown_names_a_machine_path_or_links_what_is_not_committed():
    committed = set(COMMITTED)
    found = {}
    for name in (n for n in COMMITTED if n.endswith(".md")):
        page = ROOT / name
        if not page.is_file():
            continue
        bad = [f"absolute path {p}" for p in machine_paths(page.read_text())] + dead_links(page, committed, FOLDERS)
        if bad:
            found[name] = bad[:3] + ([f"... {len(bad) - 3} more"] if len(bad) > 3 else [])
    assert not found, "\n".join(f"{n}: {'; '.join(b)}" for n, b in found.items())


def test_the_checks_find_what_they_should(tmp_path):
    assert machine_paths("# perflab report: `/work/main/outputs/x`\nsee /tmp/res and /home/u/a.md") == [
        "/work/main/outputs/x", "/tmp/res", "/home/u/a.md"]
    assert machine_paths("outputs/tmp/test-artefacts/ and ~/home/x, https://h.org/root/y, a/work/b") == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Two\n")
    page = tmp_path / "docs" / "p.md"
    page.write_text("[ok](a.md#two) [ok](../docs) ![gone](fig.png) [bad](a.md#three) [left](x.md) `[code](no.md)` "
                    "[web](https://x.org/y.md)\n")
    bad = dead_links(page, {"docs/a.md", "docs/p.md", "docs/x.md"} - {"docs/x.md"}, {"docs", "."}, root=tmp_path)
    assert bad == ["fig.png: docs/fig.png is not committed", "a.md#three: no heading #three in docs/a.md",
                   "x.md: docs/x.md is not committed"]
