"""The intervals table of ``evaluate --bootstrap`` (issue 34): msp's NLL and Brier (the model's own
probabilities) sit in msp's column, on the line of every other score's NLL and Brier, not apart on
the model's line; a metric a score reports without an interval (isotonic's NLL, null when a label
has probability 0) keeps its row."""

from __future__ import annotations

import numpy as np
from helpers import boosted_logits
from rich.console import Console

import selcal
from selcal.report.table import interval_cells, render_intervals


def intervals_text(result) -> str:
    console = Console(width=200, record=True)
    render_intervals(result, console)
    return console.export_text()


def rows_of(text: str) -> dict[str, list[str]]:
    return {line.split("│")[0].strip(): [c.strip() for c in line.split("│")[1:]]
            for line in text.splitlines() if "│" in line}


def test_msp_shows_the_models_nll_and_brier_on_their_line():
    logits, labels = boosted_logits(1200, k=5, seed=1)
    val_logits, val_labels = boosted_logits(600, k=5, seed=2)
    result = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, scores="msp,max_logit,temp",
                                    bootstrap=40)
    model = result.models[0]
    text = intervals_text(result)
    rows = rows_of(text)
    low, high = model.extra["ci"]["nll"]
    assert rows["NLL"][0] == f"{low:.4f}–{high:.4f}"  # msp's column: the model's NLL interval
    low, high = model.extra["ci"]["brier"]
    assert rows["Brier"][0] == f"{low:.4f}–{high:.4f}"
    assert rows["NLL"][1] == "-" and rows["NLL"][2] != "-"  # max_logit has none; temp its own
    model_line = next(line for line in text.splitlines() if line.strip().startswith("model:"))
    assert "accuracy" in model_line and "NLL" not in model_line and "Brier" not in model_line
    names = list(rows)
    assert names.index("NLL") + 1 == names.index("Brier")


def test_isotonics_nll_row_stays_when_no_other_score_has_an_nll_interval():
    logits, labels = boosted_logits(900, k=4, seed=3, boost=2.5)
    val_logits, val_labels = boosted_logits(200, k=4, seed=4, boost=2.5)
    result = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, scores="isotonic", bootstrap=30)
    model = result.models[0]
    assert model.scores["isotonic"]["nll"] is None  # some label got probability 0: infinite, null
    infinite = model.scores["isotonic"]["nll_infinite_rows"]
    cells, _ = interval_cells(model, ["isotonic"])
    assert cells["isotonic"]["nll"] == f"∞ on {infinite:,} rows"
    rows = rows_of(intervals_text(result))
    assert rows["NLL"] == [f"∞ on {infinite:,} rows"] and rows["Brier"][0] != "-"


def test_msp_and_isotonic_side_by_side():
    logits, labels = boosted_logits(900, k=4, seed=3, boost=2.5)
    val_logits, val_labels = boosted_logits(200, k=4, seed=4, boost=2.5)
    result = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, scores="msp,isotonic", bootstrap=30)
    rows = rows_of(intervals_text(result))
    assert rows["NLL"][0] != "-" and rows["NLL"][1].startswith("∞ on ")
    assert np.all([cell != "-" for cell in rows["Brier"]])
