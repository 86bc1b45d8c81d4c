"""Every metric of one model from its validation and evaluation rows: fit the scores (their registry
entries), reduce the rows, measure (the metric catalog), in memory (:func:`evaluate_dump`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..metrics import calibration, diagnostics, selective
from .. import scores
from ..errors import SelcalError, said
from ..metrics.exact_sums import single_threaded_blas
from .identity import fingerprint
from ..io import Dump
from ..io.lmeval import METADATA_KEY as LM_METADATA
from ..metrics import catalog
from ..options import Options
from ..results import ModelResult
from ..scores import REGISTRY, validate
from .reduce import RowReduction, array_chunks, reduce_rows, rows_per_chunk
from .split import (SharedRows, ensemble_provenance, model_name_of, split_provenance, check_ids, count_shared_rows,
    leak_warnings, pixel_provenance, prime_allocator, split_column_warnings, split_rows, split_warnings)

__all__ = ["data_warnings", "evaluate_dump", "fit_scores", "logit_kind", "measure_arrays", "finish_scores",
           "degenerate_warnings"]


# ------------------------------------------------------------------------- metrics
def _score_metrics(score: np.ndarray, correct: np.ndarray, options: Options):
    curve = selective.risk_coverage(score, correct)
    metrics = selective.selective_metrics(
        curve, risks=options.risks, coverages=options.coverages, estimator=options.aurc_estimator
    )
    return curve, metrics


def _calibration_metrics(confidence: np.ndarray, correct: np.ndarray, options: Options) -> dict[str, float]:
    """Every metric of a top-label confidence in the catalog (ECE, adaptive ECE by
    ``options.aece_estimator``, MCE, smooth ECE and its σ*, ...), each computation once."""
    out: dict[str, float] = {}
    for computation in catalog.computations():
        out.update(computation.values(confidence, correct, options))
    return out


def measure_arrays(
    logits: np.ndarray,
    labels: np.ndarray,
    val_logits: np.ndarray | None = None,
    val_labels: np.ndarray | None = None,
    *,
    options: Options = Options(),
    name: str = "model",
    path: str = "",
    split: str = "none",
    warnings: Sequence[str] = (),
    extra: dict | None = None,
    groups: np.ndarray | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    columns: dict[str, np.ndarray] | None = None,
    clusters: np.ndarray | None = None,
    ids: np.ndarray | None = None,
    image_names: np.ndarray | None = None,
    scale_means_nothing: str | None = None,
) -> ModelResult:
    """Every metric of CONVENTIONS.md for one model, from validated numpy arrays already split
    (the core of :func:`evaluate_dump`; from Python, use :func:`evaluate_arrays`).

    ``logits`` (N, K) and ``labels`` (N,) are the evaluation rows; ``val_logits`` and
    ``val_labels`` the validation rows the ``pnorm`` and ``temp`` scores are fitted on.
    ``groups`` (N,), optional, names a group per evaluation row (e.g. the source data
    set); each group then gets its own accuracy and selective metrics under ``groups``.
    ``clusters`` (N,), optional, the image of each pixel row: ``--bootstrap`` then
    resamples images, not rows. ``columns`` maps the names in ``options.score_cols`` and
    ``options.uncertainty_cols`` to their values on the evaluation rows.
    ``ids`` (N,), optional, names the evaluation rows in the most-confident-errors table
    (by default, their index in ``logits``); with ``clusters`` and ``image_names`` (the name of
    each cluster index), the table also names the image of each pixel row.
    ``scale_means_nothing``: why the logits' scale means nothing (an lm-evaluation-harness log's
    log-likelihoods, :data:`LM_SCALE`): the scores that read it are left out (:func:`leave_out`), as
    they are on logits found to be log-probabilities.
    """
    prime_allocator()  # (the chunk temporaries on the heap, not a fresh mmap each)
    labels = np.asarray(labels, dtype=np.int64)
    warnings = list(warnings)
    n_val = 0 if val_labels is None else int(np.asarray(val_labels).size)
    states = fit_scores(val_logits, val_labels, options, where=path or name, warnings=warnings)
    chunks = array_chunks(logits, labels, rows_per_chunk(logits.shape[1], options))
    result = measure_chunks(chunks, logits.shape[1], states, options=options, name=name,
                      path=path, split=split, n_val=n_val, warnings=warnings, extra=extra, groups=groups, progress=progress,
                      total=labels.size, columns=columns, scale_means_nothing=scale_means_nothing,
                      ids_of=(lambda rows: rows) if ids is None else (lambda rows: ids[rows]),
                      images_of=None if clusters is None or image_names is None else
                      (lambda rows: np.asarray(image_names)[np.asarray(clusters)[rows]]))
    result.clusters = clusters
    result.row_ids = ids
    result.extra["fingerprint"] = fingerprint(labels, ids)  # what the numbers were measured on
    return result


def fit_scores(val_logits, val_labels, options: Options, *, where: str = "", warnings: list[str] | None = None) -> dict:
    """The state of every chosen fitted score (name -> what its ``fit`` returned), fitted on the
    validation rows only; the warnings the fits find go into ``warnings``."""
    fitted = scores.fitted(options.scores)
    if not fitted:
        return {}
    if val_labels is None or np.asarray(val_labels).size == 0:
        raise SelcalError(f"{where}: the {' and '.join(fitted)} score{'s' if len(fitted) > 1 else ''} need"
                          f"{'' if len(fitted) > 1 else 's'} validation rows; give {said('val', metavar='FILE')}, "
                          f"a split column, or use {said('scores', 'msp,max_logit')}")
    val_logits = np.asarray(val_logits)  # as stored (e.g. float32): the fits convert row chunks to float64
    val_labels = np.asarray(val_labels, dtype=np.int64)
    if (val_labels < 0).any():  # rows of no class (--ood-label) have no label to fit to
        n_ood = int(np.count_nonzero(val_labels < 0))
        val_logits, val_labels = val_logits[val_labels >= 0], val_labels[val_labels >= 0]
        if val_labels.size == 0:
            raise SelcalError(f"{where}: every validation row is of no class ({said('ood_label')}); the "
                              f"{' and '.join(fitted)} fit needs in-distribution validation rows")
        if warnings is not None:
            warnings.append(f"{n_ood} validation rows are of no class ({said('ood_label')}): {_and(fitted)} "
                            f"{'is' if len(fitted) == 1 else 'are'} fitted on the other {val_labels.size}")
    n_classes = (max(int(val_logits.shape[1]), 2) if val_logits.ndim == 2 else None)  # one binary logit: K = 2
    for name in fitted:  # refusals known from the sizes alone come before any fit
        if REGISTRY[name].precheck is not None and n_classes is not None:
            REGISTRY[name].precheck(int(val_labels.size), n_classes, options)
    states = {}
    with single_threaded_blas():  # a fit summing through BLAS gives the same bits with any thread setting
        for name in fitted:
            entry = REGISTRY[name]
            states[name] = validate.fitted_state(entry, val_logits, val_labels, options)
            if entry.warnings is not None and warnings is not None:
                warnings.extend(entry.warnings(states[name]))
    per_class = [name for name in fitted if REGISTRY[name].per_class]
    if per_class and n_classes is not None and warnings is not None:
        missing = np.flatnonzero(np.bincount(val_labels, minlength=n_classes)[:n_classes] == 0)
        if missing.size:
            shown = ", ".join(str(c) for c in missing[:10]) + (f" and {missing.size - 10} more" if missing.size > 10 else "")
            warnings.append(f"class{'es' if missing.size > 1 else ''} {shown} "
                            f"{'have' if missing.size > 1 else 'has'} no validation rows: {_and(per_class)} "
                            f"(a map per class) then (almost) never predict "
                            f"{'them' if missing.size > 1 else 'it'}; give validation rows of every class")
    return states


def measure_chunks(chunks, n_classes: int, states: dict, *, options: Options, name: str, path: str, split: str,
             n_val: int, warnings: list[str], extra: dict | None, groups, progress, total: int | None = None,
             columns: dict | None = None,
             ids_of: Callable[[np.ndarray], np.ndarray] | None = None,
             images_of: Callable[[np.ndarray], np.ndarray] | None = None,
             scale_means_nothing: str | None = None) -> ModelResult:
    """Reduce the evaluation chunks and compute every metric from the per-row numbers."""
    rows = reduce_rows(chunks, n_classes, options=options, states=states, progress=progress, total=total)
    correct = rows.correct
    n = correct.size
    declared = bool((extra or {}).get("ensemble")) or (extra or {}).get("input") in ("probs", "logprobs")
    warnings.extend(data_warnings(rows, options.scores, log_probabilities=declared, options=options))
    if scale_means_nothing is None and not declared and logit_kind(rows) == "log-probabilities":
        scale_means_nothing = LOGPROB_SCALE
    result = ModelResult(
        name=name, path=path, num_classes=int(n_classes), n_eval=n, n_val=n_val, split=split,
        accuracy=float(np.count_nonzero(correct) / n),
        top5_accuracy=None if rows.top5 is None else float(np.count_nonzero(rows.top5) / n),
        error=float(np.count_nonzero(~correct) / n),
        nll=known_mean(rows.nll), brier=known_mean(rows.brier),
        cece=calibration.classwise_calibration_error(rows.classwise),
        warnings=warnings, extra=dict(extra or {}), rows=rows,
    )
    for score_name in options.scores:
        entry, score_rows, state = REGISTRY[score_name], rows.scores[score_name], states.get(score_name)
        own = score_rows.correct if score_rows.correct is not None else correct
        curve, metrics = _score_metrics(score_rows.values, own, options)
        measured: dict = {}
        if score_rows.confidence is not None:
            metrics.update(_calibration_metrics(score_rows.confidence, own, options))
            result.confidences[score_name] = score_rows.confidence
            if score_rows.correct is not None:
                measured["accuracy"] = float(np.count_nonzero(own) / n)
                result.score_correct[score_name] = own
            if score_rows.nll is not None:
                infinite = int(np.count_nonzero(np.isinf(score_rows.nll)))
                measured["nll"] = None if infinite else known_mean(score_rows.nll)
                if infinite:  # a label given probability 0 (isotonic): null and counted, never clipped
                    measured["nll_infinite_rows"] = infinite
            if score_rows.brier is not None:
                measured["brier"] = known_mean(score_rows.brier)
            if score_rows.classwise is not None:
                measured["cece"] = calibration.classwise_calibration_error(score_rows.classwise)
        metrics.update(entry.json_keys(state, measured))
        result.add_score(score_name, metrics, curve, score_rows.values)
        if entry.needs_fit:
            result.states[score_name] = state
    if rows.ood is not None and rows.ood.any():
        result.extra["n_ood"] = int(np.count_nonzero(rows.ood))
    if scale_means_nothing is not None:
        leave_out(result, scale_readers(options.scores, options), scale_means_nothing)
    add_column_scores(result, columns or {}, options)
    finish_scores(result, options)
    if groups is not None:
        result.groups = np.asarray(groups)
        result.extra["groups"] = group_metrics(result, options)
    if options.errors_top:
        result.confident_errors = _confident_errors(result, options.errors_top, ids_of or (lambda r: r), images_of)
    return result


def finish_scores(result: ModelResult, options: Options) -> None:
    """Once every score of ``result`` is measured: the warnings about degenerate confidences
    (:func:`degenerate_warnings`), then ``options.calibration_test`` (``--calibration-test M``: every
    probability score's null distribution of ECE, adaptive ECE and smooth ECE,
    :func:`selcal.bootstrap.null.add_calibration_test`)."""
    result.warnings.extend(degenerate_warnings(result))
    if options.calibration_test:
        from ..bootstrap.null import add_calibration_test

        add_calibration_test(result, options.calibration_test, options.seed, options)


DEGENERATE_BELOW = 3  # a confidence with fewer distinct values on the evaluation rows is warned about


def degenerate_warnings(result: ModelResult) -> list[str]:
    """The scores whose values take fewer than 3 distinct values on the evaluation rows (CONVENTIONS.md,
    "Degenerate confidences"), one warning for those with one value and one for those with two: what
    their calibration and selective metrics then mean (they are reported as defined). The distinct
    values are the tie groups of each score's risk-coverage curve.

    Examples
    --------
    >>> import selcal
    >>> model = selcal.evaluate_arrays([[0.0, -9.0], [0.0, -9.0], [-9.0, 0.0]], [0, 1, 1], scores="msp").models[0]
    >>> print(degenerate_warnings(model)[0][:75])
    msp: the confidence takes one value on the 3 evaluation rows (msp 0.999877)
    """
    found: dict[int, list[str]] = {1: [], 2: []}
    for name, curve in result.curves.items():
        if curve.thresholds.size < DEGENERATE_BELOW:
            found[curve.thresholds.size].append(name)
    out = []
    for count, names in found.items():
        if not names:
            continue
        n = result.curves[names[0]].n
        values = "; ".join(f"{name} " + ", ".join(f"{v + 0.0:.6g}" for v in (
            np.unique(result.confidences[name]) if name in result.confidences else result.curves[name].thresholds[::-1]))
                           for name in names)
        with_ece = [name for name in names if result.scores.get(name, {}).get("ece") is not None]
        if count == 1:
            ece = (f"the ECE of {_and(with_ece)} is |accuracy - confidence| ("
                   + ", ".join(f"{100 * result.scores[name]['ece']:.2f}%" for name in with_ece) + "), and ")
            selective = "the selective metrics are those of abstaining at random (AURC = the error rate)"
        else:
            ece = f"the ECE of {_and(with_ece)} is |accuracy - confidence| within each value's rows, and "
            selective = "the selective metrics rank two groups of rows, at random within each"
        out.append(f"{_and(names)}: the confidence takes {'one value' if count == 1 else 'only two values'} on the "
                   f"{n} evaluation rows ({values}), as a model that gives no log-probabilities does: "
                   f"{ece if with_ece else ''}{selective}; the metrics are reported as defined")
    return out


def known_mean(values: np.ndarray) -> float:
    """The exact mean over the rows that have a value: NaN marks a row of no class
    (``--ood-label``), whose NLL and Brier are not defined."""
    values = np.asarray(values, dtype=np.float64)
    known = ~np.isnan(values)
    return scores.exact_mean(values if known.all() else values[known]) if known.any() else float("nan")


def add_column_scores(result: ModelResult, columns: dict, options: Options) -> None:
    """The scores read from columns of the TEST file (``--score-col``, ``--uncertainty-col``).

    An uncertainty u is ranked as the confidence -u (exact). A confidence column whose values
    all lie in [0, 1] is read as the probability that the prediction is correct and also gets
    ECE, adaptive ECE and MCE.
    """
    correct = result.rows.correct
    for name in options.score_cols + options.uncertainty_cols:
        if name not in columns:
            raise SelcalError(f"score column '{name}': no values were given for it; score columns are read from "
                              "the TEST file (selcal.evaluate, or measure_arrays(..., columns={name: values}))")
        values = np.asarray(columns[name], dtype=np.float64)
        if values.size != correct.size:
            raise AssertionError(f"column {name}: {values.size} values for {correct.size} evaluation rows")
        uncertainty = name in options.uncertainty_cols
        score = -values if uncertainty else values
        curve, metrics = _score_metrics(score, correct, options)
        probability = not uncertainty and bool(values.size) and values.min() >= 0.0 and values.max() <= 1.0
        metrics.update(column=name, orientation="uncertainty" if uncertainty else "confidence",
                       probability_of_correct=probability)
        if probability:
            metrics.update(_calibration_metrics(values, correct, options))
        result.add_score(name, metrics, curve, score)


def _confident_errors(result: ModelResult, top: int, ids_of, images_of=None) -> dict:
    """The most confident errors of every score (see :func:`selcal.metrics.diagnostics.confident_errors`)."""
    rows = result.rows
    out = {}
    for name, values in result.score_values.items():
        entry = REGISTRY.get(name)
        own = entry is not None and name in result.score_correct
        out[name] = diagnostics.confident_errors(
            values, result.score_correct.get(name, rows.correct), top, curve=result.curves[name], ids_of=ids_of,
            labels=rows.label, predictions=rows.scores[name].pred if own else rows.pred,
            probability=entry is not None and entry.is_probability(result.scores[name]), images_of=images_of)
    return out


def group_metrics(result: ModelResult, options: Options) -> dict[str, dict]:
    """Accuracy and the selective metrics of every score, within each group's rows (and a warning for a
    score constant within a group, not constant overall)."""
    correct = result.rows.correct
    out = {}
    constant_overall = {name for name, curve in result.curves.items() if curve.thresholds.size == 1}
    for group in sorted(set(result.groups.tolist())):
        members = result.groups == group
        group_correct = correct[members]
        scores = {}
        for name, values in result.score_values.items():
            curve, scores[name] = _score_metrics(values[members], result.score_correct.get(name, correct)[members],
                                                 options)
            if curve.thresholds.size == 1 and curve.n > 1 and name not in constant_overall:
                value = (result.confidences[name][members][0] if name in result.confidences else curve.thresholds[0])
                result.warnings.append(f"{name}: the confidence is constant ({value + 0.0:.6g}) within group "
                                       f"'{group}' ({curve.n} rows), so its selective metrics there are those of "
                                       "abstaining at random (AURC = the group's error rate)")
        out[group] = {
            "n_eval": int(members.sum()),
            "accuracy": float(np.count_nonzero(group_correct) / group_correct.size),
            "scores": scores,
        }
    return out


INPUT_WORDS = {"probs": "probabilities", "logprobs": "log-probabilities"}


def scores_for_input(options: Options, kind: str, where: str = "", *, python: bool = False) -> tuple[Options, list[str]]:
    """``options`` without the scores not computed on a file holding probabilities or
    log-probabilities (``available_on`` in the registry: on probabilities every ``raw_logits``
    score, on log-probabilities those that read the logits' shift; CONVENTIONS.md, "Input").
    Returns the options and the names left out; ``python``: the refusal names the Python arguments."""
    if kind == "logits":
        return options, []
    dropped = [name for name in options.scores if not REGISTRY[name].available_on(kind, options)]
    kept = [name for name in options.scores if name not in dropped]
    if dropped and not kept:
        raise SelcalError(f"{where}: holds {INPUT_WORDS[kind]}, and {_and(dropped)} need{'s' if len(dropped) == 1 else ''}"
                          " raw logits; choose scores that do not (e.g. "
                          f"{said('scores', 'msp,temp', python=python)}), or pass "
                          f"{said('input_kind', 'logits', python=python)}")
    return (replace(options, scores=tuple(kept)) if dropped else options), dropped


def with_input(result: ModelResult, kind: str, dropped: Sequence[str]) -> ModelResult:
    """``result`` saying what its file held (JSON ``input``) and which scores are not available on it."""
    if kind != "logits":
        result.extra["input"] = kind
    if dropped:
        result.extra["not_available"] = {"scores": list(dropped), "metrics": [],
                                         "reason": f"on {INPUT_WORDS[kind]} (they need raw logits)"}
    return result


def _and(names: Sequence[str]) -> str:
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


LOGPROB_SCALE = "on logits that look like log-probabilities (logsumexp = 0 on every row)"
LM_SCALE = "on the log-likelihoods of an lm-evaluation-harness log (a choice's length sets their scale)"


def scale_readers(chosen: Sequence[str], options: Options) -> list[str]:
    """The chosen scores that read the logits' scale (``reads_scale``), unless every chosen score
    does (then none: a run of max_logit alone keeps it, under its warning)."""
    readers = [name for name in chosen if REGISTRY[name].reads_scale(options)]
    return readers if len(readers) < len(chosen) else []


def leave_out(result: ModelResult, names: Sequence[str], reason: str) -> ModelResult:
    """``result`` without the scores ``names``, which mean nothing on its logits (``reason``): no
    number of theirs anywhere (table, leaderboard, CSV, report, best score, intervals, figures),
    named under ``not_available`` as the scores a file of probabilities cannot have.

    Called before the per-group metrics and the most confident errors, which then skip them."""
    names = [name for name in names if name in result.scores]
    if not names:
        return result
    for store in (result.scores, result.curves, result.score_values, result.confidences, result.score_correct,
                  result.states):
        for name in names:
            store.pop(name, None)
    known = result.extra.get("not_available") or {"scores": [], "metrics": []}
    result.extra["not_available"] = {**known, "scores": list(dict.fromkeys([*known["scores"], *names])),
                                     "reason": known.get("reason") or reason}
    return result


def logit_kind(rows: RowReduction) -> str:
    """What the logit column seems to hold: ``"probabilities"`` (non-negative, rows sum to 1
    on more than 99% of rows), ``"log-probabilities"`` (logsumexp = 0 on more than 99% of
    rows) or ``"logits"``. In the first two the max logit is not a logit (plots skip vmax_msp)."""
    if rows.looks_like_probabilities.mean() > 0.99:
        return "probabilities"
    if (np.abs(rows.max_logit - rows.log_msp) < 1e-4).mean() > 0.99:  # logsumexp(v) = 0
        return "log-probabilities"
    return "logits"


def data_warnings(rows: RowReduction, chosen: Sequence[str] = (), log_probabilities: bool = False,
                  options: Options | None = None) -> list[str]:
    """Signs that the dump holds something other than logits and 0-based labels.

    ``chosen``: the scores evaluated (the log-probabilities warning names those that read
    the logits' scale under ``options``, ``reads_scale`` in the registry). ``log_probabilities``: the dump says
    it holds log-probabilities (an ensemble written by ``selcal ensemble``), so they are not
    warned about.
    """
    warnings = []
    kind = logit_kind(rows)
    if kind == "probabilities":
        warnings.append("the logits look like probabilities (non-negative, rows sum to 1): "
                        "save logits, or log-probabilities, instead")
    elif kind == "log-probabilities" and not log_probabilities:
        options = options or Options()
        right = [n for n in chosen if not REGISTRY[n].reads_scale(options)]
        wrong = ([n for n in chosen if REGISTRY[n].reads_scale(options)]
                 or [n for n in REGISTRY if REGISTRY[n].reads_scale(options)])
        warnings.append("the logits look like log-probabilities (logsumexp = 0 on every row): "
                        + (f"{_and(right)} {'is' if len(right) == 1 else 'are'} right, but " if right else "")
                        + f"{_and(wrong)} {'is' if len(wrong) == 1 else 'are'} not meaningful"
                        + (" (left out)" if scale_readers(chosen, options) else ""))
    accuracy = rows.correct.mean()
    shifted_accuracy = rows.label_is_pred_plus_one.mean()
    if shifted_accuracy > max(2 * accuracy, 0.5):
        warnings.append(f"the labels look 1-based: label = prediction + 1 on {100 * shifted_accuracy:.1f}% "
                        f"of rows, label = prediction on {100 * accuracy:.1f}%; subtract 1 from the labels")
    return warnings


def evaluate_dump(test: Dump, val: Dump | None = None, *, options: Options = Options(), name: str | None = None,
                  progress: Callable[[int, int | None], None] | None = None) -> ModelResult:
    """Split, fit and measure one model's dump (see :func:`measure_arrays`)."""
    check_ids(test.path, test.ids, val.path if val is not None else None, val.ids if val is not None else None,
              test.split, val.split if val is not None else None)
    numbered = test.ids is None and options.errors_top
    if numbered:  # the confident errors name a row by its number in the file
        test = replace(test, ids=np.arange(len(test)))
    val_rows, eval_rows, rule = split_rows(test, val, options, by_position=numbered)
    n_train = test.n_train + (val.n_train if val is not None else 0)
    extra = split_provenance(rule, options, val.path if val is not None else None, test.binary,
                        test.n_ignored + (val.n_ignored if val is not None else 0), n_train,
                        by_id=test.ids is not None and not numbered)
    extra.update(ensemble_provenance(test.metadata))
    if test.input != "logits":  # what the file held (selcal.io.probs)
        extra["input"] = test.input
    if test.images is not None:
        extra["pixels"] = pixel_provenance(test.metadata, test.image_names, test.images,
                                           None if val_rows is None or rule == "val-file" else val_rows.images,
                                           eval_rows.images, val)
    warnings = split_warnings(len(eval_rows), len(val_rows) if options.needs_validation and val_rows else None,
                              eval_rows.n_ignored) + split_column_warnings(test.split)
    result = measure_arrays(
        eval_rows.logits, eval_rows.labels,
        None if val_rows is None else val_rows.logits,
        None if val_rows is None else val_rows.labels,
        options=options, name=name or model_name_of(test.path), path=test.path, split=rule,
        warnings=warnings,
        extra=extra, groups=eval_rows.groups,
        progress=progress, clusters=eval_rows.images, columns=eval_rows.columns,
        ids=eval_rows.ids,
        image_names=None if eval_rows.images is None or test.image_names is None else test.image_names,
        scale_means_nothing=LM_SCALE if (test.metadata or {}).get(LM_METADATA) else None,
    )
    if numbered:  # row numbers selcal made are no ids
        result.extra["fingerprint"] = fingerprint(eval_rows.labels)
        result.row_ids = None
    if val is not None:  # after the fit's own warnings, as in evaluate_source
        shared = count_shared_rows(eval_rows.logits, eval_rows.labels, SharedRows(val_rows.logits, val_rows.labels))
        result.warnings += leak_warnings(test.path, val.path, shared)
    result.cluster_names = test.image_names
    return result
