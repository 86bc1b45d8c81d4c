"""What the bootstrap resamples: a model's per-row numbers (:class:`RowData`) and, to refit,
its validation logits (:class:`RefitData`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..metrics import calibration
from ..errors import SelcalError
from ..results import ModelResult


# ----------------------------------------------------------------------------- inputs
@dataclass
class RowData:
    """The per-row arrays the bootstrap resamples (evaluation rows, one entry per row).

    Parameters
    ----------
    correct : bool (N,)
    scores : score name -> confidence values (N,), higher = more confident.
    confidence : score name -> top-label probability (N,), for the scores that have
        calibration metrics (those with probabilities in the registry).
    row_means : metric -> per-row values whose mean is the metric, either at model level
        (``"nll"``) or for a score (``"temp.nll"``).
    correct_of : score name -> its own correctness (N,), for a score whose probabilities
        have their own argmax (its errors are its own).
    risks, coverages, estimator, bins, aece_estimator : as in :class:`selcal.options.Options`.
    """

    correct: np.ndarray
    scores: dict[str, np.ndarray]
    confidence: dict[str, np.ndarray] = field(default_factory=dict)
    row_means: dict[str, np.ndarray] = field(default_factory=dict)
    risks: tuple[float, ...] = (0.01, 0.05, 0.1)
    coverages: tuple[float, ...] = (0.5, 0.8, 0.9)
    estimator: str = "mean"
    bins: int = calibration.DEFAULT_BINS
    clusters: np.ndarray | None = None  # per row: its cluster (image); resamples then draw whole clusters
    correct_of: dict[str, np.ndarray] = field(default_factory=dict)
    aece_estimator: str = "equal-mass"
    options: Any = None  # the Options of the evaluation (the functions of catalog metrics read them)

    @property
    def n(self) -> int:
        return int(self.correct.size)

    @classmethod
    def from_model(cls, model: ModelResult, options=None) -> "RowData":
        """The arrays of a :class:`~selcal.report.ModelResult` (from ``selcal.evaluate``)."""
        from ..options import Options

        options = options or Options()
        rows = model.rows
        if rows is None or not model.score_values:
            raise SelcalError(f"{model.name}: the result holds no per-row values to resample; evaluate it again")
        # (a probability column of the file, --score-col, keeps no confidence: its ECE gets no interval)
        confidence = {name: model.confidences[name] for name in model.scores if name in model.confidences}
        correct_of = {name: np.asarray(model.score_correct[name], dtype=bool)
                      for name in model.scores if name in model.score_correct}
        # none without logits; none either for rows of no class (--ood-label: NaN, no NLL or Brier)
        row_means = {k: v for k, v in (("nll", rows.nll), ("brier", rows.brier)) if v is not None and _known(v)}
        for name in model.scores:
            score_rows = (rows.scores or {}).get(name)
            if name in correct_of:
                row_means[f"{name}.accuracy"] = correct_of[name]
            for key in ("nll", "brier"):
                if score_rows is not None and getattr(score_rows, key) is not None and _known(getattr(score_rows, key)):
                    row_means[f"{name}.{key}"] = getattr(score_rows, key)
        return cls(
            correct=np.asarray(rows.correct, dtype=bool),
            scores={name: np.asarray(model.score_values[name], dtype=np.float64)
                    for name in model.scores if name in model.score_values},
            confidence=confidence, row_means=row_means, correct_of=correct_of,
            risks=tuple(options.risks), coverages=tuple(options.coverages),
            estimator=options.aurc_estimator, bins=options.bins, aece_estimator=options.aece_estimator,
            options=options,
            clusters=None if getattr(model, "clusters", None) is None else np.asarray(model.clusters),
        )

    def take(self, rows: np.ndarray) -> "RowData":
        """The same data restricted to (or reordered by) the index array ``rows``."""
        return replace(
            self, correct=self.correct[rows], scores={k: v[rows] for k, v in self.scores.items()},
            confidence={k: v[rows] for k, v in self.confidence.items()},
            row_means={k: v[rows] for k, v in self.row_means.items()},
            correct_of={k: v[rows] for k, v in self.correct_of.items()},
            clusters=None if self.clusters is None else self.clusters[rows],
        )


def _known(values: np.ndarray) -> bool:
    """Every row has a value (rows of no class, --ood-label, have no NLL or Brier: no interval)."""
    return not np.isnan(np.asarray(values, dtype=np.float64)).any()


@dataclass
class RefitData:
    """Logits and labels of one model's evaluation and validation rows, for refitting the fitted scores.

    The evaluation rows must be those of the result, in the same order.
    """

    logits: np.ndarray
    labels: np.ndarray
    val_logits: np.ndarray
    val_labels: np.ndarray
    clusters: np.ndarray | None = None  # pixel rows: the image of each evaluation row ...
    val_clusters: np.ndarray | None = None  # ... and of each validation row (whole images are redrawn)
