"""Smooth ECE of a block of bootstrap resamples at once (selcal.metrics.smooth.SmoothEceOfCounts): each
resample's value and σ* equal the scalar search (smooth_ece on the explicitly repeated rows, on the
resample grid of metrics.catalog.SMOOTH_RESAMPLE) to 1e-9, in every case the scalar search has."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from selcal.metrics import smooth
from selcal.metrics.catalog import SMOOTH_RESAMPLE

TOL = 1e-9  # σ* is within xtol = 1e-10 of the fixed point in both searches


def assert_blocks_match(q, c, counts):
    values, sigmas = smooth.SmoothEceOfCounts(q, c, **SMOOTH_RESAMPLE)(counts)
    assert values.shape == sigmas.shape == (len(counts),)
    for j, row in enumerate(counts):
        rows = np.repeat(np.arange(q.size), row)
        want = smooth.smooth_ece(q[rows], c[rows], **SMOOTH_RESAMPLE)
        assert values[j] == pytest.approx(want.value, abs=TOL, rel=0), (j, "value")
        assert sigmas[j] == pytest.approx(want.sigma, abs=TOL, rel=0), (j, "sigma")


def multinomial(rng, n, size):
    return rng.multinomial(n, np.full(n, 1 / n), size=size)


@pytest.mark.parametrize("seed", range(4))
def test_resamples_of_a_classifier_equal_the_scalar_search(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    q = rng.beta(6, 1.2, n)
    c = rng.random(n) < np.clip(q * rng.uniform(0.8, 1.1), 0, 1)
    assert_blocks_match(q, c, multinomial(rng, n, 12))


@pytest.mark.parametrize("levels", [1, 3, 7])
def test_heavy_ties_and_confidences_at_the_ends(levels):
    rng = np.random.default_rng(levels)
    n = 400
    q = np.round(rng.uniform(0, 1, n) * levels) / levels  # many rows at q = 0 and q = 1
    c = rng.random(n) < q
    assert_blocks_match(q, c, multinomial(rng, n, 10))


def test_the_scalar_cases_one_sign_cancelling_no_rows_and_a_single_row():
    q = np.array([0.9, 0.9, 0.6, 0.6, 0.3])
    c = np.array([True, False, True, False, False])
    counts = np.array([
        [2, 0, 3, 0, 0],  # every residual positive: the mean gap
        [0, 3, 0, 2, 1],  # every residual negative
        [1, 1, 0, 0, 0],  # +0.1 and -0.9 at one confidence: not cancelling
        [0, 0, 1, 1, 0],  # 0.4 and -0.6
        [5, 0, 0, 0, 0],  # one row five times
        [1, 1, 1, 1, 1],
    ])
    assert_blocks_match(q, c, counts)
    half = np.array([0.5, 0.5])
    assert_blocks_match(half, np.array([True, False]), np.array([[1, 1], [2, 2], [3, 1]]))  # cancel at every q


def test_resamples_of_other_sizes_as_the_cluster_bootstrap_draws():
    rng = np.random.default_rng(9)
    n = 300
    q = rng.uniform(0.2, 1.0, n)
    c = rng.random(n) < q ** 1.5
    counts = rng.integers(0, 4, size=(8, n))
    counts[0, :] = 0
    counts[0, :3] = 1
    assert_blocks_match(q, c, counts)


def test_a_tiny_sigma_near_the_floor():
    """Residuals that nearly cancel at every confidence: σ* at or near 2^-14, the scalar search's own path."""
    q = np.repeat(np.linspace(0.1, 0.9, 9), 2)
    c = np.tile([True, False], 9)
    q = q + np.tile([0.0, 1e-7], 9)
    assert_blocks_match(q, c, np.vstack([np.ones(18, dtype=int), np.full(18, 2)]))


def test_the_rows_order_does_not_matter():
    rng = np.random.default_rng(3)
    n = 500
    q = rng.uniform(0.3, 1.0, n)
    c = rng.random(n) < q
    counts = multinomial(rng, n, 6)
    perm = rng.permutation(n)
    a = smooth.SmoothEceOfCounts(q, c, **SMOOTH_RESAMPLE)(counts)
    b = smooth.SmoothEceOfCounts(q[perm], c[perm], **SMOOTH_RESAMPLE)(counts[:, perm])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(0, 2**32 - 1), st.sampled_from([2, 5, 100]))
def test_any_small_data_matches(n, seed, levels):
    rng = np.random.default_rng(seed)
    q = np.round(rng.uniform(0, 1, n) * levels) / levels
    c = rng.random(n) < rng.uniform(0, 1)
    assert_blocks_match(q, c, multinomial(rng, n, 4))
