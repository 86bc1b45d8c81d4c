"""Files with no logits: a confidence, a prediction (``pred`` or ``prediction``) and a label per
row. Every selective metric and the top-label calibration are computed from the confidence;
what needs logits is reported as not available, not as an error."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from helpers import realdata
from oracles import ref_calibration, ref_selective

import selcal  # noqa: E402

def make(n=300, k=10, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    confidence = np.round(rng.random(n) * 64) / 64  # ties on purpose
    correct = rng.random(n) < confidence  # roughly calibrated
    pred = np.where(correct, labels, (labels + 1) % k)
    return confidence, pred, labels


@pytest.mark.slow
def test_a_confidence_file_gets_every_selective_and_calibration_metric(dumps):
    confidence, pred, labels = make()
    path = dumps.table("conf.parquet", {"confidence": pa.array(confidence), "pred": pa.array(pred),
                                        "label": pa.array(labels)})
    model = selcal.evaluate(path).models[0]
    correct = pred == labels
    assert model.accuracy == np.mean(correct) and model.n_eval == 300
    want = ref_selective.selective_metrics_reference(confidence, correct)
    got = model.scores["confidence"]
    for key, value in want.items():
        if key in got:
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert got["ece"] == pytest.approx(ref_calibration.ece(confidence, correct, 15), rel=1e-12)
    assert got["aece"] == pytest.approx(ref_calibration.aece(confidence, correct, 15), rel=1e-12)
    out = model.to_dict()
    assert out["nll"] is None and out["num_classes"] is None and out["logits"] is False
    assert out["not_available"] == {"scores": ["msp", "max_logit", "pnorm", "temp"],
                                    "metrics": ["nll", "brier", "cece", "top5_accuracy"]}


def test_npz_and_parquet_and_the_prediction_name_agree(dumps, h):
    confidence, pred, labels = make(seed=1)
    a = dumps.table("a.parquet", {"confidence": pa.array(confidence), "prediction": pa.array(pred),
                                  "label": pa.array(labels)})
    b = dumps.path("b.npz")
    np.savez(b, confidence=confidence.astype(np.float64), pred=pred, labels=labels)
    h.assert_same_numbers(selcal.evaluate(a).models[0].to_dict(), selcal.evaluate(b).models[0].to_dict())


def test_split_column_ignored_label_and_other_columns(dumps):
    confidence, pred, labels = make(seed=2)
    labels[::7] = 255
    split = np.where(np.arange(300) % 4 == 0, "val", "test")
    other = -confidence  # an uncertainty
    path = dumps.table("c.parquet", {"confidence": pa.array(confidence), "pred": pa.array(pred),
                                     "label": pa.array(labels), "split": pa.array(split), "u": pa.array(other)})
    model = selcal.evaluate(path, ignore_label=255, uncertainty_cols=("u",)).models[0]
    keep = (labels != 255) & (split == "test")
    assert model.n_eval == keep.sum() and list(model.scores) == ["u"]
    correct = pred[keep] == labels[keep]
    assert model.scores["u"]["aurc"] == pytest.approx(ref_selective.aurc_by_thresholds(confidence[keep], correct),
                                                      rel=1e-12)


@pytest.mark.parametrize("change, message", [
    (lambda c: c.__setitem__("confidence", pa.array([0.5] * 9 + [float("nan")])),
     "column 'confidence', row 9: holds NaN; store a finite number for every row"),
    (lambda c: c.__setitem__("pred", pa.array([1] * 4 + [None] + [1] * 5, type=pa.int64())),
     "column 'pred', row 4: has no label (null)"),
    (lambda c: c.__setitem__("pred", pa.array([1] * 3 + [-2] + [1] * 6)),
     "column 'pred', row 3: holds -2; classes are numbered from 0"),
    (lambda c: c.pop("confidence"),
     "no column 'confidence' (columns: pred, label); name the confidence with --score-col"),
])
def test_bad_confidence_files_are_refused_in_one_line(cli, dumps, change, message):
    columns = {"confidence": pa.array([0.5] * 10), "pred": pa.array([1] * 10), "label": pa.array([1] * 10)}
    change(columns)
    path = dumps.table("bad.parquet", columns)
    result = cli("evaluate", path)
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"selcal: error: {path}: {message}"), lines


def test_val_file_refused_and_cli_outputs(cli, dumps):
    confidence, pred, labels = make(seed=3)
    a = dumps.table("a.parquet", {"confidence": pa.array(confidence), "pred": pa.array(pred), "label": pa.array(labels)})
    b = dumps.table("b.parquet", {"confidence": pa.array(confidence[::-1]), "pred": pa.array(pred),
                                  "label": pa.array(labels)})
    result = cli("evaluate", a, "--val", b)
    assert result.exit_code == 2 and "holds no logits, so nothing is fitted on a --val file" in result.stderr
    table = cli("evaluate", a, "--bootstrap", "20")
    assert table.exit_code == 0, table.stderr
    assert "not available without logits: msp, max_logit, pnorm, temp, NLL" in " ".join(table.stdout.split())
    csv = cli("evaluate", a, b, "--csv", "-")
    assert csv.exit_code == 0, csv.stderr
    header, *rows = csv.stdout.strip().splitlines()
    assert "aurc_confidence" in header.split(",") and len(rows) == 2


def test_published_imagenet_confidences():
    model = selcal.evaluate(realdata("hollance_imagenet_top1", "timm_resnet34.npz")).models[0]
    assert model.n_eval == 50000 and round(100 * model.accuracy, 2) == 75.11  # as the data's README says
    assert 0 < model.scores["confidence"]["aurc"] < model.error and "ece" in model.scores["confidence"]


@pytest.mark.slow
def test_the_html_report_of_a_file_without_logits(cli, dumps):
    confidence, pred, labels = make(seed=7)
    a = dumps.table("a.parquet", {"confidence": pa.array(confidence), "pred": pa.array(pred), "label": pa.array(labels)})
    report = dumps.path("r.html")
    result = cli("evaluate", a, "--report", report, "-q")
    assert result.exit_code == 0, result.stderr
    page = report.read_text(encoding="utf-8")
    assert "no logits" in page and "K = None" not in page and ">None<" not in page
