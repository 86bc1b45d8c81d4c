"""Read and validate logit dumps (CONVENTIONS.md, "Input"). The only module that reads files.

Every problem with a file is raised as :class:`~selcal.errors.SelcalError` with one
line naming the file, the column, the first offending row (counted from 0) and what
to do. Code past this module trusts its arrays.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import SelcalError

__all__ = ["Dump", "read_dump", "atomic_write", "SPLIT_VALUES"]

SPLIT_VALUES = ("val", "test")
_WIDE_LOGIT = re.compile(r"^logit_(\d+)$")
_FLOAT_TYPES = (pa.float16(), pa.float32(), pa.float64())
_CHECK_ROWS = 1 << 16


@dataclass
class Dump:
    """The arrays of one logit dump, validated.

    ``logits`` keeps the file's float dtype (converted to float64 chunk by chunk later);
    a single binary logit v is stored as the two columns (0, v).
    """

    path: str
    logits: np.ndarray
    labels: np.ndarray
    split: np.ndarray | None = None
    ids: np.ndarray | None = None
    groups: np.ndarray | None = None
    n_ignored: int = 0
    binary: bool = False
    metadata: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return int(self.logits.shape[1])

    def __len__(self) -> int:
        return int(self.labels.size)

    def subset(self, rows: np.ndarray) -> "Dump":
        """The dump restricted to ``rows`` (a boolean mask or index array)."""
        pick = lambda a: None if a is None else a[rows]  # noqa: E731
        return Dump(
            path=self.path,
            logits=self.logits[rows],
            labels=self.labels[rows],
            split=pick(self.split),
            ids=pick(self.ids),
            groups=pick(self.groups),
            n_ignored=self.n_ignored,
            binary=self.binary,
            metadata=self.metadata,
        )


def _where(path, column=None, row=None) -> str:
    parts = [str(path)]
    if column is not None:
        parts.append(f"column '{column}'")
    if row is not None:
        parts.append(f"row {row}")
    return ": ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0]


def _fail(path, column, row, message: str) -> SelcalError:
    return SelcalError(f"{_where(path, column, row)}: {message}")


def read_dump(
    path,
    *,
    label_col: str = "label",
    logits_col: str | None = None,
    ignore_label: int | None = None,
    group_col: str | None = None,
) -> Dump:
    """Read a Parquet or ``.npz`` logit dump and validate it.

    Parameters
    ----------
    path : str or Path
    label_col : name of the integer label column (Parquet).
    logits_col : name of the list column holding the logits; by default ``logits``,
        else the only list column, else the wide columns ``logit_0 .. logit_{K-1}``.
    ignore_label : rows with this label are dropped and counted.
    group_col : optional column of group names for per-group breakdowns.
    """
    path = str(path)
    if not os.path.exists(path):
        raise _fail(path, None, None, "no such file; check the path")
    if os.path.isdir(path):
        raise _fail(path, None, None, "is a folder; give a .parquet or .npz file")
    if not os.access(path, os.R_OK):
        raise _fail(path, None, None, "cannot be read (permission denied)")
    if path.endswith(".npz"):
        columns = _read_npz(path, label_col)
    else:
        columns = _read_parquet(path, label_col, logits_col, group_col)
    return _validate(path, ignore_label=ignore_label, **columns)


# ----------------------------------------------------------------------------- npz
def _read_npz(path: str, label_col: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise _fail(path, None, None, f"not a readable .npz file ({_short(exc)})") from None
    if "logits" not in arrays:
        found = ", ".join(sorted(arrays)) or "nothing"
        raise _fail(path, None, None, f"no array named 'logits' (found: {found}); save logits and labels")
    label_key = next((k for k in (label_col, "labels", "label") if k in arrays), None)
    if label_key is None:
        raise _fail(path, None, None, "no array named 'labels'; save the labels beside the logits")
    logits = arrays["logits"]
    if logits.ndim == 1:
        logits = logits[:, None]
    if logits.ndim != 2:
        raise _fail(path, "logits", None, f"has {logits.ndim} dimensions; expected N x K")
    if logits.dtype not in (np.float16, np.float32, np.float64):
        raise _fail(path, "logits", None, f"has dtype {logits.dtype}; save float16, float32 or float64 logits")
    labels = arrays[label_key]
    if labels.ndim != 1 or labels.size != logits.shape[0]:
        raise _fail(path, label_key, None, f"has shape {labels.shape}; expected ({logits.shape[0]},), one label per row")
    split = arrays.get("split")
    return dict(
        logits=logits,
        labels=_labels_to_int(path, label_key, labels, None),
        split=None if split is None else split.astype(str),
        ids=None,
        groups=None,
        label_col=label_key,
        logits_col="logits",
        metadata={},
    )


# ------------------------------------------------------------------------- parquet
def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _read_parquet(path: str, label_col: str, logits_col: str | None, group_col: str | None) -> dict:
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _fail(path, None, None, f"not a readable Parquet file ({_short(exc)}); was it truncated or corrupted?") from None
    names = table.column_names
    if label_col not in names:
        raise _fail(
            path, None, None, f"no label column '{label_col}' (columns: {', '.join(names)}); name it with --label-col"
        )
    logits, logits_col = _logits_from_table(path, table, logits_col)
    labels = _labels_to_int(path, label_col, None, table.column(label_col))
    split = None
    if "split" in names:
        split_col = table.column("split")
        if not (pa.types.is_string(split_col.type) or pa.types.is_large_string(split_col.type)
                or pa.types.is_dictionary(split_col.type)):
            raise _fail(path, "split", None, f"has type {split_col.type}; it must hold the strings 'val' and 'test'")
        split = _strings(path, "split", split_col)
    ids = _strings(path, "id", table.column("id")) if "id" in names else None
    groups = None
    if group_col is not None:
        if group_col not in names:
            raise _fail(path, None, None, f"no group column '{group_col}' (columns: {', '.join(names)})")
        groups = _strings(path, group_col, table.column(group_col))
    metadata = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (table.schema.metadata or {}).items()
                if k.startswith(b"selcal.")}
    return dict(logits=logits, labels=labels, split=split, ids=ids, groups=groups,
                label_col=label_col, logits_col=logits_col, metadata=metadata)


def _strings(path: str, name: str, column: pa.ChunkedArray) -> np.ndarray:
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise _fail(path, name, row, "is empty (null); give every row a value")
    return np.asarray(column.cast(pa.string()).to_numpy(zero_copy_only=False), dtype=object).astype(str)


def _first_null_row(array: pa.Array) -> int:
    return int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])


def _logits_from_table(path: str, table: pa.Table, logits_col: str | None):
    names = table.column_names
    if logits_col is not None and logits_col not in names:
        raise _fail(path, None, None, f"no logits column '{logits_col}' (columns: {', '.join(names)})")
    if logits_col is None:
        list_columns = [f.name for f in table.schema if _is_list(f.type)]
        if "logits" in names:
            logits_col = "logits"
        elif len(list_columns) == 1:
            logits_col = list_columns[0]
        elif len(list_columns) > 1:
            raise _fail(path, None, None, f"several list columns ({', '.join(list_columns)}); name the logits with --logits-col")
        else:
            return _wide_logits(path, table), "logit_*"
    column = table.column(logits_col)
    if not _is_list(column.type):
        raise _fail(
            path, logits_col, None,
            f"has type {column.type}; logits must be a list of float16/float32/float64 per row "
            "or columns logit_0 .. logit_{K-1}",
        )
    value_type = column.type.value_type
    if _is_list(value_type):
        raise _fail(path, logits_col, None, f"holds nested lists ({column.type}); store one flat list of K logits per row")
    if value_type not in _FLOAT_TYPES:
        raise _fail(path, logits_col, None, f"holds {value_type} values; logits must be float16, float32 or float64")
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if array.null_count:
        raise _fail(path, logits_col, _first_null_row(array), "is null; every row needs its K logits")
    lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
    if lengths.size == 0:
        raise _fail(path, None, None, "has no rows")
    n_classes = int(lengths[0])
    ragged = np.flatnonzero(lengths != n_classes)
    if ragged.size:
        row = int(ragged[0])
        raise _fail(path, logits_col, row, f"has {lengths[row]} logits but row 0 has {n_classes}; every row needs the same K")
    if n_classes == 0:
        raise _fail(path, logits_col, 0, "is an empty list; every row needs its K logits")
    values = array.flatten()
    if values.null_count:
        raise _fail(path, logits_col, _first_null_row(values) // n_classes, "holds a null logit; store finite numbers")
    return values.to_numpy(zero_copy_only=False).reshape(-1, n_classes), logits_col


def _is_list(data_type) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type)


def _wide_logits(path: str, table: pa.Table) -> np.ndarray:
    indexed = {int(m.group(1)): name for name in table.column_names if (m := _WIDE_LOGIT.match(name))}
    if not indexed:
        raise _fail(
            path, None, None,
            f"no logits found (columns: {', '.join(table.column_names)}); store them in a list column "
            "'logits' or in columns logit_0 .. logit_{K-1}",
        )
    n_classes = len(indexed)
    missing = [k for k in range(n_classes) if k not in indexed]
    if missing:
        raise _fail(path, None, None, f"has {n_classes} logit_k columns but no 'logit_{missing[0]}'; number them 0 .. K-1")
    columns = []
    for k in range(n_classes):
        column = table.column(indexed[k])
        if column.type not in _FLOAT_TYPES:
            raise _fail(path, indexed[k], None, f"has type {column.type}; logits must be float16, float32 or float64")
        if column.null_count:
            raise _fail(path, indexed[k], _first_null_row(column.combine_chunks()), "is null; store finite numbers")
        columns.append(column.to_numpy())
    dtype = np.result_type(*columns)
    return np.stack(columns, axis=1).astype(dtype, copy=False)


def _labels_to_int(path: str, name: str, labels: np.ndarray | None, column: pa.ChunkedArray | None) -> np.ndarray:
    if column is not None:
        if column.null_count:
            raise _fail(path, name, _first_null_row(column.combine_chunks()), "has no label (null); every row needs one")
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise _fail(path, name, None, f"has type {column.type}; labels must be integers 0 .. K-1")
        labels = column.to_numpy()
    if labels.dtype.kind in "iu":
        if labels.dtype.kind == "u" and labels.size and labels.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(labels))
            raise _fail(path, name, row, f"label {labels[row]} is too large")
        return labels.astype(np.int64)
    if labels.dtype.kind == "f":
        whole = np.isfinite(labels) & (labels == np.round(labels))
        if not whole.all():
            row = int(np.flatnonzero(~whole)[0])
            raise _fail(path, name, row, f"label {labels[row]!r} is not a whole number; labels must be integers 0 .. K-1")
        return labels.astype(np.int64)
    raise _fail(path, name, None, f"has dtype {labels.dtype}; labels must be integers 0 .. K-1")


# ------------------------------------------------------------------------ validate
def _validate(path, *, logits, labels, split, ids, groups, label_col, logits_col, metadata, ignore_label) -> Dump:
    n_rows = labels.size
    if n_rows == 0:
        raise _fail(path, None, None, "has no rows")
    keep = np.ones(n_rows, dtype=bool) if ignore_label is None else labels != ignore_label
    n_classes = logits.shape[1]
    out_of_range = keep & ((labels < 0) | (labels >= max(n_classes, 2)))
    if out_of_range.any():
        row = int(np.flatnonzero(out_of_range)[0])
        hint = " (use --ignore-label for a void label)" if labels[row] >= max(n_classes, 2) else ""
        raise _fail(path, label_col, row, f"label {labels[row]} is outside 0 .. {max(n_classes, 2) - 1}{hint}")
    for start in range(0, n_rows, _CHECK_ROWS):
        chunk = logits[start:start + _CHECK_ROWS]
        bad = ~np.isfinite(chunk).all(axis=1) & keep[start:start + _CHECK_ROWS]
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            what = "NaN" if np.isnan(logits[row]).any() else "an infinite value"
            hint = " (float16 overflows above 65504: save the logits as float32)" if logits.dtype == np.float16 else ""
            raise _fail(path, logits_col, row, f"holds {what}{hint}; logits must be finite")
    if split is not None:
        unknown = ~np.isin(split, SPLIT_VALUES)
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            raise _fail(path, "split", row, f"has the value {split[row]!r}; use 'val' or 'test'")
    n_ignored = int(n_rows - keep.sum())
    if n_ignored:
        logits, labels = logits[keep], labels[keep]
        split = None if split is None else split[keep]
        ids = None if ids is None else ids[keep]
        groups = None if groups is None else groups[keep]
        if labels.size == 0:
            raise _fail(path, label_col, None, f"every row has the ignored label {ignore_label}; nothing to evaluate")
    binary = n_classes == 1
    if binary:
        logits = np.concatenate([np.zeros_like(logits), logits], axis=1)
    return Dump(path=path, logits=logits, labels=labels, split=split, ids=ids, groups=groups,
                n_ignored=n_ignored, binary=binary, metadata=metadata)


# ------------------------------------------------------------------------- output
@contextmanager
def atomic_write(path, mode: str = "w"):
    """Open a temporary file beside ``path``; rename it onto ``path`` only on success.

    A failed or killed run never leaves a partial file under the final name.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SelcalError(f"{path}: folder '{folder}' does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise SelcalError(f"{path}: folder '{folder}' is not writable; choose another output path")
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, mode) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise
