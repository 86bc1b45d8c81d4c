"""Renderings of results (:mod:`selcal.results`) for a person:

- ``table.py``: ``selcal evaluate``'s terminal table of one model and its bootstrap intervals;
- ``leaderboard.py``: the leaderboard of several models (terminal, Markdown, CSV);
- ``confident_errors.py``: the most confident errors as CSV (``--errors-csv``).

Every fact about a metric (name, unit, direction, interval) is its entry in the catalog
(:mod:`selcal.metrics.catalog`), every fact about a score its registry entry; the names
below stay for callers of the report module.
"""

from __future__ import annotations

from ..metrics import catalog
from ..results import SCHEMA_VERSION, EvaluationResult, ModelResult, to_jsonable  # noqa: F401  (re-exported)
from .confident_errors import ERRORS_CSV_COLUMNS, confident_errors_csv
from .leaderboard import (CSV_ONLY, DEFAULT_SORT, LEADERBOARD_COLUMNS, WARNING_MARKER, leaderboard, leaderboard_csv,
                          leaderboard_markdown, render_leaderboard)
from .table import fit_notes, metric_sections, render_intervals, render_table, split_words

__all__ = ["ModelResult", "EvaluationResult", "SCHEMA_VERSION", "to_jsonable", "render_table", "metric_sections",
           "fit_notes", "split_words", "leaderboard", "render_leaderboard", "leaderboard_markdown", "leaderboard_csv",
           "LEADERBOARD_COLUMNS", "CSV_ONLY", "DEFAULT_SORT", "WARNING_MARKER", "METRIC_NAMES", "metric_name",
           "metric_label", "metric_unit", "ERRORS_CSV_COLUMNS", "confident_errors_csv", "render_intervals"]

METRIC_NAMES = {k: (m.label, m.unit) for k, m in catalog.CATALOG.items() if not m.family}
metric_name = catalog.name
metric_unit = catalog.unit
metric_label = catalog.label
