"""The papers' remaining diagnostics: top-5 accuracy, MbLS's adaptive ECE, the most confident
errors, sweeps across runs, sorted-logit profiles. Each number against a brute-force loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import selcal
from selcal.api import in_top_k
from selcal.report import leaderboard, leaderboard_csv, leaderboard_markdown


# ------------------------------------------------------------------------- top-5
def brute_top_k(logits, labels, k):
    """The label's position in each row sorted high to low, ties to the lower index, by a loop."""
    out = []
    for row, label in zip(logits.tolist(), labels.tolist()):
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        out.append(order.index(label) < k)
    return np.array(out, dtype=bool)


def tied_logits(rng, n, k, levels=3):
    """Logits on a coarse grid: most rows have ties, many of them around the label."""
    return rng.integers(0, levels, size=(n, k)).astype(np.float64)


@pytest.mark.parametrize("k_classes", [5, 6, 9, 40])
@pytest.mark.parametrize("levels", [2, 3, 1000])
def test_top_k_matches_a_sort_of_every_row(k_classes, levels):
    rng = np.random.default_rng(k_classes * levels)
    logits = tied_logits(rng, 400, k_classes, levels)
    labels = rng.integers(0, k_classes, 400)
    for k in (1, 2, 5):
        assert np.array_equal(in_top_k(logits, labels, k), brute_top_k(logits, labels, k))
        # given the argmax, its rows are not compared: the same answer, ties toward the lower index included
        assert np.array_equal(in_top_k(logits, labels, k, pred=logits.argmax(axis=1)), brute_top_k(logits, labels, k))


def test_top_1_is_argmax_correctness():
    rng = np.random.default_rng(3)
    logits = tied_logits(rng, 500, 7, 2)
    labels = rng.integers(0, 7, 500)
    assert np.array_equal(in_top_k(logits, labels, 1), logits.argmax(axis=1) == labels)


@settings(max_examples=60, deadline=None)
@given(st.integers(5, 12), st.integers(1, 30), st.integers(0, 2**31), st.integers(1, 6))
def test_top5_property(k_classes, n, seed, levels):
    rng = np.random.default_rng(seed)
    logits = tied_logits(rng, n, k_classes, levels)
    labels = rng.integers(0, k_classes, n)
    assert np.array_equal(in_top_k(logits, labels, 5), brute_top_k(logits, labels, 5))
    assert np.array_equal(in_top_k(logits, labels, 5, pred=logits.argmax(axis=1)), brute_top_k(logits, labels, 5))


def _arrays(rng, n, k, sharp=1.0, levels=None):
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) if levels is None else tied_logits(rng, n, k, levels)
    logits[np.arange(n), labels] += sharp
    return logits, labels


def test_top5_accuracy_in_the_result_json_and_leaderboard():
    rng = np.random.default_rng(0)
    logits, labels = _arrays(rng, 1200, 12, sharp=0.5, levels=4)
    model = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp", "max_logit"), chunk_rows=37))
    expected = brute_top_k(logits, labels, 5).mean()
    assert model.top5_accuracy == expected
    assert model.models[0].to_dict()["top5_accuracy"] == expected
    keys = list(model.models[0].to_dict())
    assert keys.index("top5_accuracy") == keys.index("accuracy") + 1
    result = selcal.EvaluationResult(models=[model], options=selcal.Options())
    row = leaderboard(result, "top5_accuracy")[0]
    assert row["top5_accuracy"] == expected
    assert "top-5" in leaderboard_markdown([row])
    assert "top5_accuracy" in leaderboard_csv([row]).splitlines()[0]


def test_top5_accuracy_is_absent_below_five_classes():
    rng = np.random.default_rng(1)
    logits, labels = _arrays(rng, 300, 4)
    model = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp",)))
    assert model.top5_accuracy is None and "top5_accuracy" not in model.models[0].to_dict()


@pytest.mark.slow
def test_top5_accuracy_on_a_sample_dump_streamed_and_in_memory():
    path = "sample_logits/netcal_densenetbc100c100.parquet"  # log-probabilities: exact ties at 0
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    test = table.filter(np.asarray(table.column("split").to_pylist()) == "test")
    logits = np.asarray(test.column("logits").to_pylist(), dtype=np.float32).astype(np.float64)
    labels = np.asarray(test.column("label").to_pylist())
    expected = brute_top_k(logits, labels, 5).mean()
    options = selcal.Options(scores=("msp",))
    in_memory = selcal.evaluate(path, options=options, stream=False).models[0]
    streamed = selcal.evaluate(path, options=options, stream=True).models[0]
    assert in_memory.top5_accuracy == streamed.top5_accuracy == expected


# ------------------------------------------------------------------- MbLS's AECE
def mbls_code_aece(confidences, accuracies, nbins=15):
    """The MbLS evaluation code's AdaptiveECELoss.forward, transcribed line by line (numpy, float64)."""
    def histedges_equal_n(x):
        npt = len(x)
        return np.interp(np.linspace(0, npt, nbins + 1), np.arange(npt), np.sort(x))

    n, bin_boundaries = np.histogram(confidences, histedges_equal_n(confidences))
    bin_lowers = bin_boundaries[:-1]
    bin_uppers = bin_boundaries[1:]
    ece = 0.0
    for bin_lower, bin_upper in zip(bin_lowers, bin_uppers):
        in_bin = (confidences > bin_lower) * (confidences <= bin_upper)
        prop_in_bin = in_bin.astype(float).mean()
        if prop_in_bin > 0:
            accuracy_in_bin = accuracies[in_bin].astype(float).mean()
            avg_confidence_in_bin = confidences[in_bin].mean()
            ece += abs(avg_confidence_in_bin - accuracy_in_bin) * prop_in_bin
    return ece


@pytest.mark.parametrize("n, n_bins, levels", [(1, 15, None), (2, 15, None), (7, 3, None), (100, 15, None),
                                               (1000, 15, None), (1000, 15, 7), (333, 10, 3), (50, 1, None)])
def test_mbls_aece_matches_the_transcribed_code(n, n_bins, levels):
    from selcal.metrics.calibration import mbls_adaptive_calibration_error

    rng = np.random.default_rng(n + n_bins)
    q = rng.uniform(0.1, 1.0, n) if levels is None else rng.integers(1, levels + 1, n) / levels
    correct = rng.random(n) < q
    assert mbls_adaptive_calibration_error(q, correct, n_bins) == pytest.approx(
        mbls_code_aece(q, correct, n_bins), rel=1e-12, abs=1e-15)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.booleans()), min_size=1, max_size=60), st.integers(1, 8))
def test_mbls_aece_property(rows, n_bins):
    from selcal.metrics.calibration import mbls_adaptive_calibration_error

    q = np.array([r[0] for r in rows]) / 8.0
    correct = np.array([r[1] for r in rows])
    assert mbls_adaptive_calibration_error(q, correct, n_bins) == pytest.approx(
        mbls_code_aece(q, correct, n_bins), rel=1e-12, abs=1e-15)


def test_the_least_confident_sample_is_in_no_bin():
    from selcal.metrics.calibration import mbls_adaptive_calibration_error

    # Only the least confident sample is badly calibrated: MbLS's estimator does not see it.
    q = np.array([0.01, 0.5, 0.5, 0.9, 0.9])
    correct = np.array([True, True, False, True, False])
    assert mbls_adaptive_calibration_error(q, correct, 2) == pytest.approx(0.4 * 2 / 5)
    # Equal-mass groups {0.01, 0.5, 0.5} and {0.9, 0.9} count it: (|2 - 1.01| + |1 - 1.8|) / 5.
    assert selcal.metrics.calibration.adaptive_calibration_error(q, correct, 2) == pytest.approx((0.99 + 0.8) / 5)


def test_aece_estimator_option_changes_aece_only():
    rng = np.random.default_rng(5)
    logits, labels = _arrays(rng, 900, 6, sharp=1.0)
    val_logits, val_labels = _arrays(rng, 400, 6, sharp=1.0)
    default = selcal.evaluate_arrays(logits, labels, val_logits, val_labels)
    mbls = selcal.evaluate_arrays(logits, labels, val_logits, val_labels,
                                  options=selcal.Options(aece_estimator="mbls"))
    for name in ("msp", "temp"):
        q = np.exp(mbls.score_values[name])
        assert mbls.scores[name]["aece"] == pytest.approx(mbls_code_aece(q, mbls.rows.correct), rel=1e-12)
        assert default.scores[name]["aece"] == selcal.metrics.calibration.adaptive_calibration_error(q, default.rows.correct)
        assert {k: v for k, v in mbls.scores[name].items() if k != "aece"} == \
            {k: v for k, v in default.scores[name].items() if k != "aece"}
    with pytest.raises(selcal.SelcalError, match="aece_estimator"):
        selcal.Options(aece_estimator="nope")


def test_aece_estimator_on_the_command_line(cli):
    path = "sample_logits/calibrator_cifar10_resnet50_ce.parquet"
    out = cli.json(path, "--scores", "msp", "--aece-estimator", "mbls")
    assert out["options"]["aece_estimator"] == "mbls"
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    test = np.asarray(table.column("split").to_pylist()) == "test"
    logits = np.asarray(table.column("logits").to_pylist(), dtype=np.float32)[test].astype(np.float64)
    labels = np.asarray(table.column("label").to_pylist())[test]
    q = np.exp(selcal.scores.log_msp(logits))
    assert out["models"][0]["scores"]["msp"]["aece"] == pytest.approx(
        mbls_code_aece(q, logits.argmax(1) == labels), rel=1e-12)
    bad = cli("evaluate", path, "--aece-estimator", "x")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "aece-estimator" in bad.stderr


# ------------------------------------------------------------ most confident errors
def brute_confident_errors(score, correct, ids, top):
    """(id, score, rank percentile) of the top errors, by loops over all rows."""
    n = len(score)
    errors = [i for i in range(n) if not correct[i]]
    errors.sort(key=lambda i: (-score[i], ids[i]))
    out = []
    for i in errors[:top]:
        higher = sum(1 for j in range(n) if score[j] > score[i])
        equal = sum(1 for j in range(n) if score[j] == score[i])
        out.append((ids[i], score[i], 100.0 * (higher + (equal + 1) / 2) / n))
    return out


def _check_errors_table(model, ids, labels, logits, top):
    for name, table in model.confident_errors.items():
        score = model.score_values[name]
        expected = brute_confident_errors(score.tolist(), model.rows.correct.tolist(), list(ids), top)
        assert len(table) == len(expected)
        assert [str(i) for i in table.id] == [str(e[0]) for e in expected]
        probability = name in ("msp", "temp") or (name == "pnorm" and model.scores["pnorm"]["fallback"])
        for row, (_, value, percentile) in enumerate(expected):
            assert table.confidence[row] == (np.exp(value) if probability else value)
            assert table.rank_percentile[row] == pytest.approx(percentile, rel=1e-12)
        position = table.position
        assert np.array_equal(table.label, labels[position])
        assert np.array_equal(table.prediction, logits[position].argmax(axis=1))
        assert not np.any(table.label == table.prediction)


def test_confident_errors_match_a_loop_over_every_row():
    rng = np.random.default_rng(11)
    logits, labels = _arrays(rng, 700, 5, sharp=1.0, levels=6)  # coarse logits: many tied scores
    val_logits, val_labels = _arrays(rng, 300, 5, sharp=1.0, levels=6)
    ids = np.array([f"row{(i * 7919) % 700:04d}" for i in range(700)])
    model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, ids=ids,
                                   options=selcal.Options(errors_top=25, chunk_rows=64))
    assert set(model.confident_errors) == set(model.scores)
    _check_errors_table(model, ids, labels, logits, 25)
    plain = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=selcal.Options(errors_top=5))
    _check_errors_table(plain, np.arange(700), labels, logits, 5)
    none = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, options=selcal.Options(errors_top=0))
    assert none.confident_errors == {} and none.rows.pred is None


def test_confident_errors_do_not_depend_on_row_order():
    rng = np.random.default_rng(12)
    logits, labels = _arrays(rng, 500, 6, sharp=0.5, levels=4)
    ids = np.array([f"r{i}" for i in range(500)])
    order = rng.permutation(500)
    options = selcal.Options(scores=("msp", "max_logit"), errors_top=30)
    a = selcal.evaluate_arrays(logits, labels, ids=ids, options=options)
    b = selcal.evaluate_arrays(logits[order], labels[order], ids=ids[order], options=options)
    for name in a.confident_errors:
        ta, tb = a.confident_errors[name], b.confident_errors[name]
        assert ta.id.tolist() == tb.id.tolist()
        assert np.array_equal(ta.confidence, tb.confidence) and np.array_equal(ta.rank_percentile, tb.rank_percentile)


def test_row_numbers_name_the_file_rows_streamed_or_not(dumps):
    rng = np.random.default_rng(13)
    logits, labels = _arrays(rng, 600, 5, sharp=1.0)
    split = np.where(rng.random(600) < 0.3, "val", "test")
    path = dumps.parquet("noid.parquet", logits, labels, split=split)
    options = selcal.Options(errors_top=10)
    a = selcal.evaluate(str(path), options=options, stream=False).models[0]
    b = selcal.evaluate(str(path), options=options, stream=True).models[0]
    stored = np.asarray(logits, dtype=np.float32).astype(np.float64)
    for name, table in a.confident_errors.items():
        other = b.confident_errors[name]
        assert table.id.tolist() == other.id.tolist()
        rows = table.id.astype(np.int64)
        assert np.all(split[rows] == "test")
        assert np.array_equal(labels[rows], table.label)
        assert np.array_equal(stored[rows].argmax(axis=1), table.prediction)
    test_rows = np.flatnonzero(split == "test")
    _check_errors_table(a, test_rows, labels[test_rows], stored[test_rows], 10)


@pytest.mark.slow
def test_errors_csv_on_the_command_line(cli, tmp_path):
    import csv

    path = "sample_logits/lspair_alpha0.1.parquet"
    out = tmp_path / "errors.csv"
    done = cli("evaluate", path, "sample_logits/lspair_alpha0.parquet", "--errors-csv", out, "--errors-top", "4", "-q")
    assert done.exit_code == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == ["model", "score", "rank", "id", "label", "prediction", "confidence", "rank_percentile"]
    assert len(rows) == 2 * 4 * 4
    model = selcal.evaluate(path).models[0]
    table = model.confident_errors["msp"]
    mine = [r for r in rows if r["model"] == "lspair_alpha0.1" and r["score"] == "msp"]
    assert [r["rank"] for r in mine] == ["1", "2", "3", "4"]
    assert [r["id"] for r in mine] == table.id[:4].tolist()
    assert [float(r["confidence"]) for r in mine] == table.confidence[:4].tolist()
    assert [float(r["rank_percentile"]) for r in mine] == table.rank_percentile[:4].tolist()
    bad = cli("evaluate", path, "--errors-top", "-1")
    assert bad.exit_code == 2 and "errors-top" in bad.stderr and bad.stderr.count("\n") == 1


def test_the_report_lists_the_confident_errors_escaped():
    from selcal.report.html import render_report

    rng = np.random.default_rng(14)
    logits, labels = _arrays(rng, 300, 6, sharp=0.5)
    ids = np.array([f"<img src=x>{i}" for i in range(300)])
    model = selcal.evaluate_arrays(logits, labels, ids=ids, options=selcal.Options(scores=("msp",), errors_top=3))
    page = render_report(selcal.EvaluationResult(models=[model], options=selcal.Options()), [])
    assert "Most confident errors" in page and "<img src=x>" not in page
    assert page.count("&lt;img src=x&gt;") == 3
    assert f"{model.confident_errors['msp'].rank_percentile[0]:.3f}" in page
    assert "top-5 accuracy" in page


# ------------------------------------------------------------------------- sweeps
from selcal.metrics import diagnostics  # noqa: E402


@pytest.mark.parametrize("path, name, value", [
    ("runs/lspair_alpha0.1.parquet", "alpha", 0.1), ("runs/lspair_alpha0.parquet", "alpha", 0.0),
    ("runs/alpha=0.05/test.parquet", "alpha", 0.05), ("runs/m_alpha_0.2_seed1.npz", "alpha", 0.2),
    ("wd=-1e-3.parquet", "wd", -0.001), ("a/lr-0.1.parquet", "lr", 0.1), ("a/lr_1e-4-seed_2.parquet", "seed", 2.0),
    ("runs/alphabet3.parquet", "alpha", None), ("runs/xalpha0.3.parquet", "alpha", None),
    ("runs/alpha.parquet", "alpha", None), ("runs/alpha_x.parquet", "alpha", None),
])
def test_sweep_value_from_the_file_name(path, name, value):
    assert diagnostics.sweep_value_from_name(path, name) == value


def test_sweep_value_refusals():
    with pytest.raises(selcal.SelcalError, match="alpha = 0 and 0.1"):
        diagnostics.sweep_value_from_name("alpha0/m_alpha0.1.parquet", "alpha")
    with pytest.raises(selcal.SelcalError, match="no metadata key 'beta'"):
        diagnostics.sweep_value("m_alpha0.1.parquet", "beta", {})
    with pytest.raises(selcal.SelcalError, match="not a number"):
        diagnostics.sweep_value("m.parquet", "alpha", {"alpha": "high"})
    assert diagnostics.sweep_value("m_alpha0.1.parquet", "alpha", {"alpha": " 0.3 "}) == 0.3  # metadata first


@pytest.mark.slow
def test_sweep_from_metadata_and_names_on_the_command_line(cli, dumps, tmp_path):
    import pyarrow as pa

    rng = np.random.default_rng(21)
    fast = ("--scores", "msp,max_logit")
    paths = []
    for i, alpha in enumerate((0.2, 0.0, 0.05)):
        logits, labels = _arrays(rng, 300, 5, sharp=1.0 + i)
        split = np.where(np.arange(300) < 100, "val", "test")
        if i == 0:  # the value in the metadata (the name says nothing)
            path = dumps.table("first.parquet", {
                "logits": pa.array(logits.tolist(), type=pa.list_(pa.float32())), "label": pa.array(labels),
                "split": pa.array(split.tolist())}, metadata={"alpha": str(alpha)})
        else:
            path = dumps.parquet(f"run_alpha{alpha:g}.parquet", logits, labels, split=split)
        paths.append(path)
    out = cli.json(*paths, "--sweep", "alpha", *fast)
    assert [m["sweep"] for m in out["models"]] == [{"alpha": 0.2}, {"alpha": 0.0}, {"alpha": 0.05}]
    board = cli("evaluate", *paths, *fast, "--sweep", "alpha", "--sort-by", "alpha", "--csv", "-")
    assert board.exit_code == 0, board.stderr
    lines = board.stdout.splitlines()
    assert lines[0].startswith("model,alpha,accuracy")
    assert [line.split(",")[1] for line in lines[1:]] == ["0.0", "0.05", "0.2"]
    markdown = cli("evaluate", *paths, *fast, "--sweep", "alpha", "--markdown", "-")
    assert markdown.stdout.splitlines()[0].startswith("| model | alpha |")
    plots = tmp_path / "figs"
    done = cli("evaluate", *paths[1:], "--sweep", "alpha", "--plots", plots, "-q", *fast)
    assert done.exit_code == 0, done.stderr
    assert (plots / "sweep_alpha.png").stat().st_size > 1000
    bad = cli("evaluate", *paths, *fast, "--sweep", "beta")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "first.parquet" in bad.stderr
    clash = cli("evaluate", *paths, *fast, "--sweep", "accuracy")
    assert clash.exit_code == 2 and clash.stderr.count("\n") == 1


def test_sweep_series_reads_every_number_from_the_models():
    rng = np.random.default_rng(22)
    models = []
    for i, alpha in enumerate((0.1, 0.0, 0.1, 2.0)):
        logits, labels = _arrays(rng, 400, 5, sharp=1.0 + 0.3 * i)
        val_logits, val_labels = _arrays(rng, 200, 5, sharp=1.0 + 0.3 * i)
        model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name=f"m{i}",
                                       options=selcal.Options(scores=("msp", "pnorm", "temp")))
        model.extra["sweep"] = {"alpha": alpha}
        models.append(model)
    series = diagnostics.sweep_series(models, "alpha")
    assert series.x.tolist() == [0.0, 0.1, 0.1, 2.0] and series.models == ["m1", "m0", "m2", "m3"]
    assert series.log_x == "symlog"  # 0 included, the nonzero values span a factor 20
    by_key = {panel.key: panel for panel in series.panels}
    assert set(by_key) == {"accuracy", "aurc", "cov@0.01", "cov@0.05", "cov@0.1", "ece", "aece"}
    ordered = [models[1], models[0], models[2], models[3]]
    assert by_key["accuracy"].lines["accuracy"].tolist() == [m.accuracy for m in ordered]
    for score in ("msp", "pnorm", "temp"):
        assert by_key["aurc"].lines[score].tolist() == [m.scores[score]["aurc"] for m in ordered]
        assert by_key["cov@0.05"].lines[score].tolist() == [m.scores[score]["cov@0.05"] for m in ordered]
    assert by_key["ece"].lines["before T (msp)"].tolist() == [m.scores["msp"]["ece"] for m in ordered]
    assert by_key["aece"].lines["after T (temp)"].tolist() == [m.scores["temp"]["aece"] for m in ordered]
    assert diagnostics.sweep_axis([0.001, 0.01, 0.1]) == "log" and diagnostics.sweep_axis([1, 5, 10]) is None


def test_the_sweep_lines_of_ece_take_their_scores_colours_from_the_registry(monkeypatch):
    """The ECE panels' lines were coloured by their label's first word ('after' -> temp's colour,
    'before' -> msp's): an entry whose sweep_label says otherwise drew in grey."""
    from dataclasses import replace

    from selcal.figures.base import score_colour
    from selcal.figures.sweep import figure_sweep
    from selcal.scores import REGISTRY

    shown = replace(REGISTRY["temp"].display, sweep_label="calibrated", colour="#123456")
    monkeypatch.setitem(REGISTRY, "temp", replace(REGISTRY["temp"], display=shown))
    rng = np.random.default_rng(5)
    models = []
    for i, alpha in enumerate((0.0, 0.1)):
        logits, labels = _arrays(rng, 300, 4, sharp=1.0 + 0.5 * i)
        val_logits, val_labels = _arrays(rng, 150, 4, sharp=1.0 + 0.5 * i)
        model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name=f"m{i}",
                                       options=selcal.Options(scores=("msp", "temp")))
        model.extra["sweep"] = {"alpha": alpha}
        models.append(model)
    series = diagnostics.sweep_series(models, "alpha")
    ece = next(panel for panel in series.panels if panel.key == "ece")
    assert ece.scores == {"before T (msp)": "msp", "calibrated": "temp"}
    figure = figure_sweep(series)
    axes = figure.axes[[panel.key for panel in series.panels].index("ece")]
    colours = {line.get_label(): line.get_color() for line in axes.get_lines() if not line.get_label().startswith("_")}
    assert colours == {"before T (msp)": score_colour("msp"), "calibrated": "#123456"}


# ------------------------------------------------------------ sorted-logit profile
def test_sorted_logit_profile_matches_a_loop():
    rng = np.random.default_rng(23)
    logits = rng.normal(scale=3.0, size=(300, 30))
    correct = rng.random(300) < 0.7
    top = diagnostics.top_sorted_logits(logits)
    assert top.shape == (300, 20)
    for i in range(0, 300, 37):
        assert top[i].tolist() == sorted(logits[i].tolist(), reverse=True)[:20]
    profile = diagnostics.sorted_logit_profile(top, correct, 3)
    assert list(profile.correct) == ["v", "v^3", "exp(v)"]
    for subset, mask in ((profile.correct, correct), (profile.incorrect, ~correct)):
        for label, transform in (("v", lambda x: x), ("v^3", lambda x: x ** 3), ("exp(v)", math.exp)):
            for rank in (0, 4, 19):
                values = [transform(sorted(row, reverse=True)[rank]) for row in logits[mask].tolist()]
                mean = sum(values) / len(values)
                std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
                assert subset[label].mean[rank] == pytest.approx(mean, rel=1e-10)
                assert subset[label].std[rank] == pytest.approx(std, rel=1e-9, abs=1e-12)
            assert subset[label].count == mask.sum()
    few = diagnostics.sorted_logit_profile(diagnostics.top_sorted_logits(logits[:, :4]), np.ones(300, bool), 2)
    assert few.ranks.tolist() == [1, 2, 3, 4] and few.incorrect["v"].count == 0


def test_the_profile_sample_is_every_row_or_a_hash_sample(monkeypatch):
    rng = np.random.default_rng(24)
    logits, labels = _arrays(rng, 2000, 7, sharp=1.0)
    options = selcal.Options(scores=("msp", "max_logit"), logit_profile=True, chunk_rows=300)
    model = selcal.evaluate_arrays(logits, labels, options=options)
    assert np.array_equal(model.rows.profile, -np.sort(-logits, axis=1))
    assert np.array_equal(model.rows.profile_correct, logits.argmax(1) == labels)
    monkeypatch.setattr(diagnostics, "PROFILE_ROWS", 500)
    sampled = selcal.evaluate_arrays(logits, labels, options=options)
    order = rng.permutation(2000)
    shuffled = selcal.evaluate_arrays(logits[order], labels[order], options=options)
    assert 350 < sampled.rows.profile.shape[0] < 650
    as_set = lambda m: sorted(map(tuple, m.rows.profile.tolist()))  # noqa: E731
    assert as_set(sampled) == as_set(shuffled)  # the same rows, whatever the order
    plain = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp",)))
    assert plain.rows.profile is None


def brute_pnorm_given_vmax(msp, vmax, score, lo, hi, width, step, min_count):
    inside = [i for i in range(len(msp)) if lo < msp[i] <= hi]
    v = [vmax[i] for i in inside]
    mean = sum(v) / len(v)
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
    kept = [i for i in inside if abs(vmax[i] - mean) <= 2 * std]
    low, high = min(vmax[i] for i in kept), max(vmax[i] for i in kept)
    out = []
    start = low
    while True:
        last = start + width >= high
        members = [score[i] for i in kept if start <= vmax[i] < start + width or (last and start <= vmax[i])]
        if len(members) >= min_count:
            m = sum(members) / len(members)
            out.append((start + width / 2, m, math.sqrt(sum((x - m) ** 2 for x in members) / len(members))))
        else:
            out.append((start + width / 2, None, None))
        if last:
            return len(kept), out
        start += step


def test_pnorm_given_vmax_matches_a_loop():
    rng = np.random.default_rng(25)
    n = 3000
    msp = rng.uniform(0.3, 1.0, n)
    vmax = rng.normal(3.0, 1.0, n) + 2 * msp
    score = rng.uniform(0, 1, n)
    bins = diagnostics.pnorm_given_vmax(msp, vmax, score, width=0.3, step=0.1, min_count=5)
    assert [(b.lo, b.hi) for b in bins] == list(diagnostics.MSP_BINS)
    for b in bins:
        n_kept, expected = brute_pnorm_given_vmax(msp.tolist(), vmax.tolist(), score.tolist(), b.lo, b.hi, 0.3, 0.1, 5)
        assert b.n_kept == n_kept and len(b.centre) == len(expected)
        for i, (centre, mean, std) in enumerate(expected):
            assert b.centre[i] == pytest.approx(centre, abs=1e-9)
            if mean is None:
                assert np.isnan(b.mean[i])
            else:
                assert b.mean[i] == pytest.approx(mean, rel=1e-9) and b.std[i] == pytest.approx(std, rel=1e-8, abs=1e-12)
    empty = diagnostics.pnorm_given_vmax(msp, vmax, score, bins=((0.0, 0.1),))
    assert empty[0].n_bin == 0 and empty[0].centre.size == 0


@pytest.mark.slow
def test_diagnostic_figures_are_drawn_with_hostile_names():
    import matplotlib

    from selcal import figures as plots

    rng = np.random.default_rng(26)
    models = []
    for i, name in enumerate(("$\\alpha$ run", "b_$x")):
        logits, labels = _arrays(rng, 500, 8, sharp=1.0 + i)
        val_logits, val_labels = _arrays(rng, 300, 8, sharp=1.0 + i)
        model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name=name,
                                       options=selcal.Options(scores=("msp", "pnorm"), logit_profile=True))
        model.extra["sweep"] = {"$a": float(i)}
        models.append(model)
    diagnostic = ("sweep", "logit_profile", "pnorm_vmax")
    jobs = plots.plan_figures(selcal.EvaluationResult(models=models), kinds=diagnostic)
    assert [job.kind for job in jobs if job.model is None] == ["sweep_a", "overlay_logit_profile"]
    for model in models:
        assert [job.kind for job in jobs if job.model == model.name] == ["logit_profile", "pnorm_vmax"]
    for job in jobs:
        with matplotlib.rc_context(plots.base.STYLE):
            chosen = [models[i] for i in job.models]
            figure = job.draw(chosen if job.many else chosen[0], **job.options)
            texts = [t.get_text() for t in figure.findobj(matplotlib.text.Text)]
            assert len(plots.base.render(figure, "png")) > 1000
        assert not any("$\\alpha$" in t and "\\$" not in t for t in texts)  # user text escaped


def test_confident_errors_of_segmentation_pixels_name_their_image(tmp_path, cli):
    from helpers import brute_force_rows, make_folder

    items = make_folder(tmp_path / "seg")
    logits, labels, ids = brute_force_rows(items)
    model = selcal.evaluate(str(tmp_path / "seg"), pixels_per_image=0, scores=("msp", "max_logit"),
                            errors_top=7).models[0]
    for name, table in model.confident_errors.items():
        assert table.image is not None and len(table) == 7
        rows = table.id.astype(np.int64)  # row numbers among the labelled pixels, in file order
        assert [i.split("/")[0] for i in ids[rows]] == [str(image) for image in table.image]
        assert np.array_equal(labels[rows], table.label)
        assert np.array_equal(logits[rows].argmax(axis=1), table.prediction)
    done = cli("evaluate", tmp_path / "seg", "--pixels-per-image", "0", "--scores", "msp", "--errors-csv", "-",
               "--errors-top", "2")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(",rank_percentile,image")


# ---------------------------------------------------------- the label-smoothing sweep
LS_SWEEP = [f"sample_logits/lspair_alpha{a}.parquet" for a in ("0", "0.05", "0.1", "0.2")]


def test_the_label_smoothing_sweep_of_the_sample_dumps():
    from pathlib import Path

    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in LS_SWEEP]
    for table, alpha in zip(tables, ("0", "0.05", "0.1", "0.2")):
        assert table.schema.metadata[b"selcal.label_smoothing"].decode() == alpha
        assert table.column("id").equals(tables[0].column("id")) and table.column("label").equals(tables[0].column("label"))
    assert sum(Path(p).stat().st_size for p in LS_SWEEP) < 4 * 1024 * 1024
    result = selcal.evaluate(LS_SWEEP, scores=("msp", "pnorm"), sweep="alpha", errors_top=0)
    assert [m.extra["sweep"]["alpha"] for m in result.models] == [0.0, 0.05, 0.1, 0.2]
    ce, *smoothed = result.models
    for model in smoothed:  # every LS model: lower error, worse MSP ranking, which the p-norm repairs
        assert model.error < ce.error
        assert model.scores["msp"]["aurc"] > ce.scores["msp"]["aurc"]
        assert model.scores["pnorm"]["aurc"] < model.scores["msp"]["aurc"]
    for model in smoothed[1:]:  # alpha 0.1 and 0.2: below the CE model's MSP (0.05: level with it)
        assert model.scores["pnorm"]["aurc"] < ce.scores["msp"]["aurc"]
    assert ce.scores["pnorm"]["fallback"]


def test_no_logit_profile_for_log_probabilities():
    from scipy.special import log_softmax

    from selcal import figures as plots

    rng = np.random.default_rng(27)
    logits, labels = _arrays(rng, 400, 6, sharp=1.0)
    val_logits, val_labels = _arrays(rng, 200, 6, sharp=1.0)
    model = selcal.evaluate_arrays(log_softmax(logits, axis=1), labels, log_softmax(val_logits, axis=1), val_labels,
                                   options=selcal.Options(scores=("msp", "pnorm"), logit_profile=True))
    notes = []
    diagnostic = ("logit_profile", "pnorm_vmax")
    assert plots.plan_figures(selcal.EvaluationResult(models=[model]), kinds=diagnostic, notes=notes) == []
    assert len(notes) == 1 and "log-probabilities" in notes[0]
    raw = selcal.evaluate_arrays(logits, labels, val_logits, val_labels,
                                 options=selcal.Options(scores=("msp", "pnorm"), logit_profile=True))
    jobs = plots.plan_figures(selcal.EvaluationResult(models=[raw]), kinds=diagnostic)
    assert [job.kind for job in jobs] == ["logit_profile", "pnorm_vmax"]


def test_bootstrap_gives_an_aece_interval_under_either_estimator():
    from selcal.bootstrap import add_intervals

    rng = np.random.default_rng(28)
    logits, labels = _arrays(rng, 300, 5, sharp=1.0)
    for estimator, has_interval in (("equal-mass", True), ("mbls", True)):  # issue 21: mbls keeps its interval
        options = selcal.Options(scores=("msp",), aece_estimator=estimator)
        model = selcal.evaluate_arrays(logits, labels, options=options)
        result = add_intervals(selcal.EvaluationResult(models=[model], options=options), resamples=20)
        ci = result.models[0].scores["msp"]["ci"]
        assert ("aece" in ci) == has_interval and "ece" in ci
