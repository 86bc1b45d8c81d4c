"""Studies: training recipes compared across seeds and data sets, judged against run-to-run noise
(CONVENTIONS.md, "Studies"); ``selcal study`` and :func:`study`.

The package: ``runs.py`` (a run's recipe, seed and data set from a template or a manifest),
``measure.py`` (evaluate the runs of each data set, aggregate), ``twolevel.py`` (the two-level
bootstrap, vectorised), ``stats.py`` (the pure statistics: summaries, intervals, p-values, Holm,
ranks), ``result.py`` (:class:`StudyResult`, its JSON and tidy table), ``render.py`` (the
terminal table, LaTeX, Markdown, CSV), ``report.py`` (the HTML page).

``selcal.study`` is this package, and calling it calls :func:`study` (``selcal.study(paths,
pattern=...)``), as ``selcal.threshold`` is called.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Sequence

from .result import StudyResult
from .runs import Run, runs_from_manifest, runs_from_pattern

__all__ = ["study", "StudyResult", "Run", "runs_from_pattern", "runs_from_manifest"]


def study(
    paths: Sequence | str | None = None,
    *,
    pattern: str | None = None,
    manifest=None,
    baseline: str | None = None,
    metrics: Sequence[str] | str | None = None,
    allow_other_data: bool = False,
    options=None,
    read=None,
    run=None,
    curves: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    **settings_values,
) -> StudyResult:
    """Compare training recipes over their runs; the Python API behind ``selcal study``.

    Parameters
    ----------
    paths : the runs' dumps (any input ``selcal evaluate`` reads, one model each), with
        ``pattern``, a template such as ``"{dataset}/{recipe}_seed{seed}.parquet"`` (fields in
        braces, ``*`` a wildcard; other fields, e.g. ``{arch}``, become columns);
    manifest : or a CSV with the columns ``path``, ``recipe``, ``seed`` and optionally ``dataset``
        and ``val`` (a validation dump of the run); its relative paths are relative to it.
    baseline : a recipe: every other recipe's difference to it, with verdicts (with a bootstrap).
    metrics : the metrics of the table and of the verdicts, e.g. ``["msp.aurc", "ece"]``
        (``[SCORE.]METRIC``; default: accuracy, the AURC of the first score and the ECE of
        the first score that has one, as ``selcal check``).
    allow_other_data : accept runs of one data set evaluated on other rows (refused otherwise).
    options, read, run : the records of :func:`selcal.evaluate`: :class:`~selcal.options.Options` (every
        run's evaluation; its ``seed`` also seeds the bootstrap), :class:`~selcal.options.ReadSettings`
        (how the files are read), :class:`~selcal.options.RunSettings` (``engine``: ``local`` or
        ``ray``, the same numbers; ``bootstrap``: resamples of the two-level bootstrap, 0 for no
        intervals; ``confidence``).
    curves : keep each recipe's averaged risk-coverage curve (for the figures).
    progress : ``progress(what, done, total)`` with what ``"runs"`` (evaluated) or ``"resamples"``.
    **settings_values : fields of the three records (``scores="msp,temp"``, ``bins=20``, ``seed=1``,
        ``bootstrap=1000``, ``engine="ray"``, ``label_col="y"``, ...).

    Returns
    -------
    :class:`StudyResult`; ``.to_polars()`` is the table ``--csv`` writes, ``.to_json()`` the JSON.
    """
    from ..checks.specs import parse_specs
    from ..errors import SelcalError, naming_flags, said
    from ..options import settings, split_items
    from ..pipeline.jobs import jobs_as_read, run_jobs
    from .measure import measure_study

    options, read, run = settings("study", options, read, run, **settings_values)
    if run.bootstrap:
        from ..bootstrap import check_arguments

        check_arguments(run.bootstrap, run.confidence)
    for name, value in (("bootstrap_refit", run.bootstrap_refit), ("sweep", run.sweep), ("sort_by", run.sort_by)):
        if value:
            raise SelcalError(f"{name} is not a setting of a study (the runs are judged against run-to-run noise "
                              "with fits as evaluated)")
    if (pattern is None) == (manifest is None):
        raise SelcalError(f"give the runs' recipes and seeds by {said('pattern', metavar='TEMPLATE')} or "
                          f"{said('manifest', metavar='FILE')} (one of them)")
    if manifest is not None:
        if paths:
            raise SelcalError(f"{said('manifest')} lists the runs: give no {'dumps' if naming_flags() else 'paths'} "
                              "beside it")
        runs = runs_from_manifest(manifest)
    else:
        paths = [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else list(paths or [])
        runs = runs_from_pattern(paths, pattern)
    if isinstance(metrics, str):
        metrics = split_items(metrics, "metrics")
    specs = parse_specs(metrics or (), said("metrics"))
    for spec in specs:
        if spec.model is not None:
            raise SelcalError(f"{said('metrics')} {spec.text}: a study names metrics without a model ([SCORE.]METRIC)")

    def jobs_of(members: Sequence[Run]):
        jobs = []
        for member in members:
            found = jobs_as_read(member.path, member.val, options, read)
            if len(found) != 1:
                raise SelcalError(f"{member.path}: holds {len(found)} models; a run of a study is one model (give "
                                  "each log or dump as its own run)")
            jobs += found
        return jobs

    return measure_study(runs, options=options, jobs_of=jobs_of,
                         run_jobs=lambda jobs: run_jobs(jobs, engine=run.engine), metrics_specs=specs,
                         baseline=baseline, resamples=run.bootstrap, confidence=run.confidence,
                         allow_other_data=allow_other_data, curves=curves, progress=progress)


class _CallablePackage(types.ModuleType):
    """This package's type: ``selcal.study(...)`` is :func:`study`."""

    def __call__(self, *args, **kwargs):
        return study(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
