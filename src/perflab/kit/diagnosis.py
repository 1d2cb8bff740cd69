"""What `perflab.kit.diagnose` found: a `Diagnosis` (the step's time, the findings ranked by cost) that shows itself.

    d = diagnose(step)             # perflab.kit.diagnosing
    d                              # in a notebook: an HTML table; print(d): the same as text, one screen
    d.findings[0].kind, d.findings[0].where.short, d.findings[0].count, d.findings[0].share
    d.figure()                     # the step's time by cause (matplotlib)
    d.save("diagnosis.json")       # the JSON (`SCHEMA`), written whole or not at all
    cause_line(d)                  # '248 ops per step at 8.1 us each, launch-bound': beside a claim that does not hold

A finding: `kind` (one of KINDS), `where` (the user's line, `perflab.kit.frames.Site`) and `op`, `count` per step,
`share` of the step's time (a `Measured` with its 99% interval, where it is timed), `evidence` (the counter or
profile it came from), `fix` (one line) and `study` (the notebook that shows the fix), `stack` (the user's frames,
innermost first, up to the step) and `detail`. The JSON's fields and their meaning: docs/command.md#perflab-diagnose.
"""
from __future__ import annotations

import dataclasses
import html
import json
import math
import os
import tempfile
from pathlib import Path

from .formatting import fmt_seconds, num, sig
from .frames import Site
from .judge import Measured

SCHEMA = "perflab.diagnosis/1"

HOST_SYNC, COPY, RECOMPILE, GRAPH_BREAK = "host sync", "host-to-device copy", "recompile", "graph break"
LAUNCH_BOUND, LOOP, DATA, MEMORY, FLOOR = "launch-bound", "Python loop of small ops", "data loading", "memory", \
    "far from the floor"
LIFETIME = "CUDA-graph lifetime"
KINDS = (HOST_SYNC, RECOMPILE, GRAPH_BREAK, LAUNCH_BOUND, COPY, LOOP, DATA, MEMORY, FLOOR, LIFETIME)
COUNTED = {HOST_SYNC: "syncs", COPY: "copies", RECOMPILE: "recompiles", GRAPH_BREAK: "breaks", LAUNCH_BOUND: "ops",
           LOOP: "ops"}   # what a finding's count per step counts, where it is one thing


@dataclasses.dataclass
class Finding:
    kind: str
    where: Site | None
    op: str
    count: float | None          # per step (None: not a per-step count, e.g. a graph break seen at compile time)
    share: Measured | None       # of the step's time, where timed
    evidence: str
    fix: str
    study: str
    stack: tuple = ()            # the user's frames, innermost first, up to the step's own
    detail: str = ""
    once_s: float | None = None  # seconds paid once, not per step (a recompile during warm-up)

    @property
    def cost_s(self) -> float | None:
        """Seconds of the step's time it accounts for (share x the step's mean time), set by the Diagnosis."""
        return getattr(self, "_cost_s", None)

    def as_dict(self, rank: int) -> dict:
        return {"rank": rank, "kind": self.kind,
                "where": {**self.where.as_dict(), "op": self.op} if self.where else {"op": self.op},
                "count_per_step": self.count,
                "share": None if self.share is None else {"value": self.share.value, "low": _finite(self.share.low),
                                                          "high": _finite(self.share.high)},
                "cost_s": self.cost_s, "once_s": self.once_s, "evidence": self.evidence, "fix": self.fix,
                "study": self.study, "detail": self.detail, "stack": [s.as_dict() for s in self.stack]}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclasses.dataclass
class Diagnosis:
    target: str
    device: str
    step: Measured                 # seconds per step: the mean of the timed calls and its 99% interval
    calls: int                     # timed calls
    findings: list[Finding]
    counts: dict                   # per step: host syncs, copies, ops (the launch count), compiles... (docs)
    overhead: dict                 # diagnose's own cost: wall time, instruments' slowdown (docs)
    notes: list[str] = dataclasses.field(default_factory=list)
    first_call_s: float = 0.0

    def __post_init__(self):
        for f in self.findings:
            f._cost_s = f.share.value * self.step.value if f.share is not None else None

    # ---- text -------------------------------------------------------------------------------------------------
    def headline(self) -> str:
        s = self.step
        spread = f" [{fmt_seconds(s.low)}, {fmt_seconds(s.high)}]" if math.isfinite(s.low) and math.isfinite(s.high) \
            and s.low != s.high else ""
        return (f"{self.target} on {self.device}: {fmt_seconds(s.value)} per step{spread} (mean of {self.calls} "
                f"calls, 99% interval); first call {fmt_seconds(self.first_call_s)}; "
                f"{len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}")

    def rows(self, top: int | None = None) -> list[dict]:
        rows = []
        for i, f in enumerate(self.findings[:top] if top else self.findings, 1):
            rows.append({"#": str(i), "kind": f.kind, "where": _where(f), "op": f.op,
                         "per step": "" if f.count is None else f"{num(f.count)} {COUNTED.get(f.kind, '')}".strip(),
                         "share": _share(f), "fix": f"{f.fix} ({f.study})" if f.study else f.fix,
                         "evidence": f.evidence})
        return rows

    def table(self, top: int = 12, width: int = 160) -> str:
        """The one-screen text: the headline, one line per finding, its evidence and fix under it, the notes."""
        lines = [self.headline()]
        rows = self.rows(top)
        if rows:
            cols = ("#", "kind", "where", "op", "per step", "share")
            w = {c: min(max(len(c), *(len(r[c]) for r in rows)), 52 if c == "where" else 40 if c == "op" else 30)
                 for c in cols}
            lines.append("  ".join(c.ljust(w[c]) for c in cols))
            for r in rows:
                lines.append("  ".join(_cut(r[c], w[c]).ljust(w[c]) for c in cols).rstrip())
                lines.append(_cut(f"     fix: {r['fix']}", width))
                lines.append(_cut(f"     evidence: {r['evidence']}", width))
        else:
            lines.append("no finding: no host sync, copy, recompile, graph break, loop or launch-bound pattern seen")
        if len(self.findings) > top:
            lines.append(f"... {len(self.findings) - top} more (the JSON has them all)")
        lines += [f"note: {n}" for n in self.notes]
        lines.append(_overhead_line(self.overhead))
        return "\n".join(lines)

    __str__ = table

    def __repr__(self) -> str:
        return self.table()

    def _repr_html_(self, top: int = 5) -> str:
        """Folded (`<details>`) under the headline and the top cause (a page shows what the step costs and why; the
        argument of a notebook does not need the rest): the `top` findings (# kind where op per step share) and,
        folded again, every finding with its fix and evidence, and the notes."""
        esc = html.escape

        def table(rows, cols):
            head = "".join(f"<th style='text-align:left'>{esc(c)}</th>" for c in cols)
            body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{esc(r[c])}</td>" for c in cols) + "</tr>"
                           for r in rows)
            return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

        rows = self.rows()
        short = ("#", "kind", "where", "op", "per step", "share")
        shown = rows[:top]
        more = f"; {len(rows) - top} more below" if len(rows) > top else ""
        overlap = ("shares overlap (a sync inside a loop counts in both), so they need not add to 100%"
                   if sum(f.share is not None for f in self.findings) > 1 else "")
        notes = "".join(f"<li>{esc(n)}</li>" for n in [*self.notes, _overhead_line(self.overhead)])
        lead = (f"<p style='font-size:12px; color:#616161'>{esc(' · '.join(x for x in (overlap, more) if x))}</p>"
                if overlap or more else "")
        cause = self.cause_line()
        summary = (f"<b>{esc(self.headline())}</b><br>" + (f"top cause: {esc(cause)}" if cause else "no finding")
                   + " <span style='color:#757575'>(open: the findings)</span>")
        return (f"<details class='perflab-diagnosis'><summary>{summary}</summary>"
                + (table(shown, short) if shown else "<p>no finding</p>") + lead
                + f"<details><summary>every finding ({len(rows)}) with its fix and evidence, and the notes</summary>"
                + (table(rows, (*short, "fix", "evidence")) if rows else "") + f"<ul>{notes}</ul></details></details>")

    # ---- JSON -------------------------------------------------------------------------------------------------
    def as_dict(self) -> dict:
        return {"schema": SCHEMA, "target": self.target, "device": self.device,
                "step": {"mean_s": self.step.value, "low_s": _finite(self.step.low), "high_s": _finite(self.step.high),
                         "calls": self.calls, "first_call_s": self.first_call_s},
                "findings": [f.as_dict(i) for i, f in enumerate(self.findings, 1)],
                "counts": self.counts, "overhead": self.overhead, "notes": self.notes}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1, default=str) + "\n"

    def save(self, path: str | os.PathLike) -> Path:
        """Write the JSON to `path` atomically: a temporary file beside it, renamed over it (never half-written)."""
        return write_atomic(path, self.to_json())

    # ---- figure -----------------------------------------------------------------------------------------------
    def figure(self, top: int = 10):
        """The step's time by cause: each timed finding's share with its 99% interval (shares may overlap: a sync
        inside a loop counts in both), and the launch count of the others in the labels. -> matplotlib Figure"""
        import matplotlib.pyplot as plt

        timed = [f for f in self.findings if f.share is not None][:top]
        fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * max(1, len(timed))))
        labels = [f"{f.kind}: {_where(f)}" for f in timed]
        vals = [100 * f.share.value for f in timed]
        lo = [100 * (f.share.value - f.share.low) if math.isfinite(f.share.low) else 0 for f in timed]
        hi = [100 * (f.share.high - f.share.value) if math.isfinite(f.share.high) else 0 for f in timed]
        y = list(range(len(timed)))[::-1]
        ax.barh(y, vals, xerr=[lo, hi], color="#c0504d", capsize=3)
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_xlabel(f"% of the step's time ({fmt_seconds(self.step.value)} per step; 99% intervals)")
        ax.set_xlim(0, 100)
        ax.set_title(f"{self.target}: the step's time by cause", fontsize=10)
        if not timed:
            ax.text(50, 0, "no timed finding", ha="center", va="center")
        fig.tight_layout()
        return fig

    def save_figure(self, path: str | os.PathLike) -> Path:
        """The figure as PNG at `path`, written atomically."""
        import matplotlib.pyplot as plt

        path = Path(path)
        fig = self.figure()
        tmp = _temporary(path, ".png")
        try:
            fig.savefig(tmp, dpi=110)
            os.replace(tmp, path)
        finally:
            plt.close(fig)
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def log(self, log, **fields) -> dict:
        """One "diagnosis" row in a run's results log (`run.log`, a `perflab.kit.results.ResultsLog`): the target,
        the headline, the top cause (`cause_line`) and the top findings; `perflab report` names that cause beside a
        timed claim of the run that does not hold."""
        top = [{"kind": f.kind, "where": f.where.short if f.where else "", "op": f.op, "count": f.count,
                "share": None if f.share is None else f.share.value} for f in self.findings[:5]]
        return log.append("diagnosis", target=self.target, device=self.device, step_s=self.step.value,
                          headline=self.headline(), cause=self.cause_line(), findings=top, **fields)

    # ---- the cause beside a claim ------------------------------------------------------------------------------
    def top(self, kinds: tuple[str, ...] | None = None) -> Finding | None:
        """The costliest finding (of `kinds`, if given), or None."""
        return next((f for f in self.findings if kinds is None or f.kind in kinds), None)

    def cause_line(self, kinds: tuple[str, ...] | None = None) -> str:
        return cause_line(self, kinds)


def cause_line(d: Diagnosis, kinds: tuple[str, ...] | None = None) -> str:
    """The top cause in a few words, for a verdict card beside a speed claim that does not hold ("does not hold: " +
    this): '248 ops per step at 8.1 us each, launch-bound'; '' when nothing was found."""
    f = d.top(kinds)
    if f is None:
        return ""
    at = f" at {f.where.short}" if f.where else ""
    share = f" ({f.share.value:.0%} of the step)" if f.share is not None else ""
    if f.kind == LAUNCH_BOUND:
        per = d.step.value / f.count if f.count else math.nan
        return f"{num(f.count)} ops per step at {fmt_seconds(per)} each, launch-bound"
    if f.kind in (HOST_SYNC, COPY):
        what = "host syncs" if f.kind == HOST_SYNC else "blocking host-to-device copies"
        return f"{num(f.count)} {what} per step ({f.op}){at}{share}"
    if f.kind == RECOMPILE:
        return f"recompiles{at}: {f.op}" + (f", {fmt_seconds(f.once_s)} compiling" if f.once_s else "")
    if f.kind == LOOP:
        return f"a Python loop of {num(f.count)} small ops per step{at}{share}"
    if f.kind == DATA:
        return f"batches built in the step{at}{share}, data loading"
    return f"{f.kind}{at}: {f.op}{share}"


def _where(f: Finding) -> str:
    """'probe1d/baseline.py:56 (_iter_event_chunks)': the file's last two parts (the JSON has its path)."""
    if f.where is None:
        return "(the step)"
    parts = f.where.short.replace("\\", "/").split("/")
    at = "/".join(parts[-2:])
    return f"{at} ({f.where.function})" if f.where.function else at


def _share(f: Finding) -> str:
    s = f.share
    if s is None:
        return "" if f.once_s is None else f"{fmt_seconds(f.once_s)} once"
    if math.isfinite(s.low) and math.isfinite(s.high):
        return f"{s.value:.1%} [{s.low:.1%}, {s.high:.1%}]"
    return f"{s.value:.1%}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _overhead_line(o: dict) -> str:
    if not o:
        return ""
    parts = [f"diagnose took {fmt_seconds(o.get('wall_s', 0.0))}"]
    if o.get("own_s") is not None:
        parts.append(f"{fmt_seconds(o['own_s'])} of it its own (not the step's calls)")
    if o.get("sampling_slowdown") is not None:
        parts.append(f"the line sampler slowed the step by {sig(100 * o['sampling_slowdown'], 2)}%")
    if o.get("counting_slowdown") is not None:
        parts.append(f"the counted call took {sig(o['counting_slowdown'], 2)}x a step")
    return "; ".join(parts) + " (none of it in the step's time)"


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """`text` into `path`: a temporary file in the same folder, then renamed over it."""
    path = Path(path)
    tmp = _temporary(path, ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _temporary(path: Path, suffix: str) -> str:
    """An empty file beside `path` (its folder made if missing), with the permissions a new file gets here."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    return tmp
