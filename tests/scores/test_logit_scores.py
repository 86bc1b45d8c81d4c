"""Confidence scores from logits (CONVENTIONS.md, "Scores").

Definitions under test (logits v of one row, K classes, prediction = argmax, first on ties):

* msp: ranked by log-MSP = -log1p(S), S = sum_{k != pred} exp(v_k - v_max); equal to
  log(max softmax) but keeping full relative precision when the MSP is within 1e-16 of 1;
* max_logit: v_max;
* pnorm: max_k (v_k - mu) / ||v - mu||_p, mu = mean_k v_k (centred) or 0 (uncentred),
  ||x||_p = (sum |x_k|^p)^(1/p); a row whose centred logits are all zero scores 0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_calibration as ref

from selcal import scores  # noqa: E402
from selcal.api import Options, evaluate_arrays  # noqa: E402

REL = 1e-12


def approx(expected, rel=REL, abs=0.0):
    """pytest.approx with no hidden absolute tolerance (its default 1e-12 would make every
    comparison of a log-MSP near 0 pass)."""
    return pytest.approx(expected, rel=rel, abs=abs)


def textbook_log_msp(logits):
    """v_max - logsumexp(v) the textbook float64 way (what saturates)."""
    top = logits.max(axis=1)
    return top - (top + np.log(np.sum(np.exp(logits - top[:, None]), axis=1)))


# ================================================================ log-MSP
class TestLogMsp:
    def test_hand_example(self):
        # v = (log 3, 0, 0): softmax = (3/5, 1/5, 1/5), log-MSP = log(3/5) = -0.5108256237659907
        # v = (0, 0): a tie, MSP = 1/2 (not 1: only the first index is the prediction)
        # v = (2, 2, 2): MSP = 1/3
        logits = np.array([[math.log(3), 0.0, 0.0]])
        assert scores.log_msp(logits)[0] == approx(math.log(3 / 5))
        assert scores.log_msp(np.array([[0.0, 0.0]]))[0] == approx(math.log(0.5))
        assert scores.log_msp(np.array([[2.0, 2.0, 2.0]]))[0] == approx(math.log(1 / 3))

    @pytest.mark.parametrize("k", [2, 3, 10, 100])
    def test_equals_log_of_the_float64_softmax_maximum_for_ordinary_logits(self, k):
        rng = np.random.default_rng(k)
        logits = rng.normal(size=(500, k))
        expected = np.log(ref.softmax64(logits).max(axis=1))
        np.testing.assert_allclose(scores.log_msp(logits), expected, rtol=REL, atol=0)

    @pytest.mark.slow
    @pytest.mark.parametrize("k", [2, 3, 10])
    def test_matches_the_decimal_reference_at_every_scale(self, k):
        rng = np.random.default_rng(100 + k)
        for scale in (0.1, 3.0, 30.0, 300.0):
            logits = rng.normal(size=(20, k)) * scale
            got = scores.log_msp(logits)
            for i, row in enumerate(logits):
                assert got[i] == approx(ref.log_msp_exact(row)), (scale, row)

    def test_keeps_relative_precision_where_float64_softmax_saturates(self):
        # Margins 40 and 45: S = exp(-40) = 4.248e-18 and exp(-45) = 2.863e-20, below
        # float64's 1.1e-16 spacing at 1, so softmax gives MSP = 1.0 for both and the
        # textbook v_max - logsumexp(v) gives 0 for both: a tie. The convention's
        # -log1p(S) gives -4.248354255291589e-18 and -2.862518580549393e-20.
        # A third row (7, -33, -33) has S = 2 exp(-40): -log1p(2 exp(-40)) = -8.496708510583178e-18.
        logits = np.array([[0.0, -40.0, -1e3], [0.0, -45.0, -1e3], [7.0, -33.0, -33.0]])
        got = scores.log_msp(logits)
        assert got[0] == approx(-math.log1p(math.exp(-40.0)))
        assert got[1] == approx(-math.log1p(math.exp(-45.0)))
        assert got[2] == approx(-math.log1p(2 * math.exp(-40.0)))
        for i, row in enumerate(logits):
            assert got[i] == approx(ref.log_msp_exact(row))
        assert got[2] < got[0] < got[1] < 0.0  # the smaller S, the more confident
        # Guards: the ordinary float64 formulas really do tie these rows.
        assert textbook_log_msp(logits).tolist() == [0.0, 0.0, 0.0]
        assert ref.softmax64(logits).max(axis=1).tolist() == [1.0, 1.0, 1.0]
        two_class = np.array([[0.0, -40.0], [0.0, -45.0]])
        assert scores.log_msp(two_class).tolist() == got[:2].tolist()

    def test_far_below_the_smallest_normal_the_score_is_zero(self):
        # exp(-700) = 9.86e-305 is still a normal double; exp(-800) underflows to 0.
        got = scores.log_msp(np.array([[0.0, -700.0], [800.0, 0.0]]))
        assert got[0] == approx(ref.log_msp_exact([0.0, -700.0]))
        assert got[1] == 0.0

    def test_inverse_temperature_scales_the_logits(self):
        # beta = 1/2 is exact in binary, so softmax(beta v) is the softmax of the halved logits.
        rng = np.random.default_rng(3)
        logits = rng.normal(size=(30, 5)) * 20
        got = scores.log_msp(logits, inverse_temperature=0.5)
        for i, row in enumerate(logits):
            assert got[i] == approx(ref.log_msp_exact(row * 0.5))

    @pytest.mark.slow
    @settings(deadline=None, max_examples=200)
    @given(values=st.lists(st.floats(-200.0, 200.0, allow_nan=False), min_size=2, max_size=8))
    def test_is_log_of_the_softmax_maximum(self, values):
        row = np.array(values)
        got = scores.log_msp(row[None, :])[0]
        assert got <= 0.0
        assert got == approx(ref.log_msp_exact(row), abs=1e-300)


# ================================================================ max logit
class TestMaxLogit:
    def test_is_the_largest_logit(self):
        logits = np.array([[1.0, 3.0, 2.0], [-5.0, -7.0, -6.0], [4.0, 4.0, 0.0]])
        assert scores.max_logit(logits).tolist() == [3.0, -5.0, 4.0]

    def test_random_rows(self):
        logits = np.random.default_rng(0).normal(size=(100, 7)) * 10
        assert scores.max_logit(logits).tolist() == [max(row) for row in logits.tolist()]


# ================================================================ argmax ties
class TestArgmaxTies:
    def test_prediction_is_the_first_index_on_ties(self):
        logits = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0], [3.0, 3.0, 3.0], [-1.0, 5.0, 4.0]])
        pred, exps, rest = scores.softmax_terms(logits)
        assert pred.tolist() == [0, 1, 0, 1]
        # the tied runner-up stays in S: exp(0) = 1
        assert rest.tolist() == [1.0 + math.exp(-1.0), math.exp(-2.0) + 1.0, 2.0, math.exp(-6.0) + math.exp(-1.0)]

    def test_accuracy_counts_a_tie_as_the_first_class(self):
        # Row 0: tie between classes 0 and 1, label 0 -> correct; row 1: same logits, label 1 -> wrong.
        result = evaluate_arrays(np.array([[1.0, 1.0, 0.0]] * 2), np.array([0, 1]),
                                 options=Options(scores=("msp", "max_logit")))
        assert result.accuracy == 0.5


# ================================================================ pnorm
class TestPnorm:
    def test_hand_example_p2_centred_and_uncentred(self):
        # v = (4, 1, 1).
        # centred: mu = 2, x = (2, -1, -1), ||x||_2 = sqrt(4 + 1 + 1) = sqrt 6, s = 2/sqrt 6 = 0.816496580927726
        # uncentred: ||v||_2 = sqrt(16 + 1 + 1) = sqrt 18 = 3 sqrt 2, s = 4/(3 sqrt 2) = 0.9428090415820634
        v = np.array([[4.0, 1.0, 1.0]])
        assert scores.pnorm(v, 2)[0] == approx(2 / math.sqrt(6))
        assert scores.pnorm(v, 2, center=False)[0] == approx(4 / math.sqrt(18))
        # p = 1: centred ||x||_1 = 4 -> 1/2; uncentred ||v||_1 = 6 -> 2/3
        assert scores.pnorm(v, 1)[0] == approx(0.5)
        assert scores.pnorm(v, 1, center=False)[0] == approx(2 / 3)

    def test_hand_example_negative_logits(self):
        # v = (-1, -2, -3). centred: mu = -2, x = (1, 0, -1), ||x||_2 = sqrt 2 -> 1/sqrt 2.
        # uncentred: max v = -1 (negative), ||v||_2 = sqrt 14 -> -1/sqrt 14 = -0.2672612419124244
        v = np.array([[-1.0, -2.0, -3.0]])
        assert scores.pnorm(v, 2)[0] == approx(1 / math.sqrt(2))
        assert scores.pnorm(v, 2, center=False)[0] == approx(-1 / math.sqrt(14))

    @pytest.mark.slow
    @pytest.mark.parametrize("center", [True, False])
    @pytest.mark.parametrize("k", [2, 3, 10, 100])
    def test_grid_equals_a_loop_with_numpy_norm(self, center, k):
        rng = np.random.default_rng(k + center)
        logits = rng.normal(size=(200, k)) * 3 + rng.normal(size=(200, 1))
        ps = list(range(1, 11))
        grid = scores.pnorm_grid(logits, ps, center=center)
        assert grid.shape == (200, 10)
        for j, p in enumerate(ps):
            expected = ref.pnorm_loop(logits, p, center)
            if center:
                # Centre in exact rationals first: numpy's v - mean(v) loses up to 1e-11 relative
                # to cancellation when the logits are close (K = 2), which selcal does not.
                expected = np.array([_pnorm_of_exactly_centred(row, p) for row in logits])
            np.testing.assert_allclose(grid[:, j], expected, rtol=REL, atol=0)
            np.testing.assert_allclose(scores.pnorm(logits, p, center), expected, rtol=REL, atol=0)

    def test_centred_p1_rows_with_one_logit_above_the_mean_tie_exactly(self):
        # max x / sum |x| = x_top / (2 x_top) = 1/2 in exact arithmetic for every such row.
        logits = np.array([[3.1, 0.2, 0.1], [7.0, -1.3, 0.4], [0.3, 0.1, 0.2 - 1e-9]])
        assert scores.pnorm(logits, 1).tolist() == [0.5, 0.5, 0.5]

    def test_grid_keeps_the_order_of_the_ps_given(self):
        logits = np.random.default_rng(1).normal(size=(20, 5))
        grid = scores.pnorm_grid(logits, [7, 2, 10, 1])
        for j, p in enumerate([7, 2, 10, 1]):
            np.testing.assert_allclose(grid[:, j], ref.pnorm_loop(logits, p), rtol=REL, atol=0)

    @pytest.mark.parametrize("magnitude", [1e4, 1e30, 1e200, 1e-200])
    @pytest.mark.parametrize("center", [True, False])
    def test_no_overflow_for_large_logits(self, magnitude, center):
        # |x|^10 of 1e30 is 1e300, of 1e200 is far past the float64 range; the score is scale
        # free (s(c v) = s(v) for c > 0), so it must equal the score of the unscaled row.
        base = np.array([[1.0, -0.5, 0.25, 0.75, -1.0], [3.0, 2.0, 1.0, 0.0, -6.0]])
        logits = base * magnitude
        with np.errstate(over="raise", under="ignore"):
            got = scores.pnorm_grid(logits, range(1, 11), center=center)
        assert np.all(np.isfinite(got))
        expected = scores.pnorm_grid(base, range(1, 11), center=center)
        np.testing.assert_allclose(got, expected, rtol=REL, atol=0)
        for i in range(len(base)):
            assert got[i, 9] == approx(ref.pnorm_exact(logits[i], 10, center))
            assert got[i, 0] == approx(ref.pnorm_exact(logits[i], 1, center))

    def test_magnitude_1e30_with_p10_matches_the_exact_reference(self):
        logits = np.array([[1e30, 2e30, -3e30, 5e29]])
        assert scores.pnorm(logits, 10)[0] == approx(ref.pnorm_exact(logits[0], 10))
        assert scores.pnorm(logits, 10, center=False)[0] == approx(ref.pnorm_exact(logits[0], 10, center=False))

    def test_all_equal_row_scores_zero(self):
        logits = np.array([[2.5, 2.5, 2.5], [0.0, 0.0, 0.0], [-4.0, -4.0, -4.0]])
        grid = scores.pnorm_grid(logits, range(1, 11))
        assert grid.tolist() == [[0.0] * 10] * 3
        # uncentred, only the all-zero row has a zero norm
        assert scores.pnorm(np.array([[0.0, 0.0]]), 3, center=False).tolist() == [0.0]

    @pytest.mark.parametrize("value", [0.1, -1e30, 1e-3, 123.456])
    def test_all_equal_row_scores_zero_even_when_the_float64_mean_is_not_that_value(self, value):
        # Every logit equal: v - mu is the zero vector and the score is 0 by definition.
        # For 0.1 the float64 mean of (0.1, 0.1, 0.1) is 0.10000000000000002, not 0.1, so a
        # score computed from v - fl(mean) sees three equal tiny non-zero values and returns
        # +-1/3^(1/p) (-1/3 at p = 1) instead of 0.
        logits = np.full((1, 3), value)
        assert scores.pnorm_grid(logits, range(1, 11)).tolist() == [[0.0] * 10]

    @pytest.mark.parametrize("shift", [-1000.0, -3.5, 0.125, 7.0, 1000.0])
    def test_centred_score_ignores_a_constant_added_to_a_row(self, shift):
        rng = np.random.default_rng(5)
        logits = rng.normal(size=(50, 6)) * 4
        for p in (1, 2, 5, 10):
            np.testing.assert_allclose(scores.pnorm(logits + shift, p), scores.pnorm(logits, p), rtol=REL, atol=0)
        # ... while the uncentred score (eq. 17 as printed) does depend on it.
        assert not np.allclose(scores.pnorm(logits + shift, 2, center=False), scores.pnorm(logits, 2, center=False),
                               rtol=1e-6, atol=0)

    def test_centred_score_is_exactly_shift_invariant_on_dyadic_logits(self):
        # Logits on a 1/64 grid: v + c, the mean and v - mu are all exact, so bit-equal scores.
        rng = np.random.default_rng(6)
        logits = rng.integers(-640, 640, size=(40, 4)) / 64
        for p in range(1, 11):
            assert scores.pnorm(logits + 96.0, p).tolist() == scores.pnorm(logits, p).tolist()

    @pytest.mark.slow
    @settings(deadline=None, max_examples=150)
    @given(
        rows=st.integers(1, 6).flatmap(
            lambda k: st.lists(st.lists(st.integers(-3200, 3200), min_size=k + 1, max_size=k + 1),
                               min_size=1, max_size=5)),
        center=st.booleans(),
    )
    def test_grid_matches_the_loop_on_exactly_representable_logits(self, rows, center):
        # Logits on a 1/64 grid, so that the mean and v - mu are the same doubles however
        # they are computed: any difference is in the norm itself.
        logits = np.array(rows, dtype=np.float64) / 64
        grid = scores.pnorm_grid(logits, range(1, 11), center=center)
        for j, p in enumerate(range(1, 11)):
            np.testing.assert_allclose(grid[:, j], ref.pnorm_loop(logits, p, center), rtol=REL, atol=0)
        if center:
            assert np.all((grid >= 0.0) & (grid <= 1.0))  # max(x) >= 0 = mean(x), ||x||_p >= max|x|


class TestPnormLargeP:
    """p >= 1050 used to underflow: the largest term (|x| / m)^p with |x| / m in [1/2, 1) fell into
    subnormals, and at p = 2000 real rows scored up to 27% off (46% at p = 10000)."""

    GRID = (1, 2, 10, 1050, 2000, 10000)

    @pytest.mark.parametrize("center", [True, False])
    def test_real_rows_match_the_decimal_reference_at_every_p(self, center):
        logits = _sample_rows(40)[0]
        grid = scores.pnorm_grid(logits, self.GRID, center=center)
        for j, p in enumerate(self.GRID):
            expected = np.array([ref.pnorm_exact(row, p, center) for row in logits])
            np.testing.assert_allclose(grid[:, j], expected, rtol=REL, atol=0, err_msg=f"p = {p}")
            np.testing.assert_array_equal(scores.pnorm(logits, p, center), grid[:, j])  # alone = in a grid

    @pytest.mark.parametrize("magnitude", [1e-300, 1e-3, 1.0, 1e30, 1e300])
    def test_any_scale_and_spread_at_large_p(self, magnitude):
        rng = np.random.default_rng(11)
        logits = rng.normal(size=(30, 7)) * rng.uniform(0.01, 20, size=(30, 1)) * magnitude
        logits[0] = [magnitude, magnitude * 0.5, 0, 0, 0, 0, 0]
        for center in (True, False):
            grid = scores.pnorm_grid(logits, self.GRID, center=center)
            assert np.all(np.isfinite(grid))
            for j, p in enumerate(self.GRID):
                expected = np.array([ref.pnorm_exact(row, p, center) for row in logits])
                np.testing.assert_allclose(grid[:, j], expected, rtol=REL, atol=0, err_msg=f"p = {p}, {center}")

    def test_large_p_keeps_the_zero_row_and_tends_to_max_over_max_abs(self):
        logits = np.array([[1.5, 1.5, 1.5], [4.0, 1.0, 1.0]])
        grid = scores.pnorm_grid(logits, [10000, 1000000])
        assert grid[0].tolist() == [0.0, 0.0]
        assert grid[1, 1] == approx(1.0, rel=1e-5)  # x = (2, -1, -1): max x / max |x| = 1

    def test_p_search_over_a_large_grid_uses_the_exact_scores(self):
        from selcal.scores import fits as posthoc

        logits, labels = _sample_rows(300)
        fit = posthoc.fit_pnorm(logits, labels, (2, 2000))
        correct = np.argmax(logits, axis=1) == labels
        for p in (2, 2000):
            exact = np.array([ref.pnorm_exact(row, p) for row in logits])
            from selcal.metrics import selective

            expected = selective.selective_metrics(selective.risk_coverage(exact, correct))["aurc"]
            assert fit.val_objective[p] == approx(expected, rel=1e-9), p


def _sample_rows(n: int):
    """The first n rows of a real sample dump (float64 logits, labels)."""
    from selcal import read_dump

    dump = read_dump(str(SAMPLES / "markus93_densenet40_c10.parquet"))
    return np.asarray(dump.logits[:n], dtype=np.float64), np.asarray(dump.labels[:n])


def _pnorm_of_exactly_centred(row, p: int) -> float:
    """max x / ||x||_p with x = v - mean(v) centred exactly (Fractions); the ratio is exact for p = 1."""
    from fractions import Fraction

    values = [Fraction(float(v)) for v in row]
    mean = sum(values) / len(values)
    centred = [v - mean for v in values]
    if p == 1:
        total = sum(abs(x) for x in centred)
        return float(max(centred) / total) if total else 0.0
    as_float = np.array([float(x) for x in centred])
    norm = np.linalg.norm(as_float, ord=p)
    return float(as_float.max() / norm) if norm else 0.0
