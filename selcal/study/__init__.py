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
    bootstrap: int = 0,
    confidence: float = 0.95,
    engine: str = "local",
    allow_other_data: bool = False,
    options=None,
    label_col: str | None = None,
    logits_col: str | None = None,
    ignore_label: int | None = None,
    input_kind: str | None = None,
    ood_label: int | None = None,
    pixels_per_image: int | None = None,
    curves: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    **option_values,
) -> StudyResult:
    """Compare training recipes over their runs; the Python API behind ``selcal study``.

    Parameters
    ----------
    paths : the runs' dumps (any input ``selcal evaluate`` reads, one model each), with
        ``pattern``, a template such as ``"{dataset}/{recipe}_seed{seed}.parquet"`` (fields in
        braces, ``*`` a wildcard; other fields, e.g. ``{arch}``, become columns);
    manifest : or a CSV with the columns ``path``, ``recipe``, ``seed`` and optionally ``dataset``
        and ``val`` (a validation dump of the run); its relative paths are relative to it.
    baseline : a recipe: every other recipe's difference to it, with verdicts (with ``bootstrap``).
    metrics : the metrics of the table and of the verdicts, e.g. ``["msp.aurc", "ece"]``
        (``[SCORE.]METRIC``; default: accuracy, the AURC of the first score and the ECE of
        the first score that has one, as ``selcal check``).
    bootstrap, confidence : resamples of the two-level bootstrap (0: no intervals) and the level.
    engine : ``local`` or ``ray``, as for :func:`selcal.evaluate`: the same numbers.
    allow_other_data : accept runs of one data set evaluated on other rows (refused otherwise).
    options, **option_values : the :class:`selcal.Options` of the evaluation of every run (``scores``,
        ``bins``, ``seed`` (also the bootstrap's), ...), as for :func:`selcal.evaluate`.
    curves : keep each recipe's averaged risk-coverage curve (for the figures).
    progress : ``progress(what, done, total)`` with what ``"runs"`` or ``"resamples"``.

    Returns
    -------
    :class:`StudyResult`; ``.to_polars()`` is the table ``--csv`` writes, ``.to_json()`` the JSON.
    """
    from ..checks.specs import parse_specs
    from ..errors import SelcalError
    from ..api import resolve_options
    from ..options import split_items
    from ..pipeline.jobs import model_jobs, run_jobs
    from .measure import measure_study

    options = resolve_options(options, option_values, "study")
    if bootstrap:
        from ..bootstrap import check_arguments

        check_arguments(bootstrap, confidence)
    if engine not in ("local", "ray"):
        raise SelcalError(f"--engine must be local or ray; got {engine!r}")
    if (pattern is None) == (manifest is None):
        raise SelcalError("give the runs' recipes and seeds by --pattern TEMPLATE or --manifest FILE (one of them)")
    if manifest is not None:
        if paths:
            raise SelcalError("--manifest lists the runs: give no dumps beside it")
        runs = runs_from_manifest(manifest)
    else:
        paths = [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else list(paths or [])
        runs = runs_from_pattern(paths, pattern)
    if isinstance(metrics, str):
        metrics = split_items(metrics, "--metric")
    specs = parse_specs(metrics or (), "--metric")
    for spec in specs:
        if spec.model is not None:
            raise SelcalError(f"--metric {spec.text}: a study names metrics without a model ([SCORE.]METRIC)")
    reading = dict(label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                   pixels_per_image=pixels_per_image,
                   reader_settings={"input_kind": input_kind, "ood_label": ood_label})

    def jobs_of(members: Sequence[Run]):
        jobs = []
        for run in members:
            found = model_jobs(run.path, run.val, options=options, **reading)
            if len(found) != 1:
                raise SelcalError(f"{run.path}: holds {len(found)} models; a run of a study is one model (give "
                                  "each log or dump as its own run)")
            jobs += found
        return jobs

    return measure_study(runs, options=options, jobs_of=jobs_of,
                         run_jobs=lambda jobs: run_jobs(jobs, engine=engine), metrics_specs=specs, baseline=baseline,
                         resamples=bootstrap, confidence=confidence, allow_other_data=allow_other_data,
                         curves=curves, progress=progress)


class _CallablePackage(types.ModuleType):
    """This package's type: ``selcal.study(...)`` is :func:`study`."""

    def __call__(self, *args, **kwargs):
        return study(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
