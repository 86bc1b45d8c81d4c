"""A score ranked as its own confidence (msp, temp, every calibrator) reads its selective metrics from
the calibration metrics' cumulative sums (selcal/bootstrap/vectorised.py, ``_Prefix``): the same bits
as its own cumulative sums in its own order, and the plain metrics of the repeated rows (issue 34)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from helpers import plain_metrics, tied_data

from selcal.bootstrap import RowData, resample_metrics
from selcal.bootstrap.vectorised import Prepared, row_counts


def _both_ways(data: RowData, counts: np.ndarray):
    shared = Prepared(data)
    own = Prepared(data)
    own.ranked_as_confidence = set()  # every score's own cumulative sums, as before
    return shared, shared.metrics_of_counts(counts), own.metrics_of_counts(counts)


def test_a_score_ranked_as_its_confidence_is_found_and_another_is_not():
    rng = np.random.default_rng(0)
    data = tied_data(200, rng, levels=3)
    data = replace(data, scores={**data.scores, "p": data.confidence["q"], "minus": -data.confidence["q"]},
                   confidence={"q": data.confidence["q"], "p": data.confidence["q"], "minus": data.confidence["q"]})
    assert Prepared(data).ranked_as_confidence == {"q", "p"}  # log(q) and q rank as q; -q does not


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), levels=st.sampled_from([1, 2, 5, 40]),
       accuracy=st.sampled_from([0.0, 0.3, 0.9, 1.0]), estimator=st.sampled_from(["mean", "trapz"]))
def test_the_shared_sums_give_the_same_bits_as_the_own_ones(seed, n, levels, accuracy, estimator):
    rng = np.random.default_rng(seed)
    data = tied_data(n, rng, levels=levels, accuracy=accuracy, estimator=estimator)
    draws = rng.integers(0, n, size=(7, n))
    counts = row_counts(draws, n)
    counts[0] = 0
    counts[0, rng.integers(n)] = n  # one row drawn n times: a single tie group
    shared, got, want = _both_ways(data, counts)
    assert shared.ranked_as_confidence == {"q"}
    assert list(got) == list(want) and all(list(got[k]) == list(want[k]) for k in want)  # (the keys' order too)
    for level in want:
        for key in want[level]:
            np.testing.assert_array_equal(got[level][key], want[level][key], err_msg=f"{level}.{key}")


@pytest.mark.parametrize("levels", [1, 3, 1000])
def test_the_shared_sums_equal_the_plain_metrics_of_the_repeated_rows(levels):
    rng = np.random.default_rng(levels)
    data = tied_data(150, rng, levels=levels)
    draws = rng.integers(0, data.n, size=(4, data.n))
    got = resample_metrics(data, draws)
    for i in range(draws.shape[0]):
        want = plain_metrics(data, draws[i])["q"]
        for key, value in want.items():
            if value is None or np.isnan(value):
                assert np.isnan(got["q"][key][i]), key
            else:
                assert got["q"][key][i] == pytest.approx(value, abs=1e-9, rel=0), key
