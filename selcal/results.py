"""Result objects and the JSON they write (schema 1 of CONVENTIONS.md): what an evaluation returns,
before any rendering (:mod:`selcal.report` renders them for people)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._version import __version__

if TYPE_CHECKING:
    import polars

__all__ = ["ModelResult", "EvaluationResult", "SCHEMA_VERSION", "to_jsonable", "json_schema"]

SCHEMA_VERSION = 1


def json_schema(version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the results JSON of schema ``version``, shipped with the
    package as ``selcal/schema/result-{version}.json``.

    Examples
    --------
    >>> json_schema()["title"]
    'selcal evaluation result, schema 1'
    """
    from importlib.resources import files

    return json.loads(files("selcal").joinpath(f"schema/result-{version}.json").read_text(encoding="utf-8"))


@dataclass
class ModelResult:
    """Every number selcal reports for one model (keys as in CONVENTIONS.md's JSON).

    ``scores`` maps a score name to its metrics; ``curves`` keeps each score's
    risk-coverage operating points for plotting; ``score_values`` each score's per-row
    value on the evaluation rows, and ``rows`` the per-row reduction
    (:class:`selcal.api.RowReduction`: correctness, log-MSP, NLL, Brier, ...) for
    bootstrap and plots. None of these three is written to JSON, nor ``confident_errors``
    (score name -> :class:`selcal.metrics.diagnostics.ConfidentErrors`, the most confident errors),
    nor ``row_ids`` (the ids of the evaluation rows in their order, when the file has ids: a
    study pairs the rows of several runs by them).
    """

    name: str
    path: str
    num_classes: int
    n_eval: int
    n_val: int
    split: str
    accuracy: float
    error: float
    nll: float
    brier: float
    cece: float
    top5_accuracy: float | None = None
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    curves: dict[str, Any] = field(default_factory=dict, repr=False)
    score_values: dict[str, Any] = field(default_factory=dict, repr=False)
    rows: Any = field(default=None, repr=False)
    groups: Any = field(default=None, repr=False)
    clusters: Any = field(default=None, repr=False)  # the image of each pixel row (cluster bootstrap)...
    cluster_names: Any = field(default=None, repr=False)  # ... as an index into these image ids
    confident_errors: dict[str, Any] = field(default_factory=dict, repr=False)
    confidences: dict[str, Any] = field(default_factory=dict, repr=False)  # top-label probability of each score that has one
    score_correct: dict[str, Any] = field(default_factory=dict, repr=False)  # own errors of a score with its own predictions
    states: dict[str, Any] = field(default_factory=dict, repr=False)  # fitted state of each fitted score
    # --calibration-test: each probability score's null distributions (selcal.bootstrap.null.CalibrationNull)
    calibration_nulls: dict[str, Any] = field(default_factory=dict, repr=False)
    row_ids: Any = field(default=None, repr=False)  # the id of each evaluation row (None: the file has none)

    def add_score(self, name: str, metrics: dict[str, Any], curve=None, values=None) -> None:
        self.scores[name] = metrics
        if curve is not None:
            self.curves[name] = curve
        if values is not None:
            self.score_values[name] = values

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name, "path": self.path, "num_classes": self.num_classes,
            "n_eval": self.n_eval, "n_val": self.n_val, "split": self.split,
            "accuracy": self.accuracy,
            **({"top5_accuracy": self.top5_accuracy} if self.top5_accuracy is not None else {}),
            "error": self.error, "nll": self.nll,
            "brier": self.brier, "cece": self.cece,
            "scores": self.scores,
        }
        out.update(self.extra)
        out["warnings"] = list(self.warnings)
        return to_jsonable(out)


def _unique_names(models: list) -> list:
    """The models, those whose name an earlier one already has renamed ``NAME 2``, ``NAME 3``, ...
    (a copy: the caller's result keeps its name), so a leaderboard, a legend or the HTML report
    never shows two models under one name (e.g. several ``evaluate_arrays`` results named "model")."""
    from dataclasses import replace

    used = {m.name for m in models}
    seen: set = set()
    out = []
    for model in models:
        if model.name in seen:
            number = 2
            while f"{model.name} {number}" in used:
                number += 1
            model = replace(model, name=f"{model.name} {number}")
            used.add(model.name)
        seen.add(model.name)
        out.append(model)
    return out


@dataclass
class EvaluationResult:
    """The result of ``selcal.evaluate`` and ``selcal.evaluate_arrays``: one :class:`ModelResult`
    per model.

    A result of one model also answers for that model (``result.scores`` is
    ``result.models[0].scores``), and results given as ``models`` are unpacked into their
    models, so ``EvaluationResult([evaluate_arrays(...), ...])`` gathers several models.
    """

    models: list[ModelResult]
    options: Any = None

    def __post_init__(self):
        self.models = _unique_names([m for item in self.models
                                     for m in (item.models if isinstance(item, EvaluationResult) else [item])])

    def __getattr__(self, name: str):
        models = self.__dict__.get("models")
        if not name.startswith("_") and models is not None and len(models) == 1:
            return getattr(models[0], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA_VERSION, "selcal": __version__}
        if self.options is not None:
            out["options"] = options_dict(self.options)
        out["models"] = [m.to_dict() for m in self.models]
        return out

    def to_json(self) -> str:
        """JSON text; NaN and infinity never appear (undefined values are ``null``)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    def to_polars(self) -> polars.DataFrame:
        """A long polars DataFrame: one row per (model, score, metric), with the columns ``model``,
        ``score`` (null for a model's metric: accuracy, NLL, ...), ``metric`` (the JSON key), ``name``
        (its flat name, as MLflow logs it: ``msp/cov_at_risk_0.01``), ``value``, and ``low``,
        ``high`` (the interval of ``--bootstrap``; null without). The numbers are the JSON's.

        Examples
        --------
        >>> import selcal
        >>> frame = selcal.evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], [0, 1, 1], scores="msp").to_polars()
        >>> frame.columns
        ['model', 'score', 'metric', 'name', 'value', 'low', 'high']
        >>> frame.filter(metric="aurc")["value"].item()
        0.4444444444444444
        """
        from .writers.flat import metrics_frame

        return metrics_frame(self, "polars")

    def to_pandas(self) -> Any:
        """The frame of :meth:`to_polars` as a pandas DataFrame (pandas is optional; undefined values are NaN)."""
        from .writers.flat import metrics_frame

        return metrics_frame(self, "pandas")

    @property
    def curves(self) -> "CurveFrames":
        """``curves(kind="rc")``: the figures' data as a frame (:func:`selcal.writers.flat.curve_rows`);
        ``kind="reliability"`` for the reliability diagrams' bins, ``library="pandas"`` for pandas.
        Indexed like a dict (``result.curves["msp"]``), a one-model result's risk-coverage curves."""
        return CurveFrames(self)

    def __getitem__(self, name: str) -> ModelResult:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)


class CurveFrames(Mapping):
    """``result.curves``: called, a frame of the figures' data (``result.curves("rc")``); as a mapping,
    the risk-coverage curves of a one-model result (``ModelResult.curves``: score -> RiskCoverage)."""

    def __init__(self, result: EvaluationResult):
        self._result = result

    def __call__(self, kind: str = "rc", *, library: str = "polars") -> Any:
        from .writers.flat import curves_frame

        return curves_frame(self._result, kind, library)

    def _one(self) -> dict:
        models = self._result.models
        if len(models) != 1:
            raise KeyError(f"the result holds {len(models)} models; use result.models[i].curves, "
                           "or result.curves('rc') for every model's")
        return models[0].curves

    def __getitem__(self, score: str):
        return self._one()[score]

    def __iter__(self):
        return iter(self._one())

    def __len__(self) -> int:
        return len(self._one())


def options_dict(options) -> dict[str, Any]:
    return to_jsonable({
        "scores": list(options.scores), "bins": options.bins, "risks": list(options.risks),
        "coverages": list(options.coverages), "aurc_estimator": options.aurc_estimator,
        "aece_estimator": getattr(options, "aece_estimator", "equal-mass"),
        "val_fraction": options.val_fraction, "seed": options.seed, "center": options.center,
        "p_grid": list(options.p_grid), "pnorm_objective": options.pnorm_objective,
        "temp_objective": options.temp_objective,
        **({"score_cols": list(options.score_cols)} if getattr(options, "score_cols", ()) else {}),
        **({"uncertainty_cols": list(options.uncertainty_cols)} if getattr(options, "uncertainty_cols", ()) else {}),
        **({"calibration_test": options.calibration_test} if getattr(options, "calibration_test", 0) else {}),
    })


def to_jsonable(value):
    """Plain Python types for JSON: numpy scalars unwrapped, arrays as lists, NaN and inf as ``None``."""
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value
