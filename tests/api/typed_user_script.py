"""A user's script against selcal's public API, type-checked by mypy --strict in the tests
(tests/api/test_public_api_types.py): with py.typed shipped, a user's checker sees these types.
Only functions here: importing it (pytest's doctest collection) runs nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

import selcal
from selcal import metrics
from selcal.figures import plot_rc


def write_and_evaluate(folder: Path, logits: npt.NDArray[np.float32], labels: npt.NDArray[np.int64]) -> float:
    for split in ("val", "test"):
        with selcal.DumpWriter(folder, split=split, classes=3) as writer:
            writer.add(logits, labels, ids=None)
    result: selcal.EvaluationResult = selcal.evaluate(str(folder), scores="msp,temp", bins=20)
    model: selcal.ModelResult = result.models[0]
    return model.accuracy


def metric_functions(labels: npt.NDArray[np.int64], probabilities: npt.NDArray[np.float64]) -> list[float]:
    coverage, risk, thresholds = metrics.risk_coverage_curve(labels, probabilities, input_kind="probs")
    values: list[float] = [metrics.aurc(labels, probabilities), metrics.ece(labels, probabilities, bins=10),
                           metrics.coverage_at_risk(labels, probabilities, 0.05), metrics.nll(labels, probabilities)]
    return values + [float(coverage[0]), float(risk[-1]), float(thresholds[0])]


def frames_figures_and_tracking(logits: npt.NDArray[np.float64], labels: npt.NDArray[np.int64]) -> str:
    options = selcal.Options(scores=("msp", "max_logit"), bins=15)
    result = selcal.evaluate_arrays(logits, labels, options=options, bootstrap=100)
    frame = result.to_polars()
    assert frame.height > 0
    schema: dict[str, object] = selcal.results.json_schema()
    assert schema["title"]
    plot_rc(result)
    return selcal.log_to_mlflow(result, figures=False, report=False, prefix="selcal/")
