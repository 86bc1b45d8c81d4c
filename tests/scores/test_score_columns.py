"""Scores read from columns of the TEST file: ``--score-col`` (a confidence, higher = more
confident) and ``--uncertainty-col`` (lower = more confident), evaluated on the same rows as
the logit scores; a confidence column with every value in [0, 1] is read as the probability
that the prediction is correct and also gets the calibration metrics."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from helpers import selective_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_calibration, ref_selective

import selcal  # noqa: E402
from selcal.api import Options, evaluate_arrays, measure_arrays  # noqa: E402
from selcal.errors import SelcalError  # noqa: E402

SELECTIVE = selective_keys()


def _selective(metrics: dict) -> dict:
    return {key: metrics[key] for key in SELECTIVE}


def test_a_confidence_column_by_hand():
    # five rows: correct, correct, wrong, correct, wrong; confidences 0.9 0.8 0.7 0.6 0.5 -> errors ranked 3rd and 5th
    logits = np.array([[2.0, 0.0]] * 5)
    labels = np.array([0, 0, 1, 0, 1])
    conf = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    result = measure_arrays(logits, labels, options=Options(scores=("msp",), score_cols=("conf",)),
                             columns={"conf": conf})
    metrics = result.scores["conf"]
    # r_k = 0, 0, 1/3, 1/4, 2/5 -> AURC = (0 + 0 + 1/3 + 1/4 + 2/5) / 5
    assert metrics["aurc"] == pytest.approx((1 / 3 + 1 / 4 + 2 / 5) / 5, rel=1e-15)
    assert metrics["auroc"] == pytest.approx(5 / 6, rel=1e-15)  # 5 of the 6 (correct, error) pairs ordered right
    assert metrics["probability_of_correct"] and metrics["orientation"] == "confidence"
    # ECE, 15 bins: each row alone in its bin -> mean |[correct] - q|
    assert metrics["ece"] == pytest.approx((0.1 + 0.2 + 0.7 + 0.4 + 0.5) / 5, rel=1e-12)


def test_columns_match_the_references(h):
    logits, labels = h.make_data(n=400, k=4, seed=11)
    rng = np.random.default_rng(1)
    conf = np.round(rng.random(400) * 32) / 32  # ties on purpose
    unc = np.round(rng.normal(size=400) * 8) / 8
    result = measure_arrays(logits, labels, options=Options(scores=("msp",), score_cols=("conf",),
                                                             uncertainty_cols=("unc",)),
                             columns={"conf": conf, "unc": unc})
    correct = result.rows.correct
    want = ref_selective.selective_metrics_reference(conf, correct)
    for key in SELECTIVE:
        assert result.scores["conf"][key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    assert result.scores["unc"]["aurc"] == pytest.approx(ref_selective.aurc_by_thresholds(-unc, correct), rel=1e-12)
    assert result.scores["conf"]["ece"] == pytest.approx(ref_calibration.ece(conf, correct, 15), rel=1e-12)
    assert result.scores["conf"]["aece"] == pytest.approx(ref_calibration.aece(conf, correct, 15), rel=1e-12)
    assert "ece" not in result.scores["unc"]


def test_a_column_outside_0_1_gets_no_calibration_metrics():
    logits = np.array([[1.0, 0.0]] * 4)
    result = measure_arrays(logits, np.array([0, 1, 0, 0]), options=Options(scores=("msp",), score_cols=("s",)),
                             columns={"s": np.array([0.2, 0.5, 1.5, 0.9])})
    assert "ece" not in result.scores["s"] and not result.scores["s"]["probability_of_correct"]


_grid = st.lists(st.integers(-40, 40), min_size=30, max_size=60)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(_grid, st.integers(0, 2**32 - 1), st.sampled_from(["affine", "cube", "exp2", "negate"]))
def test_a_strictly_monotone_transform_leaves_every_selective_metric_unchanged(values, seed, transform):
    x = np.array(values, dtype=np.float64) / 16  # a grid: the transforms below keep distinct values distinct
    n = x.size
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, 3))
    labels = np.where(rng.random(n) < 0.6, logits.argmax(axis=1), rng.integers(0, 3, n))
    f = {"affine": lambda v: 8 * v - 3, "cube": lambda v: v ** 3, "exp2": np.exp2, "negate": lambda v: -v}[transform]
    base = measure_arrays(logits, labels, options=Options(scores=("msp",), score_cols=("x",)), columns={"x": x})
    if transform == "negate":  # decreasing: the same column read as an uncertainty
        options = Options(scores=("msp",), uncertainty_cols=("x",))
    else:
        options = Options(scores=("msp",), score_cols=("x",))
    moved = measure_arrays(logits, labels, options=options, columns={"x": f(x)})
    assert _selective(moved.scores["x"]) == _selective(base.scores["x"])


def test_columns_are_read_from_parquet_and_npz_alike_and_streamed_alike(dumps, h):
    logits, labels = h.make_data(n=300, k=4, seed=12)
    conf = np.random.default_rng(2).random(300)
    unc = np.random.default_rng(3).normal(size=300)
    parquet = dumps.parquet("m.parquet", logits, labels, extra={"conf": pa.array(conf), "unc": pa.array(unc)},
                            row_group_size=64)
    npz = dumps.npz("m.npz", logits, labels, conf=conf, unc=unc)
    options = dict(scores=("msp", "max_logit"), score_cols=("conf",), uncertainty_cols=("unc",))
    results = [selcal.evaluate(path, stream=stream, **options).models[0].to_dict()
               for path, stream in ((parquet, False), (parquet, True), (npz, False))]
    for other in results[1:]:
        h.assert_same_numbers(results[0], other)
    assert results[0]["scores"]["conf"]["column"] == "conf"


def test_columns_follow_the_evaluation_rows(dumps, h):
    """With a split column and an ignored label, a column is cut exactly as the logits are."""
    logits, labels = h.make_data(n=200, k=4, seed=13)
    labels = labels.copy()
    labels[::10] = 255
    split = np.where(np.arange(200) % 3 == 0, "val", "test")
    conf = np.random.default_rng(4).random(200)
    path = dumps.parquet("m.parquet", logits, labels, split=split, extra={"conf": pa.array(conf)})
    model = selcal.evaluate(path, ignore_label=255, score_cols=("conf",)).models[0]
    keep = (labels != 255) & (split == "test")
    correct = logits[keep].argmax(axis=1) == labels[keep]
    assert model.n_eval == keep.sum()
    assert model.scores["conf"]["aurc"] == pytest.approx(ref_selective.aurc_by_thresholds(conf[keep], correct),
                                                         rel=1e-12)


@pytest.mark.parametrize("bad, message", [
    (np.nan, "column 'conf', row 5: holds NaN; store a finite number for every row"),
    (np.inf, "column 'conf', row 5: holds an infinite value; store a finite number for every row"),
    (None, "column 'conf', row 5: is empty (null); store a number for every row"),
])
def test_bad_values_are_refused_in_one_line(cli, dumps, h, bad, message):
    logits, labels = h.make_data(n=20, k=3, seed=14)
    values = [0.5] * 20
    values[5] = bad
    path = dumps.parquet("m.parquet", logits, labels, extra={"conf": pa.array(values, type=pa.float64())})
    result = cli("evaluate", path, "--scores", "msp", "--score-col", "conf")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"selcal: error: {path}: {message}"]
    npz = dumps.npz("m.npz", logits, labels, conf=np.array([np.nan if v is None else v for v in values]))
    result = cli("evaluate", npz, "--scores", "msp", "--uncertainty-col", "conf")
    assert result.exit_code == 2 and "column 'conf', row 5: holds" in result.stderr


def test_missing_and_non_numeric_columns_and_clashing_names(cli, dumps, h):
    logits, labels = h.make_data(n=20, k=3, seed=15)
    path = dumps.parquet("m.parquet", logits, labels, extra={"name": pa.array(["a"] * 20)})
    for args, expected in (
        (["--score-col", "nope"], f"{path}: no column 'nope'"),
        (["--score-col", "name"], f"{path}: column 'name': has type string; expected one number per row"),
        (["--score-col", "msp"], "score column 'msp' has the name of a chosen score"),
        (["--score-col", "a", "--uncertainty-col", "a"], "score column 'a': give each column once"),
    ):
        result = cli("evaluate", path, "--scores", "msp", *args)
        assert result.exit_code == 2, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"selcal: error: {expected}"), lines


def test_cli_json_table_and_bootstrap_with_columns(cli, dumps, h):
    logits, labels = h.make_data(n=300, k=4, seed=16)
    conf = np.random.default_rng(5).random(300)
    path = dumps.parquet("m.parquet", logits, labels, extra={"conf": pa.array(conf), "u": pa.array(-conf)})
    out = cli.json(path, "--scores", "msp", "--score-col", "conf", "--uncertainty-col", "u")
    scores = out["models"][0]["scores"]
    assert list(scores) == ["msp", "conf", "u"]
    assert _selective(scores["conf"]) == _selective(scores["u"])  # u = -conf: the same ranking
    assert out["options"]["score_cols"] == ["conf"]
    table = cli("evaluate", path, "--scores", "msp", "--score-col", "conf", "--bootstrap", "20")
    assert table.exit_code == 0, table.stderr
    assert "read as the probability that the prediction is correct" in " ".join(table.stdout.split())


def test_options_refuse_an_empty_column_name():
    with pytest.raises(SelcalError):
        Options(score_cols=("",))


def test_a_score_column_without_values_is_one_clear_error():
    logits = np.array([[1.0, 0.0]] * 4)
    with pytest.raises(SelcalError, match="score column 'c': no values were given for it"):
        evaluate_arrays(logits, np.array([0, 1, 0, 0]), options=Options(scores=("msp",), score_cols=("c",)))


def test_selcal_check_takes_bounds_on_a_score_column(cli, dumps, h, tmp_path):
    logits, labels = h.make_data(n=200, k=4, seed=17)
    conf = np.random.default_rng(6).random(200)
    path = dumps.parquet("m.parquet", logits, labels, extra={"conf": pa.array(conf)})
    report = tmp_path / "r.json"
    assert cli("evaluate", path, "--scores", "msp", "--score-col", "conf", "--json", report).exit_code == 0
    aurc = selcal.evaluate(path, scores="msp", score_cols=("conf",)).models[0].scores["conf"]["aurc"]
    assert cli("check", report, "--max", f"conf.aurc={aurc * 1.01}").exit_code == 0
    assert cli("check", report, "--max", f"conf.aurc={aurc * 0.99}").exit_code == 1
