"""RMS calibration error (CONVENTIONS.md, "Calibration under the null, RMS calibration error,
degenerate confidences"): sqrt(Σ_b (n_b/N)(acc_b - conf_b)²) over ECE's non-empty equal-width bins."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from oracles import ref_calibration as ref

import selcal
from selcal.bootstrap import RowData, resample_metrics
from selcal.metrics import calibration, catalog


def test_rmsce_of_a_hand_worked_case():
    """Four bins of width 1/4. 0.25 (wrong) alone in (0, 1/4]: gap 0.25, weight 1/5; 0.55 (right)
    alone in (1/2, 3/4]: gap 0.45, weight 1/5; 0.95, 0.95, 0.85 (2 right) in (3/4, 1]: accuracy 2/3,
    confidence 2.75/3, gap 0.25, weight 3/5. RMSCE² = 0.2 (0.0625) + 0.2 (0.2025) + 0.6 (0.0625)
    = 0.0905, while ECE = 0.2 (0.25) + 0.2 (0.45) + 0.6 (0.25) = 0.29."""
    q = [0.95, 0.95, 0.85, 0.55, 0.25]
    c = [1, 0, 1, 1, 0]
    assert calibration.rms_calibration_error(q, c, n_bins=4) == pytest.approx(math.sqrt(0.0905), rel=1e-14)
    assert calibration.expected_calibration_error(q, c, n_bins=4) == pytest.approx(0.29, rel=1e-14)


def test_rmsce_of_a_single_bin_is_its_gap_and_of_a_calibrated_bin_zero():
    assert calibration.rms_calibration_error([0.9] * 10, [1] * 7 + [0] * 3, n_bins=15) == pytest.approx(0.2, rel=1e-14)
    assert calibration.rms_calibration_error([0.5, 0.5], [1, 0], n_bins=15) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_rmsce_equals_torchmetrics_l2_written_out(seed):
    """Against torchmetrics' definition in plain exact arithmetic (tests/oracles/ref_calibration.py), on
    rows with ties, bin edges, 0 and 1."""
    rng = np.random.default_rng(seed)
    n, bins = int(rng.integers(1, 300)), int(rng.choice([1, 2, 5, 15, 40]))
    q = [rng.uniform(0, 1, n), np.round(rng.uniform(0, 1, n) * bins) / bins, rng.beta(5, 1, n)][seed % 3]
    q[: min(n, 2)] = [0.0, 1.0][: min(n, 2)]
    correct = rng.random(n) < q
    assert calibration.rms_calibration_error(q, correct, bins) == pytest.approx(ref.rmsce(q, correct, bins),
                                                                                  rel=1e-13, abs=1e-300)


@pytest.mark.parametrize("seed", range(4))
def test_rmsce_is_at_least_ece_and_at_most_mce(seed):
    """The root of a weighted mean of squares lies between the weighted mean and the largest value."""
    rng = np.random.default_rng(100 + seed)
    q = rng.uniform(0.2, 1, 500)
    correct = rng.random(500) < q ** 2
    ece = calibration.expected_calibration_error(q, correct)
    rmsce = calibration.rms_calibration_error(q, correct)
    mce = calibration.maximum_calibration_error(q, correct)
    assert ece * (1 - 1e-14) <= rmsce <= mce * (1 + 1e-14)


def test_rmsce_is_a_catalog_metric_of_every_probability_score_with_an_interval():
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 3, (400, 5))
    labels = np.where(rng.random(400) < 0.7, logits.argmax(1), rng.integers(0, 5, 400))
    result = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp", bins=10, bootstrap=20)
    data = json.loads(result.to_json())["models"][0]["scores"]
    assert catalog.label("rmsce") == "RMS-CE (%)" and catalog.better("rmsce") == "lower"
    for name in ("msp", "temp"):
        q, correct = result.models[0].confidences[name], result.models[0].score_correct.get(
            name, result.models[0].rows.correct)
        assert data[name]["rmsce"] == calibration.rms_calibration_error(q, correct, 10)
        low, high = data[name]["ci"]["rmsce"]
        assert low <= high
    assert "rmsce" not in data["max_logit"]


def test_resampled_rmsce_equals_the_plain_one_on_the_repeated_rows():
    """The bootstrap's vectorised form (per-bin sums of each resample) against the function."""
    rng = np.random.default_rng(8)
    q = np.round(rng.uniform(0.3, 1, 200) * 12) / 12
    correct = rng.random(200) < q
    data = RowData(correct=correct, scores={"q": q}, confidence={"q": q}, bins=7)
    draws = rng.integers(0, 200, (6, 200))
    got = resample_metrics(data, draws)["q"]["rmsce"]
    for i, rows in enumerate(draws):
        assert got[i] == pytest.approx(calibration.rms_calibration_error(q[rows], correct[rows], 7), rel=1e-12)
