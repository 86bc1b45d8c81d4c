"""The leaderboard over several models: one row per model, sorted best first, CSV and Markdown."""

import csv
import io
import math

import numpy as np
import pytest
from helpers import SAMPLES
from typer.testing import CliRunner

import selcal
from selcal.cli import app
from selcal.report import leaderboard, leaderboard_csv, leaderboard_markdown


def _model(rng, n, k, sharpness):
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += sharpness
    return logits, labels


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(0)
    models = []
    for i, sharpness in enumerate((0.5, 3.0, 1.5)):
        logits, labels = _model(rng, 1500, 5, sharpness)
        val_logits, val_labels = _model(rng, 500, 5, sharpness)
        models.append(selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name=f"m{i}"))
    return selcal.EvaluationResult(models=models, options=selcal.Options())


def test_one_row_per_model_with_the_numbers_of_its_result(result):
    rows = {row["model"]: row for row in leaderboard(result, "model")}
    assert set(rows) == {"m0", "m1", "m2"}
    for model in result.models:
        row, scores = rows[model.name], model.scores
        assert row["accuracy"] == model.accuracy
        assert row["aurc_msp"] == scores["msp"]["aurc"]
        assert row["aurc_pnorm"] == scores["pnorm"]["aurc"]
        assert row["pnorm_gain"] == scores["msp"]["aurc"] - scores["pnorm"]["aurc"]
        assert row["ece_msp"] == scores["msp"]["ece"] and row["ece_temp"] == scores["temp"]["ece"]
        best = min(("pnorm", "temp"), key=lambda s: (scores[s]["aurc"], s))
        assert row["best_posthoc"] == best and row["aurc_best_posthoc"] == scores[best]["aurc"]


@pytest.mark.parametrize("column, lower_is_better", [("aurc_msp", True), ("accuracy", False), ("ece_temp", True),
                                                     ("pnorm_gain", False)])
def test_sorting_is_best_first_in_the_column_direction(result, column, lower_is_better):
    values = [row[column] for row in leaderboard(result, column)]
    assert values == sorted(values, reverse=not lower_is_better)


def test_an_unknown_sort_column_is_refused(result):
    with pytest.raises(selcal.SelcalError, match="not a column"):
        leaderboard(result, "nope")


def test_csv_holds_full_precision_fractions(result):
    rows = leaderboard(result)
    parsed = list(csv.DictReader(io.StringIO(leaderboard_csv(rows))))
    assert [r["model"] for r in parsed] == [r["model"] for r in rows]
    for text_row, row in zip(parsed, rows):
        assert float(text_row["aurc_msp"]) == row["aurc_msp"]  # round-trips: no rounding, no percent
        assert int(text_row["p"]) == row["p"]


def test_markdown_is_a_table_with_a_row_per_model(result):
    text = leaderboard_markdown(leaderboard(result))
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 3
    assert all(line.count("|") == table[0].count("|") for line in table)
    m1 = next(line for line in table if line.startswith("| m1 "))
    assert f"{100 * result['m1'].accuracy:.2f}" in m1


def test_cli_prints_the_leaderboard_and_writes_csv(tmp_path):
    rng = np.random.default_rng(1)
    paths = []
    for i in range(2):
        logits, labels = _model(rng, 600, 4, 1.0 + i)
        path = tmp_path / f"model{i}.npz"
        np.savez(path, logits=logits, labels=labels)
        paths.append(str(path))
    out = tmp_path / "board.csv"
    result = CliRunner().invoke(app, ["evaluate", *paths, "--csv", str(out), "--sort-by", "accuracy"])
    assert result.exit_code == 0, result.output
    assert "model0" in result.stdout and "model1" in result.stdout
    rows = list(csv.DictReader(out.open()))
    assert [r["model"] for r in rows] == ["model1", "model0"]  # the sharper model is more accurate
    assert all(math.isfinite(float(r["aurc_msp"])) for r in rows)


@pytest.mark.slow
def test_a_board_wider_than_the_console_is_split_into_tables_never_squeezed():
    from rich.console import Console

    from selcal.report import leaderboard, render_leaderboard


    samples = SAMPLES
    result = selcal.evaluate([str(samples / "calibrator_cifar10_resnet50_ce.parquet"),
                              str(samples / "lspair_alpha0.1.parquet")], scores="all")
    for width in (80, 130, 160):
        console = Console(width=width, record=True, color_system=None)
        render_leaderboard(leaderboard(result), console)
        text = console.export_text()
        lines = text.splitlines()
        assert all(len(line) <= width for line in lines if not line.startswith("in %:"))  # the note is never cut
        cells = [line.split("│", 1)[1] for line in lines if "│" in line] + \
            [line.split("┃", 1)[1] for line in lines if "┃" in line]
        assert not any("…" in cell for cell in cells)  # no value or header cut (a long model name may be)
        header_cells = " ".join(line for line in lines if "┃" in line)
        for score in selcal.scores.score_names(["all"]):  # every score 'all' chose
            assert f" {score} " in f" {header_cells} ", (width, score)
        assert text.count("lspair_alpha0.1 ") >= 2  # the model column repeated in each table


def test_huge_values_stay_short_cells():
    from rich.console import Console

    from selcal.report import render_table

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(400, 4)) * 1e300
    labels = rng.integers(0, 4, 400)
    result = selcal.evaluate_arrays(logits, labels, seed=1)
    console = Console(width=120, record=True, color_system=None)
    render_table(result, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines() if "│" in line or "┃" in line) <= 120
    assert "e+" in text  # NLL and T of logits near 1e300 in scientific notation, not 300 digits


def test_no_warnings_leaves_no_marker_on_the_board(tmp_path):
    logits, labels = _model(np.random.default_rng(1), 50, 5, 1.0)  # 50 rows: a small-sample warning
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.npz"
        np.savez(path, logits=logits, labels=labels)
        paths.append(str(path))
    shown = CliRunner().invoke(app, ["evaluate", *paths, "--scores", "msp"])
    silent = CliRunner().invoke(app, ["evaluate", *paths, "--scores", "msp", "--no-warnings"])
    assert "(!)" in shown.stdout and "listed below" in shown.stdout
    assert "(!)" not in silent.stdout and "listed below" not in silent.stdout and silent.stderr == ""


LONG = "resnet50_imagenet_finetuned_with_label_smoothing_" * 2


@pytest.mark.slow
def test_every_leaderboard_line_in_a_pipe_fits_100_columns(tmp_path):
    """``selcal evaluate`` of several models with long names, in a pipe (CliRunner's stdout is no
    terminal): every line of the tables, the note and the calibrators at most 100 columns (before:
    tables 160 wide, the note one line of 270 columns); the note wrapped at word boundaries (its
    words whole, in order); long names cut in their middle, so models that differ at their end stay
    apart."""
    import shutil

    from rich.cells import cell_len
    from typer.testing import CliRunner

    from selcal.cli import app
    from selcal.report.leaderboard import _leaderboard_note, _shown_columns, leaderboard

    files = [str(SAMPLES / "calibrator_cifar10_resnet50_ce.parquet")]
    for seed, alpha in enumerate(("0", "0.05", "0.1")):  # lspair_alpha0: pnorm falls back (the note's '(fb)')
        files.append(str(tmp_path / f"{LONG}seed{seed}.parquet"))
        shutil.copy(SAMPLES / f"lspair_alpha{alpha}.parquet", files[-1])
    for scores in ("msp,max_logit,pnorm,temp", "calibrators"):
        run = CliRunner().invoke(app, ["evaluate", *files, "--scores", scores], env={"COLUMNS": "300"})
        assert run.exit_code == 0, run.output
        lines = run.stdout.splitlines()
        assert max(cell_len(line) for line in lines) <= 100, [line for line in lines if cell_len(line) > 100]
        result = selcal.evaluate(files, scores=scores)
        rows = leaderboard(result)
        note = _leaderboard_note(_shown_columns(rows), rows)
        assert len(note) > 100
        start = next(i for i, line in enumerate(lines) if line.startswith("in %: accuracy, "))
        wrapped = [lines[start]]
        for line in lines[start + 1:]:
            if not line.startswith("  "):
                break
            wrapped.append(line[2:])
        assert len(wrapped) > 1 and " ".join(wrapped) == note  # every word whole
        for seed in range(3):
            assert sum(f"seed{seed} " in line for line in lines if "│" in line) >= 1  # told apart
        if scores == "calibrators":
            assert "calibrators of calibrator_cifar10_resnet50_ce" in lines


@pytest.mark.slow
def test_wide_characters_count_twice_in_a_pipe(tmp_path):
    """Names of wide (East Asian) characters, two columns each: cut and wrapped by columns, not
    characters, so their lines stay within 100 columns too (the calibrators' line over a model)."""
    import shutil

    from rich.cells import cell_len
    from typer.testing import CliRunner

    from selcal.cli import app

    files = []
    for seed, alpha in enumerate(("0", "0.1")):
        files.append(str(tmp_path / f"{'模型' * 30}_{seed}.parquet"))
        shutil.copy(SAMPLES / f"lspair_alpha{alpha}.parquet", files[-1])
    run = CliRunner().invoke(app, ["evaluate", *files, "--scores", "calibrators"])
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= 100, [line for line in lines if cell_len(line) > 100]
    assert any(line.startswith("calibrators of 模型") for line in lines)
    cut = [line for line in lines if line.startswith("模型") and "…" in line and "_0 │" in line]
    assert cut  # cut in the middle, the end kept
