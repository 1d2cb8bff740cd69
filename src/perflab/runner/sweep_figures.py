"""A sweep's figures, one per swept parameter (`perflab report` on a sweep's folder links them): each timing (or
value) against the parameter, and each claim's interval and verdict at each of its values against the threshold.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .report_claims import drawable
from .report_rows import impl


def sweep_plot(out_dir: Path, rows: list[dict], param: str, grid: dict[str, list]) -> Path | None:
    """One plot for one swept parameter: each timing (or value, when a sweep has no timings) against
    `param`, one line per benchmark case and combination of the other swept parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import _wrap

    kind = "measurement" if any(r["kind"] == "measurement" for r in rows) else "value"
    others = [k for k in grid if k != param]
    points = []
    for r in rows:
        if r["kind"] != kind or param not in (r.get("params") or {}):
            continue
        y = r.get("median_s") if kind == "measurement" else r.get("value")
        if isinstance(y, (int, float)) and not isinstance(y, bool):
            group = (r.get("study"), r.get("label") or r.get("metric"), impl(r),
                     *(f"{k}={r['params'].get(k)}" for k in others))
            points.append((group, r.get("sub_label") or "", r["params"][param], y))
    # a case's sub_label often names the swept value itself ("B=64"): it splits a line only where one
    # point holds several cases of the same group
    split = {g for g, _, x, _ in points if len({s for g2, s, x2, _ in points if g2 == g and x2 == x}) > 1}
    series: dict = {}
    for group, sub, x, y in points:
        parts = [str(v) for v in (*group[:2], sub if group in split else "", *group[2:]) if v]
        name = " / ".join(dict.fromkeys(parts))  # drop repeats such as label == metric
        series.setdefault(name, []).append((x, y))
    if not series:
        return None
    order = {json.dumps(v): i for i, v in enumerate(grid[param])}
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in grid[param])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in list(series.items())[:12]:
        pts.sort(key=lambda t: order.get(json.dumps(t[0]), 0))
        xs = [x if numeric else order.get(json.dumps(x), 0) for x, _ in pts]
        ax.plot(xs, [y for _, y in pts], marker="o", label=_wrap(name, 60))  # wrapped, never cut
    if not numeric:
        ax.set_xticks(range(len(grid[param])), [str(v) for v in grid[param]])
    elif min(grid[param]) > 0 and max(grid[param]) / min(grid[param]) >= 8:
        ax.set_xscale("log", base=2)
    ys = [y for pts in series.values() for _, y in pts]
    if min(ys) > 0 and max(ys) / min(ys) >= 10:
        ax.set_yscale("log")
    ax.set_xlabel(param)
    ax.set_ylabel("median time (s)" if kind == "measurement" else "value")
    ax.set_title(f"sweep over {param}" + (f" ({len(series) - 12} more series not shown)" if len(series) > 12 else ""))
    ax.legend(fontsize=6)
    fig.tight_layout()
    path = out_dir / f"sweep_{param}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sweep_claims_figure(rows: list[dict], param: str, grid: dict[str, list]):
    """Each claim measured in a sweep, on a panel of its own: its value and interval (coloured by verdict) at each
    value of `param`, the threshold as a black line (a `partly` one dashed), log scale where the claim is a ratio,
    each point's value and verdict printed beside it and the claim's full text on top, so the figure reads without
    the table. A line per combination of the other swept parameters. -> Figure, or None when no claim was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..kit.claims import COLORS, ClaimRow, _ratio_scale, _wrap, log_ticks
    from ..kit.formatting import num, num_interval

    others = [k for k in grid if k != param]
    by_claim: dict[str, list] = {}
    text: dict[str, str] = {}
    for r in rows:
        if r["kind"] != "claim" or param not in (r.get("params") or {}) or not drawable(r):
            continue
        nums = ClaimRow.from_log(r)
        if nums.value is None or nums.verdict == "not tested here":
            continue
        key = nums.key
        text[key] = nums.claim
        series = ", ".join(f"{k}={r['params'].get(k)}" for k in others)
        by_claim.setdefault(key, []).append((series, r["params"][param], nums, r["verdict"]))
    if not by_claim:
        return None
    values = list(grid[param])
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    order = {json.dumps(v): i for i, v in enumerate(values)}
    fig, axes = plt.subplots(len(by_claim), 1, figsize=(8, 0.8 + 2.6 * len(by_claim)), squeeze=False)
    for ax, (key, pts) in zip(axes[:, 0], by_claim.items()):
        names = list(dict.fromkeys(s for s, *_ in pts))
        n0 = pts[0][2]
        thr = n0["at_least"] if n0.get("at_least") is not None else n0["at_most"]
        log = all(_ratio_scale({k: v for k, v in n.items() if k in ("value", "low", "high", "at_least", "at_most")})
                  for _, _, n, _ in pts)
        for j, name in enumerate(names):
            mine = sorted((p for p in pts if p[0] == name), key=lambda p: order.get(json.dumps(p[1]), 0))
            xs = [(x if numeric else order.get(json.dumps(x), 0)) for _, x, _, _ in mine]
            if not numeric and len(names) > 1:
                xs = [x + (j - (len(names) - 1) / 2) * 0.08 for x in xs]  # side by side, not on top of each other
            ax.plot(xs, [n["value"] for _, _, n, _ in mine], color="#9e9e9e", lw=0.8, zorder=1,
                    label=name or None)
            for x, (_, _, n, verdict) in zip(xs, mine):
                color = COLORS.get(verdict, "black")
                lo = n["low"] if math.isfinite(n["low"]) else n["value"]
                hi = n["high"] if math.isfinite(n["high"]) else n["value"]
                ax.errorbar([x], [n["value"]], yerr=[[n["value"] - lo], [hi - n["value"]]], fmt="o", color=color,
                            mec="black", mew=0.5, capsize=3, zorder=2)
                ax.annotate(f"{num_interval(n['value'], n['low'], n['high'])} {verdict}", (x, n["value"]),
                            textcoords="offset points", xytext=(6, 4), fontsize=6.5)
        ax.axhline(thr, color="black", lw=1.1)
        rule = pts[0][2].get("rule") or (f">= {num(thr)}" if n0.get("at_least") is not None else f"<= {num(thr)}")
        ax.annotate(f"threshold {rule}", (0, thr), xycoords=("axes fraction", "data"), textcoords="offset points",
                    xytext=(2, 3), fontsize=6.5)
        if n0.get("partly") is not None:
            ax.axhline(n0["partly"], color="#f9a825", lw=1.0, ls="--")
        if log:
            ax.set_yscale("log")
            log_ticks(ax.yaxis)
        ax.margins(x=0.25)  # room for the printed values beside the last point
        if not numeric:
            ax.set_xticks(range(len(values)), [str(v) for v in values])
        elif min(values) > 0 and max(values) / min(values) >= 8:
            ax.set_xscale("log", base=2)
            ax.set_xticks(values, [str(v) for v in values])
        ax.set_xlabel(param)
        ax.set_ylabel(pts[0][2].get("quantity") or "measured")
        ax.set_title(_wrap(text[key], 110), fontsize=8, loc="left")
        if any(names):
            ax.legend(fontsize=6)
    fig.tight_layout()
    return fig
