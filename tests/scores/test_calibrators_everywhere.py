"""The calibrators in every part of selcal (issue 26): refitted by --bootstrap-refit, judged by
check and compare like any score, refused in one line where they cannot be fitted, their
reported metrics recomputed from their reported parameters, and compared side by side (ECE,
smooth ECE, AURC with intervals) in the leaderboard and the HTML report."""

from __future__ import annotations

import csv
import io
import json
import warnings

import numpy as np
import pytest
from helpers import (
    boosted_logits,  # noqa: E402
    one_error_line,
    save_npz,
    shifted_logits,
)
from oracles import ref_calibration, ref_selective, ref_smooth
from scipy.special import log_softmax, softmax
from typer.testing import CliRunner

import selcal
from selcal.api import Options, evaluate_arrays  # noqa: E402
from selcal.cli import app
from selcal.scores import calibrators  # noqa: E402

FOUR = ("vector", "dirichlet", "ets", "isotonic")


def data(n=600, k=4, seed=0, scale=2.0):
    return boosted_logits(n, k, seed, scale, boost=1.2)


def write_dump(path, logits, labels, n_val):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, k = logits.shape
    split = np.where(np.arange(n) < n_val, "val", "test")
    table = pa.table({"id": np.arange(n), "label": labels, "split": split,
                      "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), k)})
    pq.write_table(table, path)
    return path


@pytest.fixture(scope="module")
def two_dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("calibrators")
    logits, labels = data(n=900, seed=2)
    other = logits + np.random.default_rng(5).normal(0.0, 0.8, logits.shape)  # a second model, same rows
    return (write_dump(folder / "a.parquet", logits, labels, 300), write_dump(folder / "b.parquet", other, labels, 300))


# --------------------------------------------------------------------------- --bootstrap-refit
@pytest.mark.slow
def test_bootstrap_refit_fits_each_calibrator_once_per_resample(monkeypatch):
    logits, labels = data()
    val, val_y = data(n=400, seed=1)
    calls = {name: 0 for name in FOUR}
    for name in FOUR:
        original = getattr(calibrators, f"fit_{name}")

        def counted(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(calibrators, f"fit_{name}", counted)
    options = Options(scores="calibrators", odir_lambda=0.01)
    once = json.loads(evaluate_arrays(logits, labels, val, val_y, options=options, bootstrap=6).to_json())
    assert calls == {name: 1 for name in FOUR}  # without --bootstrap-refit: fitted once
    refit = json.loads(evaluate_arrays(logits, labels, val, val_y, options=options, bootstrap=6,
                                       bootstrap_refit=True).to_json())
    assert calls == {name: 1 + (1 + 6) for name in FOUR}  # the fit, then one per resample
    for name in FOUR:
        fixed, refitted = once["models"][0]["scores"][name], refit["models"][0]["scores"][name]
        assert fixed["aurc"] == refitted["aurc"] and fixed["ece"] == refitted["ece"]  # the same point estimate
        assert fixed["ci"]["ece"] != refitted["ci"]["ece"], name  # the fit's own variability is in the interval
    assert refit["bootstrap"]["refit"] is True


# --------------------------------------------------------------------------- check and compare
@pytest.mark.slow
def test_check_judges_calibrator_metrics_like_any_score(cli, two_dumps, tmp_path):
    a, b = two_dumps
    for path, out in ((a, "a.json"), (b, "b.json")):
        result = cli("evaluate", path, "--scores", "calibrators", "--bootstrap", "20", "--json", tmp_path / out, "-q")
        assert result.exit_code == 0, result.output
    result = cli("check", tmp_path / "b.json", "--baseline", tmp_path / "a.json", "--metric", "vector.ece",
                 "--metric", "dirichlet.smece", "--metric", "isotonic.aurc", "--metric", "ets.nll", "--json", "-")
    assert result.exit_code in (0, 1), result.output
    rows = {row["metric"]: row for row in json.loads(result.stdout)["rows"]}
    assert set(rows) == {"vector.ece", "dirichlet.smece", "isotonic.aurc", "ets.nll"}
    base = json.loads((tmp_path / "a.json").read_text())["models"][0]["scores"]
    assert rows["dirichlet.smece"]["reference"] == base["dirichlet"]["smece"]
    assert all(row["p_value"] is not None for row in rows.values())  # judged with their intervals
    every = cli("check", tmp_path / "b.json", "--baseline", tmp_path / "a.json", "--all", "--json", "-")
    judged = {row["metric"] for row in json.loads(every.stdout)["rows"]}
    assert {f"{name}.{key}" for name in FOUR for key in ("aurc", "ece", "smece")} <= judged
    assert not any(key.endswith("smece_sigma") for key in judged)  # a bandwidth: reported, never judged


@pytest.mark.slow
def test_compare_judges_calibrators_on_paired_resamples(cli, two_dumps):
    a, b = two_dumps
    result = cli("compare", a, b, "--scores", "msp,vector,isotonic", "--bootstrap", "30", "--metric", "vector.ece",
                 "--metric", "isotonic.smece", "--metric", "vector.aurc", "--json", "-")
    assert result.exit_code in (0, 1), result.output
    rows = {row["metric"]: row for row in json.loads(result.stdout)["rows"]}
    assert set(rows) == {"vector.ece", "isotonic.smece", "vector.aurc"}
    evaluated = [json.loads(cli("evaluate", path, "--scores", "msp,vector,isotonic", "--json", "-").stdout)
                 ["models"][0]["scores"] for path in (a, b)]
    assert rows["vector.ece"]["reference"] == evaluated[0]["vector"]["ece"]
    assert rows["isotonic.smece"]["value"] == evaluated[1]["isotonic"]["smece"]
    assert all(row["ci_difference"] is not None for row in rows.values())


# --------------------------------------------------------------------------- refusals
def test_too_few_validation_rows_for_each_calibrator(cli, tmp_path):
    logits, labels = data(n=100, k=10)
    path = write_dump(tmp_path / "m.parquet", logits, labels, 5)
    for name in ("vector", "dirichlet", "isotonic"):
        one_error_line(cli("evaluate", path, "--scores", f"msp,{name}", "--json", tmp_path / "o.json"),
                          f"{name} needs at least 10 validation rows (K = 10), got 5")
    assert not (tmp_path / "o.json").exists()  # no output half-written


def test_dirichlet_refuses_a_k_beyond_its_memory_limit_in_one_line(cli, tmp_path, monkeypatch):
    # the documented limit: 2 GiB, about K = 500 at N = 10 000 (checked before anything is allocated)
    assert calibrators.dirichlet_memory(10_000, 500) > calibrators.DIRICHLET_MEMORY_LIMIT
    assert calibrators.dirichlet_memory(10_000, 400) < calibrators.DIRICHLET_MEMORY_LIMIT
    logits, labels = data(n=300, k=6)
    path = write_dump(tmp_path / "m.parquet", logits, labels, 100)
    monkeypatch.setattr(calibrators, "DIRICHLET_MEMORY_LIMIT", calibrators.dirichlet_memory(100, 6) - 1)
    one_error_line(cli("evaluate", path, "--scores", "calibrators"),
                      "dirichlet: K = 6 classes with 100 validation rows", "use vector, ets or temp")


def test_an_uncertified_fit_says_so_and_suggests_a_larger_odir_lambda(cli, tmp_path, monkeypatch):
    logits, labels = data(n=300, k=6)
    path = write_dump(tmp_path / "m.parquet", logits, labels, 100)
    monkeypatch.setattr(calibrators, "MAX_OUTER_ITERATIONS", 2)  # a small budget, and a certificate
    monkeypatch.setattr(calibrators, "GRADIENT_TOLERANCE", 0.0)  # no gradient can meet
    one_error_line(cli("evaluate", path, "--scores", "msp,dirichlet"),
                      "dirichlet: the optimum could not be certified", "try a larger --odir-lambda")


# --------------------------------------------------------------------------- metrics from the reported params
def _check_metrics(reported: dict, p: np.ndarray, labels: np.ndarray):
    """Every reported metric of a calibrator recomputed from its probabilities p, independently."""
    pred = p.argmax(axis=1)
    top = p[np.arange(labels.size), pred]
    correct = pred == labels
    assert reported["accuracy"] == pytest.approx(correct.mean(), abs=1e-15)
    assert reported["ece"] == pytest.approx(ref_calibration.ece(top, correct, 15), abs=1e-12)
    assert reported["smece"] == pytest.approx(ref_smooth.smece(top, correct)[0], abs=1e-6)
    assert reported["aurc"] == pytest.approx(ref_selective.aurc_by_thresholds(top, correct), abs=1e-9)
    assert reported["nll"] == pytest.approx(-np.mean(np.log(p[np.arange(labels.size), labels])), rel=1e-11)
    assert reported["brier"] == pytest.approx(np.mean(np.sum((p - np.eye(p.shape[1])[labels]) ** 2, axis=1)),
                                              rel=1e-11)


@pytest.mark.slow
def test_test_metrics_recomputed_from_the_reported_parameters():
    logits, labels = data(n=500, k=5, seed=7)
    val, val_y = data(n=500, k=5, seed=8)
    model = json.loads(evaluate_arrays(logits, labels, val, val_y, options=Options(scores="calibrators"))
                       .to_json())["models"][0]
    scores = model["scores"]
    vector = scores["vector"]["params"]
    assert set(vector) == {"w", "b"} and np.shape(vector["w"]) == (5,) and np.shape(vector["b"]) == (5,)
    _check_metrics(scores["vector"], softmax(np.array(vector["w"]) * logits + np.array(vector["b"]), axis=1), labels)
    dirichlet = scores["dirichlet"]["params"]
    assert set(dirichlet) == {"W", "b"} and np.shape(dirichlet["W"]) == (5, 5) and np.shape(dirichlet["b"]) == (5,)
    W, b = np.array(dirichlet["W"]), np.array(dirichlet["b"])
    _check_metrics(scores["dirichlet"], softmax(log_softmax(logits, axis=1) @ W.T + b, axis=1), labels)
    ets = scores["ets"]["params"]
    assert set(ets) == {"weights", "temperature"} and len(ets["weights"]) == 3
    (w1, w2, w3), t = ets["weights"], ets["temperature"]
    assert sum(ets["weights"]) == pytest.approx(1.0, abs=1e-12) and min(ets["weights"]) >= 0
    _check_metrics(scores["ets"], w1 * softmax(logits / t, axis=1) + w2 * softmax(logits, axis=1) + w3 / 5, labels)
    for name in ("vector", "dirichlet", "ets"):  # the regularised mean validation NLL at the solution
        assert isinstance(scores[name]["val_objective"], float)
    lam = mu = calibrators.DEFAULT_ODIR_LAMBDA
    pv = softmax(log_softmax(val, axis=1) @ W.T + b, axis=1)
    objective = (-np.mean(np.log(pv[np.arange(val_y.size), val_y])) + lam / 20 * np.sum((W * (1 - np.eye(5))) ** 2)
                 + mu / 5 * np.sum(b ** 2))
    assert scores["dirichlet"]["val_objective"] == pytest.approx(objective, rel=1e-10)


# --------------------------------------------------------------------------- the side-by-side view
@pytest.fixture(scope="module")
def board_result():
    logits, labels = data(n=400, k=4, seed=11)
    val, val_y = data(n=200, k=4, seed=12)
    first = evaluate_arrays(logits, labels, val, val_y, name="net | one *bold*", bootstrap=8,
                            options=Options(scores="calibrators"))
    second = evaluate_arrays(logits * 0.5, labels, val, val_y, name="net-two", bootstrap=8,
                             options=Options(scores="msp,temp,max_logit"))
    first.models.extend(second.models)
    return first


def test_the_view_reads_every_number_from_the_scores(board_result):
    from selcal.report import calibrators as calibrator_view
    from selcal.report import leaderboard

    board = {row["model"]: row for row in leaderboard(board_result)}
    model = board_result.models[0]
    view = board["net | one *bold*"]["calibrators"]
    assert [r["score"] for r in view["rows"]] == ["msp", "temp", *FOUR]
    for row in view["rows"]:
        metrics = model.scores[row["score"]]
        for key in calibrator_view.AXES:
            assert row[key] == metrics[key] and row[f"{key}_ci"] == list(metrics["ci"][key])
    ece = {r["score"]: r["ece"] for r in view["rows"]}
    assert [r["score"] for r in view["rows"] if r["ece_best"]] == [min(ece, key=ece.get)]
    assert view["rows"][0]["accuracy"] == model.accuracy  # msp: the model's own predictions
    assert view["rows"][2]["accuracy"] == model.scores["vector"]["accuracy"]  # vector: its own top label
    assert board["net-two"].get("calibrators") is None  # no calibrator: no view


def test_terminal_view_fits_100_columns_and_narrow_consoles(board_result):
    from rich.console import Console

    from selcal.report import leaderboard, render_leaderboard

    board = leaderboard(board_result)
    for width in (100, 60):
        console = Console(width=width, record=True, color_system=None)
        render_leaderboard(board, console)
        text = console.export_text()
        assert "calibrators of net | one *bold*" in text
        view = text.split("calibrators of", 1)[1]  # (the leaderboard's own note is never cut: it may be longer)
        assert all(len(line) <= width for line in view.splitlines()), width
        assert "…" not in view
        row = next(r for r in board if r.get("calibrators"))["calibrators"]["rows"][2]
        assert f"[{100 * row['ece_ci'][0]:.2f}, {100 * row['ece_ci'][1]:.2f}]" in text
    assert "95% bootstrap interval" in text


def test_markdown_and_csv_views(board_result):
    from selcal.report import leaderboard, leaderboard_csv, leaderboard_markdown

    board = leaderboard(board_result)
    text = leaderboard_markdown(board)
    assert "**Calibrators**" in text and "net \\| one \\*bold\\*" in text  # the model name escaped
    table = [line for line in text.split("**Calibrators**")[1].splitlines() if line.startswith("|")]
    assert len(table) == 2 + 6 and all(line.count(" | ") == 5 for line in table[2:])
    rows = list(csv.DictReader(io.StringIO(leaderboard_csv(board))))
    model = board_result.models[0].scores
    first = next(r for r in rows if r["model"] == "net | one *bold*")
    assert float(first["isotonic.smece"]) == model["isotonic"]["smece"]
    assert float(first["vector.aurc_low"]) == model["vector"]["ci"]["aurc"][0]
    second = next(r for r in rows if r["model"] == "net-two")
    assert second["isotonic.smece"] == ""


def test_html_report_has_a_calibrators_table_per_model(board_result):
    from selcal.report.html import render_report

    page = render_report(board_result, figures=[])
    assert page.count("<table class='calibrators'>") == 1
    section = page.split("<table class='calibrators'>")[1].split("</table>")[0]
    assert section.count("<tr>") == 7 and "<small>[" in section and "<strong>" in section
    assert "net | one *bold*" not in page.replace("&#x27;", "'") or "<h2" in page  # the name is escaped text


def test_a_class_missing_from_the_validation_rows_is_warned_about():
    """Class 7 has no validation rows: vector, dirichlet and isotonic learn never to predict it, and
    their accuracy drops; the result must say so (not a silent drop)."""
    logits, labels = shifted_logits(3000, 10, 0)
    val_logits, val_labels = shifted_logits(500, 10, 3)
    keep = val_labels != 7
    result = selcal.evaluate_arrays(logits, labels, val_logits[keep], val_labels[keep],
                                    scores="msp,vector,isotonic")
    assert result.scores["isotonic"]["accuracy"] < result.accuracy - 0.03  # the silent damage
    found = [w for w in result.warnings if "class 7" in w or "classes 7" in w]
    assert len(found) == 1 and "validation" in found[0] and "vector" in found[0] and "isotonic" in found[0], \
        result.warnings


def test_dirichlet_too_large_is_refused_before_any_fit(tmp_path, monkeypatch):
    """K = 1000: dirichlet cannot fit in memory; the refusal must come before minutes of other fits."""
    from selcal.scores import calibrators

    fitted = []
    original = calibrators.fit_vector
    monkeypatch.setattr(calibrators, "fit_vector", lambda *a, **k: fitted.append(1) or original(*a, **k))
    test = save_npz(tmp_path / "test.npz", *shifted_logits(1200, 1000, 0, shift=4.0))
    val = save_npz(tmp_path / "val.npz", *shifted_logits(1100, 1000, 1, shift=4.0))
    result = CliRunner().invoke(app, ["evaluate", test, "--val", val, "--scores", "msp,vector,dirichlet"])
    assert result.exit_code == 2 and "dirichlet" in result.output and "GiB" in result.output, result.output
    assert fitted == []


@pytest.mark.slow
def test_compare_with_calibrators_prints_no_numpy_warning(tmp_path):
    """isotonic gives probability 0 to some labels (infinite NLL): the bootstrap must not print numpy's
    'invalid value encountered in matmul' (0 x inf) on stderr."""
    a = save_npz(tmp_path / "a.npz", *shifted_logits(800, 10, 0))
    b = save_npz(tmp_path / "b.npz", *shifted_logits(800, 10, 0, shift=2.5))
    val = save_npz(tmp_path / "val.npz", *shifted_logits(60, 10, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = CliRunner().invoke(app, ["compare", a, b, "--val", val, "--val", val, "--scores", "calibrators",
                                          "--bootstrap", "20"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1), result.output
