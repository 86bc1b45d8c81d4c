"""Bootstrap confidence intervals for every metric, vectorised over resamples. Pure: no I/O.

A bootstrap resample draws N of the N evaluation rows with replacement (an exact
multinomial: N uniform integer draws). The metrics of CONVENTIONS.md are then computed on
the resampled rows exactly as :mod:`selcal.metrics.selective` and :mod:`selcal.metrics.calibration` would
compute them on ``rows[draws]``, but for a whole block of resamples at once and without
sorting again:

* each score is sorted **once**; a resample keeps the original tie groups, each with a
  weight (how many times its rows were drawn) and an error weight. Groups drawn zero times
  vanish, which is exactly what happens to them in the resampled data. A score that ranks the
  rows as its confidence does (msp, temp, the calibrators) reads these weights from the
  calibration metrics' cumulative sums in the order of confidence (one pass over the counts for both).
* AURC: in a resample, tie group g has weight m (rows drawn from it), e errors, and a rows
  holding E errors before it; it adds sum_{j=1..m} (E + j e/m) / (a + j)
  = E (H(a+m) - H(a)) + (e/m) (m - a (H(a+m) - H(a))) to N * AURC (H the harmonic numbers,
  from a table). Summed by parts, only the groups holding an error remain:
  N * AURC = sum_g e [H(N) - H(a+m) + 1 - a (H(a+m) - H(a)) / m]. AUGRC and AUROC sum over
  the same groups; FPR@95%TPR and risk@c are found by searches in the cumulative weights,
  and the last feasible point of cov@r is the last point or one just before a group
  holding an error.
* ECE, RMS-CE and MCE from weighted sums over the equal-width bins; adaptive ECE *exactly*, not
  approximated: the equal-mass boundaries of a resample fall at fixed positions (it has N
  rows too) of the original confidence order with every row repeated by its weight, so each
  boundary is found by a search in the cumulative weights of the original runs of equal
  confidence, and a run cut by a boundary shares its hits in proportion, as in
  :func:`selcal.metrics.calibration.adaptive_calibration_error`.
* accuracy, error, NLL and Brier are means of per-row values.

Class-wise ECE has no interval: it needs every class's probability of every row, which
the result object does not keep (only per-row reductions are kept). Per-group metrics
(``--group-col``) get theirs by resampling within each group (:func:`group_intervals`).

Resample indices are drawn over the rows in an order fixed by their content
(:func:`canonical_order`), so, like every other number of selcal, the intervals do not
depend on the order of the rows in the file.

A value undefined in a resample (AUROC or FPR@95%TPR with no error or no correct
prediction) is left out of that metric's percentiles; if more than half the tail mass,
(1 - confidence) / 2, of the resamples is undefined, the interval is ``None``.

Without refitting (the default), the temperature and p of the fitted scores stay those
fitted on the full validation split: the intervals describe the noise of the evaluation
rows only. :class:`RefitData` adds the noise of the fit: every resample also redraws the
validation rows and refits every fitted score (slow: one full evaluation per resample).

References
----------
Efron & Tibshirani, "An introduction to the bootstrap", 1993, ch. 13 (percentile interval).

The package: ``data.py`` (RowData, RefitData), ``vectorised.py`` (the metrics of a block of
resamples), ``resample.py`` (draws, percentile intervals), ``intervals.py`` (a model's and a
result's intervals, refits, the cluster bootstrap, the groups'), ``paired.py`` (``selcal compare``),
``null.py`` (the calibration test: consistency resampling under perfect calibration).
"""

from __future__ import annotations

from .data import RefitData, RowData
from .intervals import (BootstrappedResult, add_intervals, canonical_order, draw_cluster_counts, group_intervals,
                        model_intervals, refit_metrics, row_intervals, validation_order)
from .null import CalibrationNull, add_calibration_test, calibration_nulls
from .paired import paired_differences
from .resample import (DEFAULT_CONFIDENCE, MAX_RESAMPLES, MODEL_LEVEL, check_arguments, draw_resamples,
                       percentile_interval, resample_metrics)


__all__ = [
    "DEFAULT_CONFIDENCE",
    "MAX_RESAMPLES",
    "RowData",
    "RefitData",
    "draw_resamples",
    "canonical_order",
    "resample_metrics",
    "refit_metrics",
    "percentile_interval",
    "check_arguments",
    "model_intervals",
    "row_intervals",
    "add_intervals",
    "group_intervals",
    "add_calibration_test",
    "calibration_nulls",
    "CalibrationNull",
    "paired_differences",
    "BootstrappedResult",
]
