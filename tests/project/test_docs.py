"""README.md and docs/*.md: every relative link and image resolves (the file, and its #anchor as a heading there),
every docs page is linked from the README, and the README stays a five-minute read."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 160
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).*?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def prose(text: str) -> str:
    """The text without fenced blocks and code spans: a path inside `...` is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    return LINK.findall(prose(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[`*]|<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in HEADING.findall(FENCE.sub("", path.read_text())):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken(path: Path) -> list[str]:
    """Each relative link or image of one Markdown file that does not resolve, with why."""
    bad = []
    for target in links(path.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ...: not checked here
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no such file {dest}")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves(page):
    assert links(page.read_text()) or page.name != "README.md"
    assert not broken(page), f"{page.relative_to(ROOT)}: " + "; ".join(broken(page))


def test_the_readme_is_a_five_minute_read():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move a subject to docs/"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links((ROOT / "README.md").read_text())}
    assert [p for p in PAGES[1:] if p.resolve() not in linked] == []


def test_the_checker_finds_what_it_should(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "a.png").write_bytes(b"")
    page = tmp_path / "docs" / "p.md"
    page.write_text("# A `kit` page: one, two\n\n## Sweeps on Slurm\n\n[ok](p.md#a-kit-page-one-two) [ok](#sweeps-on-slurm) "
                    "![ok](../a.png) [web](https://example.org/x) `[code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n```\n"
                    "[gone](missing.md) ![gone](a.png) [no anchor](p.md#nope)\n")
    assert [b.split(":")[0] for b in broken(page)] == ["missing.md", "a.png", "p.md#nope"]
