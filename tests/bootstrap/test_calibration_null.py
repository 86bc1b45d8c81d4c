"""The calibration test (``--calibration-test M``, CONVENTIONS.md "Calibration under the null"): the null
distribution of ECE, adaptive ECE and smooth ECE by consistency resampling, its summaries in the JSON,
the table and ``check``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import selcal
from selcal.metrics import calibration, smooth
from selcal.bootstrap.null import CalibrationNull, add_calibration_test, calibration_nulls, null_draws
from selcal.errors import OptionError
from selcal.metrics import catalog

CE = "sample_logits/calibrator_cifar10_resnet50_ce.parquet"


def brute_force(confidence, draws, seed, bins=15, estimator="equal-mass"):
    """Each draw literally: N confidences at the drawn positions of the sorted rows, each correct when its
    uniform is below it, and the plain metric functions of those rows (smooth ECE exact)."""
    q = np.sort(confidence)
    aece = (calibration.mbls_adaptive_calibration_error if estimator == "mbls"
            else calibration.adaptive_calibration_error)
    out = {"ece": [], "aece": [], "smece": []}
    for positions, uniforms in null_draws(q.size, draws, seed):
        for rows, u in zip(positions, uniforms):
            drawn = q[rows]
            correct = u < drawn
            out["ece"].append(calibration.expected_calibration_error(drawn, correct, bins))
            out["aece"].append(aece(drawn, correct, bins))
            out["smece"].append(smooth.smooth_ece(drawn, correct).value)
    return {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("estimator", ["equal-mass", "mbls"])
@pytest.mark.parametrize("n, bins, ties", [(300, 15, False), (57, 7, True), (3, 15, False)])
def test_the_null_distribution_is_a_brute_force_simulation_with_the_same_seed(n, bins, ties, estimator):
    rng = np.random.default_rng(n + bins)
    q = rng.beta(4, 1, n)
    if ties:
        q = np.round(q * 10) / 10
    got = calibration_nulls({"s": q}, draws=30, seed=11, bins=bins, aece_estimator=estimator)["s"].values
    want = brute_force(q, 30, 11, bins, estimator)
    np.testing.assert_allclose(got["ece"], want["ece"], rtol=0, atol=1e-13)
    np.testing.assert_allclose(got["aece"], want["aece"], rtol=0, atol=1e-13)
    np.testing.assert_allclose(got["smece"], want["smece"], rtol=1e-3, atol=1e-12)  # smooth_ece_many: 1e-3


def test_the_draws_are_the_documented_stream():
    """Positions then uniforms of each block from default_rng(seed): the same numbers whatever computes them."""
    rng = np.random.default_rng(4)
    (positions, uniforms), = null_draws(50, 3, 4)
    np.testing.assert_array_equal(positions, rng.integers(0, 50, size=(3, 50), dtype=np.int64))
    np.testing.assert_array_equal(uniforms, rng.random((3, 50)))


def test_the_null_does_not_depend_on_the_row_order_and_follows_the_seed():
    rng = np.random.default_rng(2)
    q = rng.uniform(0.3, 1, 400)
    first = calibration_nulls({"s": q}, draws=40, seed=3)["s"].values
    shuffled = calibration_nulls({"s": rng.permutation(q)}, draws=40, seed=3)["s"].values
    other = calibration_nulls({"s": q}, draws=40, seed=4)["s"].values
    for key in first:
        np.testing.assert_array_equal(first[key], shuffled[key])
        assert not np.array_equal(first[key], other[key])


def test_the_summaries_are_the_mean_the_95th_percentile_and_the_p_value():
    null = CalibrationNull(9, 0, {"ece": np.arange(1.0, 10.0) / 100, "smece": np.full(9, 0.5)})
    summary = null.summary({"ece": 0.07, "smece": 0.5})
    assert summary["ece_floor"] == pytest.approx(0.05)
    assert summary["ece_null_q95"] == pytest.approx(np.quantile(np.arange(1.0, 10.0) / 100, 0.95))
    assert summary["ece_p"] == pytest.approx((1 + 3) / 10)  # 0.07, 0.08, 0.09 are >= 0.07
    assert summary["smece_p"] == 1.0  # ties count as >=
    assert null.summary({"ece": None})["ece_p"] is None


def test_keys_beside_their_metric_in_the_json_and_rows_in_the_table():
    rng = np.random.default_rng(5)
    logits = rng.normal(0, 2, (500, 4))
    labels = np.where(rng.random(500) < 0.8, logits.argmax(1), rng.integers(0, 4, 500))
    result = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp", calibration_test=50)
    data = json.loads(result.to_json())
    msp = list(data["models"][0]["scores"]["msp"])
    for metric in catalog.tested_under_the_null():
        anchor = catalog.CATALOG[metric].gives[-1]
        at = msp.index(anchor)
        assert msp[at + 1:at + 4] == [f"{metric}_floor", f"{metric}_null_q95", f"{metric}_p"]
    assert "ece_p" not in data["models"][0]["scores"]["max_logit"]
    assert data["options"]["calibration_test"] == 50
    for name in ("msp", "temp"):
        scores = data["models"][0]["scores"][name]
        assert 1 / 51 <= scores["ece_p"] <= 1 and scores["ece_floor"] <= scores["ece_null_q95"]
    from selcal.report.table import metric_sections

    labels_shown = [label for label, _, _ in metric_sections(result.models[0])[1]]
    assert {"ECE floor (%)", "ECE null 95% (%)", "ECE p-value", "smooth ECE p-value"} <= set(labels_shown)
    plain = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp")
    assert "options" in json.loads(plain.to_json()) and "calibration_test" not in json.loads(plain.to_json())["options"]
    assert not [label for label, _, _ in metric_sections(plain.models[0])[1] if "p-value" in label]


def test_a_column_of_probabilities_is_tested_too():
    rng = np.random.default_rng(6)
    q = rng.uniform(0.5, 1, 300)
    correct = rng.random(300) < q
    model = selcal.evaluate_arrays(np.column_stack([q, 1 - q]), np.where(correct, 0, 1), scores="msp").models[0]
    add_calibration_test(model, 40, seed=1)
    assert model.scores["msp"]["ece_p"] is not None and "msp" in model.calibration_nulls


@pytest.mark.parametrize("bad", [5, -1, 1.5, True, "many", 10**7])
def test_a_bad_number_of_draws_is_refused_in_one_line(bad):
    with pytest.raises(OptionError, match="calibration_test"):
        selcal.Options(calibration_test=bad)


@pytest.mark.slow
def test_the_over_confident_cross_entropy_sample_is_rejected_and_check_judges_the_p_value(tmp_path):
    from typer.testing import CliRunner

    from selcal.cli import app

    out = tmp_path / "ce.json"
    runner = CliRunner()
    ran = runner.invoke(app, ["evaluate", CE, "--scores", "msp,temp", "--calibration-test", "1000", "--json", str(out)])
    assert ran.exit_code == 0, ran.output
    scores = json.loads(out.read_text())["models"][0]["scores"]
    for metric in catalog.tested_under_the_null():
        assert scores["msp"][f"{metric}_p"] < 0.001
        assert scores["msp"][metric] > scores["msp"][f"{metric}_null_q95"]
    assert "ECE p-value" in ran.output
    failed = runner.invoke(app, ["check", str(out), "--min", "msp.ece_p=0.05"])
    assert failed.exit_code == 1, failed.output
    passed = runner.invoke(app, ["check", str(out), "--min", "msp.ece_p=0.0005"])
    assert passed.exit_code == 0, passed.output


@pytest.mark.slow
def test_on_perfectly_calibrated_data_the_test_rejects_5_percent_within_binomial_noise():
    """200 data sets of 400 rows with c ~ Bernoulli(q): P(p <= 0.05) = 5%; with 200 repetitions the
    rejection count is Binomial(200, 0.05) (mean 10, sd 3.1): accepted within 3 sd, 1 to 19."""
    rng = np.random.default_rng(2026)
    rejected = {metric: 0 for metric in catalog.tested_under_the_null()}
    for repetition in range(200):
        q = rng.beta(5, 1.5, 400)
        correct = rng.random(400) < q
        observed = {"ece": calibration.expected_calibration_error(q, correct),
                    "aece": calibration.adaptive_calibration_error(q, correct),
                    "smece": smooth.smooth_ece(q, correct).value}
        summary = calibration_nulls({"s": q}, draws=199, seed=repetition, band=False)["s"].summary(observed)
        for metric in rejected:
            rejected[metric] += summary[f"{metric}_p"] <= 0.05
    for metric, count in rejected.items():
        assert 1 <= count <= 19, (metric, count)


def test_check_on_a_result_without_the_test_says_how_to_get_it(tmp_path):
    from typer.testing import CliRunner

    from selcal.cli import app

    rng = np.random.default_rng(7)
    logits = rng.normal(0, 2, (200, 3))
    out = tmp_path / "r.json"
    out.write_text(selcal.evaluate_arrays(logits, logits.argmax(1), scores="msp").to_json())
    ran = CliRunner().invoke(app, ["check", str(out), "--min", "msp.ece_p=0.05"])
    assert ran.exit_code == 2 and "--calibration-test" in ran.output, ran.output


def test_the_reliability_diagram_draws_the_calibrated_models_range():
    pytest.importorskip("matplotlib")
    from selcal.figures.reliability import figure_reliability, plot_reliability

    rng = np.random.default_rng(8)
    logits = rng.normal(0, 3, (600, 4))
    labels = np.where(rng.random(600) < 0.6, logits.argmax(1), rng.integers(0, 4, 600))
    result = selcal.evaluate_arrays(logits, labels, scores="msp", calibration_test=40)
    model = result.models[0]
    low, high = model.calibration_nulls["msp"].band
    assert low.shape == (15,) and np.all((low <= high) | np.isnan(low))
    figure = figure_reliability(model)
    texts = [t.get_text() for t in figure.legends[0].get_texts()]
    assert any("calibration test, 40 draws" in t for t in texts)
    assert "floor" in figure.axes[0].get_title()
    plain = figure_reliability(selcal.evaluate_arrays(logits, labels, scores="msp").models[0])
    assert not any("calibration test" in t.get_text() for t in plain.legends[0].get_texts())
    assert "floor" in plot_reliability(result).axes[0].get_title()
