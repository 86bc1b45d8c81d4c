"""The Python face of ``selcal evaluate``: :func:`evaluate` (files) and :func:`evaluate_arrays`
(arrays you hold), with ``--bootstrap`` intervals when asked.

The evaluation itself is :mod:`selcal.pipeline` (split -> fit -> reduce -> measure, in memory
and streamed alike); the intervals are :mod:`selcal.bootstrap`. Their names are re-exported
here, where earlier versions defined them (``from selcal.evaluate import Options, measure_arrays``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import fields, replace

import numpy as np

from .metrics import diagnostics
from .errors import ModelsFailed, SelcalError
from .io import expand_input, read_dump
from .io.parquet import parquet_schema_metadata
from .options import (DEFAULT_COVERAGES, DEFAULT_P_GRID, DEFAULT_RISKS, MAX_BINS, MAX_P,  # noqa: F401
                      MAX_P_GRID_VALUES, parse_floats, parse_p_grid)
from .options import DEFAULT_CONFIDENCE, FigureSettings, Options, ReadSettings, RunSettings, settings  # noqa: F401
from .results import EvaluationResult
from .pipeline.jobs import (DEFAULT_MEMORY_BUDGET, ModelJob, evaluate_model, jobs_as_read, model_jobs,  # noqa: F401
                            run_jobs)
from .pipeline.measure import (data_warnings, evaluate_dump, fit_scores, logit_kind, measure_arrays,  # noqa: F401
                               scores_for_input, with_input)
from .pipeline.reduce import RowReduction, ScoreRows, probability_terms, in_top_k, reduce_rows  # noqa: F401
from .pipeline.split import (SharedRows, model_name_of, check_ids, count_shared_rows, holdout_mask, row_hashes,  # noqa: F401
                             split_plan, split_rows)
from .pipeline.stream import evaluate_confidences, evaluate_source  # noqa: F401

__all__ = ["Options", "ReadSettings", "RunSettings", "FigureSettings", "ModelsFailed", "evaluate", "evaluate_dump", "evaluate_arrays", "measure_arrays", "holdout_mask", "ModelJob",
           "evaluate_model", "model_jobs", "run_jobs", "with_intervals", "resolve_options", "sweep_values", "add_sweep"]


def evaluate(
    paths,
    val=None,
    *,
    options: Options | None = None,
    read: ReadSettings | None = None,
    run: RunSettings | None = None,
    figures: FigureSettings | None = None,
    progress: Callable | None = None,
    **settings_values,
) -> EvaluationResult:
    """Evaluate one or several dumps; the Python API behind ``selcal evaluate`` (which parses its
    flags into these records, calls this function and renders what it returns).

    Parameters
    ----------
    paths : path or list of paths to TEST dumps (Parquet, .npz, a folder or glob of
        Parquet parts), one model each.
    val : path or list of paths, one validation dump per TEST file (optional).
    options : :class:`~selcal.options.Options`, everything that changes a number.
    read : :class:`~selcal.options.ReadSettings`, how the files are read: ``label_col``,
        ``logits_col``, ``ignore_label``, ``group_col``, ``pixels_per_image`` (pixels drawn per
        image of a segmentation folder, seeded by ``options.seed``), ``input_kind`` (``logits``,
        ``probs`` or ``logprobs``; default: probabilities are detected), ``lm_norm``
        (lm-evaluation-harness logs: ``none``, ``chars`` or ``bytes``), ``ood_label`` (rows that
        belong to no class: errors, with their own group), ``stream`` and ``memory_budget`` (read a
        TEST file by row batches; by default when its logits take more than ``memory_budget``
        bytes; the numbers are the same, bit for bit).
    run : :class:`~selcal.options.RunSettings`: ``engine`` (``local``, or ``ray``: one Ray task
        per model; the same numbers), ``bootstrap``, ``bootstrap_refit``, ``confidence``
        (percentile intervals from B resamples, 0: none), ``sweep`` (a hyperparameter that differs
        between the models: each model's value, from the Parquet metadata key of that name or else
        from the file name, goes into ``extra["sweep"]``) and ``sort_by`` (the leaderboard's column,
        checked here before the work).
    figures : :class:`~selcal.options.FigureSettings` when figures or the report will be drawn
        from the result: checked against the number of TEST files, and the data of the figures
        drawn from the sorted-logit profile are kept.
    progress : ``progress(what, done, total)``, called as the work advances: ``"rows"`` of a single
        model's evaluation pass (``total`` may be None), ``"models"`` done (first with 0),
        ``"resamples"`` of the bootstrap. (A function of ``(done, total)`` receives the rows only.)
    **settings_values : fields of any of the three records (``scores="msp,temp"``, ``bins=20``,
        ``label_col="y"``, ``bootstrap=1000``, ``engine="ray"``, ...), checked as the CLI checks its
        flags.

    Raises
    ------
    SelcalError
        A bad option or setting, before any work.
    ModelsFailed
        When some models could not be evaluated (every other one was): one message per failed
        model, naming its file.

    Examples
    --------
    >>> result = evaluate("sample_logits/calibrator_cifar10_resnet50_ce.parquet")
    >>> round(result.models[0].scores["msp"]["aurc"], 6)
    0.009505
    """
    from .report.leaderboard import sort_column

    options, read, run = settings("evaluate", options, read, run, **settings_values)
    paths, vals = _paths(paths), None if val is None else _paths(val, "val")
    report = _hook(progress)
    if run.bootstrap:
        from .bootstrap import check_arguments

        check_arguments(run.bootstrap, run.confidence)  # before the work, not after it
    sort_column(run.sort_by, run.sweep)  # a column the leaderboard does not have: refused before the work
    if figures is not None:
        figures.check_models(len(paths))
        if figures.logit_profile and not options.logit_profile:
            options = replace(options, logit_profile=True)
    swept = None if run.sweep is None else sweep_values(paths, run.sweep)
    jobs = jobs_as_read(paths, vals, options, read)
    result, failures = run_jobs(jobs, engine=run.engine, progress=_part(report, "rows"),
                                models_progress=_part(report, "models"))
    if failures:  # every model was evaluated; each one that failed is named
        raise ModelsFailed([failure.message for failure in failures])
    if swept is not None and run.sweep is not None:
        add_sweep(result, run.sweep, swept)
    if run.bootstrap:
        result = with_intervals(result, resamples=run.bootstrap, confidence=run.confidence, refit=run.bootstrap_refit,
                                paths=paths, val=vals, progress=_part(report, "resamples"),
                                label_col=read.label_col, logits_col=read.logits_col, ignore_label=read.ignore_label,
                                pixels_per_image=read.pixels_per_image, input_kind=read.input_kind,
                                lm_norm=read.lm_norm, ood_label=read.ood_label)
    return result


def _paths(paths, name: str = "paths") -> list[str]:
    """One path or several, as a list of strings; anything else (a DataFrame, an array of logits) is
    refused in one line pointing to :func:`evaluate_arrays` (a DataFrame was iterated as paths)."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        return [os.fsdecode(paths)]
    several = None if hasattr(type(paths), "columns") or not hasattr(paths, "__iter__") else list(paths)
    wrong = paths if several is None else next((p for p in several if not (
        isinstance(p, (str, bytes)) or hasattr(p, "__fspath__"))), None)
    if several is None or wrong is not None:
        library = type(wrong).__module__.split(".")[0]
        what = ("" if library == "builtins" else library + ".") + type(wrong).__name__
        raise SelcalError(f"{name}: got {what}, not a path; pass the path of a dump (or a list of paths), or "
                          "arrays in memory to selcal.evaluate_arrays(logits, labels)")
    return [os.fsdecode(p) for p in several]


def _hook(progress) -> Callable[[str, int, int | None], None] | None:
    """``progress(what, done, total)``; a function of ``(done, total)`` is given the rows only."""
    if progress is None:
        return None
    try:
        inspect.signature(progress).bind("rows", 0, 0)
    except TypeError:
        return lambda what, done, total: progress(done, total) if what == "rows" else None
    except ValueError:  # (a builtin without a signature)
        pass
    return progress


def _part(report, what: str) -> Callable[[int, int | None], None] | None:
    """``(done, total)`` of one part of the work, for ``report(what, done, total)``."""
    return None if report is None else lambda done, total: report(what, done, total)


def resolve_options(options: Options | None, option_values: dict, caller: str) -> Options:
    """``options`` with the keyword arguments ``option_values`` (fields of :class:`Options`) applied."""
    options = options or Options()
    if not option_values:
        return options
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(option_values) - known)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}; "
                        f"the options are {', '.join(sorted(known))}")
    return replace(options, **option_values)


def with_intervals(result: EvaluationResult, *, resamples: int, confidence: float, refit: bool, paths=None, val=None,
                   refit_data=None, progress=None, **read) -> EvaluationResult:
    """``--bootstrap``: intervals for every model of ``result``; with ``refit``, the fitted scores refitted
    on every resample (the dumps at ``paths``/``val`` are read again, or ``refit_data`` is given)."""
    from .bootstrap import add_intervals

    if refit and refit_data is None:

        refit_data = refit_data_of(_paths(paths), None if val is None else _paths(val), result.options, **read)
    return add_intervals(result, resamples=resamples, seed=result.options.seed, confidence=confidence,
                         refit=refit_data if refit else None, progress=progress)


def evaluate_arrays(
    logits,
    labels,
    val_logits=None,
    val_labels=None,
    *,
    options: Options | None = None,
    name: str | None = None,
    groups=None,
    ignore_label: int | None = None,
    ids=None,
    input_kind: str | None = None,
    ood_label: int | None = None,
    bootstrap: int = RunSettings.bootstrap,
    bootstrap_refit: bool = RunSettings.bootstrap_refit,
    confidence: float = RunSettings.confidence,
    progress: Callable[[int, int | None], None] | None = None,
    path: str = "",
    split: str | None = None,
    warnings: Sequence[str] = (),
    extra: dict | None = None,
    clusters=None,
    **option_values,
) -> EvaluationResult:
    """Evaluate one model from arrays you already hold; :func:`evaluate` for arrays.

    The conventions are those of a file given to ``selcal evaluate``: with ``val_logits``
    and ``val_labels`` the scores are fitted on them (as with ``--val``); without, and when
    a fitted score is asked for, on a seeded random hold-out of the rows (``val_fraction``,
    ``seed``); one binary logit per row (a 1-D array, or K = 1) means logits (0, v).

    Parameters
    ----------
    logits, val_logits : (N, K) or (N,) numbers: numpy arrays, lists, torch tensors (any
        device, ``requires_grad``, float16 or bfloat16), pandas or polars objects (a
        DataFrame of logits columns, or a column whose values are the rows: arrays or
        lists), polars LazyFrames (collected). Floats: an integer (or boolean) array, tensor or
        column is refused, as in a file (cast it, e.g. ``logits.float()``); lists of Python
        numbers are read as numbers (``[[2, 0], [0, 1]]``), as in a JSON Lines file.
    labels, val_labels : (N,) integers 0 .. K-1 (bool and whole floats are read as integers).
    options : :class:`Options`; or give its fields as keyword arguments, e.g.
        ``scores="msp,temp"``, ``bins=20``, ``risks=[0.01]``, ``p_grid="1-10"``, ``seed=1``.
    name : the model's name in the result; by default the stem of ``path`` when given, else
        ``"model"``. Results gathered in one :class:`EvaluationResult` never share a name: a
        name already taken is numbered (``model``, ``model 2``, ...), so give each its own.
    groups : (N,) a group per row (e.g. the source data set): per-group metrics, as ``--group-col``.
    ignore_label : rows with this label are dropped and counted (as ``--ignore-label``).
    input_kind : what ``logits`` hold, ``logits``, ``probs`` or ``logprobs`` (as ``--input``;
        default: probabilities are detected and read as such, as in a file).
    ood_label : rows with this label belong to no class (as ``--ood-label``).
    ids : (N,) a name per row (as an ``id`` column): the most-confident-errors table
        (``confident_errors``) names rows by it; by default by their index.
    bootstrap, bootstrap_refit, confidence : as ``--bootstrap``, ``--bootstrap-refit``, ``--confidence``.
    path, split, warnings, extra, clusters : what the result says of where the rows come from
        (the split rule's name, warnings and JSON keys to add, the image of each row).

    Returns
    -------
    :class:`~selcal.report.EvaluationResult` of one model (``.models``, ``.to_json()``; it also
    answers for its model: ``result.scores`` is ``result.models[0].scores``).

    Errors name the Python arguments (``logits: row 3 holds NaN for class 0; ...``,
    ``bins must be at least 1, got 0``).

    Examples
    --------
    >>> result = evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], [0, 1, 1], scores="msp,max_logit")
    >>> result.models[0].accuracy, result.models[0].n_eval
    (0.6666666666666666, 3)
    """
    from .io.objects import array_dump, to_numpy

    options = resolve_options(options, option_values, "evaluate_arrays")
    if bootstrap:
        from .bootstrap import check_arguments

        check_arguments(bootstrap, confidence)
    if (val_logits is None) != (val_labels is None):
        raise SelcalError("val_logits and val_labels go together: pass both or neither")
    test = array_dump(logits, labels, ("logits", "labels"), ignore_label=ignore_label, groups=groups, ids=ids,
                      input_kind=input_kind, ood_label=ood_label)
    val = None if val_logits is None else array_dump(val_logits, val_labels, ("val_logits", "val_labels"),
                                                     ignore_label=ignore_label, input_kind=input_kind or test.input,
                                                     ood_label=ood_label)
    options, dropped = scores_for_input(options, test.input, "logits", python=True)
    name = name or (model_name_of(path) if path else "model")
    model = with_input(evaluate_dump(test, val, options=options, name=name, progress=progress), test.input, dropped)
    model.path = path
    if val is not None:
        model.extra["val_path"] = None
    if split is not None:
        model.split = split
    model.warnings[:0] = list(warnings)
    model.extra.update(extra or {})
    if clusters is not None:
        model.clusters = np.asarray(to_numpy(clusters, "clusters")).ravel()
    result = EvaluationResult(models=[model], options=options)
    if bootstrap:
        refit_data = None
        if bootstrap_refit:
            from .bootstrap import RefitData

            fit, rows, _ = split_rows(test, val, options)
            refit_data = [None if fit is None else RefitData(rows.logits, rows.labels, fit.logits, fit.labels)]
        result = with_intervals(result, resamples=bootstrap, confidence=confidence, refit=bootstrap_refit,
                                refit_data=refit_data)
    return result


def sweep_values(paths, name: str) -> list[float]:
    """Each TEST file's value of the swept hyperparameter ``name`` (``--sweep NAME``): its
    Parquet metadata key ``name``, else its file name (:func:`selcal.metrics.diagnostics.sweep_value`)."""
    return [diagnostics.sweep_value(path, name, parquet_schema_metadata(path)) for path in _paths(paths)]


def add_sweep(result: EvaluationResult, name: str, values: Sequence[float]) -> None:
    """Set ``extra["sweep"] = {name: value}`` on each model (in the order of the TEST files)."""
    for model, value in zip(result.models, values):
        model.extra["sweep"] = {name: value}


def refit_data_of(paths: Sequence, val: Sequence | None, options, *, label_col: str | None = None,
               logits_col: str | None = None, ignore_label: int | None = None,
               pixels_per_image: int | None = None, **reading) -> list:
    """The logits of every model's evaluation and validation rows, for ``--bootstrap-refit``.

    Reads the dumps again and splits them exactly as ``selcal.evaluate`` does, so the
    evaluation rows are those of the result, in the same order (a path that stands for several
    models, :func:`selcal.io.expand_input`, gives one each). ``reading``: ``input_kind``,
    ``ood_label``, ``lm_norm``, as the evaluation read them.
    """
    from .bootstrap import RefitData

    out: list = []
    models = [(index, model, settings) for index, path in enumerate(paths)
              for model, settings, _ in expand_input(str(path))]
    for index, path, settings in models:
        pixels = dict(pixels_per_image=pixels_per_image, seed=options.seed)  # (segmentation folders only)
        test = read_dump(str(path), label_col=label_col, logits_col=logits_col, ignore_label=ignore_label, **pixels,
                         **reading, **settings)
        val_dump = read_dump(str(val[index]), label_col=label_col, logits_col=logits_col,
                             ignore_label=ignore_label, **pixels, **reading) if val else None
        fit, rows, _ = split_rows(test, val_dump, scores_for_input(options, test.input, test.path)[0])
        if fit is None:
            out.append(None)
            continue
        out.append(RefitData(rows.logits, rows.labels, fit.logits, fit.labels, clusters=rows.images,
                             val_clusters=fit.images))
    return out
