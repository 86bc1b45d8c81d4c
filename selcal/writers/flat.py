"""A result as flat names and long frames: one row per (model, score, metric), the figures' data.

The one mapping of a metric to a flat name (CONVENTIONS.md, "The Python face"): ``score/key``
for a score's metric and ``key`` for a model's, where a family's key spells out its ``@`` from
the catalog's label (``cov@0.01`` -> ``cov_at_risk_0.01``, ``risk@0.5`` -> ``risk_at_cov_0.5``)
and a score's name keeps only letters, digits, ``_``, ``-``, ``.`` and spaces (others become
``_``). Every name is one an experiment tracker accepts (MLflow's rule). The long frame
(:meth:`selcal.results.EvaluationResult.to_polars`) carries it in its ``name`` column and
:func:`selcal.writers.mlflow.log_to_mlflow` logs under it; the leaderboard CSV keeps its own
columns (``aurc_msp``, :func:`selcal.metrics.catalog.column`).

The rows are read from the result's JSON (``to_dict``), so a frame holds exactly the JSON's
numbers; the curves, which the JSON does not hold, from the result in memory.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import SelcalError
from ..metrics import catalog

__all__ = ["flat_key", "flat_name", "metric_rows", "flat_metrics", "frame", "curve_rows", "ROW_COLUMNS",
           "CURVE_KINDS"]

ROW_COLUMNS = ("model", "score", "metric", "name", "value", "low", "high")
CURVE_KINDS = ("rc", "reliability")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\- ]")


def flat_key(key: str) -> str:
    """A metric key as a flat name: a family's ``@`` spelled out as its catalog label says.

    Examples
    --------
    >>> flat_key("cov@0.01"), flat_key("risk@0.5"), flat_key("aurc")
    ('cov_at_risk_0.01', 'risk_at_cov_0.5', 'aurc')
    """
    metric = catalog.get(key)
    if metric is not None and metric.family:
        head = metric.label.partition("{")[0].strip()  # "cov@risk"
        return f"{safe_part(head.replace('@', '_at_'))}_{key[len(metric.key):]}"
    return safe_part(key)


def safe_part(text: str) -> str:
    """One part of a flat name: letters, digits, ``_``, ``-``, ``.`` and spaces; anything else ``_``,
    and a part that a file system would read as a folder (empty, ``.``, ``..``) starts with ``_``.

    >>> safe_part("conf$x/y"), safe_part(".."), safe_part("resnet (seed 0)")
    ('conf_x_y', '_..', 'resnet _seed 0_')
    """
    text = _UNSAFE.sub("_", str(text))
    return "_" + text if not text.strip(".") else text


def flat_name(key: str, score: str | None = None) -> str:
    """The flat name of a metric: ``score/key`` (a score's), ``key`` (a model's).

    Examples
    --------
    >>> flat_name("cov@0.01", "msp"), flat_name("nll")
    ('msp/cov_at_risk_0.01', 'nll')
    """
    return flat_key(key) if score is None else f"{safe_part(score)}/{flat_key(key)}"


def _interval(intervals: dict | None, key: str) -> tuple[float | None, float | None]:
    pair = (intervals or {}).get(key)
    return (None, None) if pair is None else (pair[0], pair[1])


def _number(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def metric_rows(result) -> list[dict[str, Any]]:
    """One row per (model, score, metric) of ``result`` (an EvaluationResult, or its JSON as a dict):
    ``model``, ``score`` (None for a model's metric), ``metric`` (the JSON key), ``name``
    (:func:`flat_name`), ``value`` and the interval's ``low`` and ``high`` (None without
    ``--bootstrap``). Every metric of the catalog the JSON holds, in the JSON's order; a score's
    other keys (fitted parameters) are not metrics."""
    document = result if isinstance(result, dict) else result.to_dict()
    rows = []
    for model in document["models"]:
        for key in catalog.model_level(judged=False):
            if key in model and _number(model[key]):
                rows.append(_row(model["name"], None, key, model[key], model.get("ci")))
        for score, metrics in model["scores"].items():
            for key, value in metrics.items():
                if catalog.get(key) is not None and _number(value):
                    rows.append(_row(model["name"], score, key, value, metrics.get("ci")))
    return rows


def _row(model: str, score: str | None, key: str, value, intervals) -> dict[str, Any]:
    low, high = _interval(intervals, key)
    return dict(zip(ROW_COLUMNS, (model, score, key, flat_name(key, score), value, low, high)))


def flat_metrics(result, *, intervals: bool = True) -> dict[str, float]:
    """``{flat name: value}`` of every metric of ``result``; with several models each name starts with
    its model's (``resnet50/msp/aurc``); an interval's bounds as ``NAME_ci_low`` and ``NAME_ci_high``.
    An undefined value (null in the JSON) is left out. Two models whose names become one flat
    name are refused."""
    rows = metric_rows(result)
    models = list(dict.fromkeys(row["model"] for row in rows))
    prefix = {model: "" for model in models} if len(models) == 1 else {model: safe_part(model) + "/" for model in models}
    seen: dict[str, str] = {}
    for model, flat in prefix.items():
        if flat in seen:
            raise SelcalError(f"models {seen[flat]!r} and {model!r} have one flat name, {flat[:-1]!r}; "
                              "rename one (evaluate_arrays(name=...))")
        seen[flat] = model
    out: dict[str, float] = {}
    for row in rows:
        name = prefix[row["model"]] + row["name"]
        for suffix, value in (("", row["value"]), ("_ci_low", row["low"]), ("_ci_high", row["high"])):
            if value is not None and (intervals or not suffix):
                out[name + suffix] = float(value)
    return out


# ----------------------------------------------------------------------------- frames
def frame(columns: dict[str, list], types: dict[str, str], library: str):
    """A polars or pandas DataFrame of ``columns`` (name -> values), of the ``types`` given
    (``str``, ``f64``, ``i64``): polars is selcal's own dependency, pandas is optional."""
    if library == "polars":
        import polars as pl

        polars_types: dict[str, Any] = {"str": pl.Utf8, "f64": pl.Float64, "i64": pl.Int64}
        return pl.DataFrame(columns, schema={name: polars_types[types[name]] for name in columns})
    if library == "pandas":
        try:
            import pandas as pd
        except ImportError:
            raise SelcalError("to_pandas needs pandas (pip install pandas); to_polars needs nothing more") from None
        pandas_types: dict[str, Any] = {"str": object, "f64": np.float64, "i64": np.int64}
        return pd.DataFrame({name: pd.Series([np.nan if v is None and types[name] == "f64" else v for v in values],
                                             dtype=pandas_types[types[name]]) for name, values in columns.items()})
    raise SelcalError(f"library must be polars or pandas, got {library!r}")


def _columns(rows: list[dict], names) -> dict[str, list]:
    return {name: [row[name] for row in rows] for name in names}


def metrics_frame(result, library: str = "polars"):
    """The long frame of :func:`metric_rows`."""
    types = {"model": "str", "score": "str", "metric": "str", "name": "str", "value": "f64", "low": "f64",
             "high": "f64"}
    return frame(_columns(metric_rows(result), ROW_COLUMNS), types, library)


def curve_rows(result, kind: str = "rc") -> tuple[list[dict], dict[str, str]]:
    """(rows, column types) of the figures' data of every model of ``result`` (in memory):

    * ``rc``: the operating points of each score's risk-coverage curve (the ``rc`` figure's
      vertices): ``coverage``, ``risk``, ``accepted`` (rows kept), ``errors`` (expected among them)
      and ``threshold`` (the score's probability when it has one, else its value; as
      :func:`selcal.metrics.risk_coverage_curve`);
    * ``reliability``: the equal-width bins of each probability score's reliability diagram
      (the result's ``bins``): ``lower``, ``upper`` (the bin's edges), ``count``, ``accuracy``,
      ``confidence`` (mean), and ``accuracy_low``, ``accuracy_high`` (the accuracy's 95%
      Clopper-Pearson interval); an empty bin has null accuracy and confidence.
    """
    from ..figures.data import reliability_data
    from ..figures.reliability import probability_scores
    from ..metrics import calibration, selective

    if kind not in CURVE_KINDS:
        raise SelcalError(f"kind must be one of {', '.join(CURVE_KINDS)}, got {kind!r}")
    rows: list[dict] = []
    models = result.models
    if kind == "rc":
        types = {"model": "str", "score": "str", "coverage": "f64", "risk": "f64", "accepted": "i64",
                 "errors": "f64", "threshold": "f64"}
        for model in models:
            for score, curve in model.curves.items():
                thresholds = curve.thresholds
                if score in model.confidences:  # ranked by its log-probability: thresholds as probabilities
                    thresholds = selective.thresholds_on(curve, model.score_values[score], model.confidences[score])
                for values in zip(curve.coverage.tolist(), curve.risk.tolist(), curve.accepted.tolist(),
                                  curve.errors.tolist(), np.asarray(thresholds, dtype=np.float64).tolist()):
                    rows.append(dict(zip(types, (model.name, score, *values))))
        return rows, types
    types = {"model": "str", "score": "str", "bin": "i64", "lower": "f64", "upper": "f64", "count": "i64",
             "accuracy": "f64", "confidence": "f64", "accuracy_low": "f64", "accuracy_high": "f64"}
    bins = getattr(result.options, "bins", None) or calibration.DEFAULT_BINS
    for model in models:
        for score, confidence, correct in probability_scores(model):
            data = reliability_data(confidence, correct, bins)
            for b in range(bins):
                known = data.count[b] > 0
                values = (b, data.edges[b], data.edges[b + 1], int(data.count[b]),
                          *(float(v[b]) if known else None for v in (data.accuracy, data.confidence, data.lower,
                                                                      data.upper)))
                rows.append(dict(zip(types, (model.name, score, *values))))
    return rows, types


def curves_frame(result, kind: str = "rc", library: str = "polars"):
    """The frame of :func:`curve_rows`."""
    rows, types = curve_rows(result, kind)
    return frame(_columns(rows, types), types, library)
