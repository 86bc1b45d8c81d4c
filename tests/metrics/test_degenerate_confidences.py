"""Degenerate confidences (CONVENTIONS.md, "Degenerate confidences"): a confidence with fewer than 3
distinct values on the evaluation rows, or constant within a group, is warned about, naming the score
and what its metrics then mean; the metrics are still reported as defined."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import selcal
from selcal.cli import app

LOG = "sample_logits/lm_eval/synthetic__llm-small/samples_arc_synth_2026-11-25T14-00-00.000000.jsonl"


def confidence_file(path, confidence, correct):
    labels = np.zeros(len(confidence), dtype=np.int64)
    pq.write_table(pa.table({"confidence": pa.array(np.asarray(confidence, dtype=np.float64)),
                             "prediction": pa.array(np.where(correct, 0, 1)), "label": pa.array(labels)}), path)
    return path


def test_a_constant_confidence_column_is_warned_about_and_still_reported(tmp_path):
    """The issue's case: confidence 1.0 on every row; ECE = AECE = MCE = smECE = 1 - accuracy."""
    correct = np.arange(1000) % 10 < 7
    path = confidence_file(tmp_path / "constant.parquet", np.ones(1000), correct)
    out = tmp_path / "r.json"
    ran = CliRunner().invoke(app, ["evaluate", str(path), "--json", str(out)])
    assert ran.exit_code == 0, ran.output
    model = json.loads(out.read_text())["models"][0]
    scores = model["scores"]["confidence"]
    for key in ("ece", "aece", "mce", "smece"):
        assert scores[key] == pytest.approx(0.3)
    assert scores["aurc"] == pytest.approx(0.3)  # random abstention: the error rate at every coverage
    [warning] = [w for w in model["warnings"] if "takes one value" in w]
    assert warning.startswith("confidence: the confidence takes one value on the 1000 evaluation rows (confidence 1)")
    assert "ECE of confidence is |accuracy - confidence| (30.00%)" in warning
    assert "abstaining at random" in warning and "reported as defined" in warning
    assert "takes one value" in ran.output  # on stderr as well


def test_two_values_are_warned_about_and_three_are_not(tmp_path):
    rng = np.random.default_rng(1)
    correct = rng.random(300) < 0.8
    two = selcal.evaluate(str(confidence_file(tmp_path / "two.parquet", np.where(correct, 0.9, 0.6), correct)))
    [warning] = [w for w in two.models[0].warnings if "two values" in w]
    assert "(confidence 0.6, 0.9)" in warning and "within each value's rows" in warning
    three = np.where(correct, 0.9, 0.6)
    three[0] = 0.75
    result = selcal.evaluate(str(confidence_file(tmp_path / "three.parquet", three, correct)))
    assert not [w for w in result.models[0].warnings if "confidence takes" in w]


def test_every_score_of_logits_with_one_value_per_row_is_named_once():
    logits = np.tile([2.0, 0.0, -1.0], (50, 1))
    labels = np.arange(50) % 3
    model = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit").models[0]
    [warning] = [w for w in model.warnings if "takes one value" in w]
    assert warning.startswith("msp and max_logit: the confidence takes one value on the 50 evaluation rows")
    assert "the ECE of msp is" in warning  # max_logit has no ECE
    assert model.scores["msp"]["ece"] == pytest.approx(abs(np.mean(labels == 0) - np.exp(2) / np.exp([2, 0, -1]).sum()))


def test_a_score_constant_within_a_group_is_warned_about_with_the_group():
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 2, (200, 3))
    groups = np.where(np.arange(200) < 60, "shifted", "clean")
    logits[:60] = [1.0, 0.0, 0.0]  # every shifted row the same
    labels = np.where(rng.random(200) < 0.7, logits.argmax(1), rng.integers(0, 3, 200))
    model = selcal.evaluate_arrays(logits, labels, groups=groups, scores="msp,max_logit").models[0]
    named = [w for w in model.warnings if "within group" in w]
    assert len(named) == 2 and all("'shifted' (60 rows)" in w for w in named)
    assert named[0].startswith("msp: the confidence is constant (0.576117) within group 'shifted'")
    assert not [w for w in model.warnings if "'clean'" in w or "takes one value" in w]


def test_an_llm_log_without_log_probabilities_is_warned_about(tmp_path):
    """A harness log whose choices carry no log-likelihood, only the model's pick (0 for the chosen choice,
    -10000 for the others, as from an API that answers without log-probabilities): every score is
    constant, the warning names them all, and every metric is still reported."""
    folder = tmp_path / "api-model"
    folder.mkdir()
    shutil.copy(LOG, folder)
    log = folder / LOG.rsplit("/", 1)[1]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for row in rows:
        likelihoods = [float(pair[0]) for pair in row["filtered_resps"]]
        pick = int(np.argmax(likelihoods))
        row["filtered_resps"] = [["0.0" if j == pick else "-10000.0", str(j == pick)] for j in range(len(likelihoods))]
        row["resps"] = [[pair] for pair in row["filtered_resps"]]
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = selcal.evaluate(str(log), scores="msp,temp")  # a model per choice count (3, 4, 5)
    model = next(m for m in result.models if "(4 choices)" in m.name)
    [warning] = [w for w in model.warnings if "takes one value" in w]
    assert warning.startswith("msp and temp: the confidence takes one value")
    assert "as a model that gives no log-probabilities does" in warning
    assert model.scores["msp"]["ece"] == pytest.approx(1 - model.accuracy)
    assert model.scores["msp"]["aurc"] == pytest.approx(1 - model.accuracy)
    for original in selcal.evaluate(LOG, scores="msp").models:
        assert not [w for w in original.warnings if "takes one value" in w]
