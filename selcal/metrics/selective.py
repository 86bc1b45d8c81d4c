"""Selective classification: the risk-coverage primitive and the metrics built on it.

Every metric in this module reads from :func:`risk_coverage`, the only place that
sorts a confidence score (see ``CONVENTIONS.md``, "Selective classification").
Samples with equal score form a *tie group*; the curve has one operating point per
tie group, and inside a group the cumulative error count is its expectation under a
uniformly random order, so no number here depends on the order of the input rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "RiskCoverage",
    "risk_coverage",
    "thresholds_on",
    "aurc",
    "eaurc",
    "augrc",
    "coverage_at_risk",
    "risk_at_coverage",
    "error_auroc",
    "fpr_at_tpr",
    "selective_metrics",
    "AURC_ESTIMATORS",
]

AURC_ESTIMATORS = ("mean", "trapz")


@dataclass(frozen=True)
class RiskCoverage:
    """Operating points of the risk-coverage curve, one per tie group.

    Attributes
    ----------
    accepted : ndarray of int64, shape (G,)
        Number of samples accepted at each operating point, k (strictly increasing;
        the last one is N).
    errors : ndarray of float64, shape (G,)
        Cumulative error count E_k among the accepted samples (an integer value).
    n : int
        Number of samples N.
    n_errors : int
        Total number of errors.
    thresholds : ndarray of float64, shape (G,)
        Score of each tie group: operating point g accepts every sample with
        score >= thresholds[g].
    """

    accepted: np.ndarray
    errors: np.ndarray
    n: int
    n_errors: int
    thresholds: np.ndarray

    @property
    def coverage(self) -> np.ndarray:
        """Coverage k/N at each operating point."""
        return self.accepted / self.n

    @property
    def risk(self) -> np.ndarray:
        """Selective risk r_k = E_k / k at each operating point."""
        return self.errors / self.accepted

    @property
    def correct(self) -> np.ndarray:
        """Cumulative number of correct predictions accepted at each operating point."""
        return self.accepted - self.errors

    def errors_at_every_k(self) -> np.ndarray:
        """E_k for k = 1..N: inside a tie group, the expected count under a random order.

        Linear interpolation between the operating points that bound the group.
        """
        group_sizes = np.diff(self.accepted, prepend=0)
        errors_before = np.concatenate(([0.0], self.errors[:-1]))
        group_errors = self.errors - errors_before
        # Position of each k inside its group: 1..size. position * errors is an exact
        # integer, so E_k is exact at every group end.
        start = np.repeat(self.accepted - group_sizes, group_sizes)
        position = np.arange(1, self.n + 1, dtype=np.float64) - start
        expected = position * np.repeat(group_errors, group_sizes) / np.repeat(group_sizes, group_sizes)
        return np.repeat(errors_before, group_sizes) + expected


def risk_coverage(score, correct) -> RiskCoverage:
    """Tie-grouped operating points of the risk-coverage curve.

    Parameters
    ----------
    score : array-like of float, shape (N,)
        Confidence score, higher = more confident. Compared as float64.
    correct : array-like of bool, shape (N,)
        Whether each prediction is correct.

    Returns
    -------
    RiskCoverage

    References
    ----------
    Geifman & El-Yaniv, "Selective classification for deep neural networks", 2017;
    tie groups as in scikit-learn's ``_binary_clf_curve``.

    Examples
    --------
    >>> rc = risk_coverage([0.9, 0.8, 0.8, 0.1], [True, True, False, False])
    >>> rc.accepted.tolist(), rc.errors.tolist()
    ([1, 3, 4], [0.0, 1.0, 2.0])
    """
    score = np.asarray(score, dtype=np.float64).ravel()
    errors = ~np.asarray(correct, dtype=bool).ravel()
    if score.shape != errors.shape:
        raise ValueError("score and correct must have the same length")
    if score.size == 0:
        raise ValueError("risk_coverage needs at least one sample")
    if np.isnan(score).any():
        raise ValueError("score contains NaN")
    order = np.argsort(-score, kind="stable")
    sorted_score = score[order]
    # Cumulative sums in float64 are exact for integer counts below 2**53.
    cum_errors = np.cumsum(errors[order], dtype=np.float64)
    # Compare, not subtract: inf - inf is NaN, which would split a group of equal infinities.
    group_ends = np.flatnonzero(sorted_score[1:] != sorted_score[:-1])
    group_ends = np.append(group_ends, score.size - 1)
    return RiskCoverage(
        accepted=group_ends + 1,
        errors=cum_errors[group_ends],
        n=int(score.size),
        n_errors=int(cum_errors[-1]),
        thresholds=sorted_score[group_ends],
    )


def thresholds_on(rc: RiskCoverage, score, scale) -> np.ndarray:
    """The thresholds of ``rc`` (the curve of ``score``) on another ``scale`` of the same rows: a
    non-decreasing function of the score, row by row (the probability of a score ranked by its
    logarithm, as MSP is). Every row of a tie group has the same score, hence the same value on
    the scale; operating point g takes that of its group.

    Examples
    --------
    >>> log_p = np.log([0.9, 0.6, 0.6, 0.3])
    >>> thresholds_on(risk_coverage(log_p, [True, True, False, False]), log_p, np.exp(log_p)).round(12).tolist()
    [0.9, 0.6, 0.3]
    """
    order = np.argsort(-np.asarray(score, dtype=np.float64).ravel(), kind="stable")
    return np.asarray(scale, dtype=np.float64).ravel()[order][rc.accepted - 1]


def _oracle(rc: RiskCoverage) -> RiskCoverage:
    """The curve of the oracle ordering: every correct sample before every error."""
    n_correct = rc.n - rc.n_errors
    # Two pure groups (all correct, then all errors); drop the empty one.
    accepted = np.unique(np.array([n_correct, rc.n], dtype=np.int64))
    accepted = accepted[accepted > 0]
    errors = (accepted - n_correct).astype(np.float64)
    return RiskCoverage(accepted, errors, rc.n, rc.n_errors, thresholds=1.0 - (errors > 0))


def aurc(rc: RiskCoverage, estimator: str = AURC_ESTIMATORS[0]) -> float:
    """Area under the risk-coverage curve.

    ``mean``: (1/N) sum_{k=1..N} r_k with r_k = E_k / k (CONVENTIONS.md).
    ``trapz``: the trapezoid from (0, 0) used by the Xia et al. and Cattelan & Silva
    code, equal to ``mean`` - r_N / (2N).

    References
    ----------
    Geifman et al., "Bias-reduced uncertainty estimation for deep neural
    classifiers", ICLR 2019 (AURC, E-AURC).
    """
    if estimator not in AURC_ESTIMATORS:
        raise ValueError(f"unknown AURC estimator {estimator!r}; use one of {AURC_ESTIMATORS}")
    k = np.arange(1, rc.n + 1, dtype=np.float64)
    value = float(np.sum(rc.errors_at_every_k() / k) / rc.n)
    if estimator == "trapz":
        value -= rc.n_errors / rc.n / (2 * rc.n)
    return value


def eaurc(rc: RiskCoverage, estimator: str = AURC_ESTIMATORS[0]) -> float:
    """Excess AURC: AURC minus the AURC of the oracle ordering (same estimator)."""
    return aurc(rc, estimator) - aurc(_oracle(rc), estimator)


def augrc(rc: RiskCoverage) -> float:
    """Area under the generalised risk-coverage curve: (1/N) sum_k E_k / N.

    References
    ----------
    Traub et al., "Overcoming common flaws in the evaluation of selective
    classification systems", NeurIPS 2024.
    """
    return float(np.sum(rc.errors_at_every_k()) / rc.n / rc.n)


def coverage_at_risk(rc: RiskCoverage, max_risk: float) -> float:
    """Largest coverage k/N at an operating point with r_k <= max_risk; 0 when none."""
    feasible = rc.risk <= max_risk
    if not feasible.any():
        return 0.0
    return float(rc.coverage[np.flatnonzero(feasible)[-1]])


def risk_at_coverage(rc: RiskCoverage, min_coverage: float) -> float:
    """r_k at the first operating point with coverage k/N >= min_coverage."""
    reached = np.flatnonzero(rc.coverage >= min_coverage)
    return float(rc.risk[reached[0]]) if reached.size else float("nan")


def error_auroc(rc: RiskCoverage) -> float | None:
    """P(score of a random correct > score of a random error), ties counting 1/2.

    ``None`` when there is no error or no correct prediction.
    """
    n_correct = rc.n - rc.n_errors
    if rc.n_errors == 0 or n_correct == 0:
        return None
    correct_cum = rc.correct.astype(np.float64)
    correct_before = np.concatenate(([0.0], correct_cum[:-1]))
    group_errors = np.diff(rc.errors, prepend=0.0)
    group_correct = correct_cum - correct_before
    wins = np.sum(group_errors * (correct_before + 0.5 * group_correct))
    return float(wins / (n_correct * rc.n_errors))


def fpr_at_tpr(rc: RiskCoverage, tpr: float = 0.95) -> float | None:
    """Fraction of errors accepted at the highest threshold accepting >= tpr of the correct.

    ``None`` when there is no error or no correct prediction.
    """
    n_correct = rc.n - rc.n_errors
    if rc.n_errors == 0 or n_correct == 0:
        return None
    first = np.flatnonzero(rc.correct / n_correct >= tpr)[0]
    return float(rc.errors[first] / rc.n_errors)


def selective_metrics(
    rc: RiskCoverage,
    *,
    risks=(0.01, 0.05, 0.1),
    coverages=(0.5, 0.8, 0.9),
    estimator: str = AURC_ESTIMATORS[0],
) -> dict[str, float | None]:
    """Every selective-classification metric of CONVENTIONS.md, keyed as in the JSON."""
    metrics: dict[str, float | None] = {
        "aurc": aurc(rc, estimator),
        "eaurc": eaurc(rc, estimator),
        "augrc": augrc(rc),
        "auroc": error_auroc(rc),
        "fpr95": fpr_at_tpr(rc, 0.95),
    }
    for r in risks:
        metrics[f"cov@{r:g}"] = coverage_at_risk(rc, r)
    for c in coverages:
        metrics[f"risk@{c:g}"] = risk_at_coverage(rc, c)
    return metrics
