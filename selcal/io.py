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

__all__ = ["Dump", "Batch", "read_dump", "open_dump", "expand_binary", "atomic_write", "SPLIT_VALUES"]

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
    source = open_dump(path, label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                       group_col=group_col)
    return source.read_all()


def open_dump(path, *, label_col: str = "label", logits_col: str | None = None, ignore_label: int | None = None,
              group_col: str | None = None) -> "DumpSource":
    """Open a dump for reading in row batches (the schema is checked now, the rows as they come)."""
    path = str(path)
    if not os.path.exists(path):
        raise _fail(path, None, None, "no such file; check the path")
    if os.path.isdir(path):
        raise _fail(path, None, None, "is a folder; give a .parquet or .npz file")
    if not os.access(path, os.R_OK):
        raise _fail(path, None, None, "cannot be read (permission denied)")
    if path.endswith(".npz"):
        return NpzSource(path, label_col, ignore_label)
    return ParquetSource(path, label_col, logits_col, ignore_label, group_col)


@dataclass
class Batch:
    """Validated rows of one batch; ``first_row`` is the file row number of its first row."""

    logits: np.ndarray
    labels: np.ndarray
    split: np.ndarray | None
    ids: np.ndarray | None
    groups: np.ndarray | None
    n_ignored: int
    first_row: int


class DumpSource:
    """A dump opened for reading: ``batches()`` yields validated :class:`Batch` objects."""

    path: str
    num_rows: int
    metadata: dict
    ignore_label: int | None
    label_col: str
    logits_col: str

    def raw_batches(self, batch_rows: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def _labels_and_split(self) -> tuple[np.ndarray, np.ndarray | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def num_classes(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def logits_bytes(self) -> int:
        """Size of the logits in memory, as stored (before any float64 conversion)."""
        raise NotImplementedError  # pragma: no cover

    def _kept(self) -> tuple[np.ndarray, np.ndarray | None]:
        if not hasattr(self, "_kept_cache"):
            labels, split = self._labels_and_split()
            keep = None if self.ignore_label is None else labels != self.ignore_label
            if keep is not None and split is not None:
                split = split[keep]
            self._kept_cache = (int(labels.size if keep is None else keep.sum()), split)
        return self._kept_cache

    @property
    def num_kept_rows(self) -> int:
        """Rows left after dropping the ignored label."""
        return self._kept()[0]

    def id_column(self) -> np.ndarray | None:
        """The id of every kept row (None without an id column), read without the logits."""
        return None

    def split_column(self) -> np.ndarray | None:
        """The split value of every kept row (None without a split column), read without the logits."""
        return self._kept()[1]

    def batches(self, batch_rows: int | None = None):
        """Validated batches of at most ``batch_rows`` rows (default: about 2**21 logits), in file order."""
        if batch_rows is None:
            batch_rows = max(64, (1 << 21) // max(self.num_classes, 1))
        for columns, first_row in self.raw_batches(batch_rows):
            yield self._validate(first_row=first_row, **columns)

    def read_all(self) -> Dump:
        """Every row in memory (the logits keep their float dtype), filled batch by batch."""
        logits = None
        parts: list[Batch] = []
        filled = seen = 0
        for batch in self.batches():
            seen += len(batch.labels) + batch.n_ignored
            if seen > self.num_rows:
                raise _fail(self.path, None, None, "holds more rows than its metadata says; was it corrupted?")
            if logits is None:
                logits = np.empty((self.num_rows, batch.logits.shape[1]), dtype=batch.logits.dtype)
            logits[filled:filled + len(batch.labels)] = batch.logits
            filled += len(batch.labels)
            batch.logits = None  # release the batch's buffer
            parts.append(batch)
        if not parts or self.num_rows == 0:
            raise _fail(self.path, None, None, "has no rows")
        if filled == 0:
            raise _fail(self.path, self.label_col, None,
                        f"every row has the ignored label {self.ignore_label}; nothing to evaluate")
        logits = logits[:filled]
        join = lambda name: None if getattr(parts[0], name) is None else np.concatenate(  # noqa: E731
            [getattr(b, name) for b in parts])
        binary = logits.shape[1] == 1
        if binary:
            logits = expand_binary(logits)
        return Dump(path=self.path, logits=logits, labels=join("labels"), split=join("split"), ids=join("ids"),
                    groups=join("groups"), n_ignored=sum(b.n_ignored for b in parts), binary=binary,
                    metadata=self.metadata)

    def _validate(self, *, logits, labels, split, ids, groups, first_row) -> Batch:
        path, n_rows = self.path, labels.size
        keep = np.ones(n_rows, dtype=bool) if self.ignore_label is None else labels != self.ignore_label
        n_classes = max(logits.shape[1], 2)
        out_of_range = keep & ((labels < 0) | (labels >= n_classes))
        if out_of_range.any():
            row = int(np.flatnonzero(out_of_range)[0])
            hint = " (use --ignore-label for a void label)" if labels[row] >= n_classes else ""
            raise _fail(path, self.label_col, first_row + row,
                        f"label {int(labels[row])} is outside 0 .. {n_classes - 1}{hint}")
        for start in range(0, n_rows, _CHECK_ROWS):
            chunk = logits[start:start + _CHECK_ROWS]
            bad = ~np.isfinite(chunk).all(axis=1) & keep[start:start + _CHECK_ROWS]
            if bad.any():
                row = start + int(np.flatnonzero(bad)[0])
                k = int(np.flatnonzero(~np.isfinite(logits[row]))[0])
                what = "NaN" if np.isnan(logits[row, k]) else "an infinite value"
                hint = " (float16 overflows above 65504: save the logits as float32)" if logits.dtype == np.float16 else ""
                wide = getattr(self, "wide_columns", None)
                column = wide[k] if wide else self.logits_col
                where = "" if wide else f" for class {k}"
                raise _fail(path, column, first_row + row, f"holds {what}{where}{hint}; logits must be finite")
        if split is not None:
            unknown = ~np.isin(split, SPLIT_VALUES)
            if unknown.any():
                row = int(np.flatnonzero(unknown)[0])
                raise _fail(path, "split", first_row + row, f"has the value {str(split[row])!r}; use 'val' or 'test'")
        n_ignored = int(n_rows - np.count_nonzero(keep))
        if n_ignored:
            pick = lambda a: None if a is None else a[keep]  # noqa: E731
            logits, labels, split, ids, groups = (pick(a) for a in (logits, labels, split, ids, groups))
        return Batch(logits, labels, split, ids, groups, n_ignored, first_row)


def expand_binary(logits: np.ndarray) -> np.ndarray:
    """One binary logit v per row -> the two-class logits (0, v) (CONVENTIONS.md, "Input")."""
    return np.concatenate([np.zeros_like(logits), logits], axis=1)


# ----------------------------------------------------------------------------- npz
class NpzSource(DumpSource):
    """An ``.npz`` dump: arrays ``logits`` (N x K) and ``labels``; read whole."""

    def __init__(self, path: str, label_col: str, ignore_label: int | None):
        self.path, self.ignore_label, self.metadata = path, ignore_label, {}
        self.logits_col = "logits"
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            reason = "it holds Python objects, not plain arrays" if "pickle" in str(exc) else _short(exc)
            raise _fail(path, None, None, f"not a readable .npz file ({reason}); save it with numpy.savez") from None
        if "logits" not in arrays:
            found = ", ".join(sorted(arrays)) or "nothing"
            raise _fail(path, None, None, f"no array named 'logits' (found: {found}); save logits and labels")
        label_key = next((k for k in (label_col, "labels", "label") if k in arrays), None)
        if label_key is None:
            raise _fail(path, None, None, "no array named 'labels'; save the labels beside the logits")
        self.label_col = label_key
        logits = arrays["logits"]
        if logits.ndim == 1:
            logits = logits[:, None]
        if logits.ndim != 2:
            raise _fail(path, "logits", None, f"has {logits.ndim} dimensions; expected N x K")
        if logits.dtype not in (np.float16, np.float32, np.float64):
            raise _fail(path, "logits", None, f"has dtype {logits.dtype}; save float16, float32 or float64 logits")
        if logits.shape[1] == 0:
            raise _fail(path, "logits", None, "has K = 0 columns; save N x K logits")
        labels = arrays[label_key]
        if labels.ndim != 1 or labels.size != logits.shape[0]:
            raise _fail(path, label_key, None,
                        f"has shape {labels.shape}; expected ({logits.shape[0]},), one label per row")
        split = arrays.get("split")
        self.num_rows = int(labels.size)
        self._columns = dict(logits=logits, labels=_labels_to_int(path, label_key, labels, None),
                             split=None if split is None else split.astype(str), ids=None, groups=None)

    def raw_batches(self, batch_rows: int):
        if self.num_rows:
            yield self._columns, 0

    def _labels_and_split(self):
        return self._columns["labels"], self._columns["split"]

    @property
    def num_classes(self) -> int:
        return int(self._columns["logits"].shape[1])

    @property
    def logits_bytes(self) -> int:
        return int(self._columns["logits"].nbytes)


# ------------------------------------------------------------------------- parquet
def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _corrupt(path: str, exc: BaseException) -> SelcalError:
    return _fail(path, None, None, f"not a readable Parquet file ({_short(exc)}); was it truncated or corrupted?")


class ParquetSource(DumpSource):
    """A Parquet dump read by record batches: constant memory whatever its size."""

    def __init__(self, path: str, label_col: str, logits_col: str | None, ignore_label: int | None,
                 group_col: str | None):
        self.path, self.ignore_label, self.label_col = path, ignore_label, label_col
        try:
            # No read-ahead, and column chunks read 8 MB at a time: a row group of a wide dump can
            # hold hundreds of MB, which would otherwise be decompressed whole.
            self.file = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 23)
            schema = self.file.schema_arrow
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(path, exc) from None
        self.num_rows = int(self.file.metadata.num_rows)
        if self.num_rows < 0:
            raise _fail(path, None, None, "has a negative row count in its metadata; was it truncated or corrupted?")
        names = schema.names
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise _fail(path, duplicated[0], None, "appears more than once in the file; give every column its own name")
        if label_col not in names:
            raise _fail(path, None, None,
                        f"no label column '{label_col}' (columns: {', '.join(names)}); name it with --label-col")
        label_type = schema.field(label_col).type
        if not (pa.types.is_integer(label_type) or pa.types.is_floating(label_type)):
            raise _fail(path, label_col, None, f"has type {label_type}; labels must be integers 0 .. K-1")
        self.logits_col, self.wide_columns = self._resolve_logits(schema, logits_col)
        self.split_col = None
        if "split" in names:
            split_type = schema.field("split").type
            if not (pa.types.is_string(split_type) or pa.types.is_large_string(split_type)
                    or pa.types.is_dictionary(split_type)):
                raise _fail(path, "split", None, f"has type {split_type}; it must hold the strings 'val' and 'test'")
            self.split_col = "split"
        self.id_col = "id" if "id" in names else None
        if self.id_col is not None:
            id_type = schema.field("id").type
            if pa.types.is_nested(id_type):
                raise _fail(path, "id", None, f"has type {id_type}; ids must be single values (strings or numbers)")
        if group_col is not None and group_col not in names:
            raise _fail(path, None, None, f"no group column '{group_col}' (columns: {', '.join(names)})")
        self.group_col = group_col
        self.metadata = {k.decode(errors="replace"): v.decode(errors="replace")
                         for k, v in (schema.metadata or {}).items() if k.startswith(b"selcal.")}
        logits_columns = self.wide_columns or [self.logits_col]
        wanted = [label_col, *logits_columns, self.split_col, self.id_col, self.group_col]
        self.columns = list(dict.fromkeys(c for c in wanted if c is not None))

    def _resolve_logits(self, schema: pa.Schema, logits_col: str | None):
        path, names = self.path, schema.names
        if logits_col is not None and logits_col not in names:
            raise _fail(path, None, None, f"no logits column '{logits_col}' (columns: {', '.join(names)})")
        if logits_col is None:
            list_columns = [f.name for f in schema if _is_list(f.type)]
            if "logits" in names:
                logits_col = "logits"
            elif any(_WIDE_LOGIT.match(name) for name in names):
                return "logit_*", _wide_columns(path, schema)  # named for the purpose: beats another list
            elif len(list_columns) == 1:
                logits_col = list_columns[0]
            elif len(list_columns) > 1:
                raise _fail(path, None, None,
                            f"several list columns ({', '.join(list_columns)}); name the logits with --logits-col")
            else:
                return "logit_*", _wide_columns(path, schema)
        data_type = schema.field(logits_col).type
        if not _is_list(data_type):
            raise _fail(
                path, logits_col, None,
                f"has type {data_type}; logits must be a list of float16/float32/float64 per row "
                "or columns logit_0 .. logit_{K-1}",
            )
        value_type = data_type.value_type
        if _is_list(value_type):
            raise _fail(path, logits_col, None,
                        f"holds nested lists ({data_type}); store one flat list of K logits per row")
        if value_type not in _FLOAT_TYPES:
            raise _fail(path, logits_col, None, f"holds {value_type} values; logits must be float16, float32 or float64")
        return logits_col, None

    def id_column(self) -> np.ndarray | None:
        if self.id_col is None:
            return None
        try:
            table = self.file.read(columns=[self.label_col, self.id_col])
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(self.path, exc) from None
        ids = _strings(self.path, "id", table.column(self.id_col))
        if self.ignore_label is not None:
            labels = _labels_to_int(self.path, self.label_col, None, table.column(self.label_col).combine_chunks())
            ids = ids[labels != self.ignore_label]
        return ids

    def _labels_and_split(self):
        columns = [self.label_col] + ([self.split_col] if self.split_col else [])
        try:
            table = self.file.read(columns=columns)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(self.path, exc) from None
        labels = _labels_to_int(self.path, self.label_col, None, table.column(self.label_col).combine_chunks())
        split = None if not self.split_col else _strings(self.path, "split", table.column("split").combine_chunks())
        return labels, split

    @property
    def num_classes(self) -> int:
        """K as stored (1 for one binary logit); a plain list column is read for its first row, once."""
        if not hasattr(self, "_num_classes"):
            data_type = None if self.wide_columns else self.file.schema_arrow.field(self.logits_col).type
            if self.wide_columns:
                self._num_classes = len(self.wide_columns)
            elif pa.types.is_fixed_size_list(data_type):
                self._num_classes = int(data_type.list_size)
            else:
                self._num_classes = next((int(c["logits"].shape[1]) for c, _ in self.raw_batches(1)), 0)
        return self._num_classes

    @property
    def logits_bytes(self) -> int:
        """Estimated from the row groups' uncompressed sizes (every column read)."""
        metadata = self.file.metadata
        return int(sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)))

    def raw_batches(self, batch_rows: int):
        iterator = iter(self.file.iter_batches(batch_size=batch_rows, columns=self.columns))
        first_row = 0
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise _corrupt(self.path, exc) from None
            yield self._columns(batch, first_row), first_row
            first_row += batch.num_rows

    def _columns(self, batch: pa.RecordBatch, first_row: int) -> dict:
        path = self.path
        if self.wide_columns:
            logits = _wide_logits(path, batch, self.wide_columns, first_row)
        else:
            logits = _list_logits(path, batch.column(self.logits_col), self.logits_col, first_row,
                                  getattr(self, "_row0_classes", None))
            if first_row == 0 and logits.shape[0]:
                self._row0_classes = logits.shape[1]
        return dict(
            logits=logits,
            labels=_labels_to_int(path, self.label_col, None, batch.column(self.label_col), first_row),
            split=None if self.split_col is None else _strings(path, "split", batch.column("split"), first_row),
            ids=None if self.id_col is None else _strings(path, "id", batch.column("id"), first_row),
            groups=None if self.group_col is None else _strings(path, self.group_col, batch.column(self.group_col),
                                                                  first_row),
        )


def _strings(path: str, name: str, column: pa.Array, first_row: int = 0) -> np.ndarray:
    """A string column as a numpy unicode array, through a dictionary (no Python object per row)."""
    if column.null_count:
        raise _fail(path, name, first_row + _first_null_row(column), "is empty (null); give every row a value")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column.cast(pa.string()))
    values = np.array(column.dictionary.cast(pa.string()).to_pylist(), dtype=str)
    if values.size == 0:
        return np.array([], dtype=str)
    return values[column.indices.to_numpy(zero_copy_only=False)]


def _first_null_row(array: pa.Array) -> int:
    return int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])


def _list_logits(path: str, array: pa.Array, name: str, first_row: int, n_classes: int | None) -> np.ndarray:
    """The (rows, K) logits of a list column; ``n_classes`` is row 0's K once known.

    Of null rows, null logits, rows of another length and empty rows, the first offending
    row is the one named.
    """
    problems = []
    if array.null_count:
        problems.append((_first_null_row(array), "is null; every row needs its K logits"))
    values = array.flatten()
    if values.null_count:
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        problems.append((int(parents[_first_null_row(values)]), "holds a null logit; store finite numbers"))
    lengths = pc.fill_null(pc.list_value_length(array), 0 if n_classes is None else n_classes)
    lengths = lengths.to_numpy(zero_copy_only=False)
    if lengths.size == 0:
        return np.empty((0, max(getattr(array.type, "list_size", 1), 1)), dtype=np.float32)
    if n_classes is None:
        n_classes = int(lengths[np.flatnonzero(~pc.is_null(array).to_numpy(zero_copy_only=False))[0]]) \
            if array.null_count < len(array) else 1
    ragged = np.flatnonzero((lengths != n_classes) & ~pc.is_null(array).to_numpy(zero_copy_only=False))
    if ragged.size:
        row = int(ragged[0])
        problems.append((row, f"has {lengths[row]} logits but row 0 has {n_classes}; every row needs the same K"))
    if n_classes == 0:
        problems.append((0, "is an empty list; every row needs its K logits"))
    if problems:
        row, message = min(problems)
        raise _fail(path, name, first_row + row, message)
    return values.to_numpy(zero_copy_only=False).reshape(-1, n_classes)


def _is_list(data_type) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type)


def _wide_columns(path: str, schema: pa.Schema) -> list[str]:
    indexed = {int(m.group(1)): name for name in schema.names if (m := _WIDE_LOGIT.match(name))}
    if not indexed:
        raise _fail(
            path, None, None,
            f"no logits found (columns: {', '.join(schema.names)}); store them in a list column "
            "'logits' or in columns logit_0 .. logit_{K-1}",
        )
    n_classes = len(indexed)
    missing = [k for k in range(n_classes) if k not in indexed]
    if missing:
        raise _fail(path, None, None,
                    f"has {n_classes} logit_k columns but no 'logit_{missing[0]}'; number them 0 .. K-1")
    for k in range(n_classes):
        data_type = schema.field(indexed[k]).type
        if data_type not in _FLOAT_TYPES:
            raise _fail(path, indexed[k], None, f"has type {data_type}; logits must be float16, float32 or float64")
    return [indexed[k] for k in range(n_classes)]


def _wide_logits(path: str, batch: pa.RecordBatch, names: list[str], first_row: int) -> np.ndarray:
    columns = []
    for name in names:
        column = batch.column(name)
        if column.null_count:
            raise _fail(path, name, first_row + _first_null_row(column), "is null; store finite numbers")
        columns.append(column.to_numpy())
    return np.stack(columns, axis=1).astype(np.result_type(*columns), copy=False)


def _labels_to_int(path: str, name: str, labels: np.ndarray | None, column: pa.Array | None,
                   first_row: int = 0) -> np.ndarray:
    if column is not None:
        if column.null_count:
            raise _fail(path, name, first_row + _first_null_row(column), "has no label (null); every row needs one")
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise _fail(path, name, None, f"has type {column.type}; labels must be integers 0 .. K-1")
        labels = column.to_numpy(zero_copy_only=False)
    if labels.dtype.kind in "iu":
        if labels.dtype.kind == "u" and labels.size and labels.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(labels))
            raise _fail(path, name, first_row + row, f"label {labels[row]} is too large")
        return labels.astype(np.int64)
    if labels.dtype.kind == "f":
        whole = np.isfinite(labels) & (labels == np.round(labels))
        if not whole.all():
            row = int(np.flatnonzero(~whole)[0])
            raise _fail(path, name, first_row + row,
                        f"label {float(labels[row])!r} is not a whole number; labels must be integers 0 .. K-1")
        return labels.astype(np.int64)
    raise _fail(path, name, None, f"has dtype {labels.dtype}; labels must be integers 0 .. K-1")


# ------------------------------------------------------------------------- output
@contextmanager
def atomic_write(path, mode: str = "w"):
    """Open a temporary file beside ``path``; rename it onto ``path`` only on success.

    A failed or killed run never leaves a partial file under the final name. The file gets
    the permissions a plainly created one would (the temporary file is private, 0600).
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
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise
