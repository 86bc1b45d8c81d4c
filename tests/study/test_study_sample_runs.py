"""The study of the guide (docs/guides/studies.md) on the label-smoothing runs of sample_logits/:
three training seeds of each alpha, the table and the verdicts it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

import selcal

MANIFEST = Path(__file__).resolve().parents[2] / "sample_logits" / "lspair_seeds" / "runs.csv"


@pytest.mark.slow
def test_the_label_smoothing_study_of_the_guide():
    result = selcal.study(manifest=MANIFEST, baseline="alpha0", bootstrap=1000,
                          metrics=["accuracy", "msp.aurc", "pnorm.aurc", "msp.ece"])
    assert [(run.recipe, run.seed) for run in result.runs] == [("alpha0", 0), ("alpha0", 1), ("alpha0", 2),
                                                               ("alpha0.1", 0), ("alpha0.1", 1), ("alpha0.1", 2)]
    shown = {}
    for row in result.rows:
        name = row["metric"] if row["score"] is None else f"{row['score']}.{row['metric']}"
        if name in result.metrics:
            shown[(row["recipe"], name)] = (f"{100 * row['mean']:.2f} ± {100 * row['std']:.2f}", row["verdict"])
    assert shown == {
        ("alpha0", "accuracy"): ("84.24 ± 0.17", None), ("alpha0.1", "accuracy"): ("85.43 ± 0.03", "better"),
        ("alpha0", "msp.aurc"): ("3.60 ± 0.07", None), ("alpha0.1", "msp.aurc"): ("4.10 ± 0.12", "worse"),
        ("alpha0", "pnorm.aurc"): ("3.60 ± 0.07", None), ("alpha0.1", "pnorm.aurc"): ("3.45 ± 0.02", "better"),
        ("alpha0", "msp.ece"): ("9.34 ± 0.09", None), ("alpha0.1", "msp.ece"): ("6.00 ± 0.11", "better"),
    }
