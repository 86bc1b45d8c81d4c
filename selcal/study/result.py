"""What ``selcal study`` returns: the runs, every run's result, the aggregates per (data set,
recipe, score, metric), the verdicts against a baseline and the mean ranks; its JSON and its
tidy table (:meth:`StudyResult.to_polars`, written as the CSV)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..metrics.catalog import split_name
from ..results import options_dict, to_jsonable
from .runs import Run

__all__ = ["StudyResult", "COLUMNS", "BASELINE_COLUMNS", "STUDY_SCHEMA"]

STUDY_SCHEMA = 1
COLUMNS = ("dataset", "recipe", "score", "metric", "runs", "mean", "std", "low", "high")
BASELINE_COLUMNS = ("diff", "diff_low", "diff_high", "p", "verdict")
_TEXT = {"dataset", "recipe", "score", "metric", "verdict"}


@dataclass
class StudyResult:
    """The result of :func:`selcal.study`.

    ``runs``: every :class:`Run`, in the order of the study (data set, recipe, seed);
    ``results``: each run's result as ``selcal evaluate --json`` writes its model (same order);
    ``rows``: one dict per (data set, recipe, score, metric) with the keys of :data:`COLUMNS`
    (and :data:`BASELINE_COLUMNS` with a baseline), ``score`` None for a model-level metric,
    ``dataset`` None when the study has none; ``details``: per row, how its interval was made;
    ``metrics``: the study's metrics (``accuracy``, ``msp.aurc``, ...), the table's columns and
    the judged ones; ``ranks``: metric -> recipe -> mean rank over the data sets (two or more);
    ``curves``: data set -> recipe -> the risk-coverage curve averaged over the runs (for the
    figures; not in the JSON).
    """

    runs: list[Run]
    results: list[dict]
    rows: list[dict]
    metrics: list[str]
    datasets: list[str | None]
    recipes: list[str]
    options: Any = None
    baseline: str | None = None
    bootstrap: dict = field(default_factory=dict)
    ranks: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    details: list[dict] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    curves: dict = field(default_factory=dict, repr=False)
    curve_score: str | None = None

    @property
    def columns(self) -> list[str]:
        """The columns of the tidy table: those of :data:`COLUMNS`, each field of the runs after
        ``recipe``, and :data:`BASELINE_COLUMNS` with a baseline."""
        out = list(COLUMNS)
        out[2:2] = self.fields
        return out + (list(BASELINE_COLUMNS) if self.baseline is not None else [])

    def row(self, dataset: str | None, recipe: str, metric: str) -> dict | None:
        """The aggregate row of a recipe's qualified metric (``msp.aurc``, ``accuracy``) in a data set."""
        wanted = (dataset, recipe, *split_name(metric))
        return next((row for row in self.rows if (row["dataset"], row["recipe"], row["score"], row["metric"]) == wanted),
                    None)

    def to_polars(self):
        """The tidy table, one row per (data set, recipe, score, metric): the CSV's frame.

        Fractions at full precision; empty (null) ``score`` for a model-level metric, ``dataset``
        without data sets, ``low``/``high`` without a bootstrap."""
        import polars as pl

        schema = {c: (pl.Utf8 if c in _TEXT or c in self.fields else pl.Int64 if c == "runs" else pl.Float64)
                  for c in self.columns}
        return pl.DataFrame([{c: row.get(c) for c in schema} for row in self.rows], schema=schema, orient="row")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": STUDY_SCHEMA, "kind": "study", "selcal": __version__}
        if self.options is not None:
            out["options"] = options_dict(self.options)
        out["study"] = {"metrics": list(self.metrics), "baseline": self.baseline, "datasets": list(self.datasets),
                        "recipes": list(self.recipes), "fields": list(self.fields),
                        "bootstrap": dict(self.bootstrap) or None}
        out["runs"] = [{"path": run.path, "dataset": run.dataset, "recipe": run.recipe, "seed": run.seed,
                        **({"val": run.val} if run.val else {}), "fields": dict(run.fields), "result": result}
                       for run, result in zip(self.runs, self.results)]
        out["aggregates"] = [{**{c: row.get(c) for c in self.columns}, **({"interval": detail} if detail else {})}
                             for row, detail in zip(self.rows, self.details or [None] * len(self.rows))]
        out["ranks"] = self.ranks
        out["notes"] = list(self.notes)
        out["warnings"] = [{"run": name, "warning": text} for name, text in self.warnings]
        return to_jsonable(out)

    def to_json(self) -> str:
        """JSON text (NaN and infinity never appear: undefined values are ``null``)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"
