"""One catalog of metrics (selcal.metrics.catalog): a metric added as one entry plus its function
is computed for every score with probabilities, named in the table, judged by check and compare
by its direction, and gets a bootstrap interval; and the renderers agree with the catalog."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import selcal
from selcal.checks import better
from selcal.cli import app
from selcal.metrics import calibration, catalog
from selcal.metrics.catalog import CATALOG, Metric
from selcal.report import metric_label, metric_sections

FILE = "sample_logits/lspair_alpha0.1.parquet"


def confidence_gap(confidence, correct, options):
    """|mean confidence - accuracy|: a calibration metric written for this test."""
    return abs(float(np.mean(confidence)) - float(np.mean(correct)))


@pytest.fixture
def gap():
    entry = catalog.add(Metric("gap", "confidence gap", section="calibration", compute=confidence_gap))
    yield entry
    CATALOG.pop("gap")


def test_a_metric_added_to_the_catalog_flows_everywhere(gap, tmp_path):
    result = selcal.evaluate(FILE, scores="msp,max_logit,temp", bootstrap=20)
    model = result.models[0]
    for name in ("msp", "temp"):
        confidence = model.confidences[name]
        assert model.scores[name]["gap"] == confidence_gap(confidence, model.rows.correct, None)
        low, high = model.scores[name]["ci"]["gap"]
        assert low <= high
    assert "gap" not in model.scores["max_logit"]  # not a probability
    labels = [label for section in metric_sections(model) for label, _, _ in section]
    assert "confidence gap (%)" in labels
    assert better("gap") == "lower"
    path = tmp_path / "r.json"
    path.write_text(result.to_json())
    out = CliRunner().invoke(app, ["check", str(path), "--max", "temp.gap=1", "--json", "-"])
    assert out.exit_code == 0, out.output
    assert [r["metric"] for r in json.loads(out.stdout)["rows"]] == ["temp.gap"]


def test_the_catalog_answers_what_the_renderers_show():
    assert metric_label("aurc") == "AURC (%)" and metric_label("nll") == "NLL"
    assert catalog.name("msp.cov@0.05") == "msp cov@risk 5%"
    assert better("auroc") == "higher" and better("fpr95") == "lower" and better("temperature") is None
    assert not catalog.has_interval("cece") and catalog.has_interval("risk@0.9")
    assert catalog.model_level() == ("accuracy", "error", "nll", "brier", "cece")
    assert set(catalog.definition_options()) == {"aurc_estimator", "bins", "aece_estimator"}
    q, y = np.array([0.9, 0.6, 0.8]), np.array([True, False, True])
    options = selcal.Options(bins=2)
    assert CATALOG["ece"].compute(q, y, options) == calibration.expected_calibration_error(q, y, 2)


def test_an_entry_says_whether_its_block_form_takes_the_counts_by_row_as_that_function_does():
    """The bootstrap reads ``resample_counts_by_row`` off the entry (it does not inspect signatures):
    the declaration agrees with the function ``resample_counts`` returns, so that no entry drifts."""
    import inspect

    rng = np.random.default_rng(0)
    q = np.sort(rng.uniform(0.3, 1.0, 50))
    y = rng.uniform(size=50) < q
    blocks = [m for m in catalog.computations() if m.resample_counts is not None]
    assert any(m.resample_counts_by_row for m in blocks)  # smooth ECE's
    for entry in blocks:
        counted = entry.resample_counts(q, y, selcal.Options())
        takes = "by_row" in inspect.signature(counted).parameters
        assert entry.resample_counts_by_row == takes, entry.key
        assert all(CATALOG[key].resample_counts_by_row == takes for key in entry.gives)
    with pytest.raises(ValueError, match="without resample_counts"):
        catalog.add(Metric("rows_only", "rows", compute=confidence_gap, resample_counts_by_row=True))
    assert "rows_only" not in CATALOG
