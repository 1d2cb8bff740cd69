"""What every figure of a study shares: one colour per version, the same in every figure of the study.

    color("baseline", IMPLS)       # '#7f7f7f': a study's versions take the palette in the order IMPLS names them
    color("recycle", IMPLS)        # the fifth colour, in every figure of 04
    color("optimized, batch 64")   # a name that is no version: a colour of its own, the same wherever it is drawn

Figures are drawn with `layout="constrained"` (titles never overlap a panel) and carry units on their axes; a
measured quantity is drawn with its spread (`perflab.kit.versions.GridResult.figure`, the claims figure). Every
label drawn in a panel sits on a white box above the lines (`clear_labels`, applied by `Run.savefig`): a threshold's
line never strikes through a value's label.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterable

# the baseline grey, then matplotlib's tab10 without its grey: a version keeps its colour in every figure
PALETTE = ("#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#d62728")


def color(name: str, versions: Iterable[str] = ()) -> str:
    """The colour of version `name`: its place among `versions` (a study's IMPLS, the baseline first), else a
    colour picked from the name itself (stable across figures and runs), after those the versions take."""
    names = list(versions)
    if name in names:
        return PALETTE[names.index(name) % len(PALETTE)]
    free = PALETTE[len(names):] or PALETTE
    return free[zlib.crc32(name.encode()) % len(free)]


def colors(names: Iterable[str], versions: Iterable[str] = ()) -> dict[str, str]:
    """{name: colour} for each of `names` (`color`); names that are no version get distinct colours where the
    palette has enough."""
    versions = list(versions)
    out, used = {}, set()
    for n in names:
        c = color(n, versions)
        if n not in versions and c in used:  # two names hashed alike: the next free one
            c = next((p for p in PALETTE[len(versions):] if p not in used), c)
        out[n] = c
        used.add(c)
    return out


def clear_labels(fig) -> None:
    """Put each text drawn in a panel of `fig` (ax.text, ax.annotate) that has no box of its own on a white,
    slightly transparent box above the panel's lines, so that a threshold's line drawn through a label (a value, a
    target) hides behind it instead of striking it through."""
    for ax in getattr(fig, "axes", ()):
        for t in ax.texts:
            if t.get_bbox_patch() is None and t.get_text().strip():
                t.set_bbox(dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0))
                t.set_zorder(max(t.get_zorder(), 5))
