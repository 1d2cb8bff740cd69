"""The verdict card: what a notebook decided, at its top, filled in as the cells below decide.

    card = VerdictCard(CLAIMS)                      # shown here, under the question: each claim "pending"
    ...                                             # the parameters cell
    run = setup("04_early_exit", globals(), EarlyExitParams, card=card)   # the card names the run's device
    ...
    card.figure(fig, "strategies")                  # the study's main figure, beside the table (and saved)
    rows = card.judge(study.evidence(run, found))   # judged (CLAIMS.judge), logged, and the card above filled in

One row per claim the run judges: the claim (its source), the report's number, the measured value with its interval
and unit (how it was measured under it), the verdict, the setup and device it was measured on, and the function
that measured it; the claims not tested here are folded into one line that names them and why. The same table is
what `perflab report` prints for a study (`card_markdown`, from the logged rows) and what `perflab pages` writes
into the README, so a number reads the same wherever it is shown.
"""
from __future__ import annotations

import base64
import functools
import html
import io
from collections.abc import Iterable, Mapping

from .claims import COLORS, ClaimRow, Claims, as_row, log_rows
from .formatting import value_text

PENDING = "pending"


def measured_cell(r: ClaimRow) -> str:
    """'3.41x [3.20, 3.64]' (the decided value, its interval, its unit), '0' for a count; a row logged without numbers
    (before the claims kit) by its sentence; '-' when nothing was measured."""
    if r.value is None:
        return r.measured if r.measured and r.verdict != "not tested here" else "-"
    return value_text(r.value, r.low, r.high, r.unit)


def how_cell(r: ClaimRow) -> str:
    """How the number was judged, short: 'against >= 3x · 99% interval, 11 paired rounds, 29.7 s'."""
    parts = [f"against {r.rule}"] if r.rule and r.unit != "bool" else []
    if r.value is not None and r.low == r.high:
        parts.append("exact")
    elif r.rounds is not None and r.confidence is not None:
        what = "paired rounds" if r.calls and "/" in r.calls else "rounds"
        parts.append(f"{r.confidence:.0%} interval, {r.rounds} {what}"
                     + (f", {r.seconds:.3g} s" if r.seconds is not None else ""))
    elif r.value is not None:
        parts.append("99% interval")
    return " · ".join(parts)


def setup_cell(r: ClaimRow, device: str = "") -> str:
    """'batch=128 · AMD EPYC (cpu)': the claim's setup as it ran, and the device (`device`; '' where the card names
    it once for every row); '-' for a claim about no setup on a card that names its device."""
    keys = [f"{k}={v}" for k, v in (r.setup or {}).items() if k != "device"]
    return " · ".join([*keys, device]).strip(" ·") or "-"


def _on(device: str) -> str:
    return f"Every claim measured on {device}." if device else ""


def _missed(r: ClaimRow) -> bool:
    """A speedup claim ('at least Nx faster', decided in rounds) that does not hold or holds only partly: where the
    card names the top cause `perflab diagnose` found in the baseline, what the optimized version had to remove. Not a
    bound on one version's own time (within 3x of the floor: at_most), whose cause is that version's."""
    return (r.rounds is not None and r.verdict in ("does not hold", "partly holds") and r.unit == "x"
            and r.at_least is not None)


def what_would_decide(r: ClaimRow) -> str:
    """A within-noise verdict's line on what would decide it, from its decision's note ('about 9.2 s more of rounds
    would decide it at this spread (the value 20% from the threshold)', or that no budget would); '' otherwise."""
    if r.verdict != "within noise" or not r.note:
        return ""
    return next((p for p in r.note.split("; ") if p.startswith(("about ", "no budget would decide it"))), "")


def verdict_cell(r: ClaimRow, cause: str = "") -> str:
    """'does not hold: 248 ops per step at 8.1 us each, launch-bound (perflab diagnose)' for a timed claim that missed,
    where a diagnosis gave a cause; 'within noise: about 9.2 s more of rounds would decide it ...' where the decision
    said so; the verdict alone otherwise."""
    if cause and _missed(r):
        return f"{r.verdict}: {cause} (perflab diagnose)"
    more = what_would_decide(r)
    return f"{r.verdict}: {more}" if more else r.verdict


_ORDER = {"does not hold": 0, "partly holds": 1, "within noise": 2, "holds": 3, "fixed": 4}


def ordered(rows: list[ClaimRow], headline: str = "") -> list[ClaimRow]:
    """The judged rows as a reader needs them: the headline claim first, then what does not hold, holds partly or is
    undecided, then what holds; the claims' own order within each (a stable sort)."""
    return sorted(rows, key=lambda r: (r.key != headline if headline else True, _ORDER.get(r.verdict, 5)))


def _untested(rows: list[ClaimRow]) -> list[tuple[str, list[str]]]:
    """The claims not tested here, grouped by why: [(why, [keys])]."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.verdict == "not tested here":
            groups.setdefault(r.why or "nothing measured", []).append(r.key)
    return list(groups.items())


def untested_line(rows: Iterable) -> str:
    """'Not tested here (3): target_4x, bucketed_full (measured on cpu); v10 (another engine: not comparable).'"""
    rows = [as_row(r) for r in rows]
    groups = _untested(rows)
    if not groups:
        return ""
    n = sum(len(keys) for _, keys in groups)
    return f"Not tested here ({n}): " + "; ".join(f"{', '.join(keys)} ({why})" for why, keys in groups) + "."


def untested_reasons(rows: Iterable) -> list[tuple[str, str]]:
    """[(keys, why they cannot be tested here, and what this run measured instead)] for the claims not tested here
    that say more than the line's "measured on cpu": the claim's `why_not` (why that run cannot test it) and the row's
    sentence (the indicative number a reader looks for: "0.80x in warm medians, indicative"), without the reason
    twice where the sentence already holds it; claims with the same text share one item ("a, b: why")."""
    items: dict[str, list[str]] = {}
    for r in (as_row(x) for x in rows):
        if r.verdict != "not tested here":
            continue
        why = r.why_not if r.why_not and r.why_not != r.why else ""
        here = r.measured if r.measured and r.measured not in (why, r.why) else ""
        if why and here and why.rstrip(". ") in here:   # the sentence says the reason already
            why = ""
        text = "; ".join(x for x in (why, f"here: {here}" if here else "") if x)
        if text:
            items.setdefault(text, []).append(r.key)
    return [(", ".join(keys), text) for text, keys in items.items()]


def _reasons_markdown(rows: list[ClaimRow]) -> list[str]:
    why = untested_reasons(rows)
    if not why:
        return []
    return ["", "<details><summary>why each is not tested here, and what this run measured instead</summary>", "",
            *[f"- **{k}**: {_md(w)}" for k, w in why], "", "</details>"]


def _reasons_html(rows: list[ClaimRow]) -> str:
    why = untested_reasons(rows)
    if not why:
        return ""
    items = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(w)}</li>" for k, w in why)
    return (f'<details style="font-size:12px; color:#616161"><summary>why each is not tested here, and what this run '
            f'measured instead</summary><ul style="margin:2px 0 0 0">{items}</ul></details>')


def card_markdown(rows: Iterable, *, device: str = "", figure: str = "", title: str = "", cause: str = "",
                  headline: str = "") -> str:
    """The card as Markdown (REPORT.md, the README): a table of the judged claims (`ordered`: `headline` first), the
    untested line, the figure's link (`figure`: a path relative to the Markdown file); `cause`: the top cause of the
    run's diagnosis, beside each timed claim that missed."""
    rows = [as_row(r) for r in rows]
    judged = ordered([r for r in rows if r.verdict != "not tested here"], headline)
    out = [f"**{title}**", ""] if title else []
    if judged:
        out += ["| claim | the report said | measured here | verdict | setup |", "|---|---|---|---|---|"]
        for r in judged:
            claim = r.claim + (f" ({r.source})" if r.source else "")
            measured = f"**{measured_cell(r)}** {how_cell(r)}".strip() if r.value is not None else measured_cell(r)
            out.append("| " + " | ".join(_md(x) for x in (claim, r.claimed, measured, f"**{verdict_cell(r, cause)}**",
                                                            setup_cell(r))) + " |")
    else:
        out.append("No claim was judged on this setup.")
    line = " ".join(x for x in (_on(device) if judged else "", untested_line(rows)) if x)
    if line:
        out += ["", line]
    out += _reasons_markdown(rows)
    if figure:
        out += ["", f"![the main figure]({figure})"]
    return "\n".join(out)


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


_STYLE = ("font-family: system-ui, sans-serif; font-size: 13px; border-collapse: collapse; margin: 0;")
_CELL = "padding: 4px 8px; border-bottom: 1px solid #e0e0e0; text-align: left; vertical-align: top;"


def _badge(verdict: str) -> str:
    color = COLORS.get(verdict, "#9e9e9e")
    return (f'<span style="background:{color}; color:white; padding:1px 7px; border-radius:9px; '
            f'white-space:nowrap; font-weight:600">{html.escape(verdict)}</span>')


WIDE = 760   # a card figure wider than this (px) goes under the table at its own size, not shrunk beside it


def png_width(png: bytes) -> int:
    """A PNG's width in pixels, from its IHDR chunk (0 if `png` is not one)."""
    return int.from_bytes(png[16:20], "big") if png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) >= 24 else 0


def card_html(rows: Iterable, *, device: str = "", pending: Iterable = (), figure_png: bytes | None = None,
              caption: str = "", title: str = "", cause: str = "", headline: str = "") -> str:
    """The card as HTML (a notebook's output): judged rows (`ordered`: `headline` first), `pending` claims (not yet
    decided) in grey, the untested line, and the figure (PNG bytes) beside the table (under it where the figure is
    wider than WIDE px, or the page narrow), at its own size."""
    rows = [as_row(r) for r in rows]
    judged = ordered([r for r in rows if r.verdict != "not tested here"], headline)
    esc = html.escape
    body = []
    for r in judged:
        claim = esc(r.claim) + (f' <span style="color:#757575">({esc(r.source)})</span>' if r.source else "")
        by = f'<br><code style="font-size:11px; color:#757575">{esc(r.measured_by)}</code>' if r.measured_by else ""
        measured = (f'<b style="white-space:nowrap">{esc(measured_cell(r))}</b><br>'
                    f'<span style="font-size:11px; color:#616161">{esc(how_cell(r))}</span>')
        body.append(f'<tr><td style="{_CELL}">{claim}{by}</td><td style="{_CELL}">{esc(r.claimed)}</td>'
                    f'<td style="{_CELL}">{measured}</td><td style="{_CELL}">{_badge(r.verdict)}'
                    + (f'<br><span style="font-size:11px; color:#616161">{esc(r.why)}</span>' if r.why else "")
                    + (f'<br><span style="font-size:11px; color:#616161">{esc(cause)} (perflab diagnose)</span>'
                       if cause and _missed(r) else "")
                    + (f'<br><span style="font-size:11px; color:#616161">{esc(what_would_decide(r))}</span>'
                       if what_would_decide(r) else "")
                    + f'</td><td style="{_CELL}; font-size:12px">{esc(setup_cell(r))}</td></tr>')
    for c in pending:
        body.append(f'<tr style="color:#9e9e9e"><td style="{_CELL}">{esc(c.text)}</td><td style="{_CELL}">'
                    f'{esc(c.claimed)}</td><td style="{_CELL}">-</td><td style="{_CELL}">{PENDING}</td>'
                    f'<td style="{_CELL}"></td></tr>')
    head = "".join(f'<th style="{_CELL}">{h}</th>' for h in
                   ("claim", "the report said", "measured here", "verdict", "setup"))
    table = (f'<table style="{_STYLE}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
             if body else "<p>No claim was judged on this setup.</p>")
    line = " ".join(x for x in (_on(device) if judged else "", untested_line(rows)) if x)
    foot = (f'<p style="font-size:12px; color:#616161; margin:6px 0 0 0">{esc(line)}</p>' if line else "") + \
        _reasons_html(rows)
    heading = f'<div style="font-weight:600; margin-bottom:4px">{esc(title)}</div>' if title else ""
    left = f'<div style="flex: 1 1 560px; min-width: 420px">{heading}{table}{foot}</div>'
    right = ""
    if figure_png:
        src = "data:image/png;base64," + base64.b64encode(figure_png).decode()
        cap = f'<div style="font-size:11px; color:#616161">{esc(caption)}</div>' if caption else ""
        width = png_width(figure_png)   # drawn at its own size: beside the table, or under it where it is wider
        box = (f"flex: 1 1 640px; max-width: {max(width, 640)}px" if width <= WIDE else
               f"flex: 1 1 100%; max-width: {width}px")
        right = f'<div style="{box}"><img src="{src}" style="max-width:100%">{cap}</div>'
    return f'<div style="display:flex; gap:16px; flex-wrap:wrap; align-items:flex-start">{left}{right}</div>'


def card_text(rows: Iterable, *, device: str = "", pending: Iterable = (), cause: str = "", headline: str = "") -> str:
    """The card as plain text (a terminal, a notebook viewer without HTML)."""
    rows = [as_row(r) for r in rows]
    lines = [f"[{verdict_cell(r, cause)}] {r.claim}: {measured_cell(r)} ({how_cell(r)}; {setup_cell(r, device)})"
             for r in ordered([r for r in rows if r.verdict != "not tested here"], headline)]
    lines += [f"[{PENDING}] {c.text}" for c in pending]
    line = untested_line(rows)
    why = [f"  {k}: {w}" for k, w in untested_reasons(rows)]
    return "\n".join(lines + ([line] if line else []) + why) or "no claims"


def device_text(env: Mapping) -> str:
    """'AMD EPYC (cpu), 1 thread': the device a run's rows were measured on (its environment stamp)."""
    name, kind = env.get("device_name") or "", env.get("device_kind") or env.get("device") or ""
    threads = env.get("torch_threads")
    text = f"{name} ({kind})" if name and kind and kind not in name else (name or kind)
    return text + (f", {threads} thread{'s' if threads != 1 else ''}" if threads and "cpu" in str(kind) else "")


def stamp_text(env: Mapping) -> str:
    """'torch 2.13.0+cpu · commit 7a84826 (dirty tree)': what else a card's numbers depend on (its title says it, so
    that the card, the first thing a reader sees, needs no line below it)."""
    commit = env.get("commit")
    parts = [f"torch {env['torch']}"] if env.get("torch") else []
    if commit:
        parts.append(f"commit {str(commit)[:7]}" + (" (dirty tree)" if env.get("dirty") else ""))
    return " · ".join(parts)


class VerdictCard:
    """A notebook's verdicts, shown where it is made (under the question, before the parameters) and updated in
    place by `attach` (the run: `setup(..., card=card)`), `figure` and `judge` (module doc). Outside a notebook it
    shows nothing until printed."""

    def __init__(self, claims: Claims, run=None, *, title: str = "", show: bool = True):
        if not isinstance(claims, Claims):
            raise TypeError(f"VerdictCard(CLAIMS): the study's Claims, got {type(claims).__name__}")
        self.claims, self.run, self.rows, self.title, self.cause = claims, None, None, title, ""
        self.headline = claims.headline   # the row the card leads with (`judge(headline=)` where this run's is another)
        self._png, self._caption, self._handle = None, "", None
        if show:
            self._handle = _display(self)
        if run is not None:
            self.attach(run)

    def attach(self, run) -> VerdictCard:
        """The run whose verdicts this card shows (its device, its log, its folder)."""
        self.run = run
        self.title = self.title or f"Verdicts of {run.study}"
        self._update()
        return self

    def _run(self, what: str):
        if self.run is None:
            raise RuntimeError(f"VerdictCard.{what}: no run yet: setup(..., card=card) attaches it")
        return self.run

    @property
    def device(self) -> str:
        return device_text(getattr(self.run.log, "env", {}) or {}) if self.run is not None else ""

    def judge(self, found: Mapping, *, diagnosis=None, headline: str | None = None) -> list[ClaimRow]:
        """Judge every claim on `found` (`Claims.judge`: {key: Evidence}), log the rows, fill the card in; `diagnosis`:
        the baseline's or the version's `perflab.kit.diagnose(...)`, whose top cause the card names beside a timed
        claim that does not hold (and logs, for REPORT.md); `headline`: the claim this run leads with where it is not
        the claims' own (a study whose headline depends on the device: the card, REPORT.md and the README lead with
        the same row). -> rows"""
        run = self._run("judge")
        if headline is not None:
            if headline not in {c.key for c in self.claims}:
                raise ValueError(f"VerdictCard.judge: headline {headline!r} is no claim of this study; "
                                 f"claims: {', '.join(c.key for c in self.claims)}")
            self.headline = headline
        rows = self.claims.judge(found, cfg=run.cfg, device=run.device)
        log_rows(run.log, rows, headline=self.headline, quiet=True)
        if diagnosis is not None:
            self.cause = diagnosis.cause_line()
            diagnosis.log(run.log)
        self.rows = rows
        self._update()
        return rows

    def figure(self, fig, name: str, caption: str = "") -> None:
        """Save `fig` as the run's `<name>.png` and show it beside the table (logged as the card's figure, so that
        `perflab report` links it)."""
        run = self._run("figure")
        path = run.savefig(fig, name)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")   # legible in a 640-760 px column
        self._png, self._caption = buf.getvalue(), caption
        run.log.note(f"the card's figure: {path.name}", card_figure=path.name)
        self._update()

    def details(self):
        """Each judged claim in full (what was measured, how it was judged, the decision's note) as a DataFrame:
        the appendix of the card, folded in a notebook (`<details>`: a reader opens it)."""
        import pandas as pd

        from .claims import judged_text, verdict_text

        frame = pd.DataFrame([{"claim": r.key, "verdict": verdict_text(r), "measured here": r.measured,
                               "judged": judged_text(r), "measured by": r.measured_by}
                              for r in self.rows or []]).set_index("claim")
        whole = _whole_frame()(frame)
        whole.fold = f"Each claim in full ({len(frame)}): what was measured, how it was judged (click to open)"
        return whole

    def _pending(self):
        return [] if self.rows is not None else list(self.claims)

    def _repr_html_(self) -> str:
        env = getattr(self.run.log, "env", {}) or {} if self.run is not None else {}
        title = " · ".join(x for x in (self.title or "Verdicts", self.device, stamp_text(env)) if x)
        return card_html(self.rows or [], device=self.device, pending=self._pending(), figure_png=self._png,
                         caption=self._caption, title=title, cause=self.cause, headline=self.headline or "")

    def __repr__(self) -> str:
        return card_text(self.rows or [], device=self.device, pending=self._pending(), cause=self.cause,
                         headline=self.headline or "")

    def _update(self) -> None:
        if self._handle is not None:
            self._handle.update(self)


def _display(obj):
    """Show `obj` with a display id (updated in place later) where IPython runs a kernel; else None."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    if get_ipython() is None:
        return None
    return display(obj, display_id=True)


@functools.cache
def _whole_frame():
    """A DataFrame that shows every sentence whole (pandas cuts a cell at display.max_colwidth, 50 characters)."""
    import pandas as pd

    class Whole(pd.DataFrame):
        _metadata = ["fold"]
        fold = ""    # a title: the HTML folded under it (`<details>`), opened by a click

        @property
        def _constructor(self):
            return Whole

        def _repr_html_(self):
            with pd.option_context("display.max_colwidth", None):
                inner = super()._repr_html_()
            return (f"<details><summary>{html.escape(self.fold)}</summary>{inner}</details>" if self.fold
                    else inner)

        def __repr__(self):
            with pd.option_context("display.max_colwidth", None, "display.max_columns", None,
                                   "display.expand_frame_repr", False):
                return super().__repr__()

    return Whole
