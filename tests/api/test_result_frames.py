"""Data frames of a result: the long frame (one row per model, score and metric) holds the JSON's numbers
and intervals under the one flat naming, and ``curves(kind)`` the figures' data."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from helpers import make_data

import selcal
from selcal.errors import SelcalError
from selcal.metrics import catalog
from selcal.writers.flat import flat_metrics, flat_name

MLFLOW_NAME = re.compile(r"^[/\w.\- :]*$")  # MLflow's rule for metric and param names


@pytest.fixture(scope="module")
def booted():
    logits, labels = make_data(n=300, k=4, seed=21)
    return selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp", bootstrap=20, name="net")


@pytest.fixture(scope="module")
def two():
    results = []
    for seed, name in ((22, "resnet (a)"), (23, "vit/b")):
        logits, labels = make_data(n=200, k=3, seed=seed)
        results.append(selcal.evaluate_arrays(logits, labels, scores="msp,max_logit", name=name))
    return selcal.EvaluationResult(results)


def json_value(document, model, score, key):
    entry = next(m for m in document["models"] if m["name"] == model)
    return entry[key] if score is None else entry["scores"][score][key]


def test_the_long_frame_holds_every_metric_of_the_json_once_with_its_interval(booted):
    frame = booted.to_polars()
    document = json.loads(booted.to_json())
    assert frame.columns == ["model", "score", "metric", "name", "value", "low", "high"]
    rows = frame.to_dicts()
    assert len({(r["model"], r["score"], r["metric"]) for r in rows}) == len(rows)
    model = document["models"][0]
    expected = {(None, k) for k in catalog.model_level(judged=False) if k in model}
    expected |= {(s, k) for s, metrics in model["scores"].items() for k in metrics if catalog.get(k) is not None}
    assert {(r["score"], r["metric"]) for r in rows} == expected
    for row in rows:
        value = json_value(document, row["model"], row["score"], row["metric"])
        assert row["value"] == value or (value is None and row["value"] is None), row
        where = model if row["score"] is None else model["scores"][row["score"]]
        interval = where.get("ci", {}).get(row["metric"])
        assert [row["low"], row["high"]] == (interval if interval is not None else [None, None]), row
    assert frame.filter(score="msp", metric="cov@0.01")["name"].item() == "msp/cov_at_risk_0.01"
    assert frame.filter(metric="ece")["low"].null_count() == 0  # every score with probabilities has an interval


def test_pandas_gives_the_same_frame(booted):
    pytest.importorskip("pandas")
    polars_rows = booted.to_polars().to_dicts()
    pandas_frame = booted.to_pandas()
    assert list(pandas_frame.columns) == list(polars_rows[0])
    for a, b in zip(polars_rows, pandas_frame.to_dict("records")):
        for key, value in a.items():
            other = b[key]
            if value is None:
                assert other is None or (isinstance(other, float) and math.isnan(other)), (key, other)
            else:
                assert other == value, (key, value, other)


def test_several_models_one_frame_and_flat_names_per_model(two):
    frame = two.to_polars()
    assert frame["model"].unique(maintain_order=True).to_list() == ["resnet (a)", "vit/b"]
    flat = flat_metrics(two)
    assert flat["resnet _a_/msp/aurc"] == two["resnet (a)"].scores["msp"]["aurc"]
    assert flat["vit_b/accuracy"] == two["vit/b"].accuracy
    assert all(MLFLOW_NAME.match(name) for name in flat)


def test_every_flat_name_is_one_mlflow_accepts_and_unique(booted):
    flat = flat_metrics(booted)
    assert all(MLFLOW_NAME.match(name) and ".." not in name.split("/") for name in flat)
    assert flat["msp/aurc_ci_low"] == booted.scores["msp"]["ci"]["aurc"][0]
    assert "msp/auroc" in flat and "temp/temperature" in flat
    assert flat_name("aurc", "conf$x/y") == "conf_x_y/aurc"  # a column's name, whatever it holds


def test_two_models_of_one_flat_name_are_refused():
    logits, labels = make_data(n=100, k=3, seed=24)
    clash = selcal.EvaluationResult([selcal.evaluate_arrays(logits, labels, scores="msp", name=name)
                                     for name in ("a/b", "a_b")])
    with pytest.raises(SelcalError, match="have one flat name"):
        flat_metrics(clash)


def test_the_rc_frame_is_the_curve_every_selective_metric_reads(booted):
    frame = booted.curves("rc")
    model = booted.models[0]
    for score, curve in model.curves.items():
        part = frame.filter(score=score)
        assert np.array_equal(part["coverage"].to_numpy(), curve.coverage)
        assert np.array_equal(part["risk"].to_numpy(), curve.risk)
        assert np.array_equal(part["accepted"].to_numpy(), curve.accepted)
    msp = frame.filter(score="msp")["threshold"].to_numpy()
    assert 0 < msp.min() and msp.max() <= 1 and np.all(np.diff(msp) < 0)  # probabilities, not log-MSP
    aurc = sum(float(r) for r in frame.filter(score="max_logit")["risk"])  # non-trivial: the frame is not empty
    assert aurc > 0


def test_the_reliability_frame_holds_each_bin_of_the_diagram(booted):
    frame = booted.curves("reliability", library="polars")
    model = booted.models[0]
    assert set(frame["score"].unique()) == {"msp", "temp"}
    for score in ("msp", "temp"):
        part = frame.filter(score=score)
        assert part.height == booted.options.bins and part["count"].sum() == model.n_eval
        full = part.filter(part["count"] > 0)
        gaps = (full["count"] * (full["accuracy"] - full["confidence"]).abs()).sum() / model.n_eval
        assert gaps == pytest.approx(model.scores[score]["ece"], abs=1e-12)
        assert (full["accuracy_low"] <= full["accuracy"]).all() and (full["accuracy"] <= full["accuracy_high"]).all()


def test_curves_still_index_a_one_model_results_curves(booted, two):
    assert booted.curves["msp"] is booted.models[0].curves["msp"]
    assert set(booted.curves) == set(booted.models[0].curves)
    with pytest.raises(KeyError, match="holds 2 models"):
        two.curves["msp"]
    with pytest.raises(SelcalError, match="kind must be one of rc, reliability"):
        booted.curves("roc")
