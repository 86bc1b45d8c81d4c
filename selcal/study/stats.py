"""The statistics of a study (CONVENTIONS.md, "Studies"). Pure: numbers in, numbers out.

* :func:`summary`: runs, mean and sample standard deviation (ddof = 1) of one metric over runs.
* :func:`interval`: the interval of a mean (or of a difference of two recipes' means) from the two
  levels of noise. Runs: the run level of the two-level bootstrap (n of the n runs drawn with
  replacement) has a closed form, a variance of (n - 1)/n s^2/n from a handful of distinct draws;
  its small-sample correction is the unbiased s^2/n with Student's t. Rows: the bootstrap's row
  resamples (the same rows drawn for every run of the data set) move each run's value by a part
  the runs share and a part of its own; s^2 already holds the runs' own parts (the runs were
  measured on one set of rows), so only the shared part is added (:func:`shared_row_variance`;
  adding the whole row variance counts the runs' own parts twice and, worse, lets them inflate
  the degrees of freedom). The two add up, se^2 = sum over recipes of s^2/n + v_shared, and the
  interval is centre +- t_nu se, nu = se^4 / ((sum s^2/n)^2 / (n_min - 1)): Satterthwaite's
  approximation with the row part, from N rows, counted as exact and the run part given the
  degrees of freedom of the recipe with the fewest runs (Hsu's conservative choice for a
  difference; for one recipe, n - 1). Welch's degrees of freedom for the run part (more than
  n_min - 1) were anti-conservative with three runs per recipe, Hsu's were not (the measurement:
  CONVENTIONS.md, "Studies"; bench/bench_study_false_positives.py). With one run, the interval is the rows' only (both parts: no s^2 to hold its own).
* :func:`pvalue` and :func:`verdicts`: one-sided p-values in the direction of the difference and
  Holm's procedure over the data set's judged pairs (:func:`selcal.checks.gate.holm`), at
  (1 - confidence)/2 in each direction.
* :func:`percentile_difference`: the plain two-level percentile bootstrap (no correction), kept to
  measure what the correction buys (``bench/bench_study_false_positives.py``).
* :func:`mean_ranks`: each recipe's mean rank over data sets.

References
----------
Satterthwaite, "An approximate distribution of estimates of variance components", Biometrics
Bulletin 2, 1946; Welch, Biometrika 34, 1947; Hsu, "Contributions to the theory of 'Student's'
t-test as applied to the problem of two samples", Statistical Research Memoirs 2, 1938 (the
degrees of freedom of the smaller sample: a conservative t test whatever the variances).
Davison & Hinkley, "Bootstrap methods and their application", 1997, sec. 3.8 (hierarchical data:
resampling the top level with replacement understates its variance by (n - 1)/n).
Holm, Scand. J. Statist. 6, 1979.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special

from ..checks import gate
from ..bootstrap.resample import percentile_interval

__all__ = ["Summary", "summary", "Interval", "interval", "shared_row_variance", "pvalue", "verdicts",
           "percentile_difference", "mean_ranks"]


@dataclass(frozen=True)
class Summary:
    """One metric over a recipe's runs: how many, their mean and sample standard deviation."""

    runs: int
    mean: float | None
    std: float | None  # ddof = 1; None for a single run (or when a run's value is undefined)
    variance: float | None  # std ** 2, unrounded


def summary(values: Sequence[float | None]) -> Summary:
    """Runs, mean and sample standard deviation (ddof = 1) of one metric's per-run values.

    Computed in exact rational arithmetic and rounded once (the mean is the float nearest the
    true mean), so the order of the runs does not matter. A run whose value is undefined (None
    or NaN) makes the mean undefined: the runs are not all measured.

    >>> summary([0.25, 0.5, 0.75])
    Summary(runs=3, mean=0.5, std=0.25, variance=0.0625)
    >>> summary([0.25]).std is None
    True
    """
    n = len(values)
    if n == 0 or any(v is None or not math.isfinite(v) for v in values):
        return Summary(n, None, None, None)
    exact = [Fraction(v) for v in values]
    mean = sum(exact) / n
    if n == 1:
        return Summary(1, float(mean), None, None)
    variance = float(sum((v - mean) ** 2 for v in exact) / (n - 1))
    return Summary(n, float(mean), math.sqrt(variance), variance)


def shared_row_variance(groups: Sequence[tuple[np.ndarray, float]], confidence: float) -> float | None:
    """The rows' part of the variance of a mean over runs (one group) or of a difference of two
    recipes' means (two groups, signs +1 and -1): the row noise the runs share.

    ``groups``: (matrix, sign) per recipe, ``matrix[r, b]`` run r's value on row resample b (the
    same rows for every run). Under row resampling a run's value moves by a part common to the
    runs (which rows are hard) and a part of its own; the run-to-run spread s^2 of the point
    values already holds the runs' own parts, so only the shared part is added here: the mean
    covariance over resamples between two *different* runs, within a recipe and across the two
    (a recipe with one run: its variance, both parts, as its rows-only interval). For
    sum_i sign_i mean_i, that is sum_i sum_j sign_i sign_j W_ij with W_ij the mean covariance of a
    run of i and another run of j; clipped at 0. Resamples where a value is undefined are left
    out; None when more than (1 - confidence)/2 of them are.

    >>> common = np.array([0.0, 1.0, -1.0, 2.0])
    >>> runs = np.stack([common + [0.5, 0, 0, 0], common + [0, 0.5, 0, 0]])  # each run's own noise
    >>> round(shared_row_variance([(runs, 1.0)], 0.95), 6)  # the covariance of the two runs
    1.645833
    """
    matrices = [np.atleast_2d(np.asarray(matrix, dtype=np.float64)) for matrix, _ in groups]
    stacked = np.concatenate(matrices, axis=0)
    defined = np.isfinite(stacked).all(axis=0)
    resamples = stacked.shape[1]
    if defined.sum() < 2 or resamples - defined.sum() > (1.0 - confidence) / 2 * resamples:
        return None
    covariance = np.atleast_2d(np.cov(stacked[:, defined]))
    bounds = np.cumsum([0] + [m.shape[0] for m in matrices])
    total = 0.0
    for i, (_, sign_i) in enumerate(groups):
        for j, (_, sign_j) in enumerate(groups):
            block = covariance[bounds[i]:bounds[i + 1], bounds[j]:bounds[j + 1]]
            if i == j and block.shape[0] >= 2:  # pairs of different runs only
                n = block.shape[0]
                shared = (block.sum() - np.trace(block)) / (n * (n - 1))
            else:
                shared = block.mean()
            total += sign_i * sign_j * shared
    return max(float(total), 0.0)


@dataclass(frozen=True)
class Interval:
    """An interval ``centre +- quantile * se`` and what it is made of."""

    low: float
    high: float
    se: float
    df: float  # Satterthwaite's, the run part counted with the smaller recipe's n - 1; inf: rows' noise only
    row_variance: float
    run_variance: float  # sum of s^2 / n over the recipes with two runs or more


def interval(centre: float | None, sides: Sequence[Summary], rows: float | None,
             confidence: float) -> Interval | None:
    """The interval of a mean (one side) or of a difference of means (two sides, paired by rows).

    ``sides``: the :func:`summary` of each recipe involved; a recipe with one run adds no run
    variance (it has none to estimate: its interval holds the rows' noise only). ``rows``: the
    variance over the row resamples of the mean (or of the difference), :func:`row_variance`.

    >>> i = interval(0.5, [summary([0.4, 0.5, 0.6])], 0.0, 0.95)
    >>> round(i.low, 4), round(i.high, 4), i.df  # the one-sample t interval when rows add nothing
    (0.2516, 0.7484, 2.0)
    """
    if centre is None or rows is None or any(side.mean is None for side in sides):
        return None
    estimated = [side for side in sides if side.runs >= 2]
    run_variance = math.fsum(side.variance / side.runs for side in estimated)
    se2 = run_variance + rows
    fewest = min((side.runs for side in estimated), default=0)
    df = se2 * se2 / (run_variance * run_variance / (fewest - 1)) if run_variance > 0 else math.inf
    tail = (1.0 + confidence) / 2.0
    quantile = float(special.ndtri(tail) if math.isinf(df) else special.stdtrit(df, tail))  # norm.ppf, t.ppf
    se = math.sqrt(se2)
    return Interval(centre - quantile * se, centre + quantile * se, se, df, rows, run_variance)


def pvalue(difference: float, spread: Interval) -> float:
    """One-sided p-value of "no difference" against a difference in the direction of ``difference``:
    P(T_nu >= |d| / se). With one judged pair, p < (1 - confidence)/2 exactly when the interval
    excludes 0.

    >>> pvalue(0.0, interval(0.0, [summary([1.0, 2.0])], 0.0, 0.95))
    0.5
    """
    if spread.se == 0.0:
        return 0.0 if difference != 0 else 1.0
    statistic = abs(difference) / spread.se
    return float(special.ndtr(-statistic) if math.isinf(spread.df) else special.stdtr(spread.df, -statistic))


def verdicts(differences: Sequence[float | None], pvalues: Sequence[float | None], directions: Sequence[str],
             confidence: float) -> list[str | None]:
    """``better``, ``worse`` or ``same`` for each judged pair (None: undefined): Holm's procedure
    over the pairs that have a p-value at (1 - confidence)/2, each rejected pair judged in the
    direction of its difference and its metric's (``lower`` or ``higher`` is better).

    >>> verdicts([0.02, -0.01, 0.0], [0.001, 0.2, 0.5], ["lower", "higher", "lower"], 0.95)
    ['worse', 'same', 'same']
    """
    rejected = gate.holm(list(pvalues), gate.alpha_of(confidence))
    out: list[str | None] = []
    for difference, p, direction, reject in zip(differences, pvalues, directions, rejected):
        if difference is None or p is None:
            out.append(None)
        elif not reject or difference == 0:
            out.append("same")
        else:
            out.append("better" if (difference < 0) == (direction == "lower") else "worse")
    return out


def percentile_difference(resampled: np.ndarray, direction: str, confidence: float) -> tuple[list | None, float | None]:
    """The plain two-level percentile bootstrap of a difference (recipe - baseline on each
    two-level resample): its percentile interval and the one-sided bootstrap p-value in the
    direction the resamples lean to (:func:`selcal.checks.gate.paired_pvalue`), without the correction."""
    ci = percentile_interval(resampled, confidence)
    worse = resampled if direction == "lower" else -resampled  # positive: the recipe is worse
    p_worse, p_better = gate.paired_pvalue(worse), gate.paired_pvalue(-worse)
    if p_worse is None:
        return ci, None
    return ci, min(p_worse, p_better)


def mean_ranks(means: dict[str, dict[str, float | None]], direction: str) -> dict[str, float | None]:
    """Each recipe's mean rank over data sets, for one metric.

    ``means``: data set -> recipe -> mean. Within each data set the recipes with a mean are
    ranked, 1 the best by ``direction`` (``lower``/``higher``), ties sharing the average rank;
    a recipe's ranks are then averaged over the data sets where it has one (None: none).

    >>> mean_ranks({"a": {"x": 0.1, "y": 0.2}, "b": {"x": 0.3, "y": 0.3}}, "lower")
    {'x': 1.25, 'y': 1.75}
    """
    ranks: dict[str, list[float]] = {}
    recipes: list[str] = []
    for by_recipe in means.values():
        for recipe in by_recipe:
            if recipe not in recipes:
                recipes.append(recipe)
        known = [(recipe, value) for recipe, value in by_recipe.items() if value is not None]
        if not known:
            continue
        values = np.array([value for _, value in known], dtype=np.float64)
        ranked = _average_ranks(values if direction == "lower" else -values)
        for (recipe, _), rank in zip(known, ranked):
            ranks.setdefault(recipe, []).append(float(rank))
    return {recipe: (math.fsum(ranks[recipe]) / len(ranks[recipe]) if recipe in ranks else None)
            for recipe in recipes}


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values`` (smallest first), tied values sharing the average of their ranks
    (scipy.stats.rankdata's ``average``).

    >>> _average_ranks(np.array([0.3, 0.1, 0.3, 0.2])).tolist()
    [3.5, 1.0, 3.5, 2.0]
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    first = np.flatnonzero(starts)
    sizes = np.diff(np.append(first, values.size))
    ranks = np.empty(values.size)
    ranks[order] = (first + (sizes + 1) / 2.0)[np.cumsum(starts) - 1]
    return ranks
