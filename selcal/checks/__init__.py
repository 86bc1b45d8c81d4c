"""Regression checks for CI: ``selcal check`` (two result JSON files) and ``selcal compare`` (two dumps).

Pure except for reading inputs: result JSON files (here) and logit dumps (through
:mod:`selcal.io`). Every problem with an input raises :class:`~selcal.errors.SelcalError`
with one line naming the file and what to do (the CLI exits with status 2); the outcome
of a check is a :class:`Report` (exit status 0 or 1) rendered as a terminal table, JSON,
Markdown or JUnit XML.

The rule of ``check`` (also in the README), for every metric with a direction:

* worse_by = current - baseline when lower is better, baseline - current when higher is;
* a **regression** is worse_by > tolerance (absolute, ``--tolerance``, default 0) **and**,
  when both files carry a bootstrap interval for the metric, intervals that do not overlap
  (current's interval entirely on the worse side of the baseline's). When a file has no
  intervals at all, worse_by > tolerance alone is a regression; in bootstrapped files, a
  metric without an interval (class-wise ECE) is judged only when a ``--tolerance`` names it;
* ``--max``/``--min`` bounds are checked on the current point value; an undefined value
  (``null``) fails a bound, since it cannot be shown to hold.

``compare`` uses the paired interval of B - A (both models on the same resampled rows):
B is worse when that interval lies entirely on the worse side of 0, and a regression when
it is worse and worse_by > tolerance.

The package: ``load.py`` (result JSON files), ``specs.py`` (metric specs and bounds),
``verdict.py`` (rows and the Report with its renderings), ``check_results.py`` (check),
``compare_dumps.py`` (compare).
"""

from __future__ import annotations

from ..metrics.catalog import better
from .check_results import check, primary_metrics
from .compare_dumps import compare, compare_files, labels_differ
from .load import HIGHER_IS_BETTER, LOWER_IS_BETTER, MODEL_LEVEL, Metric, load_result, metrics_of
from .specs import Spec, parse_bound, parse_bounds, parse_spec, parse_specs
from .verdict import CLOSE, Report, Row, is_close


__all__ = [
    "LOWER_IS_BETTER",
    "HIGHER_IS_BETTER",
    "better",
    "load_result",
    "parse_bound",
    "parse_bounds",
    "parse_specs",
    "Spec",
    "Row",
    "Report",
    "is_close",
    "check",
    "compare",
    "compare_files",
]
