"""Smooth ECE (CONVENTIONS.md, "Calibration beyond bins") against a quadrature written differently."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_smooth as R

from selcal.metrics import smooth

SAMPLE = SAMPLES / "calibrator_cifar10_resnet50_ce.parquet"


def mixed_case(seed: int, n: int = 50, crowd_at_one: bool = False):
    """Under-confident at low q, over-confident at high q: the kernel-smoothed residual changes sign."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.0, 1.0, n)
    if crowd_at_one:
        q[n // 2:] = 1.0 - rng.exponential(1e-4, n - n // 2)
        q[-2:] = 1.0
    q[0] = 0.0
    accuracy = 0.5 + (q - 0.5) * 0.3
    return q, (rng.uniform(size=n) < accuracy).astype(float)


@pytest.mark.slow
@pytest.mark.parametrize("seed, crowd", [(1, False), (2, True)])
def test_smece_matches_dense_quadrature(seed, crowd):
    q, c = mixed_case(seed, crowd_at_one=crowd)
    got = smooth.smooth_ece(q, c)
    value, sigma = R.smece(q, c)
    assert abs(got.value - value) < 1e-6
    assert abs(got.sigma - sigma) < 1e-6
    assert abs(got.value - got.sigma) < 1e-10  # the fixed point


@pytest.mark.slow
@pytest.mark.parametrize("seed, crowd", [(1, False), (2, True)])
def test_the_bootstraps_coarser_grid_is_within_1e_4_of_the_quadrature(seed, crowd):
    # the resamples of --bootstrap use h <= σ/32 and σ* to 1e-10 (metrics.catalog.SMOOTH_RESAMPLE)
    from selcal.metrics.catalog import SMOOTH_RESAMPLE

    q, c = mixed_case(seed, crowd_at_one=crowd)
    got = smooth.smooth_ece(q, c, **SMOOTH_RESAMPLE)
    value, sigma = R.smece(q, c)
    assert abs(got.value - value) < 1e-4 * value and abs(got.sigma - sigma) < 1e-4 * sigma


@pytest.mark.parametrize("sigma", [0.01, 0.2])
def test_smece_at_fixed_sigma_matches_dense_quadrature(sigma):
    q, c = mixed_case(3)
    assert abs(smooth.smooth_ece_at(q, c, sigma) - R.smece_sigma(q, c, sigma)) < 1e-6


def test_one_sign_residuals_give_the_mean_gap():
    q = np.array([0.9, 0.8, 0.95, 1.0, 0.7])
    c = np.array([1, 1, 1, 1, 1.0])
    got = smooth.smooth_ece(q, c)
    assert got.value == pytest.approx(np.mean(c - q), abs=1e-15)
    assert got.sigma == got.value
    assert smooth.smooth_ece(q, np.zeros(5)).value == pytest.approx(np.mean(q), abs=1e-15)


def test_cancelling_residuals_give_zero():
    assert smooth.smooth_ece([0.5, 0.5, 0.25, 0.25, 0.25, 0.25], [1, 0, 1, 0, 0, 0]) == smooth.SmoothEce(0.0, 0.0)


def test_weights_count_rows():
    q, c = mixed_case(4, n=30)
    weights = np.arange(30) % 3
    repeated = np.repeat(np.arange(30), weights)
    a = smooth.smooth_ece(q, c, weights=weights)
    b = smooth.smooth_ece(q[repeated], c[repeated])
    assert a.value == pytest.approx(b.value, abs=1e-13) and a.sigma == pytest.approx(b.sigma, abs=1e-13)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 0.3), st.floats(1.1, 3.0))
def test_smece_sigma_decreases_in_sigma_and_ignores_row_order(seed, sigma, factor):
    q, c = mixed_case(seed, n=40)
    at = smooth.smooth_ece_at(q, c, sigma)
    assert smooth.smooth_ece_at(q, c, sigma * factor) <= at + 1e-9
    order = np.random.default_rng(seed).permutation(q.size)
    assert smooth.smooth_ece_at(q[order], c[order], sigma) == pytest.approx(at, abs=1e-14)


def _sample_test_rows():
    table = pq.read_table(SAMPLE).to_pandas()
    table = table[table["split"] == "test"]
    logits = np.stack(table["logits"].to_numpy()).astype(np.float64)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p.max(axis=1), (p.argmax(axis=1) == table["label"].to_numpy()).astype(float)


@pytest.mark.slow
def test_relplot_is_larger_when_confidences_crowd_at_one(monkeypatch):
    """relplot's reflected convolution keeps a mass on the end point once instead of twice (its mirror
    copies leave the boundary sample out), so rows with q within a grid cell of 1 lose half their kernel mass,
    and the value is divided by that smaller total: 0.0606 against 0.0434. Doubling the boundary samples
    in relplot brings it to this definition within its own grid and bandwidth resolution."""
    relplot = pytest.importorskip("relplot")
    from relplot import kernels

    q, c = _sample_test_rows()
    assert np.mean(q > 0.999) > 0.9  # the confidences crowd at 1
    ours = smooth.smooth_ece(q, c)
    assert ours.value == pytest.approx(0.0434, abs=5e-5)
    assert relplot.smECE(q, c) == pytest.approx(0.0606, abs=5e-5)

    convolve = kernels.ReflectedGaussianKernel.convolve

    def doubled(self, values, eval_points):
        values = values.copy()
        values[0] *= 2
        values[-1] *= 2
        return convolve(self, values, eval_points)

    monkeypatch.setattr(kernels.ReflectedGaussianKernel, "convolve", doubled)
    assert relplot.smECE(q, c) == pytest.approx(ours.value, abs=5e-4)


@pytest.mark.slow
def test_relplot_agrees_when_no_confidence_is_near_the_ends():
    relplot = pytest.importorskip("relplot")
    rng = np.random.default_rng(5)
    q = rng.uniform(0.2, 0.8, 4000)
    c = (rng.uniform(size=q.size) < q ** 1.3).astype(float)
    assert relplot.smECE(q, c) == pytest.approx(smooth.smooth_ece(q, c).value, abs=2e-3)


def test_smooth_reliability_density_integrates_to_one_and_curve_is_the_accuracy():
    q = np.array([0.3, 0.35, 0.9, 0.95, 0.97, 1.0])
    c = np.array([0, 1, 1, 1, 0, 1.0])
    t, accuracy, density, sigma = smooth.smooth_reliability(q, c, sigma=0.05, points=2001)
    assert np.trapezoid(density, t) == pytest.approx(1.0, abs=1e-6)
    # far right: only the 0.9 .. 1.0 rows weigh; the curve is t + the kernel-weighted mean residual
    kernel = R.g(np.array([0.95]), q, np.ones_like(q), 0.05)[0]
    shift = R.g(np.array([0.95]), q, c - q, 0.05)[0]
    assert accuracy[1900] == pytest.approx(0.95 + shift / kernel, abs=1e-6)
