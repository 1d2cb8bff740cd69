"""One claims kit for every study and for `perflab new`: claims as data, the checks, the verdicts, the log, the figure.

    CLAIMS = Claims(
        Claim("syncs", "The optimized k-means makes at least 10x fewer host syncs", ">= 10x fewer", at_least=10),
        Claim("speed", "The optimized k-means is at least 2x faster at k=32", ">= 2x", at_least=2, setup={"k": 32}),
        headline="speed", params=Params)                  # checked here, at import: before anything is timed
    d = decide_speedup(base, opt, **CLAIMS["speed"].rule, max_run_time=2)   # perflab.kit.verdicts
    rows = CLAIMS.judge({"syncs": (Measured.exact(33), "33 -> 1 per iteration"), "speed": (d, "one call at k=32")},
                        cfg=run.cfg, device=run.device)
    CLAIMS.log(run, rows)                                 # results log, printed, the headline; then claims_figure(rows)
    report_checks(run, [Check("baseline equals the oracle", ok, "within 1e-5")])   # stops the notebook on a FAIL

Verdicts (`perflab.kit.verdicts.judge`, one rule for all): the whole interval on the claim's side: "holds" ("fixed"
for a claim that a cost can be removed, `fixed=True`); the whole interval on the other side: "does not hold", or
"partly holds" when the whole interval still passes `partly`; straddling: "within noise". A claim names the setup
it is about (`setup={"batch": 64, "device": "cuda"}`: parameters of the study, and the device type the run used):
measured under another it is "not tested here", and the row says what was measured instead ("measured at
batch=16"). Every claim mistake is a `ClaimError` naming the claim and what is allowed, raised when the claims are
built (an unknown field, a setup key the parameters do not have, a headline that is no claim) or when they are
judged (a measurement for no claim, a claim without one, a decision made against another threshold).
"""
from __future__ import annotations

import collections
import dataclasses
import math
import typing
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .formatting import num, value_text, with_unit
from .judge import Decision, Measured, judge

DEVICE_TYPES = ("cpu", "cuda", "mps")


class ClaimError(ValueError):
    """A claim that cannot be judged as written: the message names the claim and what is allowed."""


_FIELDS = ("at_least", "at_most", "partly", "fixed", "setup", "source", "metric", "why_not", "unit", "measured_by",
           "shown")


@dataclasses.dataclass(frozen=True, init=False)
class Claim:
    """A claim as data: `key` (how code names it), `text` (the claim, as said), `claimed` (its number, as written)
    and the rule: exactly one of `at_least` / `at_most`, `partly` (a smaller threshold on the same side: a real but
    smaller effect), `fixed` ("holds" reads "fixed": the claim is that a cost is removed), `setup` (the parameters
    and device type it is about), `source` (where it comes from: "seed 002", "issue 13"), `metric` (what is measured
    here, in words), `why_not` (why it cannot be tested elsewhere), `unit` (how its number reads: "x" for a ratio,
    "%" for a share given as a fraction, "GiB", "ms", "" for a bare count, "bool" for a pass/fail claim judged as 1
    against at_least=1: it reads "yes"/"no"), `measured_by` (the function that
    measures it, named from the study's package: "study.decide_recycle"; `Claims.measurer` finds it) and `shown` (the
    parameters its card row names as this run ran them, beside its setup: the sizes it was measured at; None: the
    study's `Claims(shown=...)`)."""
    key: str
    text: str
    claimed: str
    at_least: float | None
    at_most: float | None
    partly: float | None
    fixed: bool
    setup: tuple
    source: str
    metric: str
    why_not: str
    unit: str
    measured_by: str
    shown: tuple | None

    def __init__(self, key: str, text: str, claimed: str, **rule: Any):
        if not isinstance(key, str) or not key.isidentifier():
            raise ClaimError(f"a claim's key must be a name like 'speed_2x', got {key!r}")
        unknown = sorted(set(rule) - set(_FIELDS))
        if unknown:
            raise ClaimError(f"claim {key!r}: unknown field {', '.join(map(repr, unknown))}; a Claim takes key, text, "
                             f"claimed and {', '.join(_FIELDS)}")
        for name, v in (("text", text), ("claimed", claimed)):
            if not isinstance(v, str) or not v:
                raise ClaimError(f"claim {key!r}: {name} must be a non-empty string, got {v!r}")
        setup = rule.get("setup") or {}
        if not isinstance(setup, Mapping) or not all(isinstance(k, str) for k in setup):
            raise ClaimError(f"claim {key!r}: setup must be a mapping of parameter name to value, got {setup!r}")
        if "device" in setup and setup["device"] not in DEVICE_TYPES:
            raise ClaimError(f"claim {key!r}: setup's device is a device type, one of {DEVICE_TYPES}, "
                             f"got {setup['device']!r}")
        values = dict(key=key, text=text, claimed=claimed, at_least=rule.get("at_least"), at_most=rule.get("at_most"),
                      partly=rule.get("partly"), fixed=rule.get("fixed", False), setup=tuple(setup.items()),
                      source=rule.get("source", ""), metric=rule.get("metric", ""), why_not=rule.get("why_not", ""),
                      unit=rule.get("unit", ""), measured_by=rule.get("measured_by", ""),
                      shown=_names(key, rule["shown"]) if rule.get("shown") is not None else None)
        for name in ("unit", "measured_by"):
            if not isinstance(values[name], str):
                raise ClaimError(f"claim {key!r}: {name} must be a string, got {values[name]!r}")
        if values["measured_by"] and not all(p.isidentifier() for p in values["measured_by"].split(".")):
            raise ClaimError(f"claim {key!r}: measured_by names a function from the study's package, like "
                             f"'study.decide_speed', got {values['measured_by']!r}")
        try:
            judge(Measured.exact(0.0), at_least=values["at_least"], at_most=values["at_most"], partly=values["partly"])
        except (TypeError, ValueError) as e:
            raise ClaimError(f"claim {key!r}: {str(e).removeprefix('judge: ')}") from None
        if not isinstance(values["fixed"], bool):
            raise ClaimError(f"claim {key!r}: fixed must be True or False, got {values['fixed']!r}")
        for k, v in values.items():
            object.__setattr__(self, k, v)

    @property
    def rule(self) -> dict:
        """The thresholds, as `decide_speedup(..., **claim.rule)` and `judge(m, **claim.rule)` take them."""
        return {k: getattr(self, k) for k in ("at_least", "at_most", "partly") if getattr(self, k) is not None}

    @property
    def rule_text(self) -> str:
        """'>= 3x (partly: >= 1.05x)', '>= 70%', '<= 0.88 ms': the thresholds in the claim's unit."""
        if self.unit == "bool":  # a pass/fail claim: 1 against >= 1 ("yes"), or 0 against <= 0 ("no")
            return "yes" if self.at_least is not None else "no"
        side = ">=" if self.at_least is not None else "<="
        t = f"{side} {with_unit(self.at_least if self.at_least is not None else self.at_most, self.unit)}"
        return t + (f" (partly: {side} {with_unit(self.partly, self.unit)})" if self.partly is not None else "")

    def off_setup(self, cfg: Any = None, device_type: str = "") -> str:
        """'' when this run is the setup the claim is about, else what was measured instead ('batch=16', 'cpu')."""
        on, at = [], []
        for k, want in self.setup:
            have = device_type if k == "device" else getattr(cfg, k, None) if cfg is not None else None
            if have != want:
                (on if k == "device" else at).append(str(have) if k == "device" else f"{k}={have}")
        return " ".join(([f"on {on[0]}"] if on else []) + ([f"at {', '.join(at)}"] if at else []))

    def decide(self, decide_fn, *args, cfg: Any, device, **kw) -> Decision | None:
        """`decide_fn(*args, **claim.rule, max_run_time=cfg.verdict_time, device=device, **kw)` (a decide_* of
        `perflab.kit.verdicts`) where this run is the setup the claim is about; elsewhere None, with no time spent
        (the claim then reads "not tested here", and says what was measured instead)."""
        if self.off_setup(cfg, getattr(device, "type", str(device).split(":")[0])):
            return None
        return decide_fn(*args, **self.rule, max_run_time=cfg.verdict_time, device=device, **kw)

    def verdict(self, m: Measured | Decision | None, cfg: Any = None, device_type: str = "") -> str:
        """This claim's verdict on `m` in this run's setup."""
        if m is None or self.off_setup(cfg, device_type):
            return "not tested here"
        v = judge(m.measured if isinstance(m, Decision) else m, **self.rule)
        return "fixed" if self.fixed and v == "holds" else v


class Evidence(NamedTuple):
    """What a claim is judged on (a study's `evidence` gives one per claim, `Claims.judge` takes them): the
    measurement (a `Measured`, a `Decision`, or None where nothing was measured here), the sentence that says what
    was measured, and `at`: the claim's setup keys where the measurement ran at other values than the run's
    parameters say ({"batch": 2048})."""
    measured: Any
    sentence: str
    at: Mapping = {}


_NUMBER_FIELDS = ("at_least", "at_most", "partly", "value", "low", "high", "confidence", "seconds", "typical",
                  "typical_low", "typical_high")


@dataclasses.dataclass(frozen=True)
class ClaimRow(Mapping):
    """One judged claim: what `Claims.judge` makes, the results log holds (`to_log`, `from_log`), and the report, compare,
    the claims figure and a sweep's figure read. Its text (`key`, `claim`, `claimed`, `measured`), `verdict` and `why`,
    the rule it was judged against, the measured interval (`value`, `low`, `high`: None when nothing was measured)
    and how the decision was made, and `setup`: the claim's setup keys as this run ran them ({"batch": 2048,
    "device": "cpu"}: what ran, not what the notebook's parameters said). Read as a mapping too (`row["verdict"]`,
    `row.get("how")`): a field that is unset (None or "") is absent."""
    key: str
    claim: str
    claimed: str
    measured: str
    verdict: str
    rule: str = ""
    at_least: float | None = None
    at_most: float | None = None
    partly: float | None = None
    source: str = ""
    why: str = ""
    why_not: str = ""
    value: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    rounds: int | None = None
    seconds: float | None = None
    quantity: str = ""
    how: str = ""
    calls: str = ""
    typical: float | None = None
    typical_low: float | None = None
    typical_high: float | None = None
    note: str = ""
    variant: str = ""
    unit: str = ""
    measured_by: str = ""
    setup: Mapping = dataclasses.field(default_factory=dict)

    def __getitem__(self, k: str):
        v = getattr(self, k, None) if k in _ROW_FIELDS else None
        if v is None or v == "" or (k == "setup" and not v):
            raise KeyError(k)
        return v

    def __iter__(self):
        return (k for k in _ROW_FIELDS if k in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, k) -> bool:
        try:
            self[k]
        except KeyError:
            return False
        return True

    def __hash__(self) -> int:
        return hash((self.key, self.verdict, self.measured))

    def to_log(self) -> dict:
        """The fields the results log keeps (`ResultsLog.claim`'s), set ones only."""
        return {k: (dict(v) if k == "setup" else v) for k, v in self.items()}

    @classmethod
    def from_log(cls, row: Mapping) -> ClaimRow:
        """A claim row as the results log holds it, read back: numbers as floats (a non-finite one the log wrote as
        'inf'), an interval missing a part dropped whole; rows written before the claim kept its key or `claimed`
        (the H100 run of 1a70d9c, outputs/examples) read the claim's text as its key and `seed` as `claimed`."""
        got = {k: row[k] for k in _ROW_FIELDS if k in row and row[k] is not None}
        got.setdefault("claim", "")
        got.setdefault("key", got["claim"])
        got.setdefault("claimed", row.get("seed", ""))
        got.setdefault("measured", "")
        got.setdefault("verdict", "")
        for k in _NUMBER_FIELDS:
            if k in got:
                got[k] = _number(got[k])
        if any(got.get(k) is None for k in ("value", "low", "high")):
            for k in ("value", "low", "high"):
                got.pop(k, None)
        if not isinstance(got.get("rounds"), int) or isinstance(got.get("rounds"), bool):
            got.pop("rounds", None)
        if not isinstance(got.get("setup", {}), Mapping):
            got.pop("setup")
        got = {k: v for k, v in got.items() if v is not None}
        return cls(**got)


_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(ClaimRow))


def _names(key: str, shown) -> tuple[str, ...]:
    if isinstance(shown, str) or not all(isinstance(k, str) and k.isidentifier() for k in shown):
        raise ClaimError(f"{key}: shown is a tuple of parameter names, like ('batch', 'n_rows'), got {shown!r}")
    return tuple(shown)


class Claims:
    """A study's claims, checked together when built: unique keys, the headline among them, every setup key a
    parameter of `params` (the study's parameters dataclass) or "device", with a value of its type; `shown`: the
    parameters every judged row names as this run ran them (the sizes its numbers were measured at), unless a claim
    names its own."""

    def __init__(self, *claims: Claim, headline: str | None = None, params: type | None = None,
                 shown: tuple[str, ...] = ()):
        if not all(isinstance(c, Claim) for c in claims):
            raise ClaimError(f"Claims takes Claim objects, got {[type(c).__name__ for c in claims]}")
        keys = [c.key for c in claims]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ClaimError(f"claims named twice: {', '.join(dup)}")
        self.claims = tuple(claims)
        if headline is not None and headline not in keys:
            raise ClaimError(f"headline {headline!r} is not among the claims: {', '.join(keys)}")
        self.headline = headline
        self.shown = _names("Claims", shown)
        # the study's package: where a claim's measured_by is looked up (perflab.prover.early_exit)
        self.package = params.__module__.rpartition(".")[0] if params is not None else ""
        if params is not None:
            self._check_setup(params)

    def _check_setup(self, params: type) -> None:
        from .params import _hints, _type_ok, fields_of, type_name

        fields, hints = fields_of(params), _hints(params)
        for c in self.claims:
            bad = [k for k in self.shown_by(c) if k not in fields]
            if bad:
                raise ClaimError(f"claim {c.key!r}: shown {', '.join(map(repr, bad))} is not a parameter of "
                                 f"{params.__name__}")
            for k, v in c.setup:
                if k == "device":
                    continue
                if k not in fields:
                    allowed = ["device"] + [f for f in fields if f != "device"]  # each once
                    raise ClaimError(f"claim {c.key!r}: setup key {k!r} is not a parameter of {params.__name__}; "
                                     f"allowed: {', '.join(allowed)}")
                if not _type_ok(v, hints[k]):
                    name = type_name(hints[k])
                    what = (f"one of {name}" if typing.get_origin(hints[k]) is typing.Literal
                            else f"{'an' if name[:1] in 'aeiou' else 'a'} {name}")
                    raise ClaimError(f"claim {c.key!r}: setup {k}={v!r} is not {what}, as {params.__name__}.{k} is")

    def shown_by(self, c: Claim) -> tuple[str, ...]:
        """The parameters `c`'s row names beside its setup: its own `shown`, else the study's."""
        return c.shown if c.shown is not None else self.shown

    def __iter__(self):
        return iter(self.claims)

    def __len__(self) -> int:
        return len(self.claims)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.claims)

    def __getitem__(self, key: str) -> Claim:
        for c in self.claims:
            if c.key == key:
                return c
        raise ClaimError(f"no claim {key!r}; the claims: {', '.join(self.keys)}")

    def measurer(self, key: str):
        """The function that measures claim `key` (its `measured_by`, looked up in the study's package: the package
        of the `params` class the claims were built with), or None where the claim names none. A name that does not
        resolve raises ClaimError (`tests/project` resolves every claim's)."""
        import importlib

        name = self[key].measured_by
        if not name:
            return None
        package = self.package
        mod, _, attr = name.rpartition(".")
        try:
            obj = importlib.import_module(f"{package}.{mod}" if package else mod)
            obj = getattr(obj, attr)
        except (ImportError, AttributeError) as e:
            raise ClaimError(f"claim {key!r}: measured_by {name!r} is not a function of {package or 'any package'} "
                             f"({e})") from None
        if not callable(obj):
            raise ClaimError(f"claim {key!r}: measured_by {name!r} is not callable")
        return obj

    def judge(self, found: Mapping[str, Evidence], *, cfg: Any = None, device: Any = None) -> list[ClaimRow]:
        """One row per claim from `found` = {key: Evidence(Measured, Decision or None, the sentence of what was
        measured, at)} (a plain (measurement, sentence) or (measurement, sentence, at) tuple is read the same way);
        every claim needs an entry (None: nothing measured here). `cfg`: the run's parameters, `device`: its device
        (or device type), for the claims' setups."""
        unknown = sorted(set(found) - set(self.keys))
        missing = [k for k in self.keys if k not in found]
        if unknown or missing:
            raise ClaimError("; ".join(
                ([f"measured for no claim: {', '.join(unknown)}"] if unknown else [])
                + ([f"claims not measured: {', '.join(missing)} (give None for one not measured here)"]
                   if missing else [])) + f"; the claims: {', '.join(self.keys)}")
        dt = getattr(device, "type", device) or ""
        for c in self.claims:
            for k, _ in c.setup:
                if k == "device" and not dt:
                    raise ClaimError(f"claim {c.key!r} is about a device type: judge(..., device=run.device)")
                if k != "device" and cfg is None:
                    raise ClaimError(f"claim {c.key!r} is about {k}: judge(..., cfg=run.cfg)")
        return [self._row(c, *self._entry(c, found[c.key], self.shown_by(c)), cfg, dt, self.shown_by(c))
                for c in self.claims]

    @staticmethod
    def _entry(c: Claim, entry, shown: tuple[str, ...] = ()) -> tuple:
        if not (isinstance(entry, tuple) and len(entry) in (2, 3) and isinstance(entry[1], str)
                and (len(entry) == 2 or isinstance(entry[2], Mapping))):
            raise ClaimError(f"claim {c.key!r}: give Evidence(measurement or None, sentence) or Evidence(..., "
                             f"sentence, {{setup key: value it ran at}}), got {entry!r}")
        m, sentence, at = Evidence(*entry)
        keys = {k for k, _ in c.setup} | set(shown)
        if set(at) - keys:
            raise ClaimError(f"claim {c.key!r}: measured at {sorted(set(at) - keys)}, which is not in its setup "
                             f"or shown ({', '.join(sorted(keys)) or 'none'})")
        if m is not None and not isinstance(m, (Measured, Decision)):
            raise ClaimError(f"claim {c.key!r}: a measurement is a Measured or a Decision, got {type(m).__name__}")
        if isinstance(m, Decision):
            made = {k: getattr(m, k) for k in ("at_least", "at_most", "partly") if getattr(m, k) is not None}
            if made != c.rule:
                raise ClaimError(f"claim {c.key!r} is {c.rule} but its decision was made against {made}: "
                                 f"decide with **CLAIMS[{c.key!r}].rule")
        return m, sentence, at

    @staticmethod
    def _row(c: Claim, m, sentence: str, at: Mapping, cfg, device_type: str, shown: tuple[str, ...] = ()) -> ClaimRow:
        ran = _AsRan(cfg, {k: v for k, v in at.items() if k != "device"})
        device_type = at.get("device", device_type)
        off = c.off_setup(ran, device_type)
        setup = {k: device_type if k == "device" else getattr(ran, k, None) for k, _ in c.setup}
        setup.update({k: getattr(ran, k, None) for k in shown if k not in setup and cfg is not None})
        row = {"key": c.key, "claim": c.text, "claimed": c.claimed, "measured": sentence,
               "verdict": c.verdict(m, ran, device_type), "rule": c.rule_text, **c.rule, "setup": setup,
               "unit": c.unit, "measured_by": c.measured_by}
        if c.source:
            row["source"] = c.source
        if row["verdict"] == "not tested here":
            row["why"] = f"measured {off}" if off else (c.why_not or "nothing measured")
            if off and c.why_not:
                row["why_not"] = c.why_not
        if m is not None:
            mm = m.measured if isinstance(m, Decision) else m
            row.update(value=mm.value, low=mm.low, high=mm.high)
        if isinstance(m, Decision):
            row.update(confidence=m.confidence, rounds=m.rounds, seconds=m.seconds, quantity=m.quantity, how=m.how)
            if m.calls:
                row["calls"] = "/".join(map(str, m.calls))
            if math.isfinite(m.typical):
                row.update(typical=m.typical, typical_low=m.typical_low, typical_high=m.typical_high)
            if m.note:
                row["note"] = m.note
        return ClaimRow(**row)

    def log(self, run, rows: list[dict], *, headline: str | None = None) -> None:
        """Log each row (`run.log.claim`), print it, and make the headline claim (`headline`, else the one given
        when the claims were built) the study's one-line finding in `perflab report`."""
        log_rows(getattr(run, "log", run), rows, headline=headline or self.headline)


class _AsRan:
    """The run's parameters with some replaced by what a measurement really ran at (`Claims.judge`'s `at`)."""

    def __init__(self, cfg: Any, at: Mapping):
        self._cfg, self._at = cfg, at

    def __getattr__(self, k: str):
        if k in self._at:
            return self._at[k]
        if self._cfg is None:
            raise AttributeError(k)
        return getattr(self._cfg, k)


def _number(x) -> float | None:
    """A bound as logged: a float, or a string the log wrote for a non-finite one ('inf'); None when absent."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    try:
        return float(x) if isinstance(x, str) else None
    except ValueError:
        return None


NUMBERS = ("value", "low", "high", "at_least", "at_most", "partly")


def as_row(row: Mapping) -> ClaimRow:
    """`row` as a ClaimRow: one `Claims.judge` made, or one the results log holds (`ClaimRow.from_log`)."""
    return row if isinstance(row, ClaimRow) else ClaimRow.from_log(row)


def verdict_text(row: Mapping) -> str:
    """'holds', or 'not tested here (measured at batch=16)'."""
    return f"{row['verdict']} ({row['why']})" if row.get("why") else row["verdict"]



def judged_text(row: Mapping) -> str:
    """How the measured number was judged: '2.41 [2.30, 2.55] against >= 2 (99% interval; mean of 40 paired rounds of
    3 and 8 calls (blocks of 5 ms), typical 2.45; 0.61 s)'."""
    row = as_row(row)
    if "value" not in row or "rule" not in row:
        return ""
    exact, unit = row["low"] == row["high"], row.unit  # in the claim's unit, as the card and the rule write it
    numbers = (f"{with_unit(row['value'], unit)} (exact)" if exact else
               value_text(row["value"], row["low"], row["high"], unit))
    what = row.get("how") or f"{row.get('rounds')} rounds"
    how = (f" ({row['confidence']:.0%} interval; {what}; {row['seconds']:.2f} s)"
           if all(isinstance(row.get(k), (int, float)) for k in ("confidence", "rounds", "seconds")) else "")
    how += f"; {row['note']}" if row.get("note") else ""
    return f"{numbers} against {row['rule']}{how}"


def log_rows(log, rows: list[ClaimRow], *, headline: str | None = None, quiet: bool = False) -> None:
    """Log and print claim rows as `Claims.judge` makes them (`log`: a `perflab.kit.results.ResultsLog`; each row as
    `ClaimRow.to_log` writes it; `quiet`: log only, the verdict card shows them); the row whose key is `headline`
    leads the report."""
    rows = [as_row(r) for r in rows]
    for r in rows:
        fields = r.to_log()
        log.claim(fields.pop("claim"), claimed=fields.pop("claimed"), measured=fields.pop("measured"),
                  verdict=fields.pop("verdict"), **fields)
        if quiet:
            continue
        where = f" ({r['source']})" if r.get("source") else ""
        judged = judged_text(r) if r["verdict"] != "not tested here" else ""
        print(f"[{verdict_text(r)}] {r['claim']}{where}\n    claimed: {r['claimed']}\n    here: {r['measured']}"
              + (f"\n    judged: {judged}" if judged else "") + (f"\n    why: {r['why_not']}" if r.get("why_not") else ""))
    if headline is not None:
        hit = [r for r in rows if r.get("key") == headline]
        if not hit:
            raise ClaimError(f"headline {headline!r} is not among the rows: {', '.join(r.get('key', '?') for r in rows)}")
        log.headline(f"{hit[0]['claim']}: {hit[0]['measured']} [{verdict_text(hit[0])}]", key=headline)


# ---- checks ------------------------------------------------------------------------------------------------------

class Check(collections.namedtuple("Check", "name passed detail", defaults=("",))):
    """A correctness check's outcome: its name, whether it passed, what was measured or required (`detail`: printed,
    so what holds on any host), and `value` (an attribute, not a field: a check still unpacks as name, passed,
    detail): the measured number where it moves with the host's kernels (a largest difference at rounding level),
    logged, not printed (`perflab.kit.formatting.within`)."""

    def __new__(cls, name: str, passed: bool, detail: str = "", value: float | None = None):
        self = super().__new__(cls, name, passed, detail)
        self.value = value
        return self


def report_checks(run, checks: Iterable[Check | tuple] | Mapping[str, bool], *, stop: bool = True) -> list[Check]:
    """Log and print each check (PASS / FAIL, its name and detail); with `stop`, raise AssertionError naming every
    failed check, so the notebook stops before anything is timed on wrong results. `checks`: Checks, (name, passed,
    detail) tuples, or {name: passed}."""
    items = [Check(n, bool(p)) for n, p in checks.items()] if isinstance(checks, Mapping) else \
        [Check(*c) for c in checks]
    log = getattr(run, "log", run)
    for c in items:
        log.check(c.name, c.passed, c.detail, **({} if c.value is None else {"value": c.value}))
        print(f"{'PASS' if c.passed else 'FAIL'}  {c.name}" + (f" ({c.detail})" if c.detail else ""))
    failed = [c for c in items if not c.passed]
    if failed and stop:
        raise AssertionError("correctness checks failed: " + "; ".join(
            c.name + (f" ({c.detail})" if c.detail else "") for c in failed))
    return items


# ---- the figure -------------------------------------------------------------------------------------------------

COLORS = {"holds": "#2e7d32", "fixed": "#1565c0", "partly holds": "#f9a825", "does not hold": "#c62828",
          "within noise": "#757575", "not tested here": "#bdbdbd"}


def _ratio_scale(nums: Mapping) -> bool:
    """Whether a row is best read on a log scale: a threshold and every finite number of it positive, spanning more
    than a factor of 3 or the threshold far from 1 (a speedup, a factor)."""
    xs = [x for x in nums.values() if x is not None and math.isfinite(x)]
    if not xs or min(xs) <= 0:
        return False
    return max(xs) / min(xs) > 3 or any(k in ("at_least", "at_most") and nums[k] is not None and nums[k] >= 1.5
                                        for k in nums)


def _label(row: Mapping, nums: Mapping, label: str) -> str:
    """'holds · 4.73x [3.10, 6.39] against >= 3x · mean of 55 paired rounds of 3 and 13 calls, typical 2.46': the row's
    numbers in words and in its unit, for beside its interval."""
    head = f"{label}: " if label else ""
    if nums["value"] is None:
        return head + (verdict_text(row) if row["verdict"] == "not tested here" else
                       f"{row['verdict']} (no interval logged)")
    numbers = value_text(nums["value"], nums["low"], nums["high"], getattr(row, "unit", ""))
    how = f" · {row['how']}" if row.get("how") else ""
    return f"{head}{verdict_text(row)} · {numbers} against {row.get('rule', '')}{how}"


def drawable(row: ClaimRow) -> bool:
    """Whether a row has something to draw: judged here, an interval of some width (not an exact count: the card
    says those) and a threshold."""
    return (row.verdict != "not tested here" and row.value is not None and row.low != row.high
            and (row.at_least is not None or row.at_most is not None))


def claims_figure(runs: Mapping[str, list[dict]] | list[dict], *, title: str = ""):
    """Each claim judged on an interval, on a panel of its own in its own unit: the interval as a bar coloured by
    verdict, the value as a dot, the typical round (a decision's median round, where it differs) as a hollow
    diamond, the threshold as a black line and a `partly` threshold as a dashed one; log scale where the row is a
    ratio spanning a factor of 3. The claim's text heads its panel and its numbers are printed under it (verdict,
    value and interval against the rule, how it was measured), so the figure reads without the table. Exact counts,
    pass/fail claims and claims not tested here get no panel (the verdict card lists them). `runs`: rows (one run),
    or {label: rows} to draw several runs' intervals of the same claims in one panel (rows as `Claims.judge` makes
    them or as the results log holds them). -> Figure, or None when no claim has an interval to draw."""
    import matplotlib.pyplot as plt

    if not isinstance(runs, Mapping) or isinstance(runs, ClaimRow):
        runs = {"": runs}
    runs = {label: [as_row(r) for r in rows] for label, rows in runs.items()}
    keys = list(dict.fromkeys(r.key for rows in runs.values() for r in rows if drawable(r)))
    if not keys:
        return None
    text = {r.key: r.claim for rows in runs.values() for r in rows}
    per = 0.85 + 0.3 * len(runs)
    fig, axes = plt.subplots(len(keys), 1, figsize=(11, 0.5 + per * len(keys)), squeeze=False,
                             layout="constrained")
    for ax, key in zip(axes[:, 0], keys):
        _panel(ax, key, text[key], runs)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _panel(ax, key: str, claim: str, runs: Mapping[str, list[ClaimRow]]) -> None:
    """One claim's panel (`claims_figure`)."""
    ax.set_title(_wrap(claim, 150), fontsize=8, loc="left")
    lines, drawn, seen = [], [], []
    for j, (label, rows) in enumerate(runs.items()):
        row = next((r for r in rows if r.key == key), None)
        if row is None:
            continue
        pct = 100.0 if row.unit == "%" else 1.0  # a share is drawn in percent, as the card writes it
        nums = {k: (None if getattr(row, k) is None else float(getattr(row, k)) * pct)
                for k in (*NUMBERS, "typical") if not isinstance(getattr(row, k), str)}
        nums.setdefault("typical", None)
        lines.append(_label(row, {k: getattr(row, k) for k in ("value", "low", "high")}, label))
        if drawable(row):
            drawn.append((j, label, row, nums))
            seen.append(nums)
    finite = [v for n in seen for k, v in n.items() if k != "typical" and v is not None and math.isfinite(v)]
    log = min(finite) > 0 and max(finite) / min(finite) > 3  # a log axis only where the marks span a factor of 3
    xs = [v for n in seen for k, v in n.items() if v is not None and math.isfinite(v) and (v > 0 or not log)]
    lo, hi = min(xs), max(xs)
    pad = (hi / lo) ** 0.15 if log and lo > 0 else None
    left, right = (lo / pad, hi * pad) if pad else (lo - 0.15 * (hi - lo or abs(hi) or 1), hi + 0.15 * (hi - lo or abs(hi) or 1))
    for j, _, row, nums in drawn:
        y = -j
        color = COLORS.get(row["verdict"], "black")
        a, b = (max(nums["low"], left), min(nums["high"], right))
        ax.plot([a, b], [y, y], color=color, lw=5, solid_capstyle="butt")
        for end, edge in ((nums["low"], left), (nums["high"], right)):
            if not math.isfinite(end):
                ax.plot([edge], [y], "<" if end < 0 or end < left else ">", color=color, ms=7, clip_on=False)
        ax.plot([nums["value"]], [y], "o", color=color, mec="black", mew=0.6, ms=7)
        ax.annotate(value_text(row.value, row.low, row.high, row.unit), (nums["value"], y), xytext=(0, 6),
                    textcoords="offset points", ha="center", fontsize=7)
        typ = nums["typical"]
        if typ is not None and math.isfinite(typ) and typ != nums["value"] and (typ > 0 or not log):
            ax.plot([typ], [y], "D", mfc="none", mec="black", mew=0.8, ms=6)
    n0, row0 = drawn[0][3], drawn[0][2]
    thr = n0["at_least"] if n0["at_least"] is not None else n0["at_most"]
    ax.axvline(thr, color="black", lw=1.2)
    ax.annotate(row0.rule.split(" (partly")[0], (thr, 1), xycoords=("data", "axes fraction"), xytext=(3, -9),
                textcoords="offset points", fontsize=7)
    if n0["partly"] is not None:
        ax.axvline(n0["partly"], color="#f9a825", lw=1.2, ls="--")
    if log:
        ax.set_xscale("log")
        log_ticks(ax.xaxis)
    ax.set_xlim(left, right)
    ax.set_ylim(-len(runs) + 0.4, 0.8)
    labels = [label for _, label, _, _ in drawn]
    ax.set_yticks([-j for j, *_ in drawn], labels if any(labels) else [""] * len(drawn), fontsize=7)
    if not any(labels):
        ax.tick_params(axis="y", left=False)
    ax.tick_params(axis="x", labelsize=7)
    unit = {"%": "percent", "x": "times", "": ""}.get(row0.unit, row0.unit)
    ax.set_xlabel("\n".join(_wrap(t, 170) for t in lines) + (f"  [{unit}]" if unit else ""), fontsize=6.5, loc="left")


def log_ticks(axis) -> None:
    """A log axis's ticks at 1, 2 and 5 per decade, written as numbers (2, 5, 10; not 2x10^0), no minor labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda x, _: num(x)))
    axis.set_minor_formatter(NullFormatter())


def _wrap(s: str, width: int = 60) -> str:
    """`s` broken into lines of at most `width` characters (never cut)."""
    import textwrap

    return "\n".join(textwrap.wrap(s, width)) or s
