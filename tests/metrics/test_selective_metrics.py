"""Selective classification metrics, checked against CONVENTIONS.md ("Selective classification").

Read top to bottom, this file is the specification by example:

1. hand-worked cases of 4-10 samples with the arithmetic in comments;
2. random data with heavy ties compared with the brute-force references in
   ``ref_selective.py`` (exact rationals, enumeration of orderings, threshold loops);
3. hypothesis properties: row order, strictly increasing transforms, bounds, orderings;
4. edge cases: one sample, all correct, all wrong, all tied, no feasible operating point.

Notation as in CONVENTIONS.md: samples sorted by score s descending; a *tie group* is a set
of samples with equal s; E_k is the expected number of errors among the k most confident
under a random order inside tie groups; r_k = E_k / k.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from helpers import selective_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_selective as ref

from selcal.metrics.selective import (
    augrc,
    aurc,
    coverage_at_risk,
    eaurc,
    error_auroc,
    fpr_at_tpr,
    risk_at_coverage,
    risk_coverage,
    selective_metrics,
)

KEYS = selective_keys()
EXACT = dict(rel=1e-12, abs=1e-15)


def metrics(score, correct, estimator="mean"):
    return selective_metrics(risk_coverage(score, correct), estimator=estimator)


def assert_matches_reference(got, want):
    assert sorted(got) == sorted(want)
    for key in want:
        if want[key] is None:
            assert got[key] is None, key
        else:
            assert got[key] is not None, key
            assert got[key] == pytest.approx(float(want[key]), **EXACT), key


# =========================================================================================
# 1. Hand-worked cases
# =========================================================================================

# Case A: 4 samples, a tie group spanning a correct and an error.
#   score    0.9  0.8  0.8  0.1
#   correct   1    1    0    0
# Tie groups (descending): {0.9: C}, {0.8: C, E}, {0.1: E}.
# The two orderings consistent with the score are C C E E and C E C E.
CASE_A = ([0.9, 0.8, 0.8, 0.1], [1, 1, 0, 0])

# Case B: 5 samples, no ties.
#   score    5  4  3  2  1
#   correct  1  0  1  1  0
CASE_B = ([5.0, 4.0, 3.0, 2.0, 1.0], [1, 0, 1, 1, 0])

# Case C: 6 samples, a 3-sample tie group with 1 correct and 2 errors, and a mixed pair.
#   score    9  7  7  7  4  4
#   correct  1  1  0  0  1  0
CASE_C = ([9.0, 7.0, 7.0, 7.0, 4.0, 4.0], [1, 1, 0, 0, 1, 0])


def test_operating_points_are_one_per_tie_group_hand_worked():
    # Case A: thresholds 0.9, 0.8, 0.1 accept k = 1, 3, 4 samples with 0, 1, 2 errors.
    rc = risk_coverage(*CASE_A)
    assert rc.accepted.tolist() == [1, 3, 4]
    assert rc.errors.tolist() == [0.0, 1.0, 2.0]
    assert rc.thresholds.tolist() == [0.9, 0.8, 0.1]
    assert (rc.n, rc.n_errors) == (4, 2)
    # Case C: groups of sizes 1, 3, 2 -> k = 1, 4, 6; errors 0, 2, 3.
    rc = risk_coverage(*CASE_C)
    assert rc.accepted.tolist() == [1, 4, 6]
    assert rc.errors.tolist() == [0.0, 2.0, 3.0]


def test_errors_inside_a_tie_group_are_the_expectation_under_random_order_hand_worked():
    # Case A: E_2 is the error count after the first of the two 0.8 samples: 0 in C C E E,
    # 1 in C E C E, so E[E_2] = 1/2. Hence E = (0, 1/2, 1, 2).
    assert risk_coverage(*CASE_A).errors_at_every_k().tolist() == [0.0, 0.5, 1.0, 2.0]
    # Case C: the 7-group holds 2 errors in 3 places: each place is an error w.p. 2/3,
    # so E_2 = 2/3, E_3 = 4/3, E_4 = 2; the 4-group adds 1 error in 2 places: E_5 = 5/2, E_6 = 3.
    want = [0, Fraction(2, 3), Fraction(4, 3), 2, Fraction(5, 2), 3]
    assert ref.expected_errors_over_orderings(*CASE_C) == want
    assert risk_coverage(*CASE_C).errors_at_every_k() == pytest.approx([float(w) for w in want], **EXACT)


def test_aurc_is_not_the_value_of_one_arbitrary_tie_order_hand_worked():
    # The two tie orders of case A give 5/24 and 1/3; selcal must give neither, but 13/48.
    value = aurc(risk_coverage(*CASE_A))
    assert value != pytest.approx(5 / 24) and value != pytest.approx(1 / 3)


def trapz_aurc(rc):
    return aurc(rc, estimator="trapz")


# (metric, its exact value by brute force in ref_selective, case, the value worked by hand below).
HAND_WORKED = [
    # AURC, the mean selective risk. Case A, per ordering (1/N) sum_k E_k/k:
    #   C C E E: E = 0,0,1,2 -> 0 + 0   + 1/3 + 2/4 = 5/6
    #   C E C E: E = 0,1,1,2 -> 0 + 1/2 + 1/3 + 2/4 = 4/3
    # average (5/6 + 4/3)/2 = 13/12; AURC = 13/12 / 4 = 13/48.
    # Same from the expected curve E = (0, 1/2, 1, 2): 0 + 1/4 + 1/3 + 1/2 = 13/12.
    pytest.param(aurc, ref.aurc_over_orderings, CASE_A, Fraction(13, 48), id="aurc-A"),
    # Case B: E = 0,1,1,1,2 -> 0 + 1/2 + 1/3 + 1/4 + 2/5 = 89/60; AURC = 89/300.
    pytest.param(aurc, ref.aurc_over_orderings, CASE_B, Fraction(89, 300), id="aurc-B"),
    # Case C: E = 0, 2/3, 4/3, 2, 5/2, 3 -> 0 + 1/3 + 4/9 + 1/2 + 1/2 + 1/2 = 41/18; AURC = 41/108.
    pytest.param(aurc, ref.aurc_over_orderings, CASE_C, Fraction(41, 108), id="aurc-C"),
    # AUGRC, the mean joint error rate: (1/N) sum_k E_k / N.
    # Case A: (0 + 1/2 + 1 + 2) / 16 = 7/32.
    pytest.param(augrc, ref.augrc_over_orderings, CASE_A, Fraction(7, 32), id="augrc-A"),
    # Case B: (0 + 1 + 1 + 1 + 2) / 25 = 1/5.
    pytest.param(augrc, ref.augrc_over_orderings, CASE_B, Fraction(1, 5), id="augrc-B"),
    # Case C: (0 + 2/3 + 4/3 + 2 + 5/2 + 3) / 36 = (19/2) / 36 = 19/72.
    pytest.param(augrc, ref.augrc_over_orderings, CASE_C, Fraction(19, 72), id="augrc-C"),
    # The trapezoid AURC, from the origin. Case A: points (0,0), (1/4, 0), (2/4, 1/4), (3/4, 1/3), (1, 1/2).
    # Trapezoids of width 1/4: (1/4)(1/2)[(0+0) + (0+1/4) + (1/4+1/3) + (1/3+1/2)]
    #   = (1/8)(3/12 + 7/12 + 10/12) = (1/8)(20/12) = 5/24.
    # CONVENTIONS.md: = aurc - r_N/(2N) = 13/48 - (1/2)/8 = 13/48 - 3/48 = 10/48 = 5/24.
    pytest.param(trapz_aurc, ref.trapz_aurc_over_orderings, CASE_A, Fraction(5, 24), id="trapz-A"),
    # Case B: 89/300 - (2/5)/10 = 89/300 - 12/300 = 77/300.
    pytest.param(trapz_aurc, ref.trapz_aurc_over_orderings, CASE_B, Fraction(77, 300), id="trapz-B"),
    # The AUROC of correct against errors, ties counting 1/2.
    # Case A: correct {0.9, 0.8}, errors {0.8, 0.1}.
    #   (0.9, 0.8) win, (0.9, 0.1) win, (0.8, 0.8) tie = 1/2, (0.8, 0.1) win -> 3.5/4 = 7/8.
    pytest.param(error_auroc, ref.auroc_pairs, CASE_A, Fraction(7, 8), id="auroc-A"),
    # Case B: correct {5, 3, 2}, errors {4, 1}:
    #   5>4 5>1 3<4 3>1 2<4 2>1 -> 4/6 = 2/3.
    pytest.param(error_auroc, ref.auroc_pairs, CASE_B, Fraction(2, 3), id="auroc-B"),
    # Case C: correct {9, 7, 4}, errors {7, 7, 4}:
    #   9 beats all 3; 7 ties two 7s (1) and beats 4 (1); 4 loses to both 7s, ties 4 (1/2)
    #   -> (3 + 2 + 1/2) / 9 = 11/18.
    pytest.param(error_auroc, ref.auroc_pairs, CASE_C, Fraction(11, 18), id="auroc-C"),
]


@pytest.mark.parametrize("metric, reference, case, want", HAND_WORKED)
def test_the_hand_worked_values(metric, reference, case, want):
    assert reference(*case) == want
    assert metric(risk_coverage(*case)) == pytest.approx(float(want), **EXACT)


def test_eaurc_subtracts_the_oracle_ordering_hand_worked():
    # Case A: oracle C C E E has AURC 5/6 / 4 = 5/24 = 10/48; E-AURC = 13/48 - 10/48 = 1/16.
    # trapz: both terms lose r_N/(2N) = 1/16, so the trapz E-AURC is also 1/16.
    assert ref.aurc_of_ordering([1, 1, 0, 0]) == Fraction(5, 24)
    rc = risk_coverage(*CASE_A)
    assert eaurc(rc) == pytest.approx(1 / 16, **EXACT)
    assert eaurc(rc, estimator="trapz") == pytest.approx(1 / 16, **EXACT)
    # Case B: oracle C C C E E: E = 0,0,0,1,2 -> 1/4 + 2/5 = 13/20, AURC 13/100 = 39/300;
    # E-AURC = 89/300 - 39/300 = 50/300 = 1/6.
    assert eaurc(risk_coverage(*CASE_B)) == pytest.approx(1 / 6, **EXACT)
    # Case C: oracle C C C E E E: 1/4 + 2/5 + 3/6 = 23/20, AURC 23/120;
    # E-AURC = 41/108 - 23/120 = 410/1080 - 207/1080 = 203/1080.
    assert eaurc(risk_coverage(*CASE_C)) == pytest.approx(203 / 1080, **EXACT)


def test_fpr95_uses_the_highest_threshold_accepting_95_percent_of_correct_hand_worked():
    # Case A: 2 correct; 95% of 2 needs both; the highest threshold accepting both is 0.8
    # (the whole tie group), which accepts 1 of the 2 errors -> 1/2.
    assert fpr_at_tpr(risk_coverage(*CASE_A), 0.95) == pytest.approx(1 / 2, **EXACT)
    # 20 correct with scores 20, 19, ..., 1 and 4 errors with scores 21, 10.5, 1.5, 0.5.
    # 19/20 = 95% exactly: threshold 2 accepts 19 correct and the errors 21 and 10.5 -> 2/4.
    # (Threshold 1 would also accept 1.5 -> 3/4: not the highest.)
    score = list(range(20, 0, -1)) + [21, 10.5, 1.5, 0.5]
    correct = [1] * 20 + [0] * 4
    assert ref.fpr_at_tpr_loop(score, correct) == Fraction(1, 2)
    assert fpr_at_tpr(risk_coverage(score, correct), 0.95) == pytest.approx(1 / 2, **EXACT)


def test_coverage_at_risk_is_the_largest_feasible_coverage_hand_worked():
    # Case B: operating points k = 1..5 with r_k = 0, 1/2, 1/3, 1/4, 2/5 (not monotone).
    rc = risk_coverage(*CASE_B)
    assert coverage_at_risk(rc, 0.1) == pytest.approx(1 / 5)   # only k = 1
    assert coverage_at_risk(rc, 0.3) == pytest.approx(4 / 5)   # k = 4 (1/4), even though k = 2 fails
    assert coverage_at_risk(rc, 0.4) == pytest.approx(1.0)     # k = 5: 2/5 <= 0.4 (equality counts)
    # Case A: points k = 1, 3, 4 with r = 0, 1/3, 1/2. The per-k r_2 = 1/4 is not an
    # operating point, so cov@0.3 is 1/4, not 2/4.
    rc = risk_coverage(*CASE_A)
    assert coverage_at_risk(rc, 0.3) == pytest.approx(1 / 4)
    assert coverage_at_risk(rc, 0.34) == pytest.approx(3 / 4)


def test_risk_at_coverage_uses_the_first_operating_point_reaching_the_coverage_hand_worked():
    # Case A: coverages 1/4, 3/4, 1. c = 0.5 falls inside the 0.8 tie group: the first
    # operating point with k/N >= 0.5 is k = 3, r = 1/3 (not the interpolated r_2 = 1/4).
    rc = risk_coverage(*CASE_A)
    assert risk_at_coverage(rc, 0.5) == pytest.approx(1 / 3)
    assert risk_at_coverage(rc, 0.8) == pytest.approx(1 / 2)
    # Case B: c = 0.6 lands exactly on k = 3: r_3 = 1/3 (not r_4 = 1/4).
    assert risk_at_coverage(risk_coverage(*CASE_B), 0.6) == pytest.approx(1 / 3)


# Ten samples, tie groups of sizes 2, 3, 1, 2, 2:
#   score    9 9 | 8 8 8 | 7 | 6 6 | 5 5
#   correct  1 1 | 1 0 0 | 1 | 0 1 | 0 0
#   k            2       5   6     8    10      (coverage .2 .5 .6 .8 1)
#   E_k          0       2   2     3     5
#   r_k          0     2/5 1/3   3/8   1/2
CASE_D = ([9, 9, 8, 8, 8, 7, 6, 6, 5, 5], [1, 1, 1, 0, 0, 1, 0, 1, 0, 0])


@pytest.mark.parametrize(
    "c, want",
    [
        (0.0, 0.0),         # the first operating point
        (0.5, 2 / 5),       # lands exactly on k = 5: that one, not the next (k = 6, r = 1/3)
        (0.55, 1 / 3),      # between points: the next one, k = 6
        (0.6, 1 / 3),       # lands exactly on k = 6
        (0.7, 3 / 8),       # jumps past 0.7 inside the 6-group: k = 8; per-k r_7 = 2.5/7 is not used
        (0.8, 3 / 8),       # lands exactly on k = 8
        (0.9, 1 / 2),
        (1.0, 1 / 2),
    ],
)
def test_risk_at_coverage_takes_the_first_point_at_or_past_the_coverage(c, want):
    assert ref.risk_at_coverage_loop(*CASE_D, c) == Fraction(want).limit_denominator(100)
    assert risk_at_coverage(risk_coverage(*CASE_D), c) == pytest.approx(want, **EXACT)


@pytest.mark.parametrize(
    "r, want",
    [
        (0.0, 0.2),     # only k = 2 has zero risk
        (0.01, 0.2),
        (0.35, 0.6),    # k = 6 (1/3); k = 8 (3/8) is above
        (0.374, 0.6),
        (0.375, 0.8),   # k = 8: 3/8 <= 0.375 exactly
        (0.4, 0.8),     # k = 5 (2/5) also feasible, but k = 8 is larger
        (0.49, 0.8),
        (0.5, 1.0),     # k = 10: 1/2
    ],
)
def test_coverage_at_risk_takes_the_largest_feasible_point(r, want):
    assert ref.coverage_at_risk_loop(*CASE_D, r) == Fraction(want).limit_denominator(100)
    assert coverage_at_risk(risk_coverage(*CASE_D), r) == pytest.approx(want, **EXACT)


def test_selective_metrics_reports_every_key_of_the_json_schema_hand_worked():
    got = metrics(*CASE_A)
    assert list(got) == KEYS
    want = {
        "aurc": 13 / 48, "eaurc": 1 / 16, "augrc": 7 / 32, "auroc": 7 / 8, "fpr95": 1 / 2,
        # operating points k = 1, 3, 4, r = 0, 1/3, 1/2
        "cov@0.01": 1 / 4, "cov@0.05": 1 / 4, "cov@0.1": 1 / 4,
        "risk@0.5": 1 / 3, "risk@0.8": 1 / 2, "risk@0.9": 1 / 2,
    }
    assert got == pytest.approx(want, **EXACT)
    assert_matches_reference(got, ref.selective_metrics_reference(*CASE_A))


# =========================================================================================
# 2. Brute-force references on random data with heavy ties
# =========================================================================================


def random_case(seed, max_n=60):
    """N up to max_n, scores from a handful of values (heavy ties), random error rate."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, max_n + 1))
    n_values = int(rng.integers(1, 8))
    values = rng.normal(size=n_values)
    score = values[rng.integers(0, n_values, size=n)]
    p_correct = rng.uniform()
    correct = rng.uniform(size=n) < p_correct
    return score, correct


@pytest.mark.parametrize("seed", range(40))
def test_operating_points_match_a_threshold_loop(seed):
    score, correct = random_case(seed)
    rc = risk_coverage(score, correct)
    points = ref.operating_points(score, correct)
    assert rc.thresholds.tolist() == [t for t, _, _ in points]
    assert rc.accepted.tolist() == [k for _, k, _ in points]
    assert rc.errors.tolist() == [float(e) for _, _, e in points]
    assert rc.n == len(score) and rc.n_errors == int(np.sum(~correct))


@pytest.mark.parametrize("seed", range(40))
def test_expected_errors_at_every_k_match_the_threshold_loop(seed):
    score, correct = random_case(seed)
    want = [float(e) for e in ref.expected_errors_by_thresholds(score, correct)]
    assert risk_coverage(score, correct).errors_at_every_k() == pytest.approx(want, **EXACT)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("estimator", ["mean", "trapz"])
def test_every_metric_matches_the_brute_force_reference_on_random_tied_data(seed, estimator):
    score, correct = random_case(seed)
    got = metrics(score, correct, estimator)
    want = ref.selective_metrics_reference(score, correct, estimator=estimator)
    assert_matches_reference(got, want)


def tiny_case(seed):
    """At most 7 samples from at most 3 values: all orderings can be enumerated."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(1, 8))
    score = rng.integers(0, 3, size=n).astype(np.float64) / 2
    correct = rng.uniform(size=n) < 0.5
    return score, correct


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("metric, over_orderings, by_thresholds", [
    (aurc, ref.aurc_over_orderings, ref.aurc_by_thresholds),
    (augrc, ref.augrc_over_orderings, ref.augrc_by_thresholds),
    (trapz_aurc, ref.trapz_aurc_over_orderings, ref.trapz_aurc_by_thresholds),
], ids=["aurc", "augrc", "trapz"])
def test_aurc_augrc_and_trapz_are_the_expectation_over_all_tie_orders(seed, metric, over_orderings, by_thresholds):
    score, correct = tiny_case(seed)
    want = over_orderings(score, correct)
    # The two references agree exactly: the threshold loop's per-position expectation is
    # the average over all orderings.
    assert want == by_thresholds(score, correct)
    assert metric(risk_coverage(score, correct)) == pytest.approx(float(want), **EXACT)


@pytest.mark.parametrize("seed", range(40))
def test_trapz_aurc_equals_mean_aurc_minus_half_the_last_risk_over_n(seed):
    # CONVENTIONS.md: trapezoid from (0, 0) = aurc - r_N / (2N). Check the identity on the
    # exact references (an independent trapezoid) and on selcal.
    score, correct = random_case(seed)
    n = len(score)
    r_n = Fraction(int(np.sum(~correct)), n)
    assert ref.trapz_aurc_by_thresholds(score, correct) == ref.aurc_by_thresholds(score, correct) - r_n / (2 * n)
    rc = risk_coverage(score, correct)
    assert aurc(rc, "trapz") == pytest.approx(aurc(rc, "mean") - float(r_n) / (2 * n), **EXACT)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("estimator", ["mean", "trapz"])
def test_eaurc_is_aurc_minus_the_aurc_of_the_explicit_oracle_order(seed, estimator):
    score, correct = random_case(seed)
    order = ref.oracle_order(correct)
    oracle = ref.aurc_of_ordering(order) if estimator == "mean" else ref.trapz_aurc_of_ordering(order)
    rc = risk_coverage(score, correct)
    assert eaurc(rc, estimator) == pytest.approx(aurc(rc, estimator) - float(oracle), **EXACT)
    assert eaurc(rc, estimator) == pytest.approx(float(ref.eaurc_reference(score, correct, estimator)), **EXACT)


def test_unknown_aurc_estimator_is_refused():
    with pytest.raises(ValueError):
        aurc(risk_coverage(*CASE_A), estimator="trapezoid")


# =========================================================================================
# 3. Properties (hypothesis)
# =========================================================================================

PROPERTY = settings(max_examples=150, deadline=None)

# Scores from 4 values: almost every example has tie groups, most of them mixed.
tied_samples = st.lists(
    st.tuples(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), st.booleans()), min_size=1, max_size=40
)
# Integer-valued scores: strictly increasing transforms below keep them distinct in float64.
integer_samples = st.lists(
    st.tuples(st.integers(-20, 20), st.booleans()), min_size=1, max_size=40
)


def tied_property(test):
    """A property over ``samples`` of ``tied_samples`` (slow: 150 examples)."""
    return pytest.mark.slow(PROPERTY(given(samples=tied_samples)(test)))


def unzip(samples, dtype=np.float64):
    score = np.array([s for s, _ in samples], dtype=dtype)
    correct = np.array([c for _, c in samples], dtype=bool)
    return score, correct


@pytest.mark.slow
@PROPERTY
@given(data=st.data(), samples=tied_samples)
def test_metrics_do_not_depend_on_row_order(data, samples):
    score, correct = unzip(samples)
    perm = np.array(data.draw(st.permutations(range(len(score)))), dtype=np.int64)
    for estimator in ("mean", "trapz"):
        before = metrics(score, correct, estimator)
        after = metrics(score[perm], correct[perm], estimator)
        assert after == before  # exactly, not approximately
    a, b = risk_coverage(score, correct), risk_coverage(score[perm], correct[perm])
    assert a.errors_at_every_k().tolist() == b.errors_at_every_k().tolist()


@tied_property
def test_metrics_match_the_reference_on_heavily_tied_data(samples):
    score, correct = unzip(samples)
    assert_matches_reference(metrics(score, correct), ref.selective_metrics_reference(score, correct))


INCREASING = {
    "exp": np.exp,
    "affine": lambda x: 3 * x + 7,
    "cube": lambda x: x ** 3,
    "arctan": np.arctan,
    "shifted_log": lambda x: np.log(x + 21.0),
}


@pytest.mark.slow
@PROPERTY
@given(samples=integer_samples, name=st.sampled_from(sorted(INCREASING)))
def test_metrics_do_not_change_under_strictly_increasing_transforms(samples, name):
    score, correct = unzip(samples)
    transformed = INCREASING[name](score)
    # Precondition: the transform neither merged nor created ties nor reordered, in float64.
    assert np.array_equal(np.sign(np.subtract.outer(transformed, transformed)),
                          np.sign(np.subtract.outer(score, score)))
    for estimator in ("mean", "trapz"):
        assert metrics(transformed, correct, estimator) == metrics(score, correct, estimator)


@tied_property
def test_reversing_the_score_turns_auroc_into_one_minus_auroc(samples):
    score, correct = unzip(samples)
    forward = error_auroc(risk_coverage(score, correct))
    backward = error_auroc(risk_coverage(-score, correct))
    if forward is None:
        assert backward is None
    else:
        assert backward == pytest.approx(1 - forward, **EXACT)


@tied_property
def test_eaurc_is_never_negative_and_the_oracle_score_is_never_worse(samples):
    score, correct = unzip(samples)
    rc = risk_coverage(score, correct)
    oracle = risk_coverage(correct.astype(np.float64), correct)  # score = correct
    for estimator in ("mean", "trapz"):
        assert eaurc(rc, estimator) >= 0
        assert aurc(oracle, estimator) <= aurc(rc, estimator)
        assert eaurc(oracle, estimator) == 0
        assert eaurc(rc, estimator) == pytest.approx(aurc(rc, estimator) - aurc(oracle, estimator), **EXACT)


@tied_property
def test_every_metric_is_a_fraction_between_zero_and_one(samples):
    score, correct = unzip(samples)
    rc = risk_coverage(score, correct)
    for estimator in ("mean", "trapz"):
        for key, value in metrics(score, correct, estimator).items():
            if value is not None:
                assert 0.0 <= value <= 1.0, key
    assert np.all((0 <= rc.risk) & (rc.risk <= 1))
    assert np.all((0 < rc.coverage) & (rc.coverage <= 1)) and rc.coverage[-1] == 1


@tied_property
def test_augrc_never_exceeds_aurc(samples):
    # E_k / N <= E_k / k for every k <= N.
    score, correct = unzip(samples)
    rc = risk_coverage(score, correct)
    assert augrc(rc) <= aurc(rc)


@pytest.mark.slow
@PROPERTY
@given(correct=st.lists(st.booleans(), min_size=1, max_size=60), value=st.floats(-1e6, 1e6))
def test_aurc_of_a_constant_score_is_the_error_rate(correct, value):
    # One tie group: E_k = k e/N, so r_k = e/N for every k. AUGRC = (e/N^2) sum k/N = e(N+1)/(2N^2).
    correct = np.array(correct)
    n, e = len(correct), int(np.sum(~correct))
    rc = risk_coverage(np.full(n, value), correct)
    assert aurc(rc) == pytest.approx(e / n, **EXACT)
    assert augrc(rc) == pytest.approx(e * (n + 1) / (2 * n * n), **EXACT)
    if 0 < e < n:
        assert error_auroc(rc) == pytest.approx(0.5, **EXACT)   # every pair is a tie
        assert fpr_at_tpr(rc, 0.95) == pytest.approx(1.0)        # the only threshold accepts all


@pytest.mark.slow
@PROPERTY
@given(correct=st.lists(st.booleans(), min_size=2, max_size=60).filter(lambda c: 0 < sum(c) < len(c)),
       noise=st.integers(0, 2 ** 31 - 1))
def test_auroc_is_one_for_a_perfect_score_and_zero_for_its_reverse(correct, noise):
    correct = np.array(correct)
    # Perfect: every correct above every error; ties and spread inside each class allowed.
    jitter = np.random.default_rng(noise).integers(0, 3, size=len(correct)) / 10
    perfect = correct + jitter
    assert error_auroc(risk_coverage(perfect, correct)) == 1.0
    assert error_auroc(risk_coverage(-perfect, correct)) == 0.0
    assert fpr_at_tpr(risk_coverage(perfect, correct), 0.95) == 0.0
    assert fpr_at_tpr(risk_coverage(-perfect, correct), 0.95) == 1.0


@pytest.mark.slow
@PROPERTY
@given(score=st.lists(st.sampled_from([0.0, 1.0, 2.5]), min_size=1, max_size=40), all_correct=st.booleans())
def test_auroc_and_fpr95_are_undefined_without_both_correct_and_errors(score, all_correct):
    correct = np.full(len(score), all_correct)
    got = metrics(np.array(score), correct)
    assert got["auroc"] is None and got["fpr95"] is None
    assert got["aurc"] == (0.0 if all_correct else 1.0)
    assert got["eaurc"] == 0.0


# =========================================================================================
# 4. Edge cases
# =========================================================================================


@pytest.mark.parametrize("correct, want, trapz", [
    (True, {
        "aurc": 0.0, "eaurc": 0.0, "augrc": 0.0, "auroc": None, "fpr95": None,
        "cov@0.01": 1.0, "cov@0.05": 1.0, "cov@0.1": 1.0,
        "risk@0.5": 0.0, "risk@0.8": 0.0, "risk@0.9": 0.0,
    }, 0.0),
    # r_1 = 1; AURC = 1, AUGRC = 1; the oracle is the same single ordering, E-AURC = 0.
    # No operating point has risk <= r, so every cov@r is 0.
    # Trapezoid from (0, 0) to (1, 1): 1/2 = 1 - r_N/(2N).
    (False, {
        "aurc": 1.0, "eaurc": 0.0, "augrc": 1.0, "auroc": None, "fpr95": None,
        "cov@0.01": 0.0, "cov@0.05": 0.0, "cov@0.1": 0.0,
        "risk@0.5": 1.0, "risk@0.8": 1.0, "risk@0.9": 1.0,
    }, 0.5),
], ids=["correct", "wrong"])
def test_a_single_sample(correct, want, trapz):
    assert metrics([0.3], [correct]) == want
    rc = risk_coverage([0.3], [correct])
    assert aurc(rc, "trapz") == pytest.approx(trapz, **EXACT)
    assert eaurc(rc, "trapz") == 0.0


def test_all_correct_gives_zero_risk_everywhere():
    score = [0.9, 0.5, 0.5, 0.1, 0.7]
    got = metrics(score, [True] * 5)
    assert got == {
        "aurc": 0.0, "eaurc": 0.0, "augrc": 0.0, "auroc": None, "fpr95": None,
        "cov@0.01": 1.0, "cov@0.05": 1.0, "cov@0.1": 1.0,
        "risk@0.5": 0.0, "risk@0.8": 0.0, "risk@0.9": 0.0,
    }


def test_all_wrong_gives_full_risk_and_augrc_below_it():
    score = [5.0, 4.0, 3.0, 2.0, 1.0]
    rc = risk_coverage(score, [False] * 5)
    # E_k = k: AURC = 1; AUGRC = (1+2+3+4+5)/25 = 3/5; trapz = 1 - 1/10 = 9/10.
    assert aurc(rc) == 1.0
    assert augrc(rc) == pytest.approx(3 / 5, **EXACT)
    assert aurc(rc, "trapz") == pytest.approx(9 / 10, **EXACT)
    got = metrics(score, [False] * 5)
    assert got["eaurc"] == 0.0
    assert got["auroc"] is None and got["fpr95"] is None
    assert [got[f"cov@{r}"] for r in ("0.01", "0.05", "0.1")] == [0.0, 0.0, 0.0]
    assert [got[f"risk@{c}"] for c in ("0.5", "0.8", "0.9")] == [1.0, 1.0, 1.0]


def test_all_scores_tied_give_one_operating_point():
    # 4 samples, 1 error, all tied: one operating point k = 4, r = 1/4.
    # E_k = k/4, r_k = 1/4 -> AURC = 1/4; AUGRC = (1/4 + 2/4 + 3/4 + 1)/16 = 5/32;
    # AUROC: 3 tied pairs -> 1/2; fpr95: the only threshold accepts the error -> 1;
    # cov@r: 1/4 > 10% -> 0; risk@c = 1/4;
    # oracle C C C E: E = 0,0,0,1 -> (1/4)/4 = 1/16, so E-AURC = 1/4 - 1/16 = 3/16.
    score, correct = [0.5] * 4, [1, 1, 0, 1]
    rc = risk_coverage(score, correct)
    assert rc.accepted.tolist() == [4] and rc.errors.tolist() == [1.0]
    got = metrics(score, correct)
    assert got == pytest.approx({
        "aurc": 1 / 4, "eaurc": 3 / 16, "augrc": 5 / 32, "auroc": 1 / 2, "fpr95": 1.0,
        "cov@0.01": 0.0, "cov@0.05": 0.0, "cov@0.1": 0.0,
        "risk@0.5": 1 / 4, "risk@0.8": 1 / 4, "risk@0.9": 1 / 4,
    }, **EXACT)
    assert_matches_reference(got, ref.selective_metrics_reference(score, correct))


def test_coverage_at_risk_is_zero_when_no_operating_point_is_feasible():
    # score 3 2 1, correct 0 1 1: r = 1, 1/2, 1/3 -> nothing at or below 0.3.
    rc = risk_coverage([3.0, 2.0, 1.0], [False, True, True])
    assert coverage_at_risk(rc, 0.3) == 0.0
    assert coverage_at_risk(rc, 1 / 3) == 1.0
    assert coverage_at_risk(rc, 0.5) == 1.0


def test_positive_and_negative_zero_are_one_tie_group():
    # -0.0 == 0.0 in float64, so they are tied.
    rc = risk_coverage([0.0, -0.0, -1.0], [True, False, True])
    assert rc.accepted.tolist() == [2, 3]
    assert error_auroc(rc) == pytest.approx(ref.auroc_pairs([0.0, -0.0, -1.0], [1, 0, 1]))


@pytest.mark.parametrize("inf", [np.inf, -np.inf])
def test_equal_infinite_scores_form_one_tie_group(inf):
    # CONVENTIONS.md: "Samples with equal s (float64) form a tie group"; inf == inf in float64,
    # and risk_coverage accepts infinite scores (it refuses only NaN).
    # score inf inf 0, correct 1 0 1 -> the inf pair is one group with 1 error in 2 places.
    score = np.array([inf, inf, 0.0])
    rows = [np.array([True, False, True]), np.array([False, True, True])]  # the two row orders
    for correct in rows:
        rc = risk_coverage(score, correct)
        points = ref.operating_points(score, correct)
        assert rc.accepted.tolist() == [k for _, k, _ in points]
        assert_matches_reference(metrics(score, correct), ref.selective_metrics_reference(score, correct))
    assert metrics(score, rows[0]) == metrics(score, rows[1])


def test_risk_coverage_refuses_nan_mismatched_and_empty_input():
    with pytest.raises(ValueError):
        risk_coverage([0.1, np.nan], [True, False])
    with pytest.raises(ValueError):
        risk_coverage([0.1, 0.2], [True])
    with pytest.raises(ValueError):
        risk_coverage([], [])
