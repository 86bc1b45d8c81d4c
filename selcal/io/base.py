"""The validated arrays every reader produces (:class:`Dump`, :class:`Batch`) and the row
checks they share. Every problem with a file is raised as :class:`~selcal.errors.SelcalError`
with one line naming the file, the column, the first offending row (counted from 0) and what
to do."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SelcalError

SPLIT_VALUES = ("val", "test")
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
    images: np.ndarray | None = None  # per row: index into image_names (pixel rows of segmentation images)
    image_names: np.ndarray | None = None

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
            images=pick(self.images),
            image_names=self.image_names,
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

    def image_column(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(image index of every kept row, image ids) when the rows are pixels of images
        (a segmentation folder, or the dump ``selcal pixels`` wrote), else None."""
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
        images = self.image_column()
        return Dump(path=self.path, logits=logits, labels=join("labels"), split=join("split"), ids=join("ids"),
                    groups=join("groups"), n_ignored=sum(b.n_ignored for b in parts), binary=binary,
                    metadata=self.metadata, images=None if images is None else images[0],
                    image_names=None if images is None else images[1])

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


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__



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
