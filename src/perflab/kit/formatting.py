"""Numbers as reports print them: three significant figures, units for seconds (imports nothing heavy).

    sig(13.2874)  -> '13.3'      sig(669.8) -> '670'      sig(0.0006783) -> '6.78e-04'      sig(12) -> '12'
    num(12.04, measured=True) -> '12.0'    num(1.0, measured=True) -> '1.00'    num(1.0) -> '1'    num(3138.0) -> '3,138'
    fmt_seconds(0.034) -> '34.0 ms'
    short({"spread": [0.99166, 1.1691]}) -> '{spread: [0.992, 1.17]}'
    fmt_interval(Measured(1.03, 1.01, 1.05)) -> '1.03x [1.01, 1.05]'
"""
from __future__ import annotations

import math


def sig(v, digits: int = 3) -> str:
    """A float to `digits` significant figures (trailing zeros kept: '1.10' says the third figure is known);
    ints, bools and anything else as `str` does."""
    if isinstance(v, bool) or not isinstance(v, float):
        return str(v)
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    r = float(f"{v:.{digits}g}")  # rounded first: 0.9996 -> 1.0 has magnitude 0, not -1
    mag = math.floor(math.log10(abs(r)))
    if -3 <= mag < 6:
        return f"{r:.{max(0, digits - 1 - mag)}f}"
    return f"{r:.{digits - 1}e}"


def num(x, measured: bool = False) -> str:
    """A number as a claim's text shows it: no exponent from 1,000 up ('3,138', '2,310'), 'inf' / '-inf' for an open
    bound; below that, a measured number (`measured`: a value with its interval, a typical call) to 3 significant
    figures with their trailing zeros ('12.0', '1.10': '12' would say two figures are known), an exact one (a count,
    a share counted, a threshold, a tick) as short as 3 figures allow ('1', '0.4', '0.0102')."""
    x = float(x)
    if not math.isfinite(x):
        return "-inf" if x < 0 else ("inf" if x > 0 else "nan")
    if 1000 <= abs(x) < 1e15:
        return f"{x:,.0f}"
    return sig(x) if measured else f"{x:.3g}"


def num_interval(value, low, high, unit: str = "") -> str:
    """A measured value and its interval, each to 3 figures with their zeros (`num`, measured): '2.41 [2.30, 2.55]';
    `unit` after the value: '2.41x [2.30, 2.55]'."""
    return f"{num(value, True)}{unit} [{num(low, True)}, {num(high, True)}]"


def _in_unit(x, unit: str) -> float:
    return 100 * float(x) if unit == "%" else float(x)


def _sep(unit: str, v: float | None = None) -> str:
    """The unit after a number; a count of exactly 1 in the singular ('1 graph per new tail', not '1 graphs')."""
    if v == 1 and unit:
        first, _, rest = unit.partition(" ")
        if len(first) > 3 and first.isalpha() and first.endswith("s"):
            first = first[:-2] if first.endswith(("ches", "shes", "xes")) else first[:-1]
            unit = f"{first} {rest}".rstrip()
    return unit if unit in ("", "x", "%") or unit.startswith("x ") else f" {unit}"   # '1.96x less memory'


def with_unit(x, unit: str = "", measured: bool = False) -> str:
    """A number in a claim's unit: with_unit(3, "x") -> '3x', with_unit(0.7, "%") -> '70%' (a share is kept as a
    fraction, shown as a percentage), with_unit(0.88, "ms") -> '0.88 ms', with_unit(1, "bool") -> 'yes' (a pass/fail
    claim, judged as 1 against >= 1); a threshold to 4 figures as claims write them, a measured number (`measured`) as
    `num` writes it ('3.41x', '81.0%')."""
    if unit == "bool":
        return "yes" if float(x) >= 1 else "no"
    v = _in_unit(x, unit)
    text = num(v, True) if measured else (f"{v:.4g}" if math.isfinite(v) and abs(v) < 1000 else num(v))
    return text + _sep(unit, None if measured else v)


def value_text(value, low, high, unit: str = "") -> str:
    """A measured value and its interval in a claim's unit: '3.41x [3.20, 3.64]', '81.0% [76.1, 86.4]',
    '1.69 GiB [1.60, 1.75]'; a number without spread (low == high: a count) as it is: '0', '23.8%'."""
    if unit == "bool":
        return with_unit(value, unit) if low == high == value else f"{with_unit(low, unit)}-{with_unit(high, unit)}"
    if low == high == value:
        v = _in_unit(value, unit)
        return (num(v) if float(v).is_integer() else num(v, True)) + _sep(unit, v)
    return num_interval(_in_unit(value, unit), _in_unit(low, unit), _in_unit(high, unit), _sep(unit))


def short(v, digits: int = 3) -> str:
    """Any JSON-like value with every float in it at `digits` significant figures."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {short(x, digits)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(short(x, digits) for x in v) + "]"
    return sig(v, digits)


def fmt_seconds(s: float) -> str:
    """1.2e-5 -> '12.0 us'; 0.034 -> '34.0 ms'; 2.5 -> '2.50 s'; 1234.5 -> '1230 s' (three significant figures)."""
    s = float(s)
    if not math.isfinite(s) or s == 0:
        return f"{sig(s)} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(float(f"{s:.3g}")) >= scale or unit == "ns":  # rounded first: 0.99996 s is '1.00 s'
            return f"{sig(s / scale)} {unit}"
    return f"{s} s"


def reference_rows(keys: list[tuple]) -> list[int | None]:
    """For each timing (benchmark label, case, implementation), the index of the timing its speedup is taken
    against: the case's "baseline"; else the benchmark's one baseline that is a case of its own (an ablation:
    case "baseline", then one case per change); else the case's first timing when the case has several; else,
    in a list of variants (each case named after its implementation), the list's first; else None (a lone
    timing, such as one point of a size sweep: nothing to compare it with)."""
    groups: dict[tuple, list[int]] = {}
    for i, (label, case, _) in enumerate(keys):
        groups.setdefault((label, case), []).append(i)
    lone: dict = {}
    for (label, _), idx in groups.items():
        if all(keys[i][2] == "baseline" for i in idx):
            lone.setdefault(label, []).append(idx[0])
    variants: dict = {}
    for i, (label, case, impl) in enumerate(keys):
        if case == impl and len(groups[(label, case)]) == 1:
            variants.setdefault(label, []).append(i)
    refs: list[int | None] = []
    for i, (label, case, _) in enumerate(keys):
        idx = groups[(label, case)]
        base = [j for j in idx if keys[j][2] == "baseline"]
        if base:
            refs.append(base[0])
        elif len(lone.get(label, [])) == 1:
            refs.append(lone[label][0])
        elif len(idx) > 1:
            refs.append(idx[0])
        elif i in variants.get(label, []) and len(variants[label]) > 1:
            refs.append(variants[label][0])
        else:
            refs.append(None)
    return refs


def speedup_text(ref_median: float, median: float, is_ref: bool) -> str:
    """'ref' for the reference itself, else ref / this as '1.23x' (three significant figures)."""
    if is_ref:
        return "ref"
    return f"{sig(ref_median / median)}x" if median > 0 else ""


SPEEDUP_NOTE = ("speedup = the reference's median / this median (above 1: faster); the reference is the case's "
                "baseline, else the benchmark's baseline, else the case's first row, else (cases named after "
                "their implementation) the benchmark's first row")


def within(gap: float, passed: bool) -> str:
    """A measured gap as a check's detail prints it in a cell nbval compares: 'within tolerance' where the check
    passed, the gap itself ("3.2e-04") where it did not. A gap at rounding level moves with the CPU's vector kernels
    and its BLAS (AVX-512 or AVX2, MKL's paths on AMD and Intel): printed, it would make the cell fail on another host.
    The check keeps the gap itself as its `value` (`perflab.kit.claims.Check`), which the results log records."""
    if passed:
        return "within tolerance"
    return "0" if gap == 0 else f"{gap:.1e}" if math.isfinite(gap) else str(gap)


def fmt_interval(m, unit: str = "x", digits: int = 2) -> str:
    """A Measured (value, low, high) as text: '1.03x [1.01, 1.05]', or '1.03x' for an exact number; unit '%':
    '4.2% [4.1%, 4.3%]'."""
    def f(v):
        if not math.isfinite(v):
            return "-inf" if v < 0 else "inf"
        return f"{v:.1%}" if unit == "%" else f"{v:.{digits}f}{unit}"
    return f(m.value) if m.low == m.high else f"{f(m.value)} [{f(m.low)}, {f(m.high)}]"
