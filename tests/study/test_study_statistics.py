"""The pure statistics of a study against independent computations: summaries against the
statistics module (exact fractions), intervals and p-values against scipy's t tests (the row
noise set to zero), Holm's verdicts and the mean ranks by hand."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from selcal.study import stats


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=12))
def test_summary_is_the_mean_and_sample_std_of_the_runs(values):
    got = stats.summary(values)
    exact_mean = sum(Fraction(v) for v in values) / len(values)
    assert got.runs == len(values)
    assert got.mean == float(exact_mean)  # math.fsum: correctly rounded
    if len(values) == 1:
        assert got.std is None
    else:
        assert got.std == pytest.approx(statistics.stdev(values), rel=1e-12, abs=1e-15)


def test_summary_of_runs_with_an_undefined_value():
    assert stats.summary([0.1, None, 0.3]) == stats.Summary(3, None, None, None)
    assert stats.summary([0.1, math.nan]).mean is None


def test_one_recipe_without_row_noise_is_the_one_sample_t_interval():
    values = [0.11, 0.14, 0.09, 0.12]
    got = stats.interval(float(np.mean(values)), [stats.summary(values)], 0.0, 0.9)
    low, high = scipy_stats.t.interval(0.9, len(values) - 1, loc=np.mean(values), scale=scipy_stats.sem(values))
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-12)
    assert got.df == len(values) - 1


def test_a_difference_without_row_noise_is_a_t_test_with_the_smaller_recipes_degrees_of_freedom():
    a, b = [0.31, 0.29, 0.35], [0.25, 0.28, 0.22, 0.26, 0.24]
    sa, sb = stats.summary(a), stats.summary(b)
    difference = sb.mean - sa.mean
    got = stats.interval(difference, [sb, sa], 0.0, 0.95)
    welch = scipy_stats.ttest_ind(b, a, equal_var=False)  # its statistic; Hsu's df: min(n) - 1
    se = abs(difference / welch.statistic)
    assert got.se == pytest.approx(se, rel=1e-12) and got.df == pytest.approx(2.0, rel=1e-12)
    half = scipy_stats.t.ppf(0.975, 2) * se
    assert (got.low, got.high) == pytest.approx((difference - half, difference + half), rel=1e-12)
    assert stats.pvalue(difference, got) == pytest.approx(scipy_stats.t.sf(abs(welch.statistic), 2), rel=1e-10)
    assert welch.df > 2  # Welch's own degrees of freedom would be more (anti-conservative with 3 runs: measured)


def test_row_noise_adds_to_the_run_variance_and_raises_the_degrees_of_freedom():
    values = [0.2, 0.25, 0.3]
    summary = stats.summary(values)
    got = stats.interval(summary.mean, [summary], 0.0004, 0.95)
    run = summary.variance / 3
    assert got.se == pytest.approx(math.sqrt(run + 0.0004), rel=1e-14)
    assert got.df == pytest.approx((run + 0.0004) ** 2 / (run ** 2 / 2), rel=1e-14)  # Satterthwaite
    half = scipy_stats.t.ppf(0.975, got.df) * got.se
    assert (got.low, got.high) == pytest.approx((summary.mean - half, summary.mean + half), rel=1e-14)


def test_single_runs_get_the_rows_only_normal_interval():
    got = stats.interval(0.5, [stats.summary([0.5])], 0.01 ** 2, 0.95)
    assert math.isinf(got.df) and got.run_variance == 0.0
    assert (got.low, got.high) == pytest.approx((0.5 - 1.959963984540054 * 0.01, 0.5 + 1.959963984540054 * 0.01))


def test_no_interval_without_the_row_variance():
    assert stats.interval(0.5, [stats.summary([0.4, 0.6])], None, 0.95) is None


def _pair_covariance(x, y):
    return float(np.cov(x, y)[0, 1])


def test_the_shared_row_variance_is_the_mean_covariance_of_different_runs():
    rng = np.random.default_rng(3)
    common = rng.normal(size=200)
    a = common + rng.normal(scale=0.5, size=(3, 200))  # three runs: the rows they share, and their own
    b = 1.2 * common + rng.normal(scale=0.5, size=(2, 200))
    within_a = np.mean([_pair_covariance(a[i], a[j]) for i in range(3) for j in range(3) if i != j])
    within_b = _pair_covariance(b[0], b[1])
    across = np.mean([_pair_covariance(a[i], b[j]) for i in range(3) for j in range(2)])
    assert stats.shared_row_variance([(a, 1.0)], 0.95) == pytest.approx(within_a, rel=1e-12)
    assert stats.shared_row_variance([(b, 1.0), (a, -1.0)], 0.95) == pytest.approx(
        within_b + within_a - 2 * across, rel=1e-10)
    single = a[:1]  # one run: its whole row variance (the rows-only interval)
    assert stats.shared_row_variance([(single, 1.0)], 0.95) == pytest.approx(np.var(single[0], ddof=1), rel=1e-12)


def test_the_shared_row_variance_leaves_out_undefined_resamples_up_to_the_tail():
    runs = np.array([[1.0, 2.0, 3.0, np.nan] + [2.0] * 96, [1.5, 2.0, 2.5, 1.0] + [2.0] * 96])
    kept = runs[:, [i for i in range(100) if i != 3]]
    assert stats.shared_row_variance([(runs, 1.0)], 0.95) == pytest.approx(_pair_covariance(kept[0], kept[1]))
    assert stats.shared_row_variance([(np.array([[1.0, np.nan, np.nan, 2.0]]), 1.0)], 0.95) is None
    assert stats.shared_row_variance([(np.array([[1.0, 2.0], [2.0, 1.0]]), 1.0)], 0.95) == 0.0  # clipped at 0


def test_verdicts_follow_holm_and_the_metric_direction():
    # alpha = 0.025: sorted p 0.001 <= 0.025/4, 0.004 <= 0.025/3, 0.02 > 0.025/2: stop
    got = stats.verdicts([0.1, -0.1, 0.1, 0.1], [0.001, 0.004, 0.02, 0.3], ["lower", "lower", "higher", "higher"], 0.95)
    assert got == ["worse", "better", "same", "same"]
    assert stats.verdicts([None, 0.0], [None, 0.0], ["lower", "lower"], 0.95) == [None, "same"]


def test_mean_ranks_share_ties_and_skip_a_missing_data_set():
    means = {"d1": {"a": 0.1, "b": 0.1, "c": 0.3}, "d2": {"a": 0.2, "b": 0.1, "c": None}}
    assert stats.mean_ranks(means, "lower") == {"a": 1.75, "b": 1.25, "c": 3.0}
    assert stats.mean_ranks(means, "higher") == {"a": 1.75, "b": 2.25, "c": 1.0}


def test_the_plain_percentile_difference_is_the_gates_test():
    resampled = np.array([0.1, 0.2, -0.05, 0.3, 0.15])
    ci, p = stats.percentile_difference(resampled, "lower", 0.5)
    assert ci == [0.1, 0.2]
    assert p == pytest.approx(2 / 6)  # one resample of five on the better side, plus one


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=15))
def test_average_ranks_are_scipys_rankdata(values):
    values = np.array(values, dtype=np.float64)
    assert stats._average_ranks(values).tolist() == scipy_stats.rankdata(values, method="average").tolist()
