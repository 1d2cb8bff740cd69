"""perflab.kit.intervals: the batch-means intervals of a mean and a ratio of means, the sign test's of a median, the
trend; their coverage checked on draws of known truth (independent and autocorrelated)."""
import math
import random

import pytest

from perflab.kit import intervals as I


def test_the_order_statistic_interval_matches_the_binomial_table():
    xs = list(range(20))
    # n=20, 95%: P(B <= 5) = 0.0207 <= 0.025 < P(B <= 6) = 0.0577 -> the 6th and 15th values
    assert I.median_interval(xs, 0.05) == (5, 14)
    assert I.median_interval(list(range(9)), 0.01) == (0, 8)          # 2 / 2^9 = 0.0039 <= 0.01
    assert I.median_interval(list(range(6)), 0.01) == (-math.inf, math.inf)   # 2 / 2^6 > 0.01: no interval


def test_the_t_quantile_and_batch_means():
    assert I.t_quantile(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert I.batch_means([1, 2, 3, 4, 5, 6, 7], 3) == [1.5, 3.5, 6.0]     # sizes 2, 2, 3
    assert I.lag1([1.0, 1.0, 1.0]) == 0.0


def ar1(n: int, phi: float, rng: random.Random, mean: float = 1.0, sd: float = 0.1) -> list[float]:
    x, out = rng.gauss(0, 1), []
    for _ in range(n):
        x = phi * x + math.sqrt(1 - phi * phi) * rng.gauss(0, 1)
        out.append(mean + sd * x)
    return out


@pytest.mark.parametrize("phi", [0.0, 0.6, 0.9])
def test_the_mean_interval_covers_the_mean_of_independent_and_autocorrelated_rounds(phi):
    """95% intervals over 400 series of 300 rounds: the coverage stays near 95% whatever the rounds' dependence (the
    batches grow with it); plain t over the rounds would cover ~55% at phi = 0.9."""
    rng = random.Random(1)
    cover = sum(lo <= 1.0 <= hi for lo, hi in (I.mean_interval(ar1(300, phi, rng), 0.05) for _ in range(400)))
    assert cover / 400 >= 0.91, cover


def test_the_batches_grow_with_the_dependence_and_widen_for_what_is_left():
    rng = random.Random(2)
    assert I.batch_size(ar1(512, 0.0, rng)) == 1
    assert I.batch_size(ar1(512, 0.95, rng)) >= 8
    m, widen = I.batches([float(i // 4) for i in range(12)])        # steps of 4 equal rounds: correlated at 12
    assert m == 12 and widen == pytest.approx((1 + I.R_MAX) / (1 - I.R_MAX))
    assert I.batches([1.0, 2.0, 1.0, 2.0, 1.0, 2.0])[1] == 1.0     # fewer than FEW: taken as independent


def test_fieller_covers_a_ratio_of_means_and_widens_with_a_noisy_denominator():
    rng = random.Random(3)
    cover = 0
    for _ in range(400):
        den = [1.0 + rng.gauss(0, 0.1) for _ in range(40)]
        num = [3.0 * d + rng.gauss(0, 0.2) for d in den]
        lo, hi = I.ratio_interval(num, den, 0.05)
        cover += lo <= 3.0 <= hi
    assert cover / 400 >= 0.92
    assert I.ratio_interval([1.0, 2.0], [0.1, -0.1], 0.01) == (0.0, math.inf)   # a denominator not apart from 0
    with pytest.raises(ValueError, match="2 numerators against 3"):
        I.ratio_interval([1, 2], [1, 2, 3], 0.05)


def test_fieller_covers_a_ratio_of_means_at_its_stated_level_under_autocorrelated_rounds():
    """99% intervals of 2 / 1 over 800 series of 128 paired rounds, each side's noise (10%) AR(1) across rounds at
    phi = 0.8 (a round remembers the last ~10: a side's cache or clock state): covered 97.6% (the t over 8 or 16 batch
    means loses a little), stated >= 96% (4 standard errors below that at 800 series). An interval narrower by sqrt(rounds /
    batches) (batch means ignored: the t over the rounds, or g divided by the rounds) covers ~64% here, and passes
    every test of independent rounds (above) and test_decide's 1,200 verdicts. Its half-width stays within 1.5x of
    the one the true variance gives (not bought by an interval too wide to say anything)."""
    rng, n, phi = random.Random(48), 128, 0.8
    oracle = 2.576 * math.sqrt(2 * 0.1 ** 2 * (1 + phi) / (1 - phi) / n)   # relative half-width from the true variance
    cover, widths = 0, []
    for _ in range(800):
        num = [2.0 * x for x in ar1(n, phi, rng)]
        den = ar1(n, phi, rng)
        lo, hi = I.ratio_interval(num, den, 0.01)
        cover += lo <= 2.0 <= hi
        widths.append((hi - lo) / 2 / 2.0)
    assert cover / 800 >= 0.96, f"the 99% interval covered {cover} of 800 ratios of AR(1) rounds"
    assert sorted(widths)[400] < 1.5 * oracle, (sorted(widths)[400], oracle)


def test_a_drift_both_sides_share_cancels_in_the_ratio_and_its_interval():
    """Both sides scaled by one log-load drifting as AR(1) (sd 30%, phi 0.95: the machine slows for tens of rounds),
    each with its own 5% noise: the ratio's 99% interval covers the true 2.0 (>= 96% of 400 series; measured 98.5%) and
    stays as narrow as the sides' own noise (median half-width under 3%, not the load's 30%)."""
    rng, cover, widths = random.Random(49), 0, []
    for _ in range(400):
        load = [math.exp(0.3 * (x - 1.0) / 0.1) for x in ar1(128, 0.95, rng)]
        den = [w * (1 + 0.05 * rng.gauss(0, 1)) for w in load]
        num = [2.0 * w * (1 + 0.05 * rng.gauss(0, 1)) for w in load]
        lo, hi = I.ratio_interval(num, den, 0.01)
        cover += lo <= 2.0 <= hi
        widths.append((hi - lo) / 2 / 2.0)
    assert cover / 400 >= 0.96, cover
    assert sorted(widths)[200] < 0.03, sorted(widths)[200]


def test_the_drift_widens_an_interval_on_the_log_scale_and_a_load_bound_series_is_told():
    lo, hi = I.with_drift(2.0, 1.9, 2.1, 0.05, 0.01)
    assert lo < 1.9 and hi > 2.1 and math.log(2.0 / lo) == pytest.approx(math.hypot(math.log(2 / 1.9), 2.5758 * 0.05),
                                                                          rel=1e-3)
    assert I.with_drift(2.0, 1.9, 2.1, 0.0, 0.01) == (1.9, 2.1)
    rng = random.Random(5)
    load = [rng.gauss(0, 1) for _ in range(64)]
    assert I.moves_with([x + rng.gauss(0, 0.3) for x in load], load)
    assert not I.moves_with([rng.gauss(0, 1) for _ in range(64)], load, alpha=0.01)
    assert I.slope([2 * x for x in load], load) == pytest.approx(2.0)
    assert I.slope([2.0, 4.0, 6.0], [1.0, 2.0, 3.0]) == 0.0 == I.load_slope([2.0] * 3, [1.0] * 3)   # < 2 x FEW: none


def test_the_load_slope_takes_a_noisy_side_out():
    """A load that moves both sides alike leaves the ratio's slope at ~0 even when one side is much noisier (its
    noise tilts ratio and product together); a side the load moves alone gives a slope near 2 (ratio ~ L, the load's
    proxy ~ sqrt(L))."""
    rng = random.Random(6)
    load = [math.exp(0.3 * math.sin(i / 20)) for i in range(400)]
    common = I.load_slope([2 * x * math.exp(rng.gauss(0, 0.01)) for x in load],
                          [x * math.exp(rng.gauss(0, 0.3)) for x in load])
    alone = I.load_slope([2 * x for x in load], [1.0 * math.exp(rng.gauss(0, 0.01)) for _ in load])
    assert abs(common) < 0.3 and alone == pytest.approx(2.0, abs=0.3)


def test_a_quiet_machines_load_tells_no_slope():
    """Where the load's batches barely move (a quiet machine), a slope over them is noise: the floor shrinks it to
    ~0; where the load moves (sd 0.2 between batches), the floor barely changes it."""
    rng = random.Random(7)
    quiet = [math.exp(rng.gauss(0, 0.002)) for _ in range(64)]
    b = [2 * math.exp(rng.gauss(0, 0.002)) for _ in quiet]
    o = [1 * math.exp(rng.gauss(0, 0.002)) for _ in quiet]
    assert abs(I.load_slope(b, o, floor=0.02)) < 0.1
    assert abs(I.slope([rng.gauss(0, 0.002) for _ in quiet], [math.log(x) for x in quiet], floor=0.02)) < 0.1
    load = [math.exp(0.4 * math.sin(i / 4)) for i in range(64)]
    bb, oo = [2 * x for x in load], [1.0 for _ in load]
    assert I.load_slope(bb, oo, floor=0.02) == pytest.approx(I.load_slope(bb, oo), rel=0.05)
    assert I.load_slope(bb, oo) == pytest.approx(2.0, rel=0.1)


def test_a_trend_is_found_and_a_flat_series_has_none():
    rng = random.Random(4)
    flat = [1 + rng.gauss(0, 0.05) for _ in range(64)]
    rising = [(1 + i / 64) * (1 + rng.gauss(0, 0.02)) for i in range(64)]
    assert I.trend(flat) == 0.0
    assert I.trend(rising) == pytest.approx(1.0, abs=0.2)           # doubled from the first batch to the last
    assert I.trend([1.0, 2.0, 3.0]) == 0.0                          # too few to say
