"""The calibrators and smooth ECE as scores and metrics of selcal evaluate (CONVENTIONS.md,
"Post-hoc calibrators", "Calibration beyond bins"): every reported number recomputed from the
reported parameters."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import log_softmax, softmax

from selcal.api import Options, evaluate_arrays
from selcal.metrics import calibration, smooth
from selcal.scores import REGISTRY


def data(n=600, k=4, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(0.0, 2.0, (n, k))
    logits[np.arange(n), labels] += rng.gamma(2.0, 1.2, n)
    return logits, labels


def run(scores="calibrators", **options):
    logits, labels = data()
    val, val_y = data(n=400, seed=1)
    result = evaluate_arrays(logits, labels, val, val_y, options=Options(scores=scores, **options))
    return logits, labels, json.loads(result.to_json())["models"][0]


def test_calibrators_group_selects_msp_temp_and_the_four():
    assert Options(scores="calibrators").scores == ("msp", "temp", "vector", "dirichlet", "ets", "isotonic")
    assert Options(scores="calibrators,max_logit").scores == ("msp", "max_logit", "temp", "vector", "dirichlet",
                                                              "ets", "isotonic")


def test_each_calibrator_is_judged_as_the_classifier_it_produces():
    logits, labels, model = run()
    scores = model["scores"]
    w, b = np.array(scores["vector"]["params"]["w"]), np.array(scores["vector"]["params"]["b"])
    p = softmax(logits * w + b, axis=1)
    pred, top = p.argmax(axis=1), p.max(axis=1)
    correct = pred == labels
    assert scores["vector"]["accuracy"] == pytest.approx(correct.mean(), abs=0)
    assert scores["vector"]["ece"] == pytest.approx(calibration.expected_calibration_error(top, correct), abs=1e-12)
    assert scores["vector"]["smece"] == pytest.approx(smooth.smooth_ece(top, correct).value, abs=1e-10)
    assert scores["vector"]["nll"] == pytest.approx(-np.mean(np.log(p[np.arange(labels.size), labels])), abs=1e-12)
    W, b = np.array(scores["dirichlet"]["params"]["W"]), np.array(scores["dirichlet"]["params"]["b"])
    p = softmax(log_softmax(logits, axis=1) @ W.T + b, axis=1)
    assert scores["dirichlet"]["accuracy"] == pytest.approx((p.argmax(axis=1) == labels).mean(), abs=0)
    assert scores["dirichlet"]["brier"] == pytest.approx(
        np.mean(np.sum((p - np.eye(4)[labels]) ** 2, axis=1)), abs=1e-12)
    (w1, w2, w3), temperature = scores["ets"]["params"]["weights"], scores["ets"]["params"]["temperature"]
    assert temperature == scores["temp"]["temperature"]
    p = w1 * softmax(logits / temperature, axis=1) + w2 * softmax(logits, axis=1) + w3 / 4
    assert scores["ets"]["nll"] == pytest.approx(-np.mean(np.log(p[np.arange(labels.size), labels])), abs=1e-12)
    for name in ("vector", "dirichlet", "ets"):
        assert isinstance(scores[name]["val_objective"], float)
        assert {"smece", "smece_sigma", "ece", "aece", "mce", "nll", "brier", "aurc"} <= set(scores[name])


def test_smooth_ece_is_reported_for_every_probability_score_only():
    logits, labels, model = run(scores="msp,max_logit,temp")
    q = softmax(logits, axis=1).max(axis=1)
    got = smooth.smooth_ece(q, softmax(logits, axis=1).argmax(axis=1) == labels)
    assert model["scores"]["msp"]["smece"] == pytest.approx(got.value, abs=1e-14)
    assert model["scores"]["msp"]["smece_sigma"] == pytest.approx(got.sigma, abs=1e-14)
    assert "smece" in model["scores"]["temp"] and "smece" not in model["scores"]["max_logit"]


def test_isotonic_infinite_nll_is_null_with_its_count():
    rng = np.random.default_rng(3)
    val = rng.normal(0, 6, (60, 3))
    val_y = val.argmax(axis=1)  # perfectly separable validation rows: 0 and 1 are the only fitted values
    test = rng.normal(0, 6, (200, 3))
    test_y = rng.integers(0, 3, 200)
    model = json.loads(evaluate_arrays(test, test_y, val, val_y, options=Options(scores="msp,isotonic"))
                       .to_json())["models"][0]
    isotonic = model["scores"]["isotonic"]
    assert isotonic["nll"] is None and isotonic["nll_infinite_rows"] > 0


def test_odir_options_reach_the_fits_and_bad_values_are_refused():
    _, _, strong = run(scores="msp,dirichlet", odir_lambda=10.0, odir_mu=10.0)
    _, _, weak = run(scores="msp,dirichlet", odir_lambda=1e-4, odir_mu=1e-4)
    off = lambda m: np.abs(np.array(m["scores"]["dirichlet"]["params"]["W"]) * (1 - np.eye(4))).max()  # noqa: E731
    assert off(strong) < off(weak)
    with pytest.raises(Exception, match="odir_lambda"):
        Options(odir_lambda=-1)


def test_cli_scores_calibrators_and_refusals(cli, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    logits, labels = data(n=300)
    split = np.where(np.arange(300) < 100, "val", "test")
    table = pa.table({"label": labels, "split": split,
                      "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 4)})
    path = tmp_path / "m.parquet"
    pq.write_table(table, path)
    out = cli("evaluate", str(path), "--scores", "calibrators", "--odir-lambda", "0.01", "--json", str(tmp_path / "o.json"))
    assert out.exit_code == 0, out.output
    scores = json.loads((tmp_path / "o.json").read_text())["models"][0]["scores"]
    assert list(scores) == ["msp", "temp", "vector", "dirichlet", "ets", "isotonic"]
    bad = cli("evaluate", str(path), "--scores", "calibrators", "--odir-lambda", "-1")
    assert bad.exit_code == 2 and "--odir-lambda" in bad.output


def test_too_few_validation_rows_refused_in_one_line(cli, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    logits, labels = data(n=100, k=10)
    split = np.where(np.arange(100) < 5, "val", "test")
    table = pa.table({"label": labels, "split": split,
                      "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 10)})
    pq.write_table(table, tmp_path / "m.parquet")
    out = cli("evaluate", str(tmp_path / "m.parquet"), "--scores", "msp,vector")
    assert out.exit_code == 2 and "vector needs at least 10 validation rows" in out.output
    assert "Traceback" not in out.output


@pytest.mark.slow
def test_bootstrap_gives_smece_intervals_and_refits_the_calibrators():
    logits, labels = data()
    val, val_y = data(n=400, seed=1)
    result = evaluate_arrays(logits, labels, val, val_y, options=Options(scores="msp,vector,isotonic"),
                             bootstrap=20, bootstrap_refit=True)
    model = json.loads(result.to_json())["models"][0]
    for name in ("msp", "vector", "isotonic"):
        low, high = model["scores"][name]["ci"]["smece"]
        assert low <= model["scores"][name]["smece"] <= high or low <= high
    low, high = model["scores"]["vector"]["ci"]["aurc"]
    assert low < high
    assert REGISTRY["vector"].refitted and REGISTRY["isotonic"].refitted
