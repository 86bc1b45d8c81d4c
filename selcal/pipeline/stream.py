"""The same evaluation for a dump read by row batches (memory bounded by the validation rows), and
for a file of confidences without logits; the numbers are bit for bit those of the in-memory path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..errors import SelcalError, said
from .identity import fingerprint
from ..io import Dump, DumpSource, expand_binary
from ..io.base import nothing_left_message, release_read_buffers
from ..io.lmeval import METADATA_KEY as LM_METADATA
from ..metrics import catalog
from ..options import Options
from ..results import ModelResult
from .measure import LM_SCALE, add_column_scores, group_metrics, measure_chunks, finish_scores, fit_scores
from .reduce import RowReduction, rows_per_chunk
from .split import (SharedRows, check_same_classes, ensemble_provenance, model_name_of, split_provenance, rows_of,
    rule_name, check_ids, count_shared_rows, holdout_mask, image_holdout_mask, leak_warnings, pixel_provenance,
    split_column_warnings, split_plan, split_warnings)

__all__ = ["evaluate_confidences", "evaluate_source", "read_columns"]


# ------------------------------------------------------------------------ streaming
def _release_freed_memory() -> None:
    """Hand memory freed by finished chunks back to the OS (glibc keeps it otherwise).

    Without this, glibc's heap keeps the freed chunk buffers, and a long streamed run's
    resident memory creeps up with the number of chunks even though nothing is live.
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc: nothing to do
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def stream_chunks(source: DumpSource, eval_mask: np.ndarray | None, rows: int, groups_out: list | None,
                   val_rows: SharedRows | None = None, shared: list | None = None):
    """Evaluation rows of a streamed dump as (logits, labels) chunks of at most ``rows`` rows.

    With ``val_rows``, the evaluation rows that are also validation rows are counted into ``shared[0]``.
    """
    offset = 0
    for index, batch in enumerate(source.batches(rows, ids=False)):  # (the ids are read once: id_column())
        if index % 8 == 7:
            _release_freed_memory()
        logits, labels, groups = batch.logits, batch.labels, batch.groups
        if eval_mask is not None:
            keep = eval_mask[offset:offset + labels.size]
            logits, labels = logits[keep], labels[keep]
            groups = None if groups is None else groups[keep]
        offset += batch.labels.size
        if groups_out is not None and groups is not None:
            groups_out.append(groups)
        if labels.size:
            logits = expand_binary(logits) if logits.shape[1] == 1 else logits
            if val_rows is not None:
                shared[0] += count_shared_rows(logits, labels, val_rows)
            yield logits, labels


def gather_rows(source: DumpSource, mask: np.ndarray) -> Dump:
    """The rows of a streamed dump selected by ``mask``, in memory (e.g. its validation rows)."""
    n_rows = int(mask.sum())
    logits, labels = None, np.empty(n_rows, dtype=np.int64)
    offset = filled = 0
    for batch in source.batches():
        keep = mask[offset:offset + batch.labels.size]
        offset += batch.labels.size
        if logits is None:
            logits = np.empty((n_rows, batch.logits.shape[1]), dtype=batch.logits.dtype)
        taken = int(keep.sum())
        logits[filled:filled + taken] = batch.logits[keep]
        labels[filled:filled + taken] = batch.labels[keep]
        filled += taken
    release_read_buffers()
    binary = logits.shape[1] == 1
    return Dump(path=source.path, logits=expand_binary(logits) if binary else logits, labels=labels, binary=binary)


def read_columns(source: DumpSource, options: Options) -> dict[str, np.ndarray]:
    """The values of ``options.score_cols`` and ``options.uncertainty_cols`` for every kept row of the file."""
    return {name: source.value_column(name) for name in options.score_cols + options.uncertainty_cols}


def evaluate_confidences(source: DumpSource, val: DumpSource | None = None, *, options: Options = Options(),
                         name: str | None = None) -> ModelResult:
    """A file with no logits, only a confidence, a prediction and a label per row
    (:class:`selcal.io.confidence.ConfidenceSource`).

    The scores are its columns: ``options.score_cols`` and ``options.uncertainty_cols``, or by
    default the column ``confidence``. Every selective metric is computed, and ECE, adaptive
    ECE and MCE for a confidence in [0, 1] (the top-label calibration). The scores and the
    numbers that need logits (``options.scores``, NLL, Brier, class-wise ECE, top-5) are
    listed under ``not_available``. With a split column, the 'test' rows are evaluated.
    """
    from ..io.confidence import CONFIDENCE_NAME

    python = getattr(source, "python", False)  # (its messages name what the caller used: val=, or --val)
    if val is not None:
        raise SelcalError(f"{source.path}: holds no logits, so nothing is fitted on a {said('val', python=python)} "
                          f"file; leave out {said('val', python=python)}")
    rule, _, eval_mask = split_plan(source.split_column(), False, False, lambda: None)
    labels, predictions = source.labels, source.predictions
    if eval_mask is not None:
        labels, predictions = labels[eval_mask], predictions[eval_mask]
    if labels.size == 0:
        raise SelcalError(f"{source.path}: has no evaluation rows")
    given = options.score_cols or options.uncertainty_cols
    if not given and CONFIDENCE_NAME not in source._names:
        raise SelcalError(f"{source.path}: no column '{CONFIDENCE_NAME}' (columns: {', '.join(source._names)}); "
                          f"name the confidence with {said('score_cols', python=python)} or the uncertainty with "
                          f"{said('uncertainty_cols', python=python)}")
    column_options = options if given else replace(options, score_cols=(CONFIDENCE_NAME,))
    columns = {column: values if eval_mask is None else values[eval_mask]
               for column, values in read_columns(source, column_options).items()}
    correct = predictions == labels
    n = int(correct.size)
    rows = RowReduction(correct=correct, log_msp=None, max_logit=None, nll=None, brier=None,
                        looks_like_probabilities=None, label_is_pred_plus_one=None, classwise=None)
    n_ignored = source.num_rows - source.num_kept_rows
    extra = {"val_path": None, "logits": False,
             "not_available": {"scores": list(options.scores), "metrics": list(catalog.need_logits())}}
    if n_ignored:
        extra["n_ignored"] = n_ignored
    ids = source.id_column()
    extra["fingerprint"] = fingerprint(labels, None if ids is None else ids if eval_mask is None else ids[eval_mask])
    result = ModelResult(
        name=name or model_name_of(source.path), path=source.path, num_classes=None, n_eval=n, n_val=0, split=rule,
        accuracy=float(np.count_nonzero(correct) / n), error=float(np.count_nonzero(~correct) / n),
        nll=None, brier=None, cece=None, warnings=split_warnings(n, None, n_ignored), extra=extra, rows=rows,
    )
    add_column_scores(result, columns, column_options)
    finish_scores(result, options)
    return result


def evaluate_source(test: DumpSource, val: DumpSource | None = None, *, options: Options = Options(),
                    name: str | None = None, progress: Callable[[int, int | None], None] | None = None) -> ModelResult:
    """:func:`evaluate_dump` for a dump streamed by row batches: memory bounded by the
    validation rows, whatever the size of the evaluation rows.

    The split rules are those of :func:`split_rows` (a hold-out is chosen by the same row
    hashes), and the per-row numbers are the same, so the result is bit-for-bit that of
    the in-memory path.
    """
    if test.num_rows == 0:
        raise SelcalError(f"{test.path}: has no rows")
    if test.num_kept_rows == 0:
        raise SelcalError(f"{test.path}: column '{test.label_col}': {nothing_left_message(test)}")
    check_ids(test.path, test.id_column(), val.path if val is not None else None,
              val.id_column() if val is not None else None, test.split_column(),
              val.split_column() if val is not None else None)
    images = test.image_column()

    def holdout() -> np.ndarray:
        if images is not None:
            return image_holdout_mask(images[0], images[1], options.val_fraction, options.seed, where=test.path)
        return holdout_mask(test.num_kept_rows, test.id_column(), options.val_fraction, options.seed, test.path)

    rule, val_mask, eval_mask = split_plan(test.split_column(), val is not None, options.needs_validation, holdout)
    rule = rule_name(rule, images is not None, test.metadata)
    if val is not None:
        val_rows = rows_of(val.read_all(), "val")
        check_same_classes(test.path, test.num_classes, val.path, val.num_classes)
    elif val_mask is not None and options.needs_validation:
        val_rows = gather_rows(test, val_mask)  # read only when something is fitted on them
    else:
        val_rows = None
    n_val = len(val_rows) if val_rows is not None else 0 if val_mask is None else int(val_mask.sum())
    n_train = test.num_train_rows + (val.num_train_rows if val is not None else 0)
    n_ignored = (test.num_rows - test.num_kept_rows - test.num_train_rows
                 + (val.num_rows - val.num_kept_rows - val.num_train_rows if val is not None else 0))
    n_eval = test.num_kept_rows if eval_mask is None else int(eval_mask.sum())
    warnings = split_warnings(n_eval, len(val_rows) if options.needs_validation and val_rows else None,
                              test.num_rows - test.num_kept_rows - test.num_train_rows) + \
        split_column_warnings(test.split_column())
    states = fit_scores(None if val_rows is None else val_rows.logits,
                        None if val_rows is None else val_rows.labels, options, where=test.path, warnings=warnings)
    extra = split_provenance(rule, options, val.path if val is not None else None, test.num_classes == 1, n_ignored,
                        n_train, by_id=rule == "holdout" and test.id_column() is not None)
    extra.update(ensemble_provenance(test.metadata))
    if (test.input_kind or test.detected_input or "logits") != "logits":  # what the file held (selcal.io.probs)
        extra["input"] = test.input_kind or test.detected_input
    eval_images = None
    if images is not None:
        eval_images = images[0] if eval_mask is None else images[0][eval_mask]
        val_images = images[0][val_mask] if val_mask is not None and rule != "val-file" else None
        extra["pixels"] = pixel_provenance(test.metadata, images[1], images[0], val_images, eval_images,
                                           val_rows if val is not None else None)
    n_classes = max(test.num_classes, 2)
    groups: list | None = [] if test.has_groups else None
    shared = [0]
    shared_index = None if val is None else SharedRows(val_rows.logits, val_rows.labels)
    seen_labels: list = []  # the evaluation rows' labels, for the fingerprint
    chunks = ((logits, seen_labels.append(labels) or labels) for logits, labels in
              stream_chunks(test, eval_mask, rows_per_chunk(n_classes, options), groups, shared_index, shared))
    result = measure_chunks(chunks, n_classes, states, options=options,
                      name=name or model_name_of(test.path),
                      path=test.path, split=rule, n_val=n_val,
                      warnings=warnings, extra=extra, groups=None, progress=progress, total=n_eval,
                      columns={column: values if eval_mask is None else values[eval_mask]
                               for column, values in read_columns(test, options).items()},
                      ids_of=_stream_ids(test, eval_mask),
                      scale_means_nothing=LM_SCALE if (test.metadata or {}).get(LM_METADATA) else None)
    ids = test.id_column()
    result.row_ids = None if ids is None else ids if eval_mask is None else ids[eval_mask]
    result.extra["fingerprint"] = fingerprint(
        np.concatenate(seen_labels) if seen_labels else np.zeros(0, np.int64), result.row_ids)
    if val is not None:
        result.warnings += [w for w in leak_warnings(test.path, val.path, shared[0]) if w not in result.warnings]
    if groups:
        result.groups = np.concatenate(groups)
        result.extra["groups"] = group_metrics(result, options)
    result.clusters = eval_images
    result.cluster_names = None if images is None else images[1]
    return result


def _stream_ids(source: DumpSource, eval_mask: np.ndarray | None):
    """ids_of(evaluation positions) for a streamed dump: its ids, or row numbers (read when asked)."""
    def ids_of(positions: np.ndarray) -> np.ndarray:
        kept = positions if eval_mask is None else np.flatnonzero(eval_mask)[positions]
        ids = source.id_column()
        return kept if ids is None else ids[kept]
    return ids_of
