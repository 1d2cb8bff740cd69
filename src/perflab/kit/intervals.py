"""Intervals for the verdicts: a mean's and a ratio of means' under autocorrelated rounds, a median's without a model.

    mean_interval([1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.95, 1.05], alpha=0.01)          # (low, high) of the mean
    ratio_interval(base_times, opt_times, alpha=0.01)       # of sum(base) / sum(opt): a speedup, a rate
    median_interval(sorted(xs), alpha=0.01)                 # the sign test's, of the median (the typical round)

Rounds taken one after another on a shared machine are not independent: the load drifts, a side that responds to it
more than the other moves the ratio for many rounds at once. Both mean intervals use batch means: the rounds are cut
into consecutive batches and the t interval is taken over the batches' means, with one degree of freedom fewer than
batches. The batches are as short as the rounds' dependence allows (`batch_size`): one round each while the batch
means show no positive lag-1 correlation, twice as long while they do (down to FEW batches), so independent rounds
keep their degrees of freedom and rounds that move together under a drifting load count as one; what correlation is
left widens the variance ((1 + r) / (1 - r), `batches`).

A ratio of means (total time over total time, work over time) gets Fieller's interval over the batches: the set of r
for which mean(num - r * den) is not told apart from 0, exact when the batch means are normal, without the delta
method's symmetric guess.

scipy.special only (~0.3 s the first time, once per process): the t quantile (`stdtrit`)
and the binomial's cdf (`bdtr`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

FEW = 8   # never fewer batches than this (while there are as many rounds)
Z_LAG = 1.645  # a lag-1 correlation above Z_LAG / sqrt(batches) (one-sided 5%) makes the batches twice as long
LAG_SMALL = 0.2  # ... as does one above this
R_MAX = 0.9      # the most lag-1 correlation the widening assumes
R_FIXED = 0.5    # ... over FEW batches made long by design (a quantity the load moves), whose lag-1 is a rough guess


def _special():
    import scipy.special  # imported on first use: `perflab` commands that judge nothing skip it

    return scipy.special


def prepare() -> None:
    """Import the tables now (a decision does it before its clock starts)."""
    _special()


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom."""
    return float(_special().stdtrit(df, p))


def lag1(xs: Sequence[float]) -> float:
    """The lag-1 autocorrelation of `xs` (0 for a constant series)."""
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return sum((xs[i] - m) * (xs[i + 1] - m) for i in range(n - 1)) / var


def batch_size(xs: Sequence[float]) -> int:
    """Rounds per batch for the series `xs`: 1, doubled while the batch means' lag-1 correlation is positive beyond
    chance (Z_LAG / sqrt(batches)) and at least 2 * FEW batches would remain."""
    b, n = 1, len(xs)
    while n // (2 * b) >= FEW:
        bm = batch_means(xs, n // b)
        r = lag1(bm)
        if r <= Z_LAG / math.sqrt(len(bm)) and r <= LAG_SMALL:
            break
        b *= 2
    return b


def batches(xs: Sequence[float], fixed: int = 0) -> tuple[int, float]:
    """How many consecutive batches the series `xs` is cut into (`batch_size`; `fixed`: that many, for a quantity
    the load moves itself), and the factor the batch means' variance is widened by for the dependence left between
    them: (1 + r) / (1 - r) for their lag-1 correlation r (bias-corrected, clipped to [0, R_MAX]: at most 19x the
    variance, where the rounds are too few for the load's memory; to R_FIXED over `fixed` batches: at most 3x)."""
    m = min(len(xs), fixed) if fixed else len(xs) // batch_size(xs)
    if m < FEW:   # too few to estimate a correlation: taken as independent (the drift term is the caller's)
        return m, 1.0
    r = lag1(batch_means(xs, m))
    r = min(max(r + (1 + 3 * r) / m, 0.0), R_FIXED if fixed else R_MAX)   # the estimate's bias taken out (Kendall)
    return m, (1 + r) / (1 - r)


def batch_means(xs: Sequence[float], m: int) -> list[float]:
    """`xs` cut into `m` consecutive batches of sizes differing by at most one, each batch's mean."""
    n = len(xs)
    return [sum(xs[j * n // m:(j + 1) * n // m]) / ((j + 1) * n // m - j * n // m) for j in range(m)]


def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def mean_interval(xs: Sequence[float], alpha: float, fixed: int = 0) -> tuple[float, float]:
    """The two-sided 1 - alpha interval of the long-run mean of the series `xs` (batch means, t; `fixed`: see
    `batches`): (-inf, inf) with fewer than two values."""
    n = len(xs)
    if n < 2:
        return -math.inf, math.inf
    k, widen = batches(xs, fixed)
    m, var = _mean_var(batch_means(xs, k))
    half = t_quantile(1 - alpha / 2, k - 1) * math.sqrt(widen * var / k)
    return m - half, m + half


def ratio_interval(num: Sequence[float], den: Sequence[float], alpha: float, fixed: int = 0) -> tuple[float, float]:
    """Fieller's two-sided 1 - alpha interval of mean(num) / mean(den) for paired series (batch means, t): the r
    with (N - r D)^2 <= g var(N - r D) for the batches' means N, D and g = t^2 / batches. (0, inf) when the
    denominator is not told apart from 0 (too few or too noisy rounds)."""
    n = len(num)
    if n != len(den):
        raise ValueError(f"ratio_interval: {n} numerators against {len(den)} denominators")
    if n < 2:
        return 0.0, math.inf
    ratio = sum(num) / sum(den) if sum(den) else 0.0
    m, widen = batches([x - ratio * y for x, y in zip(num, den)], fixed)   # the dependence of what it is about
    a, b = batch_means(num, m), batch_means(den, m)
    ma, mb = sum(a) / m, sum(b) / m
    saa = sum((x - ma) ** 2 for x in a) / (m - 1)
    sbb = sum((y - mb) ** 2 for y in b) / (m - 1)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (m - 1)
    g = widen * t_quantile(1 - alpha / 2, m - 1) ** 2 / m
    qa, qb, qc = mb * mb - g * sbb, ma * mb - g * sab, ma * ma - g * saa   # qa r^2 - 2 qb r + qc <= 0
    disc = qb * qb - qa * qc
    if qa <= 0 or disc < 0:
        return 0.0, math.inf
    root = math.sqrt(disc)
    return max(0.0, (qb - root) / qa), (qb + root) / qa


def median_interval(xs: Sequence[float], alpha: float) -> tuple[float, float]:
    """The order-statistic interval [x_(l), x_(n+1-l)] of sorted `xs` that holds their true median with probability
    at least 1 - alpha for independent draws (l the largest with P(Binomial(n, 1/2) <= l - 1) <= alpha / 2);
    (-inf, inf) when n is too small for any."""
    n = len(xs)
    if n == 0 or 2 * 0.5 ** n > alpha:
        return -math.inf, math.inf
    bdtr = _special().bdtr
    j = 0   # the largest j with P(B <= j) <= alpha / 2, found by bisection on the cdf
    lo, hi = 0, (n - 1) // 2
    while lo <= hi:
        mid = (lo + hi) // 2
        if bdtr(mid, n, 0.5) <= alpha / 2:
            j, lo = mid, mid + 1
        else:
            hi = mid - 1
    return xs[j], xs[n - 1 - j]


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def with_drift(value: float, low: float, high: float, drift: float, alpha: float) -> tuple[float, float]:
    """[low, high] (an interval of `value` at its own level) widened for a drift the rounds cannot see: a relative
    standard deviation `drift` of the machine's speed between windows as long as the decision, taken at level `alpha`
    (two-sided: the look's) and added in quadrature to each half-width, as independent errors add (on the log scale
    for a positive interval, else as `drift` x |value|)."""
    if drift <= 0 or not (math.isfinite(low) and math.isfinite(high)):
        return low, high
    z = drift_z(alpha)
    if low > 0:
        lv = math.log(value)
        down = math.sqrt((lv - math.log(low)) ** 2 + (z * drift) ** 2)
        up = math.sqrt((math.log(high) - lv) ** 2 + (z * drift) ** 2)
        return math.exp(lv - down), math.exp(lv + up)
    extra = z * drift * abs(value)
    return value - math.hypot(value - low, extra), value + math.hypot(high - value, extra)


def drift_z(alpha: float) -> float:
    """The normal quantile a drift's bound at two-sided level `alpha` is taken at."""
    return float(_special().ndtri(1 - alpha / 2))


def slope(ys: Sequence[float], xs: Sequence[float], floor: float = 0.0) -> float:
    """The least-squares slope of `ys` on `xs` over FEW batch means of both (0 when xs do not vary); `floor`: a
    spread of the xs' batch means (sd) below which a slope is not told (their variance + floor^2 divides: a ridge);
    0 with fewer than 2 x FEW values, as `load_slope`."""
    if len(ys) < 2 * FEW:
        return 0.0
    a, b = batch_means(ys, FEW), batch_means(xs, FEW)
    ma, mb = sum(a) / FEW, sum(b) / FEW
    sbb = sum((x - mb) ** 2 for x in b) + (FEW - 1) * floor ** 2
    return sum((y - ma) * (x - mb) for y, x in zip(a, b)) / sbb if sbb else 0.0


def moves_with(ys: Sequence[float], xs: Sequence[float], alpha: float = 0.1) -> bool:
    """Whether the series `ys` moves with `xs` beyond chance (Pearson's r over FEW batch means of both, t test at
    `alpha`). A side noisier than the other tilts the two together without any load (its slow call lowers the ratio
    and raises the total): `follows_load` is the test that tells them apart."""
    if len(ys) < 2 * FEW:
        return False
    a, b = batch_means(ys, FEW), batch_means(xs, FEW)
    return _correlated(a, b, alpha)


def follows_load(ys: Sequence[float], xs: Sequence[float], alpha: float = 0.001, ahead: int = 4) -> bool:
    """Whether the series `ys` (each round's log ratio) follows the load that `xs` tells (each round's log total),
    beyond chance: Spearman's r of each round's `ys` against the mean of `xs` over the `ahead` rounds after it (t test
    at `alpha`, over the rounds). The load has a memory longer than a round (tens to hundreds of ms), so a ratio that
    responds to it moves with the next rounds' totals too; a side's own slow call (a collection, a page fault: drawn
    at random, one round's) moves its own round's ratio and total together and no later round's, so it tells
    nothing here (issue 50: the same-round test read a side's own slow calls as the load). Only later rounds: a
    window on both sides of a round would share its neighbours' own noise with theirs, and count it twice. False
    under 2 x FEW rounds (as `moves_with`: the paired rule's first look). `alpha` is small because the test is made
    at every look and a ratio once seen to follow the load stays judged so: at 0.01, about one decision in eight of
    sides that respond alike was read as following it over 15 looks (the crossing of a random walk's boundary)."""
    n = len(ys) - ahead
    if len(ys) < 2 * FEW:
        return False
    later = [sum(xs[i + 1:i + 1 + ahead]) / ahead for i in range(n)]
    return _correlated(_ranks(ys[:n]), _ranks(later), alpha)


def _ranks(xs: Sequence[float]) -> list[float]:
    """Each value's rank (0-based; ties in the order given): Spearman's r is Pearson's over these, and a side's slow
    calls, however slow, move a rank by one place (the test's t stays a t)."""
    order = sorted(range(len(xs)), key=xs.__getitem__)
    out = [0.0] * len(xs)
    for r, i in enumerate(order):
        out[i] = float(r)
    return out


def _correlated(a: Sequence[float], b: Sequence[float], alpha: float) -> bool:
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    if saa == 0 or sbb == 0:
        return False
    r = sum((x - ma) * (y - mb) for x, y in zip(a, b)) / math.sqrt(saa * sbb)
    return abs(r) * math.sqrt((n - 2) / max(1e-12, 1 - r * r)) > t_quantile(1 - alpha / 2, n - 2)


def load_slope(b: Sequence[float], o: Sequence[float], floor: float = 0.0, upper: float = 0.0) -> float:
    """How much the log ratio of two paired series (`b`, `o`: each round's times, positive) moves per unit of the
    load's log (half the log product: what both sides feel), over FEW consecutive batches, less what the sides' own
    noise gives it (a side noisier than the other tilts the ratio and the product together without any load: (var
    log b - var log o) within the batches, over their sizes; a load that moves both sides alike cancels there).
    `floor`: as `slope`'s (a quiet machine's batches barely move: a slope over them would be noise). `upper`: the
    one-sided upper 1 - `upper` bound of its size instead (|slope| + t x its standard error over the batches): a
    window whose load barely moved cannot tell how far the ratio follows the load, and says so by a bound near or
    above 1 (issue 50: read as none, such a window decided on the wrong side)."""
    n = len(b)
    if n < 2 * FEW:
        return 0.0
    lb, lo = [math.log(v) for v in b], [math.log(v) for v in o]
    ys, xs, noise = [], [], 0.0
    for j in range(FEW):
        gb, go = lb[j * n // FEW:(j + 1) * n // FEW], lo[j * n // FEW:(j + 1) * n // FEW]
        k = len(gb)
        ys.append((sum(gb) - sum(go)) / k)
        xs.append((sum(gb) + sum(go)) / (2 * k))
        if k > 1:
            noise += (_mean_var(gb)[1] - _mean_var(go)[1]) / (2 * k * FEW)
    my, mx = sum(ys) / FEW, sum(xs) / FEW
    sxx = sum((v - mx) ** 2 for v in xs) / (FEW - 1) + floor ** 2
    if sxx <= 0:
        return math.inf if upper else 0.0
    k = (sum((u - my) * (v - mx) for u, v in zip(ys, xs)) / (FEW - 1) - noise) / sxx
    if not upper:
        return k
    resid = sum((u - my - k * (v - mx)) ** 2 for u, v in zip(ys, xs)) / (FEW - 2)
    return abs(k) + t_quantile(1 - upper, FEW - 2) * math.sqrt(resid / ((FEW - 1) * sxx))


def trend(xs: Sequence[float], alpha: float = 0.01) -> float:
    """The relative change along the series `xs` (positive values), fitted as a line through its batch means
    (least squares, log scale) from its first batch to its last, where that slope is told apart from zero at level
    `alpha` (t with batches - 2 degrees of freedom); 0.0 when it is not, or with fewer than four batches."""
    if len(xs) < 4 or min(xs) <= 0:
        return 0.0
    m = max(4, batches(xs)[0])
    ys = [math.log(v) for v in batch_means(xs, m)]
    mx, my = (m - 1) / 2, sum(ys) / m
    sxx = sum((i - mx) ** 2 for i in range(m))
    slope = sum((i - mx) * (y - my) for i, y in enumerate(ys)) / sxx
    resid = sum((y - my - slope * (i - mx)) ** 2 for i, y in enumerate(ys)) / (m - 2)
    se = math.sqrt(resid / sxx)
    if slope == 0 or (se > 0 and abs(slope) / se < t_quantile(1 - alpha / 2, m - 2)):
        return 0.0
    return math.expm1(slope * (m - 1))
