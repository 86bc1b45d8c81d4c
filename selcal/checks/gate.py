"""The statistics of the CI gate (``selcal check`` and ``selcal compare``; CONVENTIONS.md,
"Comparisons on common ground"): one one-sided p-value per judged metric, then Holm's
step-down procedure over all of them, so that the chance that a model that is not worse fails
on *any* judged metric is at most alpha = (1 - confidence) / 2 (2.5% at the default 95%).
Pure: numbers in, numbers out.

Per metric, the null hypothesis is "not worse by more than the tolerance t": with w the
worsening (current - baseline when lower is better, baseline - current when higher is),
H0: w <= t against H1: w > t.

- ``compare`` (paired bootstrap, both models on the same resampled rows):
  p = (1 + #{i : w*_i <= t}) / (1 + B'), w*_i the worsening on resample i and B' the number of
  resamples where it is defined. This is the bootstrap percentile test: with t = 0 and one
  metric, p < alpha exactly when the two-sided percentile interval at ``confidence`` lies on
  the worse side of 0 (the rule ``compare`` used before Holm), up to the +1 terms.
- ``check`` (two result files with percentile intervals, evaluated separately, so their
  resamples are not paired): each interval gives a standard error, se = width / (2 z), z the
  standard normal quantile at (1 + confidence) / 2; then p = 1 - Phi((w - t) / sqrt(se_c^2 +
  se_b^2)). Treating the two results as independent overstates the noise of their difference
  (two models on the same rows err together), so this test is conservative: it fails a model
  only when it is worse beyond the noise of both results.

References
----------
Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6, 1979.
Efron & Tibshirani, "An introduction to the bootstrap", 1993, ch. 16 (bootstrap tests).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["alpha_of", "paired_pvalue", "interval_pvalue", "holm"]


def alpha_of(confidence: float) -> float:
    """The family-wise level of the gate: (1 - confidence) / 2, the one-sided tail of the intervals.

    >>> alpha_of(0.95)
    0.025000000000000022
    """
    return (1.0 - confidence) / 2.0


def paired_pvalue(worsening: np.ndarray, tolerance: float = 0.0) -> float | None:
    """One-sided bootstrap p-value of H0 "worsening <= tolerance" from the worsening on each
    paired resample (NaN: undefined in that resample, left out); None when none is defined.

    >>> paired_pvalue(np.array([0.1, 0.2, 0.3, -0.1]))  # one resample of four not worse
    0.4
    >>> paired_pvalue(np.full(999, 0.01))
    0.001
    """
    values = np.asarray(worsening, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return float((1 + np.count_nonzero(values <= tolerance)) / (1 + values.size))


def interval_pvalue(worsening: float, ci_current, ci_baseline, confidence: float, tolerance: float = 0.0) -> float:
    """One-sided p-value of H0 "worsening <= tolerance" from two separate percentile intervals
    (normal approximation; see the module notes).

    >>> round(interval_pvalue(0.0, [0.9, 1.1], [0.9, 1.1], 0.95), 3)
    0.5
    >>> interval_pvalue(0.3, [1.2, 1.4], [0.9, 1.1], 0.95) < 0.001
    True
    """
    from scipy.stats import norm  # (here: importing scipy.stats takes a second, and only check needs it)

    z = norm.ppf((1.0 + confidence) / 2.0)
    se = math.hypot((ci_current[1] - ci_current[0]) / (2 * z), (ci_baseline[1] - ci_baseline[0]) / (2 * z))
    excess = worsening - tolerance
    if se == 0.0:
        return 0.0 if excess > 0 else 1.0
    return float(norm.sf(excess / se))


def holm(pvalues, alpha: float) -> np.ndarray:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise level ``alpha``.

    Sort the m p-values ascending; reject p_(1), p_(2), ... while p_(j) <= alpha / (m - j + 1),
    and stop at the first that is not. None (no test) is never rejected and does not count in m.

    >>> holm([0.01, 0.04, 0.03, None], 0.05).tolist()  # 0.01 <= 0.05/3; 0.03 > 0.05/2: stop
    [True, False, False, False]
    >>> holm([0.01, 0.02, 0.03], 0.1).tolist()
    [True, True, True]
    """
    values = [math.inf if p is None else float(p) for p in pvalues]
    m = sum(1 for p in pvalues if p is not None)
    rejected = np.zeros(len(values), dtype=bool)
    for rank, index in enumerate(sorted(range(len(values)), key=lambda i: values[i])):
        if math.isinf(values[index]) or values[index] > alpha / (m - rank):
            break
        rejected[index] = True
    return rejected
