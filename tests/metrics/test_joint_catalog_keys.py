"""Several keys from one computation (selcal.metrics.catalog.jointly): smooth ECE and its σ* come from
one fixed-point search per score and per bootstrap resample, with no cache; each key keeps its own
entry's properties (label, unit, direction, interval), and a joint entry added to the catalog flows
through the evaluation, the bootstrap and check as a single-key entry does."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import selcal
from selcal.bootstrap import RefitData, add_intervals, paired_differences
from selcal.checks import better
from selcal.cli import app
from selcal.metrics import catalog, smooth
from selcal.metrics.catalog import CATALOG, Metric
from selcal.report import metric_label

SCORES = ("msp", "max_logit", "temp")  # msp and temp have probabilities (calibration metrics), max_logit not
CALIBRATED = ("msp", "temp")


def make_logits(n, k, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += rng.gamma(2.0, 1.0, n)
    return logits, labels


@pytest.fixture
def model():
    logits, labels = make_logits(400, 4, 0)
    val_logits, val_labels = make_logits(200, 4, 1)
    options = selcal.Options(scores=SCORES)
    return selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=options), options


@pytest.fixture
def smooth_calls(monkeypatch):
    """Every call of selcal.metrics.smooth.smooth_ece made outside a block of resamples, by the number of rows it
    was given; ``smooth_calls.blocks``: the resamples searched together by smooth.SmoothEceOfCounts, one
    entry per block, and ``smooth_calls.prepared`` how many times one was prepared (once per score)."""
    class Calls(list):
        blocks: list
        prepared: list

    calls = Calls()
    calls.blocks, calls.prepared = [], []
    original = smooth.smooth_ece
    inside = []

    def counting(confidence, correct, *args, **kwargs):
        if not inside:
            calls.append(np.asarray(confidence).size)
        return original(confidence, correct, *args, **kwargs)

    class Counting(smooth.SmoothEceOfCounts):
        def __init__(self, *args, **kwargs):
            calls.prepared.append(1)
            inside.append(1)
            try:
                super().__init__(*args, **kwargs)
            finally:
                inside.pop()

        def __call__(self, counts, by_row=None):  # by_row: as the catalog entry declares (resample_counts_by_row)
            calls.blocks.append(len(counts))
            inside.append(1)
            try:
                return super().__call__(counts, by_row=by_row)
            finally:
                inside.pop()

    monkeypatch.setattr(smooth, "smooth_ece", counting)
    monkeypatch.setattr(smooth, "SmoothEceOfCounts", Counting)
    return calls


# ------------------------------------------------------------------ once per score, per resample
def test_smooth_ece_and_its_sigma_are_one_computation_per_score(smooth_calls):
    logits, labels = make_logits(300, 4, 2)
    val_logits, val_labels = make_logits(150, 4, 3)
    model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=selcal.Options(scores=SCORES))
    assert len(smooth_calls) == len(CALIBRATED)
    for name in CALIBRATED:
        fixed_point = smooth.smooth_ece(model.confidences[name], model.rows.correct)
        assert (model.scores[name]["smece"], model.scores[name]["smece_sigma"]) == (fixed_point.value, fixed_point.sigma)
    assert "smece" not in model.scores["max_logit"]


def test_smooth_ece_runs_once_per_score_and_per_resample(model, smooth_calls):
    """Each score's resamples are searched in blocks (one search per resample), prepared once per score."""
    result, options = model
    resamples = 7
    add_intervals(selcal.EvaluationResult(models=[result], options=options), resamples=resamples, seed=0)
    assert smooth_calls == [] and len(smooth_calls.prepared) == len(CALIBRATED)
    assert sum(smooth_calls.blocks) == resamples * len(CALIBRATED)
    for name in CALIBRATED:
        low, high = result.scores[name]["ci"]["smece"]
        assert low <= result.scores[name]["smece"] * 1.5 and low <= high
        assert result.scores[name]["ci"]["smece_sigma"] is not None


def test_smooth_ece_runs_once_per_score_and_per_resample_of_compare(model, smooth_calls):
    result, options = model
    resamples = 5
    paired_differences(result, result, resamples=resamples, seed=0, options=options)
    assert smooth_calls == [] and sum(smooth_calls.blocks) == 2 * resamples * len(CALIBRATED)  # model A's and B's


def test_smooth_ece_runs_once_per_refitted_resample(smooth_calls):
    logits, labels = make_logits(200, 3, 4)
    val_logits, val_labels = make_logits(100, 3, 5)
    options = selcal.Options(scores=("msp", "temp"))
    result = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=options)
    smooth_calls.clear()
    resamples = 3
    add_intervals(selcal.EvaluationResult(models=[result], options=options), resamples=resamples, seed=0,
                  refit=[RefitData(logits, labels, val_logits, val_labels)])
    # msp on the vectorised path's resamples, temp refitted: one evaluation (one smooth ECE) per resample each
    assert sum(smooth_calls.blocks) == resamples and len(smooth_calls) == resamples


def test_no_hidden_cache_equal_rows_are_computed_again(smooth_calls):
    """The catalog keeps no state between calls: two calls on equal arrays are two computations."""
    q = np.array([0.9, 0.7, 0.6, 0.95])
    c = np.array([True, False, True, True])
    first = CATALOG["smece"].values(q, c, selcal.Options())
    second = CATALOG["smece_sigma"].values(q.copy(), c.copy(), selcal.Options())
    assert first == second and list(first) == ["smece", "smece_sigma"]
    assert len(smooth_calls) == 2
    fixed_point = smooth.smooth_ece(q, c)
    assert first == {"smece": fixed_point.value, "smece_sigma": fixed_point.sigma}


def test_the_resample_form_is_the_coarser_grid():
    rng = np.random.default_rng(6)
    q = rng.uniform(0.3, 1.0, 2000)
    c = rng.uniform(size=2000) < q ** 1.3
    fine = CATALOG["smece"].values(q, c, None)
    coarse = CATALOG["smece"].values(q, c, None, resample=True)
    expected = smooth.smooth_ece(q, c, **catalog.SMOOTH_RESAMPLE)
    assert coarse == {"smece": expected.value, "smece_sigma": expected.sigma}
    assert coarse["smece"] == pytest.approx(fine["smece"], rel=1e-4)


# ------------------------------------------------------------------ each key keeps its own properties
def test_each_key_of_a_joint_computation_keeps_its_own_entry():
    smece, sigma = CATALOG["smece"], CATALOG["smece_sigma"]
    assert smece.gives == sigma.gives == ("smece", "smece_sigma")
    assert smece.compute is sigma.compute and smece.resample is sigma.resample
    assert [m.gives for m in catalog.computations()].count(("smece", "smece_sigma")) == 1
    assert better("smece") == "lower" and better("smece_sigma") is None
    assert metric_label("smece") == "smooth ECE (%)" and metric_label("smece_sigma") == "smooth ECE σ*"
    assert catalog.has_interval("smece") and catalog.has_interval("smece_sigma")


def test_joint_entries_are_added_together_in_order():
    def pair(q, y, o):
        return 0.0, 1.0

    first, second = catalog.jointly(Metric("pair_a", "a"), Metric("pair_b", "b"), compute=pair)
    with pytest.raises(ValueError, match="together, in order"):
        catalog.add(second)  # its computation's first entry is not in the catalog
    with pytest.raises(ValueError, match="together, in order"):
        catalog.add(Metric("pair_c", "c", compute=pair, keys=("pair_a", "pair_b")))  # not one of its keys
    assert "pair_b" not in CATALOG and "pair_c" not in CATALOG
    assert first.values(np.array([0.5]), np.array([True]), None) == {"pair_a": 0.0, "pair_b": 1.0}
    short = Metric("x", "x", compute=lambda q, y, o: (1.0,), keys=("x", "y"))
    with pytest.raises(ValueError):  # a function that does not give one value per key
        short.values(np.array([0.5]), np.array([True]), None)


# ------------------------------------------------------------------ a joint entry flows everywhere
GAP_CALLS = []


def gap_and_sign(confidence, correct, options):
    """|mean confidence - accuracy| and its sign: two keys from one computation, written for this test."""
    GAP_CALLS.append(np.asarray(confidence).size)
    difference = float(np.mean(confidence)) - float(np.mean(correct))
    return abs(difference), float(np.sign(difference))


@pytest.fixture
def gap_pair():
    entries = catalog.jointly(Metric("gap2", "confidence gap"),
                              Metric("gap2_sign", "sign of the gap", unit="num", lower_is_better=None),
                              compute=gap_and_sign)
    for entry in entries:
        catalog.add(entry)
    GAP_CALLS.clear()
    yield entries
    for entry in entries:
        CATALOG.pop(entry.key)


def test_a_joint_entry_added_to_the_catalog_flows_everywhere(gap_pair, tmp_path):
    logits, labels = make_logits(400, 4, 0)
    val_logits, val_labels = make_logits(200, 4, 1)
    options = selcal.Options(scores=SCORES)
    result = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=options)
    assert len(GAP_CALLS) == len(CALIBRATED)
    for name in CALIBRATED:
        gap, sign = gap_and_sign(result.confidences[name], result.rows.correct, None)
        assert (result.scores[name]["gap2"], result.scores[name]["gap2_sign"]) == (gap, sign)
    assert "gap2" not in result.scores["max_logit"]
    GAP_CALLS.clear()
    evaluation = selcal.EvaluationResult(models=[result], options=options)
    add_intervals(evaluation, resamples=6, seed=0)
    assert len(GAP_CALLS) == 6 * len(CALIBRATED)
    for name in CALIBRATED:
        assert set(result.scores[name]["ci"]) >= {"gap2", "gap2_sign"}
    path = tmp_path / "r.json"
    path.write_text(evaluation.to_json())
    out = CliRunner().invoke(app, ["check", str(path), "--baseline", str(path), "--all", "--json", "-"])
    assert out.exit_code in (0, 1), out.output
    judged = {row["metric"] for row in json.loads(out.stdout)["rows"]}
    assert {"msp.gap2", "temp.gap2"} <= judged
    assert not any(key.endswith("gap2_sign") for key in judged)  # no direction: reported, never judged
