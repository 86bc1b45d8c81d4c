"""The numbers each figure shows, prepared from a model's arrays: pure functions of numpy
arrays (no matplotlib), each tested against a direct computation in tests/figures/test_figure_data.py.
The family modules draw what these return and measure nothing themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..metrics import calibration
from ..options import DEFAULT_AT_COVERAGE
from ..threshold.guarantee import binomial_upper_bound

DEFAULT_MAX_POINTS = 4000
OVERLAY_VMAX_MODELS = 6  # more models: overlay_vmax_msp_1, _2, ... of up to 6 models each
MAX_GROUP_BARS = 10  # errors_by_group: more groups than this + 1 draw these and an "other" bar
RELIABILITY_LEVEL = 0.95  # the Clopper-Pearson interval of each bin's accuracy on the reliability diagram
SMOOTH_POINTS = 1025  # mesh of the smoothed reliability curve: 1/1024 apart, a subset of smooth.py's grid
SMOOTH_MIN_BANDWIDTH = 2.0 ** -10  # σ* below this (below the mesh) is drawn at this bandwidth
SMOOTH_TICKS = 100  # rows drawn as ticks under the smoothed curve (relplot draws 100)
SMOOTH_MIN_ROWS = 10  # the smoothed curve is drawn where the kernel weights add up to this many rows at its peak


@dataclass(frozen=True)
class RCPoints:
    """Vertices of the drawn risk-coverage curve, in percent.

    The curve is the step function that the operating points define: at a coverage c
    the risk is that of the first operating point whose coverage is at least c (the
    rule of ``risk@c``), so a tie group accepted at once is a horizontal step across the
    coverage it adds, followed by a vertical jump to the next group's risk.
    """

    coverage: np.ndarray
    risk: np.ndarray
    thinned: bool


def rc_curve_points(curve, max_points: int | None = DEFAULT_MAX_POINTS) -> RCPoints:
    """Step coordinates (coverage %, risk %) of a :class:`~selcal.metrics.selective.RiskCoverage`.

    Parameters
    ----------
    curve : RiskCoverage
        Tie-grouped operating points (``accepted``, ``errors``, ``n``).
    max_points : int or None
        Above this many vertices the polyline is thinned by min/max decimation: the
        coverage axis is cut into ``max_points // 4`` equal buckets and each bucket keeps
        its first and last vertex and the vertices of its lowest and highest risk, in
        order. Every kept vertex is an exact vertex of the full curve, the segments
        between buckets are exact, and inside a bucket (0.1% of coverage by default,
        below a pixel) the drawn band spans the same risks, so the shape does not change.
        ``None`` never thins.

    Returns
    -------
    RCPoints
        ``coverage`` starts at 0 and ends at 100; ``risk`` holds r_g on (c_{g-1}, c_g].

    Examples
    --------
    >>> from selcal.metrics.selective import risk_coverage
    >>> pts = rc_curve_points(risk_coverage([0.9, 0.8, 0.8, 0.1], [True, True, False, False]))
    >>> pts.coverage.tolist()
    [0.0, 25.0, 25.0, 75.0, 75.0, 100.0]
    >>> [round(r, 2) for r in pts.risk.tolist()]
    [0.0, 0.0, 33.33, 33.33, 50.0, 50.0]
    """
    coverage = 100.0 * (np.asarray(curve.accepted, dtype=np.float64) / curve.n)
    risk = 100.0 * (np.asarray(curve.errors, dtype=np.float64) / np.asarray(curve.accepted, dtype=np.float64))
    g = coverage.size
    x = np.empty(2 * g)
    x[0] = 0.0
    x[1::2] = coverage
    x[2::2] = coverage[:-1]
    y = np.repeat(risk, 2)
    if max_points is None or x.size <= max_points:
        return RCPoints(x, y, thinned=False)
    keep = _minmax_decimation(x, y, max(1, int(max_points) // 4), 100.0)
    return RCPoints(x[keep], y[keep], thinned=True)


def _minmax_decimation(x: np.ndarray, y: np.ndarray, n_buckets: int, x_max: float) -> np.ndarray:
    """Indices to keep: first, last, argmin and argmax of y in each x bucket (x nondecreasing)."""
    bucket = np.minimum((x / x_max * n_buckets).astype(np.int64), n_buckets - 1)
    starts = np.flatnonzero(np.diff(bucket, prepend=-1))
    ends = np.append(starts[1:], x.size)
    keep = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        segment = y[a:b]
        keep.extend((a, b - 1, a + int(np.argmin(segment)), a + int(np.argmax(segment))))
    return np.unique(np.asarray(keep, dtype=np.int64))


@dataclass(frozen=True)
class ReliabilityData:
    """Per-bin numbers of a reliability diagram (equal-width bins; NaN where a bin is empty)."""

    edges: np.ndarray
    count: np.ndarray
    accuracy: np.ndarray
    confidence: np.ndarray
    n: int
    overall_accuracy: float
    overall_confidence: float
    lower: np.ndarray  # 95% Clopper-Pearson interval of each bin's accuracy (NaN where a bin is empty)
    upper: np.ndarray

    @property
    def empty(self) -> np.ndarray:
        return self.count == 0

    @property
    def gap(self) -> np.ndarray:
        """confidence - accuracy per bin (positive: over-confident); NaN for empty bins."""
        return self.confidence - self.accuracy

    def ece(self) -> float:
        """sum_b (n_b/N) |acc_b - conf_b| over the non-empty bins (equals the reported ECE)."""
        full = ~self.empty
        return math.fsum(self.count[full] * np.abs(self.gap[full])) / self.n


def reliability_data(confidence, correct, n_bins: int = calibration.DEFAULT_BINS) -> ReliabilityData:
    """Bins of the reliability diagram, from :func:`selcal.metrics.calibration.binned_calibration`.

    Examples
    --------
    >>> d = reliability_data([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 1], n_bins=10)
    >>> d.count.tolist()[5], d.accuracy.tolist()[5], d.accuracy.tolist()[8]
    (2.0, 1.0, 0.5)
    >>> round(d.ece(), 12)
    0.4
    """
    binned = calibration.binned_calibration(confidence, correct, n_bins)
    count = binned.count
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(count > 0, binned.hits / count, np.nan)
        mean_confidence = np.where(count > 0, binned.confidence_sum / count, np.nan)
    n = int(count.sum())
    lower, upper = clopper_pearson(binned.hits, count, RELIABILITY_LEVEL)
    return ReliabilityData(
        edges=np.arange(n_bins + 1, dtype=np.float64) / n_bins,
        count=count,
        accuracy=accuracy,
        confidence=mean_confidence,
        n=n,
        overall_accuracy=float(binned.hits.sum() / n),
        overall_confidence=math.fsum(binned.confidence_sum) / n,
        lower=lower,
        upper=upper,
    )


def clopper_pearson(successes, trials, level: float = RELIABILITY_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided exact (Clopper-Pearson) confidence interval of a binomial proportion, elementwise.

    With k successes in n trials and α = 1 - ``level``, the lower limit is the α/2 quantile of
    Beta(k, n - k + 1) (0 when k = 0) and the upper limit the 1 - α/2 quantile of
    Beta(k + 1, n - k) (1 when k = n); each limit alone holds with probability at least
    1 - α/2, whatever the true proportion. Where n = 0 both are NaN (no interval).

    Parameters
    ----------
    successes, trials : array_like of int
        k and n (0 <= k <= n), broadcast together.
    level : float
        Confidence level in (0, 1); default 0.95.

    Returns
    -------
    lower, upper : ndarray of float64

    References
    ----------
    Clopper & Pearson, "The use of confidence or fiducial limits illustrated in the case of the
    binomial", Biometrika 26(4), 1934.

    Examples
    --------
    >>> lower, upper = clopper_pearson([0, 3, 0], [3, 3, 0])
    >>> np.round(lower[:2], 4).tolist(), np.round(upper[:2], 4).tolist(), bool(np.isnan(lower[2]))
    ([0.0, 0.2924], [0.7076, 1.0], True)
    """
    from scipy import stats

    k, n = np.broadcast_arrays(np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64))
    tail = (1.0 - level) / 2.0
    some = k > 0
    # Shape parameters kept >= 1 where a limit is fixed (0 or 1), so scipy is never asked an invalid one.
    lower = np.where(some, stats.beta.ppf(tail, np.maximum(k, 1.0), n - k + 1.0), 0.0)
    upper = binomial_upper_bound(k, n, tail)  # the one-sided upper limit at 1 - tail (1 where k = n)
    empty = n == 0
    return np.where(empty, np.nan, lower), np.where(empty, np.nan, upper)


@dataclass(frozen=True)
class SmoothReliabilityData:
    """The smoothed reliability curve of one score (CONVENTIONS.md, "Calibration beyond bins").

    At each point t of ``t``: ``accuracy`` = t + Σ_i K(t, q_i)(c_i - q_i) / Σ_i K(t, q_i), the
    kernel-weighted accuracy with t in place of the kernel-weighted confidence (relplot's
    centred kernel regression; NaN where no weight is left), and ``density`` =
    (1/N) Σ_i K(t, q_i), the kernel density of the confidences (integral 1 over [0, 1]); K the
    reflected Gaussian kernel at ``bandwidth``. ``shown``: the points where the weights add up
    to at least ``SMOOTH_MIN_ROWS`` rows at the kernel's peak (N · density · bandwidth · √(2π)
    >= 10); elsewhere the curve rests on a handful of distant rows and is not drawn. ``smece`` and ``sigma``:
    smECE and σ*; ``bandwidth`` = max(σ*, ``SMOOTH_MIN_BANDWIDTH``). ``ticks``: the confidences
    of up to ``SMOOTH_TICKS`` rows chosen at random (seeded), with ``tick_correct``.
    """

    t: np.ndarray
    accuracy: np.ndarray
    density: np.ndarray
    shown: np.ndarray
    smece: float
    sigma: float
    bandwidth: float
    n: int
    ticks: np.ndarray
    tick_correct: np.ndarray

    def smece_of_curve(self) -> float:
        """∫_0^1 density(t) |accuracy(t) - t| dt by the trapezoid rule: smECE at ``bandwidth``
        (to the grid's precision), since density · (accuracy - t) is the smoothed residual."""
        gap = np.where(np.isnan(self.accuracy), 0.0, self.density * np.abs(self.accuracy - self.t))
        return float(np.sum((gap[1:] + gap[:-1]) / 2 * np.diff(self.t)))


def smooth_reliability_data(confidence, correct, smece: float | None = None, sigma: float | None = None, *,
                            points: int = SMOOTH_POINTS, ticks: int = SMOOTH_TICKS) -> SmoothReliabilityData:
    """The smoothed reliability curve at the score's σ*, from :func:`selcal.metrics.smooth.smooth_reliability`.

    Parameters
    ----------
    confidence, correct : array_like
        Top-label confidence q_i in [0, 1] and c_i = [prediction is right] of the evaluation rows.
    smece, sigma : float, optional
        The score's reported smECE and σ* (its ``smece`` and ``smece_sigma``); computed here
        (:func:`selcal.metrics.smooth.smooth_ece`) when not given.
    points : int
        Points of the mesh on [0, 1] (``points - 1`` a power of two, so the mesh is a subset
        of the grid the kernel sums are computed on).
    ticks : int
        Rows shown as ticks (a seeded random choice, the same on every run).

    Examples
    --------
    >>> d = smooth_reliability_data([0.7, 0.7, 0.9, 0.9], [1, 0, 1, 1], points=5)
    >>> d.t.tolist(), round(d.sigma, 4) == round(d.smece, 4)
    ([0.0, 0.25, 0.5, 0.75, 1.0], True)
    >>> bool(abs(d.smece_of_curve() - d.smece) < 0.02)  # a five-point trapezoid of the same integral
    True
    """
    from ..metrics import smooth

    q = np.asarray(confidence, dtype=np.float64).ravel()
    c = np.asarray(correct, dtype=bool).ravel()
    if smece is None or sigma is None:
        fixed_point = smooth.smooth_ece(q, c)
        smece, sigma = fixed_point.value, fixed_point.sigma
    bandwidth = max(float(sigma), SMOOTH_MIN_BANDWIDTH)
    t, accuracy, density, _ = smooth.smooth_reliability(q, c, bandwidth, points)
    shown = np.isfinite(accuracy) & (q.size * density * bandwidth * math.sqrt(2.0 * math.pi) >= SMOOTH_MIN_ROWS)
    rng = np.random.default_rng(0)
    chosen = np.sort(rng.choice(q.size, size=min(q.size, ticks), replace=False))
    return SmoothReliabilityData(t=t, accuracy=accuracy, density=density, shown=shown, smece=float(smece),
                                 sigma=float(sigma), bandwidth=bandwidth, n=int(q.size), ticks=q[chosen],
                                 tick_correct=c[chosen])


@dataclass(frozen=True)
class WindowSeries:
    """mean and std of v_max per window for one subset (NaN where the window is skipped)."""

    mean: np.ndarray
    std: np.ndarray
    count: np.ndarray


@dataclass(frozen=True)
class SlidingWindowStats:
    """Windows [lo, hi) of MSP (the last one closed at 1) and the statistics in each."""

    lo: np.ndarray
    hi: np.ndarray
    correct: WindowSeries
    incorrect: WindowSeries

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def difference(self) -> np.ndarray:
        """Mean v_max of the incorrect minus that of the correct (NaN where either is skipped)."""
        return self.incorrect.mean - self.correct.mean


def sliding_window_stats(msp, vmax, correct, width: float = 0.05, step: float = 0.01,
                         min_count: int = 10) -> SlidingWindowStats:
    """v_max given the MSP, for correct and incorrect predictions separately.

    Windows are [i * step, i * step + width) for i = 0, 1, ... while they fit in [0, 1];
    a window reaching 1 is closed on the right, so MSP = 1 is counted. In each window and
    subset, the mean and the (population) standard deviation of v_max; windows with fewer
    than ``min_count`` samples of a subset are skipped for that subset (NaN, which the
    drawing shows as a gap rather than a line across).

    References
    ----------
    Xia et al., "Understanding why label smoothing degrades selective classification",
    2024, fig. 9 right (0.05-wide sliding window).

    Examples
    --------
    >>> s = sliding_window_stats([0.5] * 10 + [0.9] * 3, [1.0] * 10 + [2.0] * 3, [True] * 13)
    >>> float(s.correct.mean[s.lo.tolist().index(0.46)]), int(np.isnan(s.correct.mean).sum())
    (1.0, 91)
    """
    msp = np.asarray(msp, dtype=np.float64)
    vmax = np.asarray(vmax, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if not (msp.shape == vmax.shape == correct.shape):
        raise ValueError("msp, vmax and correct must have the same length")
    if not (0 < width <= 1 and 0 < step <= 1):
        raise ValueError("width and step must be in (0, 1]")
    n_windows = int(math.floor((1.0 - width) / step + 1e-9)) + 1
    lo = np.round(np.arange(n_windows) * step, 12)
    hi = np.round(lo + width, 12)
    series = {}
    for name, subset in (("correct", correct), ("incorrect", ~correct)):
        m, v = msp[subset], vmax[subset]
        mean = np.full(n_windows, np.nan)
        std = np.full(n_windows, np.nan)
        count = np.zeros(n_windows, dtype=np.int64)
        for i in range(n_windows):
            inside = (m >= lo[i]) & ((m < hi[i]) | (hi[i] >= 1.0) & (m <= 1.0))
            count[i] = np.count_nonzero(inside)
            if count[i] >= min_count:
                values = v[inside]
                mean[i] = math.fsum(values) / values.size
                std[i] = math.sqrt(math.fsum((values - mean[i]) ** 2) / values.size)
        series[name] = WindowSeries(mean, std, count)
    return SlidingWindowStats(lo, hi, series["correct"], series["incorrect"])


@dataclass(frozen=True)
class LSCeiling:
    """The label-smoothing target ceiling, the share of samples whose MSP exceeds it, and
    the error rate among those samples (``None`` when correctness was not given or none exceed)."""

    alpha: float
    ceiling: float
    share_above: float
    error_rate_above: float | None


def ls_ceiling_share(msp, alpha: float, num_classes: int, correct=None) -> LSCeiling:
    """The label-smoothing target ceiling (1 - alpha) + alpha / K and who exceeds it.

    The LS training target of the true class never exceeds the ceiling, so an MSP above
    it is one the training targets never asked for; Xia et al. (2024, sec. 3.1) find the
    selective-classification damage of LS concentrated on these samples.

    Examples
    --------
    >>> c = ls_ceiling_share([0.5, 0.95, 0.99, 0.91], 0.1, 10, correct=[True, True, False, True])
    >>> round(c.ceiling, 12), c.share_above, c.error_rate_above
    (0.91, 0.5, 0.5)
    """
    ceiling = (1.0 - alpha) + alpha / num_classes
    msp = np.asarray(msp, dtype=np.float64)
    above = msp > ceiling
    error_rate = None
    if correct is not None and above.any():
        error_rate = float(np.count_nonzero(above & ~np.asarray(correct, dtype=bool)) / np.count_nonzero(above))
    return LSCeiling(float(alpha), ceiling, float(np.count_nonzero(above) / msp.size), error_rate)


@dataclass(frozen=True)
class PnormSearch:
    """The validation objective of every p, MSP's, and what was chosen."""

    p: np.ndarray
    objective: np.ndarray
    msp: float | None
    chosen_p: int | None
    fallback: bool
    objective_name: str


def pnorm_search_data(metrics: dict[str, Any]) -> PnormSearch:
    """From a model's ``scores["pnorm"]`` dict (``val_objective``, ``val_objective_msp``, ``p``)."""
    items = sorted((int(p), value) for p, value in metrics["val_objective"].items())
    values = [np.nan if v is None else float(v) for _, v in items]
    msp = metrics.get("val_objective_msp")
    return PnormSearch(
        p=np.array([p for p, _ in items], dtype=np.int64),
        objective=np.array(values, dtype=np.float64),
        msp=None if msp is None else float(msp),
        chosen_p=metrics.get("p"),
        fallback=bool(metrics.get("fallback", False)),
        objective_name=str(metrics.get("objective", "aurc")),
    )


@dataclass(frozen=True)
class GroupErrors:
    """Errors accepted at one operating point, split by group."""

    target_coverage: float
    coverage: float
    accepted: int
    errors: int
    groups: dict[str, int]
    accepted_by_group: dict[str, int]


def errors_at_coverage_by_group(curve, score, correct, groups, coverage: float = DEFAULT_AT_COVERAGE) -> GroupErrors:
    """Errors accepted at the first operating point whose coverage reaches ``coverage``, by group.

    The operating point is the one ``risk@c`` uses; it accepts every row whose score is
    at least that point's threshold, so whole tie groups are accepted and the counts are
    integers. The counts over the groups add up to the curve's error count there.

    References
    ----------
    Xia et al. 2024, fig. 8 right (errors at 10% coverage, ImageNet vs ImageNet-Sketch).

    Examples
    --------
    >>> from selcal.metrics.selective import risk_coverage
    >>> score, ok = [0.9, 0.8, 0.7, 0.1], [False, True, False, True]
    >>> e = errors_at_coverage_by_group(risk_coverage(score, ok), score, ok, ["a", "b", "b", "a"], 0.5)
    >>> e.accepted, e.errors, e.groups
    (2, 1, {'a': 1, 'b': 0})
    """
    if not 0 < coverage <= 1:
        raise ValueError("coverage must be in (0, 1]")
    score = np.asarray(score, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    groups = np.asarray(groups)
    point = int(np.flatnonzero(curve.coverage >= coverage)[0])
    accepted = score >= curve.thresholds[point]
    names, index = np.unique(groups, return_inverse=True)  # one pass, however many groups
    index = index.reshape(-1)
    errors = np.bincount(index[accepted & ~correct], minlength=names.size)
    taken = np.bincount(index[accepted], minlength=names.size)
    labels = [str(g) for g in names.tolist()]
    by_group = dict(zip(labels, errors.tolist()))
    accepted_by_group = dict(zip(labels, taken.tolist()))
    return GroupErrors(
        target_coverage=float(coverage),
        coverage=float(curve.coverage[point]),
        accepted=int(curve.accepted[point]),
        errors=int(round(float(curve.errors[point]))),
        groups=by_group,
        accepted_by_group=accepted_by_group,
    )


def histogram_top(counts) -> float:
    """Top of the log-scale histogram axis: the next power of ten above the largest bin.

    >>> histogram_top([3, 9_000, 12]), histogram_top([10_000]), histogram_top([1])
    (10000.0, 100000.0, 10.0)
    """
    largest = max(1.0, float(np.max(counts)))
    return 10.0 ** (math.floor(math.log10(largest)) + 1)


def vmax_msp_limits(stats: Sequence[SlidingWindowStats]) -> tuple[float, float]:
    """Shared y limits of the upper vmax_msp panels of an overlay: every mean ± std band of
    every model, with a 5% margin."""
    values = np.concatenate([np.asarray(s.mean + sign * s.std, dtype=np.float64)
                             for st in stats for s in (st.correct, st.incorrect) for sign in (-1, 1)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (-1.0, 1.0)
    lo, hi = float(values.min()), float(values.max())
    margin = 0.05 * (hi - lo) or 0.5
    return (lo - margin, hi + margin)


def shown_groups(stacks: Sequence[GroupErrors], limit: int = MAX_GROUP_BARS) -> tuple[list[str], list[str]]:
    """The groups drawn one by one in ``errors_by_group``, and those merged into one "other" bar.

    Up to ``limit + 1`` groups every group is drawn. Beyond, the ``limit`` groups with the
    most errors over all the bars of the figure (every model and score: the groups that
    hold the errors the figure is about) are drawn, ties broken by the number of accepted
    rows and then by name; the rest is summed into "other". Drawn groups keep name order.

    Examples
    --------
    >>> g = GroupErrors(0.1, 0.1, 9, 6, {"a": 1, "b": 3, "c": 0, "d": 2}, {"a": 2, "b": 3, "c": 2, "d": 2})
    >>> shown_groups([g], limit=2)
    (['b', 'd'], ['a', 'c'])
    >>> shown_groups([g], limit=3)
    (['a', 'b', 'c', 'd'], [])
    """
    errors: dict[str, int] = {}
    taken: dict[str, int] = {}
    for stack in stacks:
        for group, count in stack.groups.items():
            errors[group] = errors.get(group, 0) + count
            taken[group] = taken.get(group, 0) + stack.accepted_by_group.get(group, 0)
    names = sorted(errors)
    if len(names) <= limit + 1:
        return names, []
    ranked = sorted(names, key=lambda g: (-errors[g], -taken[g], g))
    top = set(ranked[:limit])
    return [g for g in names if g in top], [g for g in names if g not in top]


def overlay_pages(count: int, per_page: int = OVERLAY_VMAX_MODELS) -> list[range]:
    """Models 0..count-1 cut into the fewest figures of at most ``per_page``, as even as can be.

    >>> overlay_pages(7)
    [range(0, 4), range(4, 7)]
    >>> overlay_pages(6)
    [range(0, 6)]
    """
    pages = max(1, math.ceil(count / per_page))
    size = math.ceil(count / pages)
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


