"""The one rule at its edges (a bound exactly at a threshold, a partly bound), the rule's refusals by name, and the
intervals Measured builds (from samples, a ratio of two sets, a paired ratio), and how a Decision reads."""
import math
import types

import pytest

from perflab.kit.intervals import mean_interval, ratio_interval
from perflab.kit.judge import Decision, Measured, _settled, judge


@pytest.mark.parametrize("m, kw, want", [
    # at_least: the whole interval at or above holds; any of it at or above the threshold is noise
    (Measured(4.5, 4.0, 5.0), dict(at_least=4.0), "holds"),
    (Measured(3.5, 3.0, 4.0), dict(at_least=4.0), "within noise"),
    (Measured(3.5, 3.0, 3.9), dict(at_least=4.0, partly=3.0), "partly holds"),   # low exactly at partly
    (Measured(3.5, 2.9, 3.9), dict(at_least=4.0, partly=3.0), "does not hold"),
    # at_most: the mirror image
    (Measured(1.5, 1.0, 2.0), dict(at_most=2.0), "holds"),
    (Measured(2.5, 2.0, 3.0), dict(at_most=2.0), "within noise"),
    (Measured(2.5, 2.1, 3.0), dict(at_most=2.0, partly=3.0), "partly holds"),    # high exactly at partly
    (Measured(2.5, 2.1, 3.1), dict(at_most=2.0, partly=3.0), "does not hold"),
    (Measured(9.0, 8.0, 10.0), dict(at_least=5.0, needs="cuda"), "not tested here"),  # no device type given
])
def test_judge_at_the_edges(m, kw, want):
    assert judge(m, **kw) == want


@pytest.mark.parametrize("m, kw, settled", [
    (Measured(5.0, 4.5, 5.5), dict(at_least=4.0, partly=None), True),            # holds
    (Measured(4.0, 3.5, 4.5), dict(at_least=4.0, partly=None), False),           # noise: more rounds may tell
    (Measured(3.0, 2.5, 3.5), dict(at_least=4.0, partly=None), True),            # misses, nothing smaller claimed
    (Measured(2.0, 1.5, 2.5), dict(at_least=4.0, partly=3.0), True),             # misses partly too
    (Measured(2.5, 2.0, 3.0), dict(at_least=4.0, partly=3.0), False),            # high at partly: not yet
    (Measured(5.0, 4.5, 5.5), dict(at_most=3.0, partly=4.0), True),              # above partly: settled
    (Measured(4.5, 4.0, 5.0), dict(at_most=3.0, partly=4.0), False),             # low at partly: not yet
    (Measured(3.5, 3.1, 3.9), dict(at_most=3.0, partly=4.0), True),              # partly holds
])
def test_settled_when_no_more_rounds_can_change_the_verdict(m, kw, settled):
    assert _settled(m, at_least=kw.get("at_least"), at_most=kw.get("at_most"), partly=kw["partly"]) is settled


@pytest.mark.parametrize("kw, error, message", [
    (dict(at_least=True), TypeError, "judge: at_least must be a number, got True"),
    (dict(at_most=math.nan), TypeError, "judge: at_most must be a number, got nan"),
    (dict(at_least=1.0, partly="0.5"), TypeError, "judge: partly must be a number, got '0.5'"),
    (dict(at_least=1.0, partly=1.5), ValueError, r"judge: partly=1.5 must lie on the claim's side below at_least=1.0"),
    (dict(at_most=1.0, partly=0.5), ValueError, r"judge: partly=0.5 must lie on the claim's side above at_most=1.0"),
])
def test_a_bad_rule_is_refused_naming_the_argument(kw, error, message):
    with pytest.raises(error, match=message):
        judge(Measured.exact(1.0), **kw)


def test_partly_may_equal_the_threshold():
    assert judge(Measured(0.5, 0.4, 0.6), at_least=1.0, partly=1.0) == "does not hold"
    assert judge(Measured(1.5, 1.4, 1.6), at_most=1.0, partly=1.0) == "does not hold"


def test_from_samples_is_the_mean_and_its_interval():
    xs = [1.0, 3.0, 2.0, 4.0, 2.5, 3.5]
    m = Measured.from_samples(xs, confidence=0.9)
    lo, hi = mean_interval(xs, 0.1)
    assert (m.value, m.low, m.high) == (sum(xs) / 6, lo, hi)
    with pytest.raises(ValueError, match=r"^Measured\.from_samples: no samples$"):
        Measured.from_samples([])


def test_ratio_of_two_sets_of_samples():
    a, b = [4.0, 4.4, 3.6, 4.2, 3.8], [2.0, 2.2, 1.8, 2.1, 1.9]
    m = Measured.ratio(a, b, confidence=0.9, scale=3.0)
    # each mean's interval at 1 - alpha / 2 (so both hold together with 1 - alpha): 0.95 each
    (la, ha), (lb, hb) = mean_interval(a, 0.05), mean_interval(b, 0.05)
    assert m.value == pytest.approx(sum(a) / sum(b) * 3.0, rel=1e-15)
    assert (m.low, m.high) == pytest.approx((la / hb * 3.0, ha / lb * 3.0), rel=1e-15)
    # Measurements (anything with .times) are read through their block times
    runs = types.SimpleNamespace(times=a), types.SimpleNamespace(times=b)
    assert Measured.ratio(*runs, confidence=0.9, scale=3.0) == m


def test_ratio_with_a_denominator_not_told_apart_from_zero_is_unbounded_above():
    a, b = [1.0, 1.1, 0.9, 1.0], [0.1, 3.0, 0.1, 3.0]         # b's interval reaches below 0
    m = Measured.ratio(a, b)
    assert mean_interval(b, 0.005)[0] < 0 and m.high == math.inf and m.low > 0
    one = Measured.ratio([4.0, 4.2, 3.8], [2.0])              # one sample: b's interval is everything
    assert (one.value, one.low, one.high) == (2.0, 0.0, math.inf)
    wide = Measured.ratio([4.0], [2.0, 2.1, 1.9])             # the numerator's interval is everything
    assert (wide.low, wide.high) == (0.0, math.inf)


def test_paired_ratio_is_the_totals_ratio_with_fiellers_interval():
    num, den = [2.0, 2.4, 1.8, 2.2, 2.1, 1.9], [1.0, 1.1, 0.9, 1.0, 1.05, 0.95]
    m = Measured.paired_ratio(num, den, confidence=0.9)
    lo, hi = ratio_interval(num, den, 0.1)
    assert (m.value, m.low, m.high) == (sum(num) / sum(den), min(lo, m.value), max(hi, m.value))
    assert m.low < m.value < m.high < math.inf
    for bad in (([], []), ([1.0, 2.0], [1.0])):
        with pytest.raises(ValueError, match=f"Measured.paired_ratio: {len(bad[0])} numerators against {len(bad[1])}"):
            Measured.paired_ratio(*bad)


def test_a_decision_reads_its_rule_interval_and_note():
    d = Decision("holds", 2.5, 2.0, 3.0, 12, 0.5, 0.99, "speedup", at_least=2.0)
    assert str(d) == "speedup 2.50 [2.00, 3.00] (99% interval, 12 rounds, 0.50 s), claim >= 2: holds"
    d = Decision("within noise", 0.25, -math.inf, math.inf, 1, 2.0, 0.99, "seconds", at_most=0.3, note="budget spent")
    assert str(d) == "seconds 0.250 [-inf, inf] (99% interval, 1 rounds, 2.00 s), claim <= 0.3: within noise (budget spent)"


def test_rejudge_judges_the_same_interval_against_another_rule():
    d = Decision("holds", 2.5, 2.2, 2.8, 12, 0.5, 0.99, "speedup", at_least=2.0)
    r = d.rejudge(at_most=2.0, partly=2.9)
    assert (r.verdict, r.at_least, r.at_most, r.partly) == ("partly holds", None, 2.0, 2.9)
    assert (r.value, r.low, r.high, r.rounds) == (d.value, d.low, d.high, d.rounds)
    assert d.rejudge(at_most=2.5).verdict == "within noise"
    with pytest.raises(ValueError, match="rejudge: give exactly one of at_least and at_most"):
        d.rejudge(at_least=1.0, at_most=3.0)
    with pytest.raises(ValueError, match="rejudge: partly=1.0 must lie on the claim's side above at_most=2.0"):
        d.rejudge(at_most=2.0, partly=1.0)
