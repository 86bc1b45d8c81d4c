"""Deep ensembles from saved dumps: ``selcal ensemble M1 M2 ... --out ENS.parquet``.

The members' softmax probabilities are averaged; the ensemble dump holds the logits
log(mean_m softmax(v_m)) (so its softmax is the ensemble's mean probability), the
per-row ``mutual_information`` H(mean_m p_m) - mean_m H(p_m) and ``disagreement`` (the
fraction of members whose argmax differs from the ensemble's), the label, the split and
the ids. Members are read in row batches, one after another: memory is O(N x K) for the
running sum, never O(M x N x K).

References
----------
Lakshminarayanan et al., "Simple and scalable predictive uncertainty estimation using
deep ensembles", NeurIPS 2017; Xia et al., ICLR 2025 (deep ensembles as the baseline of
selective classification).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import scores
from ..errors import SelcalError
from ..io import expand_binary, open_dump
from .output import atomic_write, classify

__all__ = ["ensemble", "EnsembleSummary", "ENSEMBLE_METADATA", "LOGITS_METADATA"]

ENSEMBLE_METADATA = "selcal.ensemble"  # JSON: {"members": [...], "combine": ...}
LOGITS_METADATA = "selcal.logits"  # "log-probabilities": softmax gives the probabilities, logsumexp = 0


@dataclass
class EnsembleSummary:
    """What :func:`ensemble` wrote."""

    path: str
    members: list[str]
    n_rows: int
    num_classes: int
    aligned_by: str  # "id" or "order"


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """log p_k = (v_k - v_max) - log1p(S), exact in its top entry to the last digit near p = 1."""
    _, _, rest = scores.softmax_terms(logits)
    return logits - logits.max(axis=1, keepdims=True) - np.log1p(rest)[:, None]


def _float_logits(batch_logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(batch_logits, dtype=np.float64)
    return expand_binary(logits) if logits.shape[1] == 1 else logits


def _check_unique(path: str, ids: np.ndarray | None) -> None:
    if ids is None:
        return
    unique, first_index, counts = np.unique(ids, return_index=True, return_counts=True)
    if (counts > 1).any():
        duplicate = unique[counts > 1][0]
        rows = np.flatnonzero(ids == duplicate)[:2].tolist()
        raise SelcalError(f"{path}: column 'id', row {rows[1]}: id {str(duplicate)!r} also at row {rows[0]}; "
                          "every row needs its own id")


def _ids_as_stored(source, ids: np.ndarray) -> pa.Array:
    """The ids (read as text by every reader) in the type the first member stores them: integer
    ids stay integers, anything else is text."""
    stored = None
    if getattr(source, "file", None) is not None and hasattr(source.file, "schema_arrow"):
        names = source.file.schema_arrow.names
        stored = source.file.schema_arrow.field("id").type if "id" in names else None
    elif getattr(source, "_arrays", None) is not None and "id" in source._arrays:
        dtype = np.asarray(source._arrays["id"]).dtype
        stored = pa.from_numpy_dtype(dtype) if dtype.kind in "iu" else None
    if stored is not None and pa.types.is_integer(stored):
        try:
            return pa.array(np.asarray(ids).astype(np.int64)).cast(stored)
        except (ValueError, OverflowError, pa.ArrowInvalid):
            pass
    return pa.array(ids, type=pa.string())


def _require_same(path: str, column: str, what: str, first, member, start: int, first_path: str,
                  aligned_by: str, advice: str, show) -> None:
    """Refuse, in one line naming the member's first differing row, a batch whose ``what`` values differ
    from the first member's for the same rows."""
    differs = first != member
    if differs.any():
        i = int(np.flatnonzero(differs)[0])
        how = "for the same id" if aligned_by == "id" else "at the same row (no id column)"
        raise SelcalError(f"{path}: column '{column}', row {start + i}: {what} {show(member[i])} but {first_path} "
                          f"has {show(first[i])} {how}; {advice}")


def ensemble(paths, out, *, label_col: str | None = None, logits_col: str | None = None) -> EnsembleSummary:
    """Combine the dumps ``paths`` (the same rows, two or more models) into one dump at ``out``.

    Rows are aligned by the ``id`` column when every member has one (the same set of ids;
    the first member's order is kept), else by position, when every member has the same
    labels in the same order. Anything else is refused with one line.
    """
    paths = [str(p) for p in paths]
    if len(paths) < 2:
        raise SelcalError("an ensemble needs at least two dumps")
    if str(out) in paths:
        raise SelcalError(f"{out}: is one of the members; write the ensemble to another file")
    classify(out, inputs=paths)  # a member under another name (./, a symlink, a hard link), a folder, ...
    def member(path):
        source = open_dump(path, label_col=label_col, logits_col=logits_col)
        if getattr(source, "confidence_only", False):
            raise SelcalError(f"{source.path}: holds no logits; an ensemble averages the members' softmax")
        return source

    # First look at every member (K, rows, ids), one at a time: a member read whole (.npz) is
    # released before the next is opened, so at most one member's logits are held at once.
    first = member(paths[0])
    n_classes, n, first_ids = max(first.num_classes, 2), first.num_rows, first.id_column()
    _check_unique(paths[0], first_ids)
    id_array = None if first_ids is None else _ids_as_stored(first, first_ids)
    aligned_by = "id" if first_ids is not None else "order"
    positions: list[np.ndarray | None] = [None] * len(paths)  # member row -> row of the first member
    order = np.argsort(first_ids, kind="stable") if first_ids is not None else None
    first_path, first_classes = first.path, first.num_classes
    del first
    for index, path in enumerate(paths[1:], start=1):
        source = member(path)
        if max(source.num_classes, 2) != n_classes:
            raise SelcalError(f"{source.path}: has K = {source.num_classes} classes but {first_path} has "
                              f"K = {first_classes}; an ensemble needs models of the same classes")
        if source.num_rows != n:
            raise SelcalError(f"{source.path}: has {source.num_rows} rows but {first_path} has {n}; "
                              "an ensemble needs the same rows in every member")
        member_ids = source.id_column()
        _check_unique(path, member_ids)
        if (member_ids is None) != (first_ids is None):
            without = path if member_ids is None else first_path
            raise SelcalError(f"{without}: has no 'id' column but another member has; give every member ids, or none")
        if member_ids is not None:
            where = np.minimum(np.searchsorted(first_ids, member_ids, sorter=order), n - 1)
            found = order[where]
            missing = first_ids[found] != member_ids
            if missing.any():
                row = int(np.flatnonzero(missing)[0])
                raise SelcalError(f"{path}: column 'id', row {row}: id {str(member_ids[row])!r} is not in "
                                  f"{first_path}; an ensemble needs the same rows in every member")
            positions[index] = found
        del source

    log_sum = None  # running log sum_m p_m, (N, K): the only N x K array
    entropy_sum = np.zeros(n)
    member_preds = np.empty((len(paths), n), dtype=np.int32)
    labels = split = None
    for m, path in enumerate(paths):
        source = member(path)
        offset = 0
        for batch in source.batches():
            rows = slice(offset, offset + batch.labels.size)
            offset += batch.labels.size
            target = np.arange(rows.start, rows.stop) if positions[m] is None else positions[m][rows]
            logits = _float_logits(batch.logits)
            log_p = _log_softmax(logits)
            if log_sum is None:
                log_sum = np.empty((n, n_classes))
                labels = np.empty(n, dtype=np.int64)
                split = np.empty(n, dtype=object) if batch.split is not None else None
            if m == 0:
                log_sum[target] = log_p
                labels[target] = batch.labels
                if split is not None:
                    split[target] = batch.split
            else:
                _require_same(source.path, source.label_col, "label", labels[target], batch.labels, rows.start,
                              paths[0], aligned_by, "an ensemble needs the same rows in every member",
                              show=lambda value: str(int(value)))
                if split is not None and batch.split is not None:
                    _require_same(source.path, "split", "split", split[target], batch.split, rows.start, paths[0],
                                  aligned_by, "the members must agree on which rows fit (val) and which are "
                                  "evaluated (test)", show=lambda value: f"'{value}'")
                log_sum[target] = np.logaddexp(log_sum[target], log_p)
            entropy_sum[target] -= scores.negative_entropy(logits)
            member_preds[m, target] = np.argmax(logits, axis=1)
        if offset != n:
            raise SelcalError(f"{source.path}: holds {offset} rows but its metadata says {n}; was it truncated?")
        del source

    log_mean = log_sum
    log_mean -= math.log(len(paths))  # log(mean_m p_m): every entry finite
    ensemble_entropy = -scores.negative_entropy(log_mean)
    mutual_information = np.maximum(ensemble_entropy - entropy_sum / len(paths), 0.0)
    ensemble_pred = np.argmax(log_mean, axis=1)
    disagreement = (member_preds != ensemble_pred[None, :]).mean(axis=0)

    metadata = {
        ENSEMBLE_METADATA: json.dumps({"members": paths, "combine": "log mean softmax", "aligned_by": aligned_by}),
        LOGITS_METADATA: "log-probabilities",
    }
    columns = {
        "logits": pa.FixedSizeListArray.from_arrays(pa.array(np.empty(0), type=pa.float64()), n_classes),
        "label": pa.array(labels, type=pa.int64()),
        "mutual_information": pa.array(mutual_information, type=pa.float64()),
        "disagreement": pa.array(disagreement, type=pa.float64()),
    }
    if split is not None:
        columns["split"] = pa.array(split.astype(str), type=pa.string())
    if first_ids is not None:
        columns["id"] = id_array
    schema = pa.schema([(name, array.type) for name, array in columns.items()], metadata=metadata)
    step = max(1, min(65536, (1 << 20) // n_classes))  # rows per written slice: the Arrow copy stays small
    with atomic_write(out, "wb", inputs=paths) as handle, pq.ParquetWriter(handle, schema) as writer:
        for start in range(0, n, step):
            part = {name: array.slice(start, step) for name, array in columns.items()}
            part["logits"] = pa.FixedSizeListArray.from_arrays(
                pa.array(log_mean[start:start + step].ravel(), type=pa.float64()), n_classes)
            writer.write_table(pa.table(part, schema=schema))
    return EnsembleSummary(path=str(out), members=paths, n_rows=n, num_classes=n_classes, aligned_by=aligned_by)
