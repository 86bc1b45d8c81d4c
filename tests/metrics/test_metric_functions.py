"""The metric functions of ``selcal.metrics`` (scikit-learn's convention, ``metric(y_true, y_pred)``):
the numbers ``evaluate`` reports for the same rows, bit for bit, and those of the brute-force
oracles (tests/ref_*.py), for logits, probabilities and a confidence with a correctness vector."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import make_data
from oracles.ref_calibration import aece as ref_aece
from oracles.ref_calibration import brier64, nll64, softmax64
from oracles.ref_calibration import classwise_ece as ref_classwise_ece
from oracles.ref_calibration import ece as ref_ece
from oracles.ref_calibration import mce as ref_mce
from oracles.ref_calibration import rmsce as ref_rmsce
from oracles.ref_selective import (
    augrc_by_thresholds,
    aurc_by_thresholds,
    auroc_pairs,
    coverage_at_risk_loop,
    eaurc_reference,
    fpr_at_tpr_loop,
    risk_at_coverage_loop,
)
from oracles.ref_smooth import smece as ref_smece

import selcal
from selcal import metrics
from selcal.errors import SelcalError

RISK, COVERAGE, BINS = 0.2, 0.7, 10

# function -> (its key in a score's metrics, keyword arguments); model-level keys have no score
SCORE_METRICS = {
    "aurc": ("aurc", {}), "eaurc": ("eaurc", {}), "augrc": ("augrc", {}), "error_auroc": ("auroc", {}),
    "fpr_at_95_tpr": ("fpr95", {}), "coverage_at_risk": (f"cov@{RISK:g}", {"risk": RISK}),
    "risk_at_coverage": (f"risk@{COVERAGE:g}", {"coverage": COVERAGE}), "ece": ("ece", {"bins": BINS}),
    "rmsce": ("rmsce", {"bins": BINS}), "adaptive_ece": ("aece", {"bins": BINS}), "mce": ("mce", {"bins": BINS}), "smooth_ece": ("smece", {}),
}
MODEL_METRICS = {"nll": ("nll", {}), "brier": ("brier", {}), "classwise_ece": ("cece", {"bins": BINS})}
OPTIONS = dict(risks=[RISK], coverages=[COVERAGE], bins=BINS)


def same(a, b) -> bool:
    """Equal bits (NaN for the JSON's null)."""
    a = math.nan if a is None else a
    b = math.nan if b is None else b
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("k, seed", [(4, 1), (10, 2), (2, 3)])
@pytest.mark.parametrize("score", ["msp", "max_logit"])
def test_every_function_gives_the_number_evaluate_reports(k, seed, score):
    logits, labels = make_data(n=300, k=k, seed=seed)
    result = selcal.evaluate_arrays(logits, labels, scores=f"msp,{score}", **OPTIONS).models[0]
    for function, (key, kwargs) in SCORE_METRICS.items():
        if key not in result.scores[score]:  # max_logit has no probabilities: no calibration metric
            with pytest.raises(SelcalError, match="no probabilities"):
                getattr(metrics, function)(labels, logits, input_kind="logits", score=score, **kwargs)
            continue
        got = getattr(metrics, function)(labels, logits, input_kind="logits", score=score, **kwargs)
        assert isinstance(got, float)
        assert same(got, result.scores[score][key]), (function, got, result.scores[score][key])
    for function, (key, kwargs) in MODEL_METRICS.items():
        got = getattr(metrics, function)(labels, logits, input_kind="logits", **kwargs)
        assert same(got, getattr(result, key)), (function, got)


def test_probabilities_are_read_as_evaluate_reads_them():
    logits, labels = make_data(n=250, k=5, seed=4)
    probabilities = softmax64(logits).astype(np.float32)
    result = selcal.evaluate_arrays(probabilities, labels, scores="msp", **OPTIONS).models[0]
    assert result.extra.get("input") == "probs"
    for function, (key, kwargs) in {**SCORE_METRICS, **MODEL_METRICS}.items():
        expected = result.scores["msp"][key] if function in SCORE_METRICS else getattr(result, key)
        detected = getattr(metrics, function)(labels, probabilities, **kwargs)
        said = getattr(metrics, function)(labels, probabilities, input_kind="probs", **kwargs)
        assert same(detected, expected) and same(said, expected), function


def test_one_probability_per_row_is_p_of_class_one():
    rng = np.random.default_rng(5)
    p = rng.random(200)
    labels = (rng.random(200) < p).astype(int)
    two_columns = np.column_stack([1 - p, p])
    assert metrics.brier(labels, p, input_kind="probs") == pytest.approx(metrics.brier(labels, two_columns), abs=1e-12)
    result = selcal.evaluate_arrays(p, labels, input_kind="probs", scores="msp").models[0]
    assert metrics.aurc(labels, p, input_kind="probs") == result.scores["msp"]["aurc"]


def confidence_file(tmp_path, confidence, correct):
    labels = np.zeros(correct.size, dtype=np.int64)
    pred = np.where(correct, 0, 1)
    path = tmp_path / "confidences.parquet"
    pq.write_table(pa.table({"label": labels, "pred": pred, "confidence": confidence}), path)
    return path


def test_a_confidence_with_a_correctness_vector_equals_a_file_of_confidences(tmp_path):
    rng = np.random.default_rng(6)
    confidence = np.round(rng.random(300), 2)  # ties
    correct = rng.random(300) < confidence
    result = selcal.evaluate(confidence_file(tmp_path, confidence, correct), **OPTIONS).models[0]
    for function, (key, kwargs) in SCORE_METRICS.items():
        got = getattr(metrics, function)(correct, confidence, input_kind="confidence", **kwargs)
        assert same(got, result.scores["confidence"][key]), function
        assert same(getattr(metrics, function)(correct.astype(int), confidence.tolist(), input_kind="confidence",
                                               **kwargs), got)


def test_the_functions_against_the_oracles():
    rng = np.random.default_rng(7)
    q = np.round(rng.random(60), 1)  # heavy ties
    c = rng.random(60) < q
    kw = dict(input_kind="confidence")
    assert metrics.aurc(c, q, **kw) == pytest.approx(float(aurc_by_thresholds(q, c)), abs=1e-14)
    assert metrics.eaurc(c, q, **kw) == pytest.approx(float(eaurc_reference(q, c)), abs=1e-14)
    assert metrics.augrc(c, q, **kw) == pytest.approx(float(augrc_by_thresholds(q, c)), abs=1e-14)
    assert metrics.error_auroc(c, q, **kw) == pytest.approx(float(auroc_pairs(q, c)), abs=1e-14)
    assert metrics.fpr_at_95_tpr(c, q, **kw) == pytest.approx(float(fpr_at_tpr_loop(q, c)), abs=1e-14)
    assert metrics.coverage_at_risk(c, q, 0.3, **kw) == pytest.approx(float(coverage_at_risk_loop(q, c, 0.3)))
    assert metrics.risk_at_coverage(c, q, 0.5, **kw) == pytest.approx(float(risk_at_coverage_loop(q, c, 0.5)))
    assert metrics.ece(c, q, bins=7, **kw) == pytest.approx(ref_ece(q, c, 7), abs=1e-14)
    assert metrics.mce(c, q, bins=7, **kw) == pytest.approx(ref_mce(q, c, 7), abs=1e-14)
    assert metrics.rmsce(c, q, bins=7, **kw) == pytest.approx(ref_rmsce(q, c, 7), abs=1e-14)
    assert metrics.adaptive_ece(c, q, bins=7, **kw) == pytest.approx(ref_aece(q, c, 7), abs=1e-14)
    logits, labels = make_data(n=80, k=3, seed=8)
    p = softmax64(logits)
    assert metrics.nll(labels, logits, input_kind="logits") == pytest.approx(nll64(logits, labels), rel=1e-12)
    assert metrics.brier(labels, logits, input_kind="logits") == pytest.approx(brier64(logits, labels), rel=1e-12)
    assert metrics.classwise_ece(labels, logits, input_kind="logits", bins=5) == pytest.approx(
        ref_classwise_ece(p, labels, 5), abs=1e-12)


@pytest.mark.slow
def test_smooth_ece_against_its_oracle():
    rng = np.random.default_rng(7)
    q = rng.random(40)
    c = rng.random(40) < q
    assert metrics.smooth_ece(c, q, input_kind="confidence") == pytest.approx(ref_smece(q, c)[0], abs=1e-4)


def test_the_risk_coverage_curve_is_the_one_every_metric_reads():
    logits, labels = make_data(n=200, k=4, seed=9)
    result = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit").models[0]
    coverage, risk, thresholds = metrics.risk_coverage_curve(labels, logits, input_kind="logits")
    curve = result.curves["msp"]
    assert np.array_equal(coverage, curve.coverage) and np.array_equal(risk, curve.risk)
    # thresholds are MSP probabilities: operating point g accepts the rows of probability >= thresholds[g]
    msp = softmax64(logits).max(axis=1)
    accepted = [(msp >= t - 1e-12).sum() for t in thresholds]
    assert np.array_equal(accepted, curve.accepted)
    assert np.all(np.diff(thresholds) < 0) and thresholds.max() <= 1
    _, _, largest = metrics.risk_coverage_curve(labels, logits, input_kind="logits", score="max_logit")
    assert np.array_equal(largest, result.curves["max_logit"].thresholds)  # the largest logit itself


def test_lists_pandas_polars_and_torch_give_the_same_numbers():
    import polars as pl

    logits, labels = make_data(n=120, k=3, seed=10)
    expected = metrics.ece(labels, logits, input_kind="logits")
    assert metrics.ece(labels.tolist(), logits.tolist(), input_kind="logits") == expected
    assert metrics.ece(pl.Series(labels), pl.DataFrame(logits), input_kind="logits") == expected
    pd = pytest.importorskip("pandas")
    assert metrics.ece(pd.Series(labels), pd.DataFrame(logits), input_kind="logits") == expected
    torch = pytest.importorskip("torch")
    assert metrics.ece(torch.tensor(labels), torch.tensor(logits, dtype=torch.float16), input_kind="logits") == expected


@pytest.mark.parametrize("call, message", [
    (lambda: metrics.aurc([0, 1], [0.2, 0.7]), "say what it is"),
    (lambda: metrics.nll([True, False], [0.9, 0.4], input_kind="confidence"), "every class's probability"),
    (lambda: metrics.ece([True, False], [1.5, 0.4], input_kind="confidence"), r"not all in \[0, 1\]"),
    (lambda: metrics.aurc([2, 0], [0.9, 0.4], input_kind="confidence"), "row 0 holds 2"),
    (lambda: metrics.aurc([True], [0.9, 0.4], input_kind="confidence"), "2 values but y_true has 1"),
    (lambda: metrics.aurc([True, False], [0.9, np.nan], input_kind="confidence"), "row 1 holds nan"),
    (lambda: metrics.aurc([0, 1], [[1, 0], [0, 1]], score="temp"), "fitted on validation rows"),
    (lambda: metrics.aurc([0, 1], [[0.5, 0.5], [0.2, 0.8]], input_kind="probs", score="max_logit"),
     "needs raw logits"),
    (lambda: metrics.aurc([0, 1], [[1, 0], [0, 1]], input_kind="odds"), "input_kind must be one of"),
    (lambda: metrics.ece([0, 3], [[1.0, 0.0], [0.0, 1.0]], input_kind="logits"), "y_true: row 1: label 3"),
    (lambda: metrics.ece([0, 1], [[1.0, 0.0], [0.0, 1.0]], input_kind="logits", bins=0), "bins must be at least 1"),
    (lambda: metrics.coverage_at_risk([0, 1], [[1.0, 0.0], [0.0, 1.0]], 2.0, input_kind="logits"), "risks must be"),
])
def test_bad_input_is_one_line_naming_the_argument(call, message):
    with pytest.raises(SelcalError, match=message) as error:
        call()
    assert "\n" not in str(error.value)


def test_undefined_values_are_nan_as_the_json_says_null():
    assert math.isnan(metrics.error_auroc([True, True], [0.9, 0.4], input_kind="confidence"))
    assert math.isnan(metrics.fpr_at_95_tpr([True, True], [0.9, 0.4], input_kind="confidence"))
