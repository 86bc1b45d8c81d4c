"""Prepared(keys=...): only the wanted metrics are computed, and they are those of the full
computation (ECE alone by its one-pass bin sums: equal up to rounding)."""

from __future__ import annotations

import numpy as np
import pytest

from selcal.bootstrap import RowData
from selcal.bootstrap.resample import draw_resamples
from selcal.bootstrap.vectorised import Prepared, row_counts


@pytest.mark.parametrize("wanted", [{"aurc", "ece"}, {"ece"}, {"aurc", "fpr95"}, {"ece", "mce"}, {"auroc", "aece"}])
def test_the_wanted_metrics_equal_those_of_the_full_computation(wanted):
    rng = np.random.default_rng(5)
    n = 700
    confidence = np.round(rng.uniform(0.2, 1.0, n), 3)  # ties, as real confidences have
    correct = rng.random(n) < confidence
    data = RowData(correct=correct, scores={"s": np.log(confidence)}, confidence={"s": confidence},
                   risks=(), coverages=())
    counts = row_counts(next(draw_resamples(n, 40, 0)), n)
    full = Prepared(data).metrics_of_counts(counts)["s"]
    some = Prepared(data, keys=frozenset(wanted)).metrics_of_counts(counts)["s"]
    assert wanted <= set(some) <= set(full)
    for key in wanted:
        np.testing.assert_allclose(some[key], full[key], rtol=1e-12, atol=1e-15, err_msg=key)
    if wanted == {"ece"}:
        assert set(some) == {"aurc", "eaurc", "ece"}  # (AURC and E-AURC come with the ranking)
