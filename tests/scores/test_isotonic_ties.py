"""Isotonic calibration keeps exact ties: a row's probabilities depend on its set of fitted values,
not on which classes hold them (CONVENTIONS.md, "Post-hoc calibrators")."""

from __future__ import annotations

import numpy as np

from selcal.scores.calibrators import IsotonicFit

# (0.9 + A) + B and (0.9 + B) + A round differently in float64
A, B = 0.007214844075832684, 0.007111917696952796


def _fit() -> IsotonicFit:
    step = (np.array([0.0, 0.5, 0.5000001, 1.0]), np.array([B, B, A, A]))  # p below 0.5 -> B, above -> A
    return IsotonicFit(thresholds=[np.array([0.0, 1.0]), step[0], step[0]],
                       values=[np.array([0.9, 0.9]), step[1], step[1]])


def test_rows_whose_classes_hold_the_same_fitted_values_get_the_same_bits():
    assert (0.9 + A) + B != (0.9 + B) + A  # the case is one that rounding would split
    p = _fit().probabilities(np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]))
    assert sorted(p[0]) == sorted(p[1])
    assert p[0, 0] == p[1, 0] == 0.9 / (B + A + 0.9)


def test_the_probabilities_still_sum_to_one_and_follow_the_fitted_steps():
    p = _fit().probabilities(np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-15)
    total = 0.9 + A + B
    np.testing.assert_allclose(p[0], [0.9 / total, A / total, B / total], rtol=1e-15)
