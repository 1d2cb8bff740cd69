"""A claim row as the reports show it (`perflab report`'s REPORT.md, `perflab compare`'s COMPARE.md): its verdict and
how it was judged as table cells, and the claims figure (`perflab.kit.claims.claims_figure`: intervals against
thresholds, coloured by verdict) written beside the report as `claims-<study>.png`.
"""
from __future__ import annotations

from pathlib import Path


def drawable(r) -> bool:
    """Whether a claim row (a `perflab.kit.claims.ClaimRow`, or a row of the log) has an interval of some width and a
    threshold to draw it against (`perflab.kit.claims.drawable`: exact counts and untested claims are the card's)."""
    from ..kit.claims import as_row
    from ..kit.claims import drawable as kit_drawable

    return kit_drawable(as_row(r))


SPEED_MISSES = ("does not hold", "partly holds")


def verdict_cell(r: dict, cause: str = "") -> str:
    """'**not tested here** (measured at batch=16)': the verdict in bold, with its reason; a timed claim (decided in
    paired rounds) that does not hold or partly holds, with the cause its run's diagnosis found ('**does not hold**:
    248 ops per step at 8.1 us each, launch-bound': `perflab.kit.diagnosis.cause_line`, logged by `Diagnosis.log`)."""
    from ..kit.claims import verdict_text

    text = verdict_text(r).replace(r["verdict"], f"**{r['verdict']}**", 1)
    cause = r.get("cause") or cause   # a claim row that carries its own cause first
    timed = r.get("rounds") is not None
    return f"{text}: {cause}" if cause and timed and r["verdict"] in SPEED_MISSES else text


def judged_cell(r: dict) -> str:
    """'2.41 [2.30, 2.55] against >= 2 (99% interval, 12 rounds, 0.31 s)'; '' for a row logged without it."""
    from ..kit.claims import judged_text

    return judged_text(r)  # '' for a row from before perflab.kit.claims


def claims_png(path: Path, runs: dict[str, list[dict]] | list[dict], title: str) -> Path | None:
    """Draw claim rows (or {label: rows}, side by side) with `perflab.kit.claims.claims_figure` into `path`; None when
    no row has an interval to draw (rows logged before the kit: the section says so)."""
    from ..kit.claims import as_row

    runs = {label: [as_row(r) for r in rows] for label, rows in
            (runs.items() if isinstance(runs, dict) else [("", runs)])}
    if not any(drawable(r) for rows in runs.values() for r in rows):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import claims_figure

    fig = claims_figure(runs, title=title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


NO_FIGURE = ("No figure: no claim here was judged on a measured interval against a threshold (counts are exact, "
             "the others not tested here); the table above is all there is.")


def figure_name(study: str, run_id: str | None = None) -> str:
    """claims-<study>.png (claims-<study>-<run id>.png for one execution of several), a safe file name."""
    stem = "-".join(x for x in ("claims", study, run_id) if x)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in stem) + ".png"
