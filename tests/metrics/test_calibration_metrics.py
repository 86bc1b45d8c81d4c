"""Calibration metrics (CONVENTIONS.md, "Calibration"): what each number means.

Definitions under test (B bins, N samples, top-label confidence q = max_k p_k):

* equal-width bin b is (b/B, (b+1)/B] with float64 edges b/B; q = 0 is in bin 0 and
  q = 1.0 in the last bin (no hidden extra bin);
* ece  = sum_b (n_b/N) |acc_b - conf_b| over non-empty equal-width bins;
* mce  = max over non-empty equal-width bins of |acc_b - conf_b|;
* aece = the same sum over B equal-mass groups of the samples sorted by q, sizes
  differing by at most one, the first N mod B groups one larger; a run of equal q cut by
  a group boundary shares its correct count in proportion (expected value under a random
  order of the ties), so the result does not depend on row order;
* cece = mean over all K classes of the equal-width ECE of p_k against [y = k];
* nll  = mean(logsumexp(v) - v_y);  brier = mean sum_k (p_k - [y = k])^2.

Each metric has a hand-worked example, a comparison with the brute-force references of
``ref_calibration.py`` on random data, and hypothesis properties.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_calibration as ref

from selcal.api import Options, probability_terms, evaluate_arrays  # noqa: E402
from selcal.metrics import calibration  # noqa: E402

REL = 1e-12
FAST = Options(scores=("msp", "max_logit"))  # no validation split, nothing fitted


def approx(expected, rel=REL, abs=0.0):
    """pytest.approx with no hidden absolute tolerance (its default 1e-12 would make every
    comparison of a tiny NLL, Brier or log-MSP pass)."""
    return pytest.approx(expected, rel=rel, abs=abs)


def evaluate(logits, labels, bins=15, **options):
    """evaluate_arrays with the scores that need no fitting."""
    return evaluate_arrays(
        np.asarray(logits, dtype=np.float64), np.asarray(labels),
        options=Options(scores=("msp", "max_logit"), bins=bins, **options),
    )


def random_logits(seed, n, k, scale=2.0, accuracy=0.7):
    """Logits with labels that agree with the argmax about ``accuracy`` of the time."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    agree = rng.random(n) < accuracy
    labels = np.where(agree, np.argmax(logits, axis=1), rng.integers(0, k, size=n))
    return logits, labels


def random_confidences(seed, n, correct_rate=0.6, ties=False):
    rng = np.random.default_rng(seed)
    q = rng.random(n)
    if ties:
        q = np.round(q * 8) / 8  # few distinct values: long tie runs, q = 0 and q = 1 included
    correct = rng.random(n) < np.clip(q * correct_rate + 0.2, 0, 1)
    return q, correct


def classwise_from_probabilities(probabilities, labels, n_bins):
    bins = calibration.classwise_bins(np.asarray(probabilities, dtype=np.float64), np.asarray(labels), n_bins)
    return calibration.classwise_calibration_error(bins)


# ============================================================ equal-width binning
class TestEqualWidthBins:
    def test_bin_upper_edge_is_inclusive_lower_edge_exclusive(self):
        # B = 5: edges 0.2, 0.4, 0.6, 0.8, 1.0 (float64 b/5, the same doubles as the literals).
        q = [0.0, 0.2, np.nextafter(0.2, 1), 0.4, np.nextafter(0.4, 1), 0.6, 0.8, np.nextafter(0.8, 1), 1.0]
        assert calibration.equal_width_bin(q, 5).tolist() == [0, 0, 1, 1, 2, 2, 3, 4, 4]

    @pytest.mark.parametrize("n_bins", [1, 2, 3, 7, 10, 15])
    def test_bin_index_matches_the_literal_rule_at_every_edge(self, n_bins):
        # Every edge b/B, its float neighbours on both sides, and random values.
        edges = [b / n_bins for b in range(n_bins + 1)]
        q = [0.0, 1.0] + edges + [np.nextafter(e, 0.0) for e in edges[1:]] + [np.nextafter(e, 1.0) for e in edges[:-1]]
        q += list(np.random.default_rng(n_bins).random(200))
        expected = [ref.bin_index(v, n_bins) for v in q]
        assert calibration.equal_width_bin(q, n_bins).tolist() == expected


# ============================================================ confidence 1.0
class TestConfidenceOneIsInTheLastBin:
    def test_confidence_one_and_a_lower_confidence_share_the_last_bin(self):
        # B = 15: the last bin is (14/15, 1] = (0.9333.., 1]. q = 1.0 (wrong) and 0.94 (right)
        # share it: acc = 1/2, conf = (1 + 0.94)/2 = 0.97, gap 0.47, weight 1 -> ECE = MCE = 0.47.
        # A hidden 16th bin for q = 1.0 would give ECE = (0.06 + 1)/2 = 0.53 and MCE = 1.
        q, correct = [1.0, 0.94], [False, True]
        assert calibration.expected_calibration_error(q, correct) == approx(0.47, rel=REL)
        assert calibration.maximum_calibration_error(q, correct) == approx(0.47, rel=REL)
        binned = calibration.binned_calibration(q, correct)
        assert binned.count.tolist() == [0.0] * 14 + [2.0]

    def test_saturated_softmax_counts_in_the_last_bin_end_to_end(self):
        # Row 0: margin 100 -> exp(log-MSP) is exactly 1.0; row 1: margin log(19) -> q = 0.95.
        # Both in (14/15, 1]: acc = 1/2 (row 0 is wrong), conf = 0.975 -> ECE = MCE = 0.475.
        logits = np.array([[100.0, 0.0], [0.0, math.log(19.0)]])
        labels = np.array([1, 1])
        result = evaluate(logits, labels)
        assert result.scores["msp"]["ece"] == approx(0.475, rel=1e-12)
        assert result.scores["msp"]["mce"] == approx(0.475, rel=1e-12)

    def test_class_probability_one_is_in_the_last_bin(self):
        # K = 2, B = 2, rows p = (1.0, 0.0) with y = 1 and p = (0.75, 0.25) with y = 0.
        # Class 0 column: 1.0 [y=0 is 0], 0.75 [1]: both in (0.5, 1]: hits 1, conf sum 1.75
        #   -> |1 - 1.75| / 2 = 0.375.  (A hidden bin for 1.0: (|0 - 1| + |1 - 0.75|)/2 = 0.625.)
        # Class 1 column: 0.0 [1], 0.25 [0]: both in [0, 0.5]: hits 1, conf 0.25 -> 0.375.
        # cECE = (0.375 + 0.375) / 2 = 0.375   (hidden bin: (0.625 + 0.375)/2 = 0.5)
        p = np.array([[1.0, 0.0], [0.75, 0.25]])
        assert classwise_from_probabilities(p, [1, 0], 2) == approx(0.375, rel=REL)
        bins = calibration.classwise_bins(p, np.array([1, 0]), 2)
        assert bins.count.tolist() == [[0, 2], [2, 0]]


# ============================================================ ECE / MCE
class TestExpectedCalibrationError:
    def test_hand_example_five_bins(self):
        # B = 5, bins (0,.2] (.2,.4] (.4,.6] (.6,.8] (.8,1].
        #   q     correct  bin
        #   0.9   1        4
        #   1.0   0        4      <- q = 1.0 in the last bin
        #   0.7   1        3
        #   0.7   0        3
        #   0.3   1        1
        #   0.0   0        0      <- q = 0 in the first bin
        # bin 4: n=2 acc 1/2 conf 0.95 gap 0.45 -> (2/6)(0.45) = 0.15
        # bin 3: n=2 acc 1/2 conf 0.70 gap 0.20 -> (2/6)(0.20) = 0.0666...
        # bin 1: n=1 acc 1   conf 0.30 gap 0.70 -> (1/6)(0.70) = 0.11666...
        # bin 0: n=1 acc 0   conf 0    gap 0
        # ECE = 0.15 + 0.0667 + 0.1167 = 1/3;  MCE = max(0.45, 0.2, 0.7, 0) = 0.7
        q = [0.9, 1.0, 0.7, 0.7, 0.3, 0.0]
        correct = [1, 0, 1, 0, 1, 0]
        assert calibration.expected_calibration_error(q, correct, 5) == approx(1 / 3, rel=REL)
        assert calibration.maximum_calibration_error(q, correct, 5) == approx(0.7, rel=REL)

    def test_hand_example_sample_on_a_bin_edge_goes_to_the_lower_bin(self):
        # B = 10: 0.6 is the upper edge of (0.5, 0.6], so the two 0.6 join 0.55 there.
        #   bin (0.5,0.6]: q 0.55 (0), 0.6 (1), 0.6 (1): acc 2/3, conf 1.75/3 -> |2 - 1.75| / 4 = 0.0625
        #   bin (0.8,0.9]: q 0.9 (1): |1 - 0.9| / 4 = 0.025
        # ECE = 0.0875. If 0.6 went up to (0.6, 0.7]: |0 - .55| + |2 - 1.2| + |1 - .9| = 1.45 -> 0.3625.
        q = [0.55, 0.6, 0.6, 0.9]
        correct = [0, 1, 1, 1]
        assert calibration.expected_calibration_error(q, correct, 10) == approx(0.0875, rel=REL)
        # MCE: gaps |2/3 - 0.58333| = 0.083333 and |1 - 0.9| = 0.1 -> 0.1
        assert calibration.maximum_calibration_error(q, correct, 10) == approx(0.1, rel=REL)

    def test_mce_keeps_relative_precision_when_accuracy_nearly_equals_confidence(self):
        # B = 1, N = 5: acc = 2/5, conf = (4 * 0.5 + 2^-30) / 5, gap = 2^-30 / 5 = 1.8626451492309570e-10.
        # With one bin MCE = ECE = that gap. Subtracting the rounded quotients 2/5 and
        # (2 + 2^-30)/5 instead cancels all but ~7 digits (each quotient is off by up to
        # 2.8e-17, i.e. 1.5e-7 of the gap).
        q = [0.5, 0.5, 0.5, 0.5, 2.0**-30]
        correct = [1, 1, 0, 0, 0]
        gap = 2.0**-30 / 5
        assert calibration.expected_calibration_error(q, correct, 1) == approx(gap)
        assert calibration.maximum_calibration_error(q, correct, 1) == approx(gap)

    def test_one_bin_is_the_gap_between_accuracy_and_mean_confidence(self):
        # B = 1: ECE = MCE = |accuracy - mean confidence| = |3/4 - 0.6| = 0.15
        q = [0.3, 0.5, 0.7, 0.9]
        correct = [1, 1, 0, 1]
        assert calibration.expected_calibration_error(q, correct, 1) == approx(0.15, rel=REL)
        assert calibration.maximum_calibration_error(q, correct, 1) == approx(0.15, rel=REL)

    @pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
    @pytest.mark.parametrize("seed", [0, 1, 2])
    @pytest.mark.parametrize("ties", [False, True])
    def test_random_confidences_match_the_reference(self, n_bins, seed, ties):
        q, correct = random_confidences(seed, 400, ties=ties)
        assert calibration.expected_calibration_error(q, correct, n_bins) == approx(
            ref.ece(q, correct, n_bins), rel=REL)
        assert calibration.maximum_calibration_error(q, correct, n_bins) == approx(
            ref.mce(q, correct, n_bins), rel=REL)

    @pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
    @pytest.mark.parametrize("k", [2, 3, 10])
    def test_end_to_end_matches_the_reference_on_float64_softmax(self, n_bins, k):
        logits, labels = random_logits(100 * n_bins + k, 300, k)
        p = ref.softmax64(logits)
        q = p.max(axis=1)
        correct = np.array([ref.argmax_first(row) for row in logits]) == labels
        msp = evaluate(logits, labels, bins=n_bins).scores["msp"]
        assert msp["ece"] == approx(ref.ece(q, correct, n_bins), rel=REL)
        assert msp["mce"] == approx(ref.mce(q, correct, n_bins), rel=REL)
        assert msp["aece"] == approx(ref.aece(q, correct, n_bins), rel=REL)

    def test_default_is_fifteen_bins(self):
        # Distinguishes 15 bins from 10 and 20: the references differ for these data.
        q, correct = random_confidences(7, 300)
        expected = ref.ece(q, correct, 15)
        assert ref.ece(q, correct, 10) != approx(expected, rel=1e-6)
        assert calibration.expected_calibration_error(q, correct) == approx(expected, rel=REL)
        logits, labels = random_logits(8, 300, 4)
        q64 = ref.softmax64(logits).max(axis=1)
        correct64 = np.argmax(logits, axis=1) == labels
        result = evaluate_arrays(logits, labels, options=FAST)
        assert result.scores["msp"]["ece"] == approx(ref.ece(q64, correct64, 15), rel=REL)


# ============================================================ adaptive ECE
class TestAdaptiveCalibrationError:
    def test_hand_example_n_not_divisible_by_b(self):
        # N = 7, B = 3: 7 = 3*2 + 1, so group sizes 3, 2, 2 (the first group takes the extra).
        # sorted q (correct):  0.1(0) 0.2(1) 0.4(0) | 0.5(1) 0.6(1) | 0.8(1) 0.9(1)
        # group 1: hits 1, conf sum 0.7 -> |1 - 0.7| = 0.3
        # group 2: hits 2, conf sum 1.1 -> |2 - 1.1| = 0.9
        # group 3: hits 2, conf sum 1.7 -> |2 - 1.7| = 0.3
        # AECE = (0.3 + 0.9 + 0.3) / 7 = 1.5 / 7
        # (Sizes 2,2,3 and 2,3,2 give 1.5 as well: the next test tells the size rules apart.)
        q = [0.9, 0.1, 0.6, 0.4, 0.8, 0.2, 0.5]
        correct = [1, 0, 1, 0, 1, 1, 1]
        assert calibration.adaptive_calibration_error(q, correct, 3) == approx(1.5 / 7, rel=REL)

    def test_hand_example_extra_samples_go_to_the_first_groups(self):
        # N = 5, B = 3: sizes 2, 2, 1 (first 5 mod 3 = 2 groups get one more).
        # sorted q (correct): 0.1(1) 0.2(1) | 0.3(0) 0.4(0) | 0.9(0)
        # groups 2,2,1: |2 - .3| + |0 - .7| + |0 - .9| = 1.7 + 0.7 + 0.9 = 3.3 -> 3.3/5 = 0.66
        # (sizes 1,2,2 would give |1-.1| + |1-.5| + |0-1.3| = 2.7 -> 0.54;
        #  sizes 2,1,2 would give |2-.3| + |0-.3| + |0-1.3| = 3.3 as well, hence the next case)
        q = [0.4, 0.9, 0.1, 0.3, 0.2]
        correct = [0, 0, 1, 0, 1]
        assert calibration.adaptive_calibration_error(q, correct, 3) == approx(0.66, rel=REL)
        # N = 7, B = 4: sizes 2, 2, 2, 1.
        # sorted q (correct): 0.1(1) 0.2(1) | 0.3(0) 0.4(1) | 0.5(0) 0.6(0) | 0.7(1)
        # |2 - .3| + |1 - .7| + |0 - 1.1| + |1 - .7| = 1.7 + .3 + 1.1 + .3 = 3.4 -> 3.4/7
        # (sizes 1,2,2,2: |1-.1| + |1-.5| + |1-.9| + |1-1.3| = 1.8 -> 1.8/7;
        #  sizes 2,2,1,2: 1.7 + .3 + |0-.5| + |1-1.3| = 2.8 -> 2.8/7)
        q = [0.7, 0.3, 0.5, 0.1, 0.6, 0.4, 0.2]
        correct = [1, 0, 0, 1, 0, 1, 1]
        assert calibration.adaptive_calibration_error(q, correct, 4) == approx(3.4 / 7, rel=REL)

    def test_hand_example_fewer_samples_than_bins(self):
        # N = 3 < B = 5: three groups of one sample, two empty groups that do not count.
        # |1 - 0.2| + |0 - 0.6| + |1 - 0.9| = 0.8 + 0.6 + 0.1 = 1.5 -> 1.5/3 = 0.5
        q = [0.6, 0.9, 0.2]
        correct = [0, 1, 1]
        assert calibration.adaptive_calibration_error(q, correct, 5) == approx(0.5, rel=REL)

    def test_hand_example_tie_run_cut_by_a_group_boundary(self):
        # N = 4, B = 2, sizes 2, 2. q = 0.6 three times (one of them correct) and 0.9 (correct).
        # The boundary cuts the run of three 0.6: under a random order of the ties the first
        # group holds 2 of them, expected hits 2 * 1/3 = 2/3; the second holds 1, hits 1/3.
        # group 1: |2/3 - 1.2| = 8/15;  group 2: |1/3 + 1 - 1.5| = 1/6
        # AECE = (8/15 + 1/6) / 4 = (16/30 + 5/30) / 4 = 21/120 = 0.175
        # A stable sort of this row order would put the correct 0.6 in group 2 and give
        # (|0 - 1.2| + |2 - 1.5|)/4 = 0.425.
        q = [0.6, 0.6, 0.6, 0.9]
        correct = [0, 0, 1, 1]
        assert calibration.adaptive_calibration_error(q, correct, 2) == approx(0.175, rel=REL)
        assert calibration.adaptive_calibration_error(q[::-1], correct[::-1], 2) == approx(0.175, rel=REL)
        assert float(ref.aece_over_all_orderings(q, correct, 2)) == approx(0.175, rel=REL)

    def test_hand_example_tie_shares_use_expected_hits_not_expected_error(self):
        # N = 4, B = 2; all four q = 0.5, two correct. Every group holds two of the tied
        # samples: expected hits 1 each, conf sum 1.0 each -> AECE = 0.
        # (Averaging the AECE itself over orders would give 1/6: the orders that put both
        #  correct samples in one group, probability 2/6, give (|2-1| + |0-1|)/4 = 0.5. The
        #  convention averages the hit counts, not the error: 0.)
        q = [0.5, 0.5, 0.5, 0.5]
        correct = [1, 1, 0, 0]
        assert calibration.adaptive_calibration_error(q, correct, 2) == 0.0

    def test_one_group_equals_one_bin_ece(self):
        q, correct = random_confidences(3, 101)
        assert calibration.adaptive_calibration_error(q, correct, 1) == approx(
            calibration.expected_calibration_error(q, correct, 1), rel=REL)

    @pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
    @pytest.mark.parametrize("n", [7, 100, 401])
    @pytest.mark.parametrize("ties", [False, True])
    def test_random_confidences_match_the_reference(self, n_bins, n, ties):
        q, correct = random_confidences(n + n_bins, n, ties=ties)
        assert calibration.adaptive_calibration_error(q, correct, n_bins) == approx(
            ref.aece(q, correct, n_bins), rel=REL)

    @pytest.mark.slow
    @settings(deadline=None, max_examples=150)
    @given(
        data=st.lists(
            st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 0.9, 1.0]), st.booleans()),
            min_size=1, max_size=7),
        n_bins=st.integers(1, 5),
    )
    def test_ties_equal_the_average_over_every_order_of_the_tied_samples(self, data, n_bins):
        q = [v for v, _ in data]
        correct = [c for _, c in data]
        exact = ref.aece_over_all_orderings(q, correct, n_bins)
        assert ref.aece_exact(q, correct, n_bins) == exact  # the two references agree exactly
        assert calibration.adaptive_calibration_error(q, correct, n_bins) == approx(float(exact), rel=REL, abs=1e-15)


# ============================================================ class-wise ECE
class TestClasswiseCalibrationError:
    def test_hand_example_three_classes(self):
        # K = 3, B = 2 (bins [0, 0.5] and (0.5, 1]), N = 4.
        #   p                 y
        #   (0.7, 0.2, 0.1)   0
        #   (0.6, 0.3, 0.1)   1
        #   (0.2, 0.2, 0.6)   2
        #   (0.1, 0.5, 0.4)   1
        # class 0: (0.5,1]: 0.7 [1], 0.6 [0] -> |1 - 1.3| = 0.3;  [0,0.5]: 0.2, 0.1 [0,0] -> |0 - 0.3| = 0.3
        #          ECE_0 = 0.6 / 4 = 0.15
        # class 1: all in [0,0.5] (0.5 is on the edge, so in the lower bin): hits 2, sum 1.2 -> 0.8/4 = 0.2
        # class 2: (0.5,1]: 0.6 [1] -> 0.4;  [0,0.5]: 0.1, 0.1, 0.4 [0,0,0] -> 0.6;  ECE_2 = 1.0/4 = 0.25
        # cECE = (0.15 + 0.2 + 0.25) / 3 = 0.2
        p = np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.1, 0.5, 0.4]])
        y = np.array([0, 1, 2, 1])
        assert classwise_from_probabilities(p, y, 2) == approx(0.2, rel=REL)
        assert ref.classwise_ece(p, y, 2) == approx(0.2, rel=REL)

    def test_hand_example_absent_class_still_counts(self):
        # K = 3, B = 1, labels only 0 and 1: class 2 never occurs, yet counts in the mean.
        #   p                 y
        #   (0.5, 0.3, 0.2)   0
        #   (0.2, 0.6, 0.2)   1
        # class 0: |1 - 0.7| / 2 = 0.15;  class 1: |1 - 0.9| / 2 = 0.05;  class 2: |0 - 0.4| / 2 = 0.2
        # cECE = (0.15 + 0.05 + 0.2) / 3 = 0.4 / 3   (averaging over present classes only: 0.1)
        p = np.array([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2]])
        assert classwise_from_probabilities(p, [0, 1], 1) == approx(0.4 / 3, rel=REL)

    @pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
    @pytest.mark.parametrize("k", [2, 3, 10])
    def test_random_probabilities_match_the_reference(self, n_bins, k):
        logits, labels = random_logits(1000 + 10 * n_bins + k, 250, k)
        p = ref.softmax64(logits)
        assert classwise_from_probabilities(p, labels, n_bins) == approx(
            ref.classwise_ece(p, labels, n_bins), rel=REL)

    @pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
    @pytest.mark.parametrize("k", [2, 3, 10])
    def test_end_to_end_matches_the_reference_on_float64_softmax(self, n_bins, k):
        logits, labels = random_logits(2000 + 10 * n_bins + k, 250, k)
        result = evaluate(logits, labels, bins=n_bins)
        assert result.cece == approx(ref.classwise_ece(ref.softmax64(logits), labels, n_bins), rel=REL)

    def test_probabilities_on_every_bin_edge(self):
        # Each column holds the exact edges b/B: each must go to the lower bin.
        n_bins = 10
        edges = np.array([b / n_bins for b in range(n_bins + 1)])
        p = np.stack([edges, 1.0 - edges], axis=1)  # rows sum to 1 (up to rounding of 1 - e)
        labels = np.arange(edges.size) % 2
        assert classwise_from_probabilities(p, labels, n_bins) == approx(
            ref.classwise_ece(p, labels, n_bins), rel=REL)

    def test_probability_terms_give_the_float64_softmax(self):
        # The class-wise bins of probability_terms are those of the float64 softmax.
        logits, labels = random_logits(5, 200, 6)
        _, _, _, _, update = probability_terms(logits, labels, 1.0, 15)
        bins = calibration.empty_classwise_bins(logits.shape[1], 15)
        bins += update
        expected = ref.classwise_ece(ref.softmax64(logits), labels, 15)
        assert calibration.classwise_calibration_error(bins) == approx(expected, rel=REL)


# ============================================================ NLL and Brier
class TestNllAndBrier:
    def test_hand_example(self):
        # Row 1: v = (log 2, 0, 0) -> p = (1/2, 1/4, 1/4), y = 0: NLL = log 2,
        #        Brier = (1/2 - 1)^2 + (1/4)^2 + (1/4)^2 = 1/4 + 1/16 + 1/16 = 3/8
        # Row 2: same v, y = 1: NLL = log 4, Brier = (1/2)^2 + (1/4 - 1)^2 + (1/4)^2 = 1/4 + 9/16 + 1/16 = 7/8
        # Row 3: v = (1, 1, 1) -> p = 1/3 each, y = 2: NLL = log 3, Brier = 1/9 + 1/9 + 4/9 = 2/3
        # Row 4: v = (5, 5, -800): a tie; p = (1/2, 1/2, ~0), y = 1 (the argmax is the first, 0):
        #        NLL = log 2, Brier = 1/4 + 1/4 = 1/2
        # mean NLL = (log 2 + log 4 + log 3 + log 2)/4 = (4 log 2 + log 3)/4
        # mean Brier = (3/8 + 7/8 + 2/3 + 1/2)/4 = (9/24 + 21/24 + 16/24 + 12/24)/4 = 58/96
        # accuracy: argmax (first index on ties) is 0 in every row, so only row 1 is correct -> 1/4
        logits = np.array([[math.log(2), 0, 0], [math.log(2), 0, 0], [1, 1, 1], [5, 5, -800]], dtype=float)
        labels = np.array([0, 1, 2, 1])
        result = evaluate(logits, labels)
        assert result.nll == approx((4 * math.log(2) + math.log(3)) / 4, rel=REL)
        assert result.brier == approx(58 / 96, rel=REL)
        assert result.accuracy == 0.25

    @pytest.mark.parametrize("k", [2, 3, 10])
    @pytest.mark.parametrize("seed", [0, 1])
    def test_random_logits_match_scipy_float64(self, k, seed):
        logits, labels = random_logits(seed * 10 + k, 500, k, scale=1.5)
        result = evaluate(logits, labels)
        assert result.nll == approx(ref.nll64(logits, labels), rel=REL)
        assert result.brier == approx(ref.brier64(logits, labels), rel=REL)

    def test_random_logits_match_the_decimal_reference(self):
        logits, labels = random_logits(11, 60, 5, scale=4.0)
        result = evaluate(logits, labels)
        assert result.nll == approx(ref.nll_exact(logits, labels), rel=REL)
        assert result.brier == approx(ref.brier_exact(logits, labels), rel=REL)

    @pytest.mark.parametrize("margin", [28.0, 30.0, 35.0, 40.0, 50.0, 300.0])
    def test_confident_correct_rows_keep_relative_precision(self, margin):
        # p_y within ~1e-12 of 1 (or much closer): the literal float64 formulas lose every
        # digit (1 - p_y cancels), the decimal reference does not.
        logits = np.array([[0.0, -margin, -margin - 1.0], [-margin + 0.5, 0.0, -margin]])
        labels = np.array([0, 1])
        result = evaluate(logits, labels)
        assert result.nll == approx(ref.nll_exact(logits, labels), rel=REL)
        assert result.brier == approx(ref.brier_exact(logits, labels), rel=REL)
        assert result.nll > 0.0 and result.brier > 0.0

    def test_float64_literal_formulas_really_lose_these_values(self):
        # Guard for the test above: at margin 35, 1 - p_y = S/(1+S) with S = e^-35 + e^-36
        # ~ 8.6e-16 is a few units of float64's spacing below 1, so the literal formulas are
        # off by percent, not 1e-12: the test above can tell the two apart.
        logits = np.array([[0.0, -35.0, -36.0]])
        labels = np.array([0])
        exact = ref.brier_exact(logits, labels)
        assert ref.brier64(logits, labels) != approx(exact, rel=1e-6)
        assert ref.nll64_literal(logits, labels) != approx(ref.nll_exact(logits, labels), rel=1e-6)

    def test_confident_wrong_rows(self):
        # The label has probability ~exp(-40): NLL ~ 40, Brier ~ 2 - tiny.
        logits = np.array([[0.0, -40.0]])
        labels = np.array([1])
        result = evaluate(logits, labels)
        assert result.nll == approx(ref.nll_exact(logits, labels), rel=REL)
        assert result.brier == approx(ref.brier_exact(logits, labels), rel=REL)

    @pytest.mark.slow
    def test_probability_terms_per_row(self):
        # probability_terms row by row against the decimal references, including extreme rows.
        logits = np.array([
            [0.0, -40.0, -41.0, 3.0],
            [2.0, 2.0, 2.0, 2.0],
            [1e3, -1e3, 0.0, 999.0],
            [-3.0, 4.0, 0.5, 4.0 - 1e-9],
        ])
        labels = np.array([3, 1, 3, 3])
        _, log_msp, nll, brier, _ = probability_terms(logits, labels, 1.0, 15)
        for i in range(len(labels)):
            assert log_msp[i] == approx(ref.log_msp_exact(logits[i]), rel=REL)
            assert nll[i] == approx(ref.nll_exact(logits[i:i + 1], labels[i:i + 1]), rel=REL)
            assert brier[i] == approx(ref.brier_exact(logits[i:i + 1], labels[i:i + 1]), rel=REL)


# ============================================================ properties
finite = st.floats(-60.0, 60.0, allow_nan=False, allow_infinity=False)
tie_prone = st.sampled_from([-40.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 35.0])


@st.composite
def logit_tables(draw, max_rows=40, max_classes=6):
    n = draw(st.integers(1, max_rows))
    k = draw(st.integers(2, max_classes))
    values = draw(st.lists(st.one_of(tie_prone, finite), min_size=n * k, max_size=n * k))
    logits = np.array(values, dtype=np.float64).reshape(n, k)
    labels = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    return logits, labels


@st.composite
def tie_heavy_tables(draw, max_rows=40, max_classes=4):
    """Rows repeated from a small pool (some shifted by a constant, which keeps the
    softmax): many samples share a confidence and their correctness differs."""
    k = draw(st.integers(2, max_classes))
    pool = draw(st.lists(st.lists(tie_prone, min_size=k, max_size=k), min_size=1, max_size=3))
    n = draw(st.integers(2, max_rows))
    picks = draw(st.lists(st.tuples(st.integers(0, len(pool) - 1), st.sampled_from([0.0, 0.0, 8.0, -16.0])),
                          min_size=n, max_size=n))
    logits = np.array([np.array(pool[i]) + shift for i, shift in picks], dtype=np.float64)
    labels = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    return logits, labels


any_tables = st.one_of(logit_tables(), tie_heavy_tables())


confidences = st.one_of(
    st.floats(0.0, 1.0, allow_nan=False),
    st.sampled_from([0.0, 1.0, 1 / 15, 2 / 15, 0.5, 14 / 15, np.nextafter(1.0, 0.0)]),
)


@st.composite
def confidence_samples(draw):
    n = draw(st.integers(1, 60))
    q = draw(st.lists(confidences, min_size=n, max_size=n))
    c = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return np.array(q), np.array(c)


class TestProperties:
    @pytest.mark.slow
    @settings(deadline=None, max_examples=200)
    @given(data=confidence_samples(), n_bins=st.integers(1, 20))
    def test_binned_errors_are_between_zero_and_one_and_mce_bounds_ece(self, data, n_bins):
        q, c = data
        ece = calibration.expected_calibration_error(q, c, n_bins)
        aece = calibration.adaptive_calibration_error(q, c, n_bins)
        mce = calibration.maximum_calibration_error(q, c, n_bins)
        for value in (ece, aece, mce):
            assert 0.0 <= value <= 1.0
        # ECE is an n_b/N-weighted mean of the gaps, MCE their maximum. Each is one correctly
        # rounded quotient of exact quantities at best, so allow 4 units in the last place.
        assert mce >= ece * (1 - 4 * 2.0**-52)

    @pytest.mark.slow
    @settings(deadline=None, max_examples=100)
    @given(data=confidence_samples(), n_bins=st.integers(1, 20))
    def test_ece_mce_aece_match_the_references(self, data, n_bins):
        q, c = data
        # abs: a bin whose hits and correctly rounded confidence sum agree to the last bit
        # leaves |hits - conf_sum| at the rounding of that sum (< 1e-16), not relative to it.
        assert calibration.expected_calibration_error(q, c, n_bins) == approx(ref.ece(q, c, n_bins), rel=REL, abs=1e-15)
        assert calibration.maximum_calibration_error(q, c, n_bins) == approx(ref.mce(q, c, n_bins), rel=REL, abs=1e-15)
        assert calibration.adaptive_calibration_error(q, c, n_bins) == approx(ref.aece(q, c, n_bins), rel=REL, abs=1e-15)

    @pytest.mark.slow
    @settings(deadline=None, max_examples=100)
    @given(
        groups=st.lists(
            st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(0, 8)), min_size=1, max_size=12),
        n_bins=st.integers(1, 20),
        seed=st.integers(0, 2**32 - 1),
    )
    def test_perfectly_calibrated_bins_have_zero_ece_and_mce(self, groups, n_bins, seed):
        # Each group: n samples (n a power of two) of confidence m/n with exactly m correct.
        # m/n is exact in binary, so each group's confidence sum equals its hit count; any
        # union of such groups sharing a bin is calibrated too: acc_b = conf_b in every bin.
        q, c = [], []
        for n, m in groups:
            m = min(m, n)
            q += [m / n] * n
            c += [True] * m + [False] * (n - m)
        order = np.random.default_rng(seed).permutation(len(q))
        q, c = np.array(q)[order], np.array(c)[order]
        assert calibration.expected_calibration_error(q, c, n_bins) == 0.0
        assert calibration.maximum_calibration_error(q, c, n_bins) == 0.0

    @pytest.mark.slow
    @settings(deadline=None, max_examples=100)
    @given(table=any_tables, seed=st.integers(0, 2**32 - 1), n_bins=st.sampled_from([1, 2, 3, 15]))
    def test_metrics_do_not_depend_on_row_order(self, table, seed, n_bins):
        logits, labels = table
        order = np.random.default_rng(seed).permutation(labels.size)
        a = evaluate(logits, labels, bins=n_bins)
        b = evaluate(logits[order], labels[order], bins=n_bins)
        assert a.accuracy == b.accuracy
        assert a.nll == b.nll
        assert a.brier == b.brier
        assert a.cece == b.cece
        for key in ("ece", "aece", "mce"):
            assert a.scores["msp"][key] == b.scores["msp"][key], key

    @pytest.mark.slow
    @settings(deadline=None, max_examples=40)
    @given(table=any_tables, chunk=st.integers(1, 7))
    def test_metrics_do_not_depend_on_row_chunking(self, table, chunk):
        logits, labels = table
        a = evaluate(logits, labels)
        b = evaluate(logits, labels, chunk_rows=chunk)
        assert (a.nll, a.brier, a.cece) == (b.nll, b.brier, b.cece)
        for key in ("ece", "aece", "mce"):
            assert a.scores["msp"][key] == b.scores["msp"][key], key

    @pytest.mark.slow
    @settings(deadline=None, max_examples=100)
    @given(table=logit_tables())
    def test_probability_metrics_are_in_range(self, table):
        logits, labels = table
        result = evaluate(logits, labels)
        assert result.nll >= 0.0
        assert 0.0 <= result.brier <= 2.0
        assert 0.0 <= result.cece <= 1.0
        for key in ("ece", "aece", "mce"):
            assert 0.0 <= result.scores["msp"][key] <= 1.0
        assert result.scores["msp"]["mce"] >= result.scores["msp"]["ece"] * (1 - 4 * 2.0**-52)

    @pytest.mark.slow
    @settings(deadline=None, max_examples=60)
    @given(table=logit_tables(max_rows=12, max_classes=4))
    def test_classwise_ece_matches_the_reference(self, table):
        logits, labels = table
        p = ref.softmax64(logits)
        assert classwise_from_probabilities(p, labels, 15) == approx(
            ref.classwise_ece(p, labels, 15), rel=REL, abs=1e-15)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0, allow_subnormal=True), min_size=1, max_size=40))
def test_class_wise_fixed_halves_are_those_of_the_int64_definition(values):
    """The high and low halves of p * 2**62 (truncated), made in float arithmetic, equal the int64
    definition's ``fixed >> 31`` and ``fixed & (2**31 - 1)`` for any p in [0, 1], subnormals and 1 included."""
    p = np.array(values + [0.0, 1.0, 2.0**-62, 2.0**-31, 1.0 - 2.0**-53, 5e-324])
    fixed = (p * 2.0**62).astype(np.int64)
    high, low = calibration._fixed_halves(p)
    assert high.astype(np.int64).tolist() == (fixed >> 31).tolist()
    assert low.astype(np.int64).tolist() == (fixed & ((1 << 31) - 1)).tolist()


def test_class_wise_totals_are_exact_past_the_rows_summed_at_once(monkeypatch):
    """Column totals summed in float64 by blocks of rows equal the int64 sums, also when a chunk has more
    rows than one block (here forced to 3 rows) and each entry is near 2**31 - 1."""
    monkeypatch.setattr(calibration, "_EXACT_ROWS", 3)
    p = np.full((10, 2), 1.0 - 2.0**-40)
    update = calibration.classwise_update(p, np.zeros(10, dtype=np.int64), 15)
    fixed = (p * 2.0**62).astype(np.int64)
    assert update.high_totals.tolist() == (fixed >> 31).sum(axis=0).tolist()
    assert update.low_totals.tolist() == (fixed & ((1 << 31) - 1)).sum(axis=0).tolist()
