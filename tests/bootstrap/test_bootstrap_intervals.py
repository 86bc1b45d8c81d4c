"""Bootstrap intervals (selcal/bootstrap/), checked against the plain metric functions.

1. The vectorised metrics of a resample equal the plain functions of selective.py and
   calibration.py applied to the explicitly resampled rows (np.repeat by the multiplicities),
   to 1e-9, with heavy ties, both AURC estimators, few and many bins, and degenerate resamples;
   and equal ``evaluate_arrays`` run on the resampled logits (every score and model-level metric).
2. The intervals: cover the population value at about the nominal rate (200 repetitions of a
   known generator), drop undefined resamples, do not depend on row order, and land in the JSON.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import interval_keys, model_interval_keys, plain_metrics, tied_data
from scipy.stats import norm

import selcal
from selcal import bootstrap
from selcal.bootstrap import RefitData, RowData, add_intervals, percentile_interval, resample_metrics
from selcal.metrics import calibration, catalog, selective

TOL = 1e-9


def assert_resamples_match(data, counts):
    """Vectorised metrics of the resamples given by ``counts`` == plain metrics of the repeated rows."""
    draws = np.stack([np.repeat(np.arange(data.n), c) for c in counts])
    got = resample_metrics(data, draws)
    for i, row_counts in enumerate(counts):
        want = plain_metrics(data, np.repeat(np.arange(data.n), row_counts))
        assert set(got) == set(want)
        for level in want:
            assert set(got[level]) == set(want[level]), level
            for key, value in want[level].items():
                value = math.nan if value is None else value
                if math.isnan(value):
                    assert math.isnan(got[level][key][i]), (level, key)
                else:
                    assert got[level][key][i] == pytest.approx(value, abs=TOL, rel=0), (i, level, key)


# ============================================================ 1. equal to the plain metrics
@pytest.mark.parametrize("estimator", ["mean", "trapz"])
@pytest.mark.parametrize("levels,bins", [(1, 15), (3, 4), (50, 15)])
def test_resampled_metrics_equal_the_plain_metrics_on_the_repeated_rows(estimator, levels, bins):
    rng = np.random.default_rng(levels * 10 + bins)
    data = tied_data(300, rng, levels=levels, bins=bins, estimator=estimator)
    counts = rng.multinomial(data.n, np.full(data.n, 1 / data.n), size=5)
    assert_resamples_match(data, counts)


@pytest.mark.parametrize("accuracy", [0.0, 0.03, 0.5, 0.97, 1.0])
@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_resampled_metrics_on_small_and_degenerate_data(accuracy, n):
    """One row, fewer rows than bins, no errors or no correct rows in a resample."""
    rng = np.random.default_rng(n * 7 + int(accuracy * 100))
    data = tied_data(n, rng, accuracy=accuracy, levels=2)
    counts = rng.multinomial(n, np.full(n, 1 / n), size=6)
    counts[0] = 0
    counts[0, 0] = n  # one row drawn n times: a single tie group
    assert_resamples_match(data, counts)


@pytest.mark.parametrize("levels,bins,n", [(1, 15, 300), (3, 4, 300), (50, 15, 300), (2, 15, 7), (2, 4, 1)])
def test_resampled_mbls_aece_equals_the_plain_one_on_the_repeated_rows(levels, bins, n):
    """--aece-estimator mbls keeps its interval: each resample's value is the MbLS estimator of its rows."""
    from dataclasses import replace

    rng = np.random.default_rng(levels * 31 + bins + n)
    data = replace(tied_data(n, rng, levels=levels, bins=bins), aece_estimator="mbls")
    counts = rng.multinomial(n, np.full(n, 1 / n), size=6)
    counts[0] = 0
    counts[0, 0] = n
    draws = np.stack([np.repeat(np.arange(data.n), c) for c in counts])
    got = resample_metrics(data, draws)["q"]["aece"]
    for i, row_counts in enumerate(counts):
        rows = np.repeat(np.arange(data.n), row_counts)
        want = calibration.mbls_adaptive_calibration_error(data.confidence["q"][rows], data.correct[rows], bins)
        assert got[i] == pytest.approx(want, abs=TOL, rel=0), i


def test_a_resample_without_errors_has_undefined_auroc_and_fpr95():
    data = RowData(correct=np.array([True, True, False]), scores={"s": np.array([3.0, 2.0, 1.0])})
    got = resample_metrics(data, np.array([[0, 1, 1], [0, 1, 2]]))["s"]
    assert math.isnan(got["auroc"][0]) and math.isnan(got["fpr95"][0])
    assert got["auroc"][1] == 1.0 and got["aurc"][0] == 0.0


def test_the_order_of_the_draws_does_not_matter():
    rng = np.random.default_rng(3)
    data = tied_data(200, rng)
    draws = rng.integers(0, 200, size=(3, 200))
    a = resample_metrics(data, draws)
    b = resample_metrics(data, rng.permuted(draws, axis=1))
    for level in a:
        for key in a[level]:
            np.testing.assert_allclose(a[level][key], b[level][key], rtol=0, atol=1e-12)


def make_logits(n, k, rng, *, step=0.25):
    """Logits on a grid of ``step`` (many tied scores), about 60% accuracy."""
    labels = rng.integers(0, k, n)
    logits = np.round(rng.normal(0, 1.5, (n, k)) / step) * step
    logits[np.arange(n), labels] += np.round(rng.gamma(2.0, 0.8, n) / step) * step
    return logits, labels


def test_resampled_metrics_equal_evaluate_arrays_on_the_resampled_logits():
    """Every score (msp, max_logit, pnorm, temp) and the model-level numbers, as selcal.evaluate gives them."""
    rng = np.random.default_rng(11)
    logits, labels = make_logits(500, 4, rng)
    val_logits, val_labels = make_logits(300, 4, rng)
    options = selcal.Options(risks=(0.01, 0.1, 0.5), coverages=(0.3, 0.9), bins=10)
    model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=options)
    data = RowData.from_model(model, options)
    assert set(data.scores) == {"msp", "max_logit", "pnorm", "temp"}
    counts = rng.multinomial(500, np.full(500, 1 / 500), size=3)
    draws = np.stack([np.repeat(np.arange(500), c) for c in counts])
    got = resample_metrics(data, draws)
    for i in range(len(draws)):
        # Same validation rows, so the same T and p: the plain pipeline on the resampled rows.
        want = selcal.evaluate_arrays(logits[draws[i]], labels[draws[i]], val_logits, val_labels, options=options)
        for level, metrics in got.items():
            for key, values in metrics.items():
                expected = getattr(want, key) if level == "model" else want.scores[level][key]
                if expected is None:
                    assert math.isnan(values[i])
                elif catalog.get(key) is not None and catalog.get(key).resample is not None:
                    # smooth ECE: the resamples' coarser grid, within 1e-4 of the value (test_smooth)
                    assert values[i] == pytest.approx(expected, rel=1e-4), (level, key)
                else:
                    assert values[i] == pytest.approx(expected, abs=TOL, rel=0), (level, key)
    # Every selective and calibration metric of every score has resampled values (class-wise ECE aside).
    for name, metrics in model.scores.items():
        assert interval_keys(metrics) == set(got[name]), name


def test_refit_resamples_are_evaluate_arrays_on_resampled_validation_and_evaluation_rows():
    rng = np.random.default_rng(5)
    logits, labels = make_logits(300, 3, rng)
    val_logits, val_labels = make_logits(200, 3, rng)
    options = selcal.Options()
    eval_draws, val_draws = rng.integers(0, 300, (2, 300)), rng.integers(0, 200, (2, 200))
    got = bootstrap.refit_metrics(RefitData(logits, labels, val_logits, val_labels), options, eval_draws, val_draws)
    for i in range(2):
        want = selcal.evaluate_arrays(logits[eval_draws[i]], labels[eval_draws[i]],
                                      val_logits[val_draws[i]], val_labels[val_draws[i]], options=options)
        assert got["temp"]["temperature"][i] == want.scores["temp"]["temperature"]
        assert got["pnorm"]["aurc"][i] == want.scores["pnorm"]["aurc"]


# ================================================================== 2. the intervals
def test_percentile_interval_drops_undefined_resamples_and_is_null_when_too_many():
    values = np.arange(1000.0)
    assert percentile_interval(values, 0.95) == pytest.approx([24.975, 974.025])
    values[:20] = np.nan  # 2% undefined <= 2.5%: dropped
    low, high = percentile_interval(values, 0.95)
    assert low > 24.975 and high > 974.025
    values[:30] = np.nan  # 3% undefined > 2.5%: no interval
    assert percentile_interval(values, 0.95) is None


@pytest.mark.slow
def test_intervals_cover_the_population_value_at_the_nominal_rate():
    """200 samples of a known model; the 95% interval must cover the population value 90-99% of the time.

    Generator: correct ~ Bernoulli(0.8); confidence score ~ N(1, 1) if correct, N(0, 1) if not.
    Population values: accuracy 0.8; AUROC = Phi(1 / sqrt 2) exactly; AURC of a sample of
    4 million rows from the same generator (its own sampling error is ~1e-5).
    """
    def sample(n, rng):
        correct = rng.random(n) < 0.8
        return correct, rng.normal(correct.astype(float), 1.0)

    rng = np.random.default_rng(2024)
    big_correct, big_score = sample(4_000_000, rng)
    truth = {
        "accuracy": 0.8,
        "auroc": norm.cdf(1 / math.sqrt(2)),
        "aurc": selective.aurc(selective.risk_coverage(big_score, big_correct)),
    }
    covered = {k: 0 for k in truth}
    repetitions = 200
    for repetition in range(repetitions):
        correct, score = sample(1000, rng)
        intervals = bootstrap.row_intervals(RowData(correct=correct, scores={"s": score}), resamples=400,
                                            seed=repetition)
        for key, value in truth.items():
            low, high = intervals["model" if key == "accuracy" else "s"][key]
            covered[key] += low <= value <= high
    rates = {k: v / repetitions for k, v in covered.items()}
    print("coverage of the 95% intervals:", rates)
    assert all(0.90 <= rate <= 0.99 for rate in rates.values()), rates


def small_result(n=600, seed=0, options=selcal.Options()):
    rng = np.random.default_rng(seed)
    logits, labels = make_logits(n, 5, rng, step=0.125)
    val_logits, val_labels = make_logits(400, 5, rng, step=0.125)
    model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=options, name="m")
    return selcal.EvaluationResult(models=[model], options=options), (logits, labels, val_logits, val_labels)


def test_intervals_in_the_json_and_schema_1_keys_unchanged():
    plain = json.loads(small_result()[0].to_json())
    result = add_intervals(small_result()[0], resamples=50, seed=7, confidence=0.9)
    data = json.loads(result.to_json())
    assert data["bootstrap"] == {"resamples": 50, "seed": 7, "confidence": 0.9, "refit": False}
    model = data["models"][0]
    assert set(model["ci"]) == model_interval_keys()
    for name, metrics in model["scores"].items():
        ci = metrics.pop("ci")
        assert metrics == plain["models"][0]["scores"][name]  # nothing else changed
        assert set(ci) == interval_keys(metrics), name
        for low_high in ci.values():
            assert low_high is None or low_high[0] <= low_high[1]
    model.pop("ci")
    data.pop("bootstrap")
    assert data == plain


@pytest.mark.slow
def test_interval_brackets_the_point_estimate_for_smooth_metrics():
    result = add_intervals(small_result(2000)[0], resamples=300, seed=1)
    model = result.models[0]
    for key in ("accuracy", "nll", "brier"):
        low, high = model.extra["ci"][key]
        assert low <= getattr(model, key) <= high
    for name in ("msp", "temp"):
        for key in ("aurc", "augrc", "auroc", "ece", "nll", "brier"):
            if key in model.scores[name]:
                low, high = model.scores[name]["ci"][key]
                assert low <= model.scores[name][key] <= high, (name, key)


def test_intervals_do_not_depend_on_row_order():
    result, (logits, labels, val_logits, val_labels) = small_result()
    order = np.random.default_rng(9).permutation(labels.size)
    shuffled = selcal.evaluate_arrays(logits[order], labels[order], val_logits, val_labels, name="m")
    a = add_intervals(result, resamples=100, seed=3).to_dict()
    b = add_intervals(selcal.EvaluationResult(models=[shuffled], options=result.options), resamples=100, seed=3).to_dict()
    for document in (a, b):
        document["models"][0].pop("fingerprint")  # without ids the rows are known by their order
    assert a == b


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others():
    a = add_intervals(small_result()[0], resamples=60, seed=1).to_dict()
    b = add_intervals(small_result()[0], resamples=60, seed=1).to_dict()
    c = add_intervals(small_result()[0], resamples=60, seed=2).to_dict()
    assert a == b and a != c


@pytest.mark.slow
def test_refit_adds_the_fitting_noise_and_a_temperature_interval():
    result, (logits, labels, val_logits, val_labels) = small_result(300)
    fixed = add_intervals(small_result(300)[0], resamples=20, seed=4)
    refit = add_intervals(result, resamples=20, seed=4, refit=[RefitData(logits, labels, val_logits, val_labels)])
    assert refit.bootstrap["refit"] is True and fixed.bootstrap["refit"] is False
    temp = refit.models[0].scores["temp"]
    low, high = temp["ci"]["temperature"]
    assert low < high and "temperature" not in fixed.models[0].scores["temp"]["ci"]
    # Scores that fit nothing draw the same evaluation rows either way.
    for a, b in ((refit.models[0].scores["msp"]["ci"], fixed.models[0].scores["msp"]["ci"]),
                 (refit.models[0].extra["ci"], fixed.models[0].extra["ci"])):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-13, err_msg=key)


@pytest.mark.parametrize("resamples,confidence", [(1, 0.95), (100, 1.0), (100, 0.0), (2.5, 0.9)])
def test_bad_bootstrap_arguments_are_refused(resamples, confidence):
    with pytest.raises(selcal.SelcalError):
        add_intervals(small_result(100)[0], resamples=resamples, confidence=confidence)


def test_paired_differences_of_a_model_with_itself_are_zero():
    result = small_result()[0]
    model = result.models[0]
    differences = bootstrap.paired_differences(model, model, resamples=50, seed=0)
    for level, metrics in differences.items():
        for key, entry in metrics.items():
            assert entry["difference"] == 0
            assert entry["ci"] is None or entry["ci"] == [0.0, 0.0], (level, key)


@pytest.mark.slow
def test_paired_interval_is_narrower_than_the_unpaired_ones():
    """B = A's logits plus a little noise: the shared noise of the rows cancels in B - A."""
    result, (logits, labels, val_logits, val_labels) = small_result(1500)
    noisy = logits + np.random.default_rng(1).normal(0, 0.3, logits.shape)
    model_b = selcal.evaluate_arrays(noisy, labels, val_logits, val_labels, name="b")
    paired = bootstrap.paired_differences(result.models[0], model_b, resamples=300, seed=0)
    single = bootstrap.model_intervals(result.models[0], resamples=300, seed=0)
    low, high = paired["msp"]["aurc"]["ci"]
    single_low, single_high = single["msp"]["aurc"]
    assert high - low < 0.6 * (single_high - single_low)
