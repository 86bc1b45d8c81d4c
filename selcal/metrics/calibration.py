"""Calibration metrics: binned calibration errors, NLL and Brier (CONVENTIONS.md, "Calibration").

Equal-width bins are (b/B, (b+1)/B] for b = 0..B-1 with the edges computed in float64
as b/B, and q = 0 in the first bin; confidence 1.0 falls in the last bin, never in a
hidden extra one.

Every sum of floats here is exact (``math.fsum``, or integer fixed point for the
class-wise bins), so results are bit-for-bit the same for any row order or chunking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "DEFAULT_BINS",
    "equal_width_bin",
    "BinnedCalibration",
    "binned_calibration",
    "expected_calibration_error",
    "rms_calibration_error",
    "adaptive_calibration_error",
    "AECE_ESTIMATORS",
    "mbls_adaptive_bin_edges",
    "mbls_adaptive_calibration_error",
    "maximum_calibration_error",
    "ClasswiseBins",
    "CLASSWISE_SCALE",
    "scaled_classwise_update",
    "classwise_bins",
    "classwise_calibration_error",
    "empty_classwise_bins",
]

DEFAULT_BINS = 15


def equal_width_bin(q, n_bins: int = DEFAULT_BINS) -> np.ndarray:
    """Index b of the equal-width bin (b/B, (b+1)/B] holding each probability.

    Examples
    --------
    >>> equal_width_bin([0.0, 0.5, 0.51, 1.0], n_bins=2).tolist()
    [0, 0, 1, 1]
    """
    upper_edges = np.arange(1, n_bins + 1, dtype=np.float64) / n_bins
    index = np.searchsorted(upper_edges, np.asarray(q, dtype=np.float64), side="left")
    return np.minimum(index, n_bins - 1)


@dataclass(frozen=True)
class BinnedCalibration:
    """Per-bin counts, accuracy sums and confidence sums (bins may be empty)."""

    count: np.ndarray
    hits: np.ndarray
    confidence_sum: np.ndarray

    @property
    def nonempty(self) -> np.ndarray:
        return self.count > 0

    @property
    def gaps(self) -> np.ndarray:
        """|acc_b - conf_b| for the non-empty bins, as |hits_b - conf_sum_b| / n_b (no cancellation)."""
        n = self.count[self.nonempty]
        return np.abs(self.hits[self.nonempty] - self.confidence_sum[self.nonempty]) / n

    def weighted_gap(self) -> float:
        """sum_b (n_b / N) |acc_b - conf_b| over the non-empty bins, as sum_b |hits_b - conf_sum_b| / N."""
        return math.fsum(np.abs(self.hits - self.confidence_sum)) / float(np.sum(self.count))

    def weighted_square_gap(self) -> float:
        """sum_b (n_b / N) (acc_b - conf_b)² over the non-empty bins, as sum_b (hits_b - conf_sum_b)² / n_b / N."""
        n = self.count[self.nonempty]
        return math.fsum((self.hits[self.nonempty] - self.confidence_sum[self.nonempty]) ** 2 / n) \
            / float(np.sum(self.count))


def _fsum_by_group(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact (correctly rounded) sum of ``values`` within each group 0..n_groups-1."""
    # a stable sort of small whole numbers is a radix sort when they are bytes: 9x faster than of int64
    order = np.argsort(group.astype(np.uint8) if n_groups <= 256 else group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    sorted_values = values[order]
    return np.array([math.fsum(sorted_values[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])


def binned_calibration(confidence, correct, n_bins: int = DEFAULT_BINS) -> BinnedCalibration:
    """Equal-width binning of top-label confidences (the reliability diagram's data)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    index = equal_width_bin(confidence, n_bins)
    return BinnedCalibration(
        count=np.bincount(index, minlength=n_bins).astype(np.float64),
        hits=np.bincount(index[correct], minlength=n_bins).astype(np.float64),
        confidence_sum=_fsum_by_group(confidence, index, n_bins),
    )


def expected_calibration_error(confidence, correct, n_bins: int = DEFAULT_BINS) -> float:
    """ECE: sum_b (n_b/N) |acc_b - conf_b| over non-empty equal-width bins.

    References
    ----------
    Guo et al., "On calibration of modern neural networks", ICML 2017, eq. 3.

    Examples
    --------
    Two bins are filled: (0.8, 0.9] holds acc 1/2 at conf 0.9 and (0.5, 0.6] holds acc 1 at
    conf 0.6, so ECE = (2/4)(0.4) + (2/4)(0.4) = 0.4.

    >>> expected_calibration_error([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 1], n_bins=10)
    0.4
    """
    return binned_calibration(confidence, correct, n_bins).weighted_gap()


def rms_calibration_error(confidence, correct, n_bins: int = DEFAULT_BINS) -> float:
    """RMS calibration error (the L2 form of ECE): sqrt(sum_b (n_b/N) (acc_b - conf_b)²) over the
    non-empty equal-width bins of :func:`expected_calibration_error`.

    It weighs a large gap in a few rows more than ECE does, and is never smaller than ECE
    (Jensen: the root of a weighted mean square is at least the weighted mean).

    References
    ----------
    Hendrycks et al., "Deep anomaly detection with outlier exposure", ICLR 2019 (RMS calibration
    error); torchmetrics' ``CalibrationError(norm="l2")``, with the bins above.

    Examples
    --------
    The bins of the ECE example: gaps 0.4 and 0.4, each with half the rows,
    so RMSCE = sqrt(0.5 * 0.16 + 0.5 * 0.16) = 0.4; with gaps 0.4 (3 rows) and 0 (1 row),
    sqrt(0.75 * 0.16) = 0.3464...

    >>> round(rms_calibration_error([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 1], n_bins=10), 12)
    0.4
    >>> round(rms_calibration_error([0.6, 0.6, 0.6, 1.0], [1, 1, 1, 1], n_bins=10), 12)
    0.346410161514
    """
    return math.sqrt(binned_calibration(confidence, correct, n_bins).weighted_square_gap())


def maximum_calibration_error(confidence, correct, n_bins: int = DEFAULT_BINS) -> float:
    """MCE: max over non-empty equal-width bins of |acc_b - conf_b| (Guo et al. 2017, eq. 5)."""
    return float(np.max(binned_calibration(confidence, correct, n_bins).gaps))


def adaptive_calibration_error(confidence, correct, n_bins: int = DEFAULT_BINS) -> float:
    """Adaptive ECE with equal-mass bins.

    Samples sorted by confidence are cut into ``n_bins`` contiguous groups whose sizes
    differ by at most one, the first N mod B groups taking the extra sample; then the
    ECE sum over the non-empty groups. A run of equal confidences cut by a group
    boundary shares its correct predictions between the groups in proportion to the
    samples each receives (the expectation under a random order of the tied samples),
    so the result does not depend on row order.

    References
    ----------
    Nixon et al., "Measuring calibration in deep learning", CVPR Workshops 2019.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    n = confidence.size
    order = np.argsort(confidence, kind="stable")
    sorted_confidence = confidence[order]
    base, extra = divmod(n, n_bins)
    sizes = np.full(n_bins, base, dtype=np.int64)
    sizes[:extra] += 1
    sizes = sizes[sizes > 0]
    group_ends = np.cumsum(sizes)  # exclusive ends
    # Tie runs of equal confidence and the correct count inside each.
    run_ends = np.append(np.flatnonzero(np.diff(sorted_confidence)) + 1, n)
    run_starts = np.concatenate(([0], run_ends[:-1]))
    run_hits = np.add.reduceat(correct[order].astype(np.float64), run_starts)
    # Expected hits among the first m sorted samples, at every group end m.
    run_of_end = np.searchsorted(run_ends, group_ends, side="left")
    hits_before_run = np.concatenate(([0.0], np.cumsum(run_hits)))[run_of_end]
    taken_from_run = group_ends - run_starts[run_of_end]
    run_sizes = run_ends - run_starts
    cum_hits = hits_before_run + taken_from_run * (run_hits[run_of_end] / run_sizes[run_of_end])
    hits = np.diff(cum_hits, prepend=0.0)
    group_starts = np.concatenate(([0], group_ends[:-1]))
    confidence_sum = np.array([math.fsum(sorted_confidence[a:b]) for a, b in zip(group_starts, group_ends)])
    return math.fsum(np.abs(hits - confidence_sum)) / n


AECE_ESTIMATORS = ("equal-mass", "mbls")


def mbls_adaptive_bin_edges(confidence, n_bins: int = DEFAULT_BINS) -> np.ndarray:
    """The B + 1 bin edges of the MbLS evaluation code's adaptive ECE.

    ``np.interp(np.linspace(0, N, B + 1), np.arange(N), np.sort(confidence))``: edges at
    evenly spaced fractional positions of the sorted confidences, linearly interpolated,
    the last one clamped to the largest confidence. The first edge is the smallest
    confidence. Edges may repeat when confidences do.

    References
    ----------
    Liu et al., "The devil is in the margin: margin-based label smoothing for network
    calibration" (MbLS), CVPR 2022: its evaluation code's ``AdaptiveECELoss``.

    Examples
    --------
    >>> mbls_adaptive_bin_edges([0.2, 0.4, 0.6, 0.8], n_bins=2).tolist()
    [0.2, 0.6, 0.8]
    """
    confidence = np.sort(np.asarray(confidence, dtype=np.float64))
    n = confidence.size
    return np.interp(np.linspace(0, n, n_bins + 1), np.arange(n), confidence)


def mbls_adaptive_calibration_error(confidence, correct, n_bins: int = DEFAULT_BINS) -> float:
    """Adaptive ECE as the MbLS (and ACLS) evaluation code computes it (``--aece-estimator mbls``).

    Bins are (lower, upper] between consecutive :func:`mbls_adaptive_bin_edges`, so the
    least confident sample (equal to the first edge) is in no bin, yet still counts in N:
    sum over non-empty bins of (n_b / N) |acc_b - conf_b|. A confidence equal to an inner
    edge belongs to the bin below it; a run of equal confidences is never split. Sums are
    exact (``math.fsum``), in float64 (the MbLS code works in float32).

    Examples
    --------
    Edges 0.2, 0.6, 0.8: (0.2, 0.6] holds 0.4 (correct) and 0.6 (wrong), gap |1 - 1.0| = 0;
    (0.6, 0.8] holds 0.8 (correct), gap |1 - 0.8|; 0.2 is in no bin but N = 4.

    >>> round(mbls_adaptive_calibration_error([0.2, 0.4, 0.6, 0.8], [1, 1, 0, 1], n_bins=2), 12)
    0.05
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    edges = mbls_adaptive_bin_edges(confidence, n_bins)
    index = np.searchsorted(edges, confidence, side="left") - 1  # edges[b] < q <= edges[b + 1]
    inside = (index >= 0) & (index < n_bins)
    index = index[inside]
    hits = np.bincount(index[correct[inside]], minlength=n_bins).astype(np.float64)
    confidence_sum = _fsum_by_group(confidence[inside], index, n_bins)
    return math.fsum(np.abs(hits - confidence_sum)) / confidence.size


# Class-wise probabilities are summed exactly as 62-bit fixed point: p * 2**62 truncated to
# an int64 (p <= 1 fits), split into a high and a low 31-bit half so that no sum overflows.
_FIXED_ONE = 2.0**62
_HALF = 31
CLASSWISE_SCALE = 2.0**_HALF  # scaled_classwise_update takes p times this
_LOW_MASK = (1 << 31) - 1


class ClasswiseBins:
    """Per-class equal-width bin statistics of p_k against [y = k], for K classes and B bins.

    Probabilities are accumulated in exact fixed point (two 31-bit halves of p * 2**62,
    summed in int64), so the statistics are additive over row chunks with no rounding: any row
    order and any chunking give the same bits.

    Stored sparse, so that memory never grows as K x B: the first bin (0, 1/B] of every
    class is dense (4 int64 per class: most of a wide softmax is tiny), and only the
    (class, bin) cells above it that some row reached are kept, as sorted cell indices
    ``class * B + bin`` with their four sums (5 int64 per cell). A row reaches fewer than B
    cells above the first bin (its probabilities sum to 1) and at most K, so the cells are
    at most min(K (B - 1), N min(K, B - 1) + N). Updates are buffered and merged when the
    buffer is as large as the cells already kept (amortised O(cells log cells)).
    ``count``, ``hits``, ``high`` and ``low`` give dense (K, B) arrays, for small K x B only.
    """

    _FIELDS = ("count", "hits", "high", "low")

    def __init__(self, n_classes: int, n_bins: int):
        self.n_classes, self.n_bins, self.n_rows = int(n_classes), int(n_bins), 0
        self.first = np.zeros((4, self.n_classes), dtype=np.int64)  # bin 0 of every class
        self.cells = np.zeros(0, dtype=np.int64)  # sorted cell indices class * B + bin, bin >= 1
        self.values = np.zeros((4, 0), dtype=np.int64)  # count, hits, high, low of each cell
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_size = 0

    def __iadd__(self, update: "ClasswiseUpdate") -> "ClasswiseBins":
        """Add one chunk's statistics (exact integer arithmetic, O(K) plus its sparse cells; the update
        arrives with them made, on the thread that computed it)."""
        self.n_rows += update.n_rows
        self.first += update.first
        cells, values = update.moved
        self._pending.append((cells, values))
        self._pending_size += cells.size
        if self._pending_size > max(self.cells.size, 1 << 16):
            self._merge()
        return self

    def _merge(self) -> None:
        """Fold the buffered updates into the sorted cells (exact int64 sums)."""
        if not self._pending:
            return
        cells = np.concatenate([self.cells] + [c for c, _ in self._pending])
        values = np.concatenate([self.values] + [v for _, v in self._pending], axis=1)
        self._pending, self._pending_size = [], 0
        order = np.argsort(cells, kind="stable")
        cells = cells[order]
        if cells.size == 0:
            return
        starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
        self.cells = cells[starts]
        self.values = np.add.reduceat(values[:, order], starts, axis=1)

    def __getattr__(self, name: str):
        if name in ClasswiseBins._FIELDS:
            return self.dense(ClasswiseBins._FIELDS.index(name))
        raise AttributeError(name)

    def dense(self, field: int, classes: np.ndarray | None = None) -> np.ndarray:
        """One statistic (0 count, 1 hits, 2 high, 3 low) as a dense (len(classes), B) array."""
        self._merge()
        classes = np.arange(self.n_classes) if classes is None else np.asarray(classes)
        out = np.zeros((classes.size, self.n_bins), dtype=np.int64)
        out[:, 0] = self.first[field, classes]
        if classes.size:
            low, high = np.searchsorted(self.cells, [classes[0] * self.n_bins, (classes[-1] + 1) * self.n_bins])
            cells = self.cells[low:high]
            row = np.searchsorted(classes, cells // self.n_bins)
            keep = (row < classes.size) & (classes[np.minimum(row, classes.size - 1)] == cells // self.n_bins)
            out[row[keep], cells[keep] % self.n_bins] = self.values[field, low:high][keep]
        return out

    def touched_classes(self) -> np.ndarray:
        """Classes with a cell above the first bin (sorted)."""
        self._merge()
        return np.unique(self.cells // self.n_bins)

    @property
    def probability_sum(self) -> np.ndarray:
        """sum of p_k over the samples in each (class, bin) cell, float64 (dense, K x B)."""
        return _fixed_to_float(self.high, self.low)


_EXACT_ROWS = 1 << 21


def _fixed_halves(probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 31-bit halves of p * 2**62 truncated, as whole float64 numbers.

    The same halves as ``fixed = int64(p * 2**62); fixed >> 31, fixed & (2**31 - 1)``, in float
    arithmetic that is exact at every step (scaling by 2**31, floor, and a difference below 2**31
    of two whole numbers), and 1.3x faster than numpy's conversion to int64.
    """
    return _halves_of_scaled(probabilities * 2.0**_HALF)


def _halves_of_scaled(scaled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_fixed_halves` of p from ``scaled`` = p * 2**31 (overwritten by the low half)."""
    high = np.floor(scaled)
    scaled -= high  # the fraction, exactly
    scaled *= 2.0**_HALF
    return high, np.floor(scaled, out=scaled)


def _fixed_to_float(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    return high * (2.0**_HALF / _FIXED_ONE) + low / _FIXED_ONE


@dataclass
class ClasswiseUpdate:
    """One chunk's class-wise statistics, sparse: column totals plus the entries above 1/B."""

    n_rows: int
    n_bins: int
    label_counts: np.ndarray
    high_totals: np.ndarray
    low_totals: np.ndarray
    cols: np.ndarray
    cells: np.ndarray
    high: np.ndarray
    low: np.ndarray
    labels: np.ndarray
    label_cells: np.ndarray
    first: np.ndarray = field(init=False)  # (4, K): what the chunk adds to each class's first bin
    moved: tuple = field(init=False)  # (cells above the first bin, their (4, cells) sums)

    def __post_init__(self):
        # Every entry starts in its class's first bin, and the few above 1/B move to their bin.
        n_classes, n_bins = self.label_counts.size, self.n_bins
        moved = self.label_cells - self.labels * n_bins > 0
        self.first = np.stack([
            self.n_rows - np.bincount(self.cols, minlength=n_classes),
            self.label_counts - np.bincount(self.labels[moved], minlength=n_classes),
            self.high_totals - _exact_bincount(self.cols, self.high, n_classes),
            self.low_totals - _exact_bincount(self.cols, self.low, n_classes),
        ])
        cells = np.concatenate((self.cells, self.label_cells[moved]))
        values = np.zeros((4, cells.size), dtype=np.int64)
        above = self.cells.size
        values[0, :above] = 1
        values[1, above:] = 1
        values[2, :above] = self.high
        values[3, :above] = self.low
        self.moved = (cells, values)


def _exact_bincount(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Sums of int64 ``weights`` below 2**31 by ``index``, exact: float64 bincounts of 2**21 entries at a time."""
    out = np.zeros(size, dtype=np.int64)
    for start in range(0, index.size, 1 << 21):
        out += np.bincount(index[start:start + (1 << 21)], weights=weights[start:start + (1 << 21)],
                           minlength=size).astype(np.int64)
    return out


def classwise_update(probabilities, labels, n_bins: int = DEFAULT_BINS) -> ClasswiseUpdate:
    """The class-wise statistics of one chunk of rows, to add into a :class:`ClasswiseBins`.

    Only probabilities above the first bin edge are binned one by one (most of a wide
    softmax is tiny); the first bin gets the remainder of each column's exact totals.
    The work is proportional to the chunk and to K, never to K x B per chunk.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    return scaled_classwise_update(probabilities * 2.0**_HALF, labels, n_bins)


def scaled_classwise_update(scaled: np.ndarray, labels, n_bins: int = DEFAULT_BINS) -> ClasswiseUpdate:
    """:func:`classwise_update` of probabilities given as ``scaled`` = p * 2**31 (float64, overwritten),
    so that a softmax can divide straight into it: ``exps / (denominator * 2**-31)`` is p * 2**31
    bit for bit (a power of two; below 2**-1022, where p and p * 2**31 round apart, both halves are 0
    and the bin is the first either way)."""
    labels = np.asarray(labels, dtype=np.int64)
    n, n_classes = scaled.shape
    above = np.flatnonzero(scaled > CLASSWISE_SCALE / n_bins)  # flat indices: 3x faster than a 2-D nonzero
    rows, cols = np.divmod(above, n_classes)
    above_values = scaled.ravel()[above] * 2.0**-_HALF
    label_values = scaled[np.arange(n), labels] * 2.0**-_HALF
    high, low = _halves_of_scaled(scaled)
    high_totals, low_totals = np.zeros(n_classes, dtype=np.int64), np.zeros(n_classes, dtype=np.int64)
    for start in range(0, n, _EXACT_ROWS):  # whole numbers below 2**31 sum exactly in float64 up to 2**22 rows
        high_totals += high[start:start + _EXACT_ROWS].sum(axis=0).astype(np.int64)
        low_totals += low[start:start + _EXACT_ROWS].sum(axis=0).astype(np.int64)
    return ClasswiseUpdate(
        n_rows=n,
        n_bins=n_bins,
        label_counts=np.bincount(labels, minlength=n_classes),
        high_totals=high_totals,
        low_totals=low_totals,
        cols=cols,
        cells=cols * n_bins + equal_width_bin(above_values, n_bins),
        high=high.ravel()[above].astype(np.int64),
        low=low.ravel()[above].astype(np.int64),
        labels=labels,
        label_cells=labels * n_bins + equal_width_bin(label_values, n_bins),
    )


def empty_classwise_bins(n_classes: int, n_bins: int = DEFAULT_BINS) -> ClasswiseBins:
    return ClasswiseBins(n_classes, n_bins)


def classwise_bins(probabilities, labels, n_bins: int = DEFAULT_BINS) -> ClasswiseBins:
    """Bin every class's probability column (see :func:`classwise_calibration_error`).

    Examples
    --------
    >>> bins = classwise_bins(np.array([[0.9, 0.1], [0.4, 0.6]]), np.array([0, 0]), n_bins=2)
    >>> bins.count.tolist(), bins.hits.tolist()
    ([[1, 1], [1, 1]], [[1, 1], [0, 0]])
    >>> # class 0: (|1 - 0.4| + |1 - 0.9|) / 2; class 1: (|0 - 0.1| + |0 - 0.6|) / 2
    >>> float(classwise_calibration_error(bins))
    0.35
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    bins = empty_classwise_bins(probabilities.shape[1], n_bins)
    bins += classwise_update(probabilities, labels, n_bins)
    return bins


def classwise_calibration_error(bins: ClasswiseBins) -> float:
    """Class-wise ECE: mean over classes k of the equal-width ECE of p_k against [y = k].

    Every class counts, including classes absent from the labels.

    References
    ----------
    Kull et al., "Beyond temperature scaling", NeurIPS 2019 (classwise-ECE).
    """
    n = float(bins.n_rows)  # N, the same for every class
    # A class with nothing above its first bin has one non-zero term; the others are summed
    # over dense blocks of classes (bounded memory), exactly as over a dense K x B array.
    per_class = np.abs(bins.first[1] - _fixed_to_float(bins.first[2], bins.first[3]))
    touched = bins.touched_classes()
    step = max(1, (1 << 20) // bins.n_bins)
    for start in range(0, touched.size, step):
        classes = touched[start:start + step]
        hits = bins.dense(1, classes)
        probability_sum = _fixed_to_float(bins.dense(2, classes), bins.dense(3, classes))
        per_class[classes] = np.abs(hits - probability_sum).sum(axis=1)
    per_class = per_class / n
    return math.fsum(per_class) / per_class.size
