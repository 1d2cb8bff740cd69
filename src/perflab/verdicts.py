"""The verdict rule every study's `claims.py` uses: a measured interval against a claim's threshold.

    judge(Measured(4.1, 3.8, 4.5), at_least=4.0)            -> "within noise"  (the interval straddles 4)
    judge(Measured(5.2, 4.9, 5.6), at_least=4.0)            -> "holds"
    judge(Measured(2.1, 1.9, 2.3), at_least=4.0, partly=1.05) -> "partly holds"  (real, but short of 4)
    judge(None, at_least=4.0, needs="cuda", device_type="cpu") -> "not tested here"

A verdict is only as firm as its measurement: when the spread of the measurement (p20-p80 of a timing ratio,
the range over repeated rounds) crosses the threshold, the claim is "within noise" rather than flipping between
"holds" and "does not hold" from one run to the next. A claim about a mechanism this device does not have (CUDA
graphs, tensor cores, pinned transfers on a CPU run) is "not tested here", whatever a CPU measures.
"""
from __future__ import annotations

import dataclasses

VERDICTS = ("holds", "partly holds", "does not hold", "within noise", "fixed", "not tested here")


@dataclasses.dataclass(frozen=True)
class Measured:
    """A measured value and the interval it is known to (low <= value <= high)."""
    value: float
    low: float
    high: float

    @classmethod
    def exact(cls, value: float) -> Measured:
        """A count or another number without noise."""
        return cls(value, value, value)

    def __post_init__(self):
        if not self.low <= self.value <= self.high:
            raise ValueError(f"Measured needs low <= value <= high, got {self.low}, {self.value}, {self.high}")


def judge(m: Measured | None, *, at_least: float | None = None, at_most: float | None = None,
          partly: float | None = None, needs: str = "", device_type: str = "") -> str:
    """The verdict of measurement `m` against a claim `value >= at_least` (or `value <= at_most`).

    - nothing measured, or `needs` names a device type other than `device_type`: "not tested here";
    - the whole interval on the claim's side: "holds";
    - the whole interval on the other side: "partly holds" when the value still passes `partly` (a real but
      smaller effect, on the same side as the claim), else "does not hold";
    - the interval straddles the threshold: "within noise"."""
    if (at_least is None) == (at_most is None):
        raise ValueError("judge: give exactly one of at_least and at_most")
    if m is None or (needs and device_type != needs):
        return "not tested here"
    if at_least is not None:
        if m.low >= at_least:
            return "holds"
        if m.high < at_least:
            return "partly holds" if partly is not None and m.value >= partly else "does not hold"
        return "within noise"
    if m.high <= at_most:
        return "holds"
    if m.low > at_most:
        return "partly holds" if partly is not None and m.value <= partly else "does not hold"
    return "within noise"


def log_claims(log, rows: list[dict], *, headline: str | None = None) -> None:
    """Log each claim row ({"claim", "claimed", "measured", "verdict"}, plus "variant", "source", "rule", "value",
    "low" and "high" when present as plain str or numbers) with `log.claim`, print it (its rule too), and make the
    row named `headline` the study's one-line finding at the top of `perflab report` (`log.headline`). "claimed" is
    the claim's number as claimed (a seed report's, or yours); "seed", its old name, is read too."""
    for r in rows:
        extra = {k: r[k] for k in ("variant", "source", "rule", "value", "low", "high")
                 if isinstance(r.get(k), (str, int, float)) and r[k] not in ("-", "")}   # plain values only
        claimed = r["claimed"] if "claimed" in r else r["seed"]
        log.claim(r["claim"], claimed=claimed, measured=r["measured"], verdict=r["verdict"], **extra)
        where = f" ({extra['source']})" if "source" in extra else ""
        rule = f"\n    rule: {extra['rule']}" if "rule" in extra else ""
        print(f"[{r['verdict']}] {r['claim']}{where}\n    claimed: {claimed}\n    here: {r['measured']}{rule}")
    if headline is not None:
        hit = [r for r in rows if r["claim"] == headline]
        if not hit:
            raise KeyError(f"no claim {headline!r} to headline; claims: {[r['claim'] for r in rows]}")
        log.headline(f"{hit[0]['claim']}: {hit[0]['measured']} [{hit[0]['verdict']}]")
