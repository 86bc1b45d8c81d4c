"""Calibration metrics: binned calibration errors, NLL and Brier (CONVENTIONS.md, "Calibration").

Equal-width bins are (b/B, (b+1)/B] for b = 0..B-1 with the edges computed in float64
as b/B, and q = 0 in the first bin; confidence 1.0 falls in the last bin, never in a
hidden extra one.

Every sum of floats here is exact (``math.fsum``, or integer fixed point for the
class-wise bins), so results are bit-for-bit the same for any row order or chunking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_BINS",
    "equal_width_bin",
    "BinnedCalibration",
    "binned_calibration",
    "expected_calibration_error",
    "adaptive_calibration_error",
    "maximum_calibration_error",
    "ClasswiseBins",
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


def _fsum_by_group(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact (correctly rounded) sum of ``values`` within each group 0..n_groups-1."""
    order = np.argsort(group, kind="stable")
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


# Class-wise probabilities are summed exactly as 62-bit fixed point: p * 2**62 truncated to
# an int64 (p <= 1 fits), split into a high and a low 31-bit half so that no sum overflows.
_FIXED_ONE = 2.0**62
_HALF = 31
_LOW_MASK = (1 << 31) - 1


@dataclass
class ClasswiseBins:
    """Per-class equal-width bin statistics of p_k against [y = k]; shape (K, B) each.

    Probabilities are accumulated in exact fixed point (two 31-bit halves of p * 2**62,
    summed in int64), so the statistics are additive over row chunks with no rounding: any row
    order and any chunking give the same bits.
    """

    count: np.ndarray
    hits: np.ndarray
    high: np.ndarray
    low: np.ndarray

    def __iadd__(self, update: "ClasswiseUpdate") -> "ClasswiseBins":
        """Add one chunk's statistics (exact integer arithmetic, O(K) plus its sparse cells)."""
        n_bins = self.count.shape[1]
        count, hits, high, low = (a.reshape(-1) for a in (self.count, self.hits, self.high, self.low))
        first_bin = update.cols * n_bins  # every entry starts in its class's first bin ...
        self.count[:, 0] += update.n_rows
        self.hits[:, 0] += update.label_counts
        self.high[:, 0] += update.high_totals
        self.low[:, 0] += update.low_totals
        for flat, weights in ((count, 1), (high, update.high), (low, update.low)):
            np.add.at(flat, update.cells, weights)  # ... and the few above 1/B move to their bin
            np.add.at(flat, first_bin, -weights if not np.isscalar(weights) else -1)
        np.add.at(hits, update.label_cells, 1)
        np.add.at(hits, update.labels * n_bins, -1)
        return self

    @property
    def probability_sum(self) -> np.ndarray:
        """sum of p_k over the samples in each (class, bin) cell, float64."""
        return self.high * (2.0**_HALF / _FIXED_ONE) + self.low / _FIXED_ONE


@dataclass
class ClasswiseUpdate:
    """One chunk's class-wise statistics, sparse: column totals plus the entries above 1/B."""

    n_rows: int
    label_counts: np.ndarray
    high_totals: np.ndarray
    low_totals: np.ndarray
    cols: np.ndarray
    cells: np.ndarray
    high: np.ndarray
    low: np.ndarray
    labels: np.ndarray
    label_cells: np.ndarray


def classwise_update(probabilities, labels, n_bins: int = DEFAULT_BINS) -> ClasswiseUpdate:
    """The class-wise statistics of one chunk of rows, to add into a :class:`ClasswiseBins`.

    Only probabilities above the first bin edge are binned one by one (most of a wide
    softmax is tiny); the first bin gets the remainder of each column's exact totals.
    The work is proportional to the chunk and to K, never to K x B per chunk.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    n, n_classes = probabilities.shape
    fixed = (probabilities * _FIXED_ONE).astype(np.int64)
    high = fixed >> _HALF
    low = np.bitwise_and(fixed, _LOW_MASK, out=fixed)
    rows, cols = np.nonzero(probabilities > 1.0 / n_bins)
    return ClasswiseUpdate(
        n_rows=n,
        label_counts=np.bincount(labels, minlength=n_classes),
        high_totals=high.sum(axis=0),  # <= 2**31 per entry: no int64 overflow below 2**32 rows
        low_totals=low.sum(axis=0),
        cols=cols,
        cells=cols * n_bins + equal_width_bin(probabilities[rows, cols], n_bins),
        high=high[rows, cols],
        low=low[rows, cols],
        labels=labels,
        label_cells=labels * n_bins + equal_width_bin(probabilities[np.arange(n), labels], n_bins),
    )


def empty_classwise_bins(n_classes: int, n_bins: int = DEFAULT_BINS) -> ClasswiseBins:
    zeros = lambda: np.zeros((n_classes, n_bins), dtype=np.int64)  # noqa: E731
    return ClasswiseBins(zeros(), zeros(), zeros(), zeros())


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
    n = float(bins.count[0].sum())  # N, the same for every class
    per_class = np.abs(bins.hits - bins.probability_sum).sum(axis=1) / n
    return math.fsum(per_class) / per_class.size
