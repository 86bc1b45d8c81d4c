"""The validated arrays every reader produces (:class:`Dump`, :class:`Batch`) and the row
checks they share. Every problem with a file is raised as :class:`~selcal.errors.SelcalError`
with one line naming the file, the column, the first offending row (counted from 0) and what
to do."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SelcalError, said
from .columns import canonical_splits, unknown_split_message
from .messages import Line, input_error, first_line, location  # noqa: F401  (every reader's messages)

SPLIT_VALUES = ("val", "test")
#: The label of a row of no class after reading (``--ood-label V``: rows labelled V): every
#: prediction of it is an error (CONVENTIONS.md, "Input"); no class index is negative.
OOD_LABEL = -1
OOD_GROUPS = ("in-distribution", "out-of-distribution")  # the groups of --ood-label without --group-col
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
    n_train: int = 0  # rows of the split 'train', left out
    columns: dict = field(default_factory=dict)  # name -> float64 per row: score columns (DumpSource.value_column)
    input: str = "logits"  # what the file held: logits, probs or logprobs (selcal.io.probs)

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
            n_train=self.n_train,
            columns={name: values[rows] for name, values in self.columns.items()},
            input=self.input,
        )


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
    n_train: int = 0



def release_read_buffers() -> None:
    """Give back the pages Arrow's allocator keeps after a whole file was read into numpy.

    mimalloc (pyarrow's default pool) keeps freed pages for reuse; after ``read_all`` the
    decoded batches are all freed but the pages of a validation file stayed resident through the
    fits that follow (measured in bench/README.md).
    """
    pa.default_memory_pool().release_unused()

class DumpSource:
    """A dump opened for reading: ``batches()`` yields validated :class:`Batch` objects."""

    path: str
    num_rows: int
    metadata: dict
    ignore_label: int | None
    label_col: str
    logits_col: str
    input_kind: str | None = None  # --input: logits, probs or logprobs; None: detected (selcal.io.probs)
    ood_label: int | None = None  # --ood-label: rows with this label belong to no class (read as OOD_LABEL)
    python: bool = False  # messages name input_kind= (the Python face), not --input (set by open_dump)

    @property
    def has_groups(self) -> bool:
        """Its batches carry a group per row: a --group-col, or in/out of distribution (--ood-label)."""
        return getattr(self, "group_col", None) is not None or self.ood_label is not None
    detected_input: str | None = None  # what the first batch was found to hold

    def raw_batches(self, batch_rows: int, ids: bool = True):  # pragma: no cover - abstract
        """(columns, first row) of each batch; ``ids=False``: a reader that stores the ids apart may leave them
        unread (the batch's ``ids`` None)."""
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

    def _kept(self) -> tuple:
        """(kept rows, their split values, rows of the split 'train'), computed once."""
        if not hasattr(self, "_kept_cache"):
            labels, split = self._labels_and_split()
            if labels.size != self.num_rows:
                raise input_error(self.path, None, None, f"holds {labels.size} rows but its metadata says {self.num_rows}; "
                                                   "was it truncated or corrupted?")
            keep = None if self.ignore_label is None else labels != self.ignore_label
            n_train = 0
            if split is not None and (split == "train").any():
                train = split == "train"
                n_train = int(np.count_nonzero(train if keep is None else train & keep))
                keep = ~train if keep is None else keep & ~train
            if keep is not None and split is not None:
                split = split[keep]
            self._kept_cache = (int(labels.size if keep is None else keep.sum()), split, n_train)
        return self._kept_cache

    @property
    def num_kept_rows(self) -> int:
        """Rows left after dropping the ignored label and the split 'train'."""
        return self._kept()[0]

    @property
    def num_train_rows(self) -> int:
        """Rows of the split 'train' (not counting those with the ignored label), left out."""
        kept = self._kept()
        return kept[2] if len(kept) > 2 else 0  # a reader may keep its own (rows, split) without train rows

    def id_column(self) -> np.ndarray | None:
        """The id of every kept row (None without an id column), read without the logits."""
        return None

    def image_column(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(image index of every kept row, image ids) when the rows are pixels of images
        (a segmentation folder, or the dump ``selcal pixels`` wrote), else None."""
        return None

    def value_column(self, name: str) -> np.ndarray:
        """A numeric column of every kept row as float64 (e.g. a confidence), read without the
        logits; a missing, non-numeric, null, NaN or infinite value is refused in one line."""
        raise input_error(self.path, name, None, "this kind of input has no such columns; save the values in a "
                    "Parquet or .npz dump")

    def split_column(self) -> np.ndarray | None:
        """The split value of every kept row (None without a split column), read without the logits."""
        return self._kept()[1]

    def batches(self, batch_rows: int | None = None, *, ids: bool = True):
        """Validated batches of at most ``batch_rows`` rows (default: about 2**21 logits), in file order;
        ``ids=False`` for a pass that reads the ids once by :meth:`id_column` (a streamed evaluation): a
        Parquet file's batches then leave the id column unread (its strings took 0.05-0.08 s per 50 000 rows)."""
        if batch_rows is None:
            batch_rows = max(64, (1 << 21) // max(self.num_classes, 1))
        for columns, first_row in self.raw_batches(batch_rows, ids):
            yield self._validate(first_row=first_row, **columns)

    def read_all(self) -> Dump:
        """Every row in memory (the logits keep their float dtype), filled batch by batch."""
        logits = None
        parts: list[Batch] = []
        filled = seen = 0
        for batch in self.batches():
            seen += len(batch.labels) + batch.n_ignored + batch.n_train
            if logits is None:  # allocated by the rows its logits' values back, never by a bare row count
                row_bytes = batch.logits.shape[1] * batch.logits.dtype.itemsize
                capacity = min(self.num_rows, self.logits_bytes // max(row_bytes, 1))
                logits = np.empty((capacity, batch.logits.shape[1]), dtype=batch.logits.dtype)
            if seen > self.num_rows:
                raise input_error(self.path, None, None, "holds more rows than its metadata says; was it corrupted?")
            if filled + len(batch.labels) > len(logits):  # wider in memory than stored (e.g. float16 probabilities
                # read as float64 log p): grown by the rows actually decoded, never beyond the metadata's count
                grown = np.empty((min(self.num_rows, max(2 * len(logits), filled + len(batch.labels))),
                                  logits.shape[1]), dtype=logits.dtype)
                grown[:filled] = logits[:filled]
                logits = grown
            logits[filled:filled + len(batch.labels)] = batch.logits
            filled += len(batch.labels)
            batch.logits = None  # release the batch's buffer
            parts.append(batch)
        if not parts or self.num_rows == 0:
            raise input_error(self.path, None, None, "has no rows")
        if seen != self.num_rows:
            raise input_error(self.path, None, None, f"holds {seen} rows but its metadata says {self.num_rows}; "
                                               "was it truncated or corrupted?")
        if filled == 0:
            raise input_error(self.path, self.label_col, None, nothing_left_message(self))
        logits = logits[:filled]
        release_read_buffers()
        join = lambda name: None if getattr(parts[0], name) is None else np.concatenate(  # noqa: E731
            [getattr(b, name) for b in parts])
        binary = logits.shape[1] == 1
        if binary:
            logits = expand_binary(logits)
        images = self.image_column()
        return Dump(path=self.path, logits=logits, labels=join("labels"), split=join("split"), ids=join("ids"),
                    groups=join("groups"), n_ignored=sum(b.n_ignored for b in parts), binary=binary,
                    metadata=self.metadata, images=None if images is None else images[0],
                    image_names=None if images is None else images[1],
                    n_train=sum(b.n_train for b in parts), input=self.input_kind or self.detected_input or "logits")

    def _validate(self, *, logits, labels, split, ids, groups, first_row) -> Batch:
        path, n_rows = self.path, labels.size
        keep = np.ones(n_rows, dtype=bool) if self.ignore_label is None else labels != self.ignore_label
        n_ignored = int(n_rows - np.count_nonzero(keep))
        n_train = 0
        if split is not None:  # already canonical (val, test, train): see columns.canonical_splits
            train = split == "train"
            if train.any():
                n_train = int(np.count_nonzero(train & keep))
                keep &= ~train
        n_classes = max(logits.shape[1], 2)
        ood = keep & (labels == self.ood_label) if self.ood_label is not None else None
        out_of_range = keep & ((labels < 0) | (labels >= n_classes))
        if ood is not None and ood.any():  # rows of no class (--ood-label): read as OOD_LABEL
            out_of_range &= ~ood
            labels = np.where(ood, OOD_LABEL, labels)
        if ood is not None and groups is None:  # without --group-col, the groups are in and out of distribution
            groups = np.where(ood, OOD_GROUPS[1], OOD_GROUPS[0])
        if out_of_range.any():
            row = int(np.flatnonzero(out_of_range)[0])
            kept = labels[keep if ood is None else keep & ~ood]
            if labels[row] == n_classes and kept.min() >= 1 and kept.max() == n_classes:
                hint = f"; the labels look 1-based (1 .. {n_classes}): subtract 1 from every label"
            else:
                hint = (f" (use {said('ignore_label', python=self.python)} for a void label, "
                        f"{said('ood_label', python=self.python)} for rows of no class)"
                        if labels[row] >= n_classes or labels[row] < 0 else "")
            raise input_error(path, self.label_col, first_row + row,
                        f"label {int(labels[row])} is outside 0 .. {n_classes - 1}{hint}")
        logits = as_logits(self, logits, keep, first_row)
        nonfinite = first_nonfinite(logits, keep)
        if nonfinite is not None:
            row, k, what = nonfinite
            hint = " (float16 overflows above 65504: save the logits as float32)" if logits.dtype == np.float16 else ""
            wide = getattr(self, "wide_columns", None)
            column = wide[k] if wide else self.logits_col
            where = "" if wide else f" for class {k}"
            raise input_error(path, column, first_row + row, f"holds {what}{where}{hint}; logits must be finite")
        if n_ignored or n_train:
            pick = lambda a: None if a is None else a[keep]  # noqa: E731
            logits, labels, split, ids, groups = (pick(a) for a in (logits, labels, split, ids, groups))
        return Batch(logits, labels, split, ids, groups, n_ignored, first_row, n_train)


def nothing_left_message(source) -> str:
    """Why a file has no row left to evaluate (every row ignored or of the split 'train')."""
    if source.ignore_label is None:
        return "every row is of the split 'train'; nothing to evaluate (give the val and test rows)"
    return f"every row has the ignored label {source.ignore_label} or is of the split 'train'; nothing to evaluate"


def finite_values(path: str, name: str, values, keep: np.ndarray | None = None) -> np.ndarray:
    """``values`` (one per row) as float64, refusing NaN and infinity (rows counted in the file)."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise input_error(path, name, None, f"has shape {values.shape}; expected one number per row")
    if values.dtype.kind not in "iufb":
        raise input_error(path, name, None, f"has dtype {values.dtype}; expected numbers")
    values = values.astype(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        what = "NaN" if np.isnan(values[row]) else "an infinite value"
        raise input_error(path, name, row, f"holds {what}; store a finite number for every row")
    return values if keep is None else values[keep]


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays: the mixing step of every seeded hash in selcal
    (the hold-out by row identity, pixel sampling, the leak check)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def first_nonfinite(logits: np.ndarray, rows: np.ndarray | None = None) -> tuple[int, int, str] | None:
    """(row, class, "NaN" or "an infinite value") of the first non-finite logit, among ``rows``
    (a boolean mask) when given; None when every logit is finite. Checked in blocks of rows."""
    for start in range(0, logits.shape[0], _CHECK_ROWS):
        bad = ~np.isfinite(logits[start:start + _CHECK_ROWS]).all(axis=1)
        if rows is not None:
            bad &= rows[start:start + _CHECK_ROWS]
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            k = int(np.flatnonzero(~np.isfinite(logits[row]))[0])
            return row, k, "NaN" if np.isnan(logits[row, k]) else "an infinite value"
    return None


def expand_binary(logits: np.ndarray) -> np.ndarray:
    """One binary logit v per row -> the two-class logits (0, v) (CONVENTIONS.md, "Input")."""
    return np.concatenate([np.zeros_like(logits), logits], axis=1)


# ------------------------------------------------------------------ memory bounds of whole-file readers
PARQUET_ADVICE = "; save it as Parquet, which selcal reads by row batches (selcal ensemble and dump write Parquet)"
MAX_WHOLE_BYTES: int | None = None  # set to bound the whole-file readers by hand (tests); None: whole_read_limit()


def whole_read_limit() -> int:
    """Bytes that a reader of a whole file (``.npz``, ``.npy``, ``.pt``) may decode into memory: an
    eighth of the machine's memory, or of the process's address-space or data limit (``ulimit
    -v``/``-d``) when lower. Such a file is evaluated in memory, which takes about four times its
    arrays (measured: 1.3 to 1.9 GB peak for 0.5 GB of float32 logits). A Parquet file is never
    bound by it: it is streamed when large."""
    if MAX_WHOLE_BYTES is not None:
        return MAX_WHOLE_BYTES
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import resource

        for name in ("RLIMIT_AS", "RLIMIT_DATA"):
            soft = resource.getrlimit(getattr(resource, name))[0]
            if soft != resource.RLIM_INFINITY and soft > 0:
                limits.append(soft // 8)
    except (ImportError, AttributeError, ValueError, OSError):
        pass
    return min(limits) if limits else 1 << 34


def check_decoded(path: str, sizes: dict, what: str = "array", advice: str = "") -> None:
    """Refuse, before anything is read, a whole file whose arrays would take more memory once
    decoded than :func:`whole_read_limit`. ``sizes``: name -> bytes once decoded (by the shape
    and dtype the file declares, not by its size on disk)."""
    limit, total = whole_read_limit(), sum(sizes.values())
    if total > limit:
        name = max(sizes, key=sizes.get)
        raise input_error(path, None, None, f"its arrays would take {_bytes(total)} in memory once decoded ({what} "
                                      f"'{name}': {_bytes(sizes[name])}), more than selcal reads whole "
                                      f"({_bytes(limit)}){advice}")


def _bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB", "EB"):
        if n < 1000 or unit == "EB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1000
    return f"{n} bytes"  # pragma: no cover


def string_values(path: str, name: str, column: pa.Array, first_row: int = 0, canonical=None) -> np.ndarray:
    """A string column as a numpy unicode array, through a dictionary (no Python object per row).

    ``canonical`` maps the distinct values to canonical ones ("" for a value refused); it is
    applied to the dictionary, not per row.
    """
    if column.null_count:
        raise input_error(path, name, first_row + first_null_row(column), "is empty (null); give every row a value")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(_as_text(path, name, column, first_row))
    try:
        values = np.array(_as_text(path, name, column.dictionary, first_row).to_pylist(), dtype=str)
    except UnicodeDecodeError:  # a string column whose bytes are not UTF-8: a damaged file
        raise input_error(path, name, None, "holds bytes that are not UTF-8 text; was the file truncated or "
                                      "corrupted?") from None
    indices = column.indices.to_numpy(zero_copy_only=False)
    if canonical is not None:
        mapped = canonical(values)
        unknown = (mapped == "")[indices]  # only values some row uses (a dictionary may hold unused ones)
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            raise input_error(path, name, first_row + row, unknown_split_message(values[indices[row]]))
        values = mapped
    if values.size == 0:
        return np.array([], dtype=str)
    return values[indices]


def _as_text(path: str, name: str, column: pa.Array, first_row: int) -> pa.Array:
    """``column`` cast to UTF-8 strings; bytes that are not UTF-8 text are one line naming the row."""
    if pa.types.is_string(column.type):
        return column
    try:
        return column.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
                or pa.types.is_fixed_size_binary(column.type) or pa.types.is_binary_view(column.type)):
            raise input_error(path, name, None, f"has type {column.type}; store strings or numbers ({first_line(exc)})") from None
        row = next((i for i, v in enumerate(column.to_pylist()) if not _is_utf8(v)), None)
        where = None if row is None or pa.types.is_dictionary(column.type) else first_row + row
        raise input_error(path, name, where, "holds bytes that are not UTF-8 text; store strings or integers") from None


def _is_utf8(value) -> bool:
    try:
        value.decode("utf-8")
        return True
    except (UnicodeDecodeError, AttributeError):
        return value is None


def split_values(path: str, name: str, column: pa.Array, first_row: int = 0) -> np.ndarray:
    """A split column as canonical values ``val``/``test``/``train`` (CONVENTIONS.md, "Inputs and layouts")."""
    return string_values(path, name, column, first_row, canonical=canonical_splits)


def canonical_split_array(path: str, name: str, values: np.ndarray, first_row: int = 0) -> np.ndarray:
    """``values`` through :func:`~selcal.io.columns.canonical_splits`, each distinct value once;
    an unknown value is one line naming its first row."""
    unique, inverse = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    canonical = canonical_splits(unique)
    unknown = canonical == ""
    if unknown.any():
        row = int(np.flatnonzero(unknown[inverse])[0])
        raise input_error(path, name, first_row + row, unknown_split_message(values[row]))
    return canonical[inverse.reshape(-1)]


def first_null_row(array: pa.Array) -> int:
    return int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])


def labels_to_int(path: str, name: str, labels: np.ndarray | None, column: pa.Array | None,
                   first_row: int = 0) -> np.ndarray:
    """Labels as int64: any integer width, bool, or whole floats (no value is cast unchecked)."""
    if column is not None:
        if column.null_count:
            raise input_error(path, name, first_row + first_null_row(column), "has no label (null); every row needs one")
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                or pa.types.is_boolean(column.type)):
            raise input_error(path, name, None, f"has type {column.type}; labels must be integers 0 .. K-1")
        labels = column.to_numpy(zero_copy_only=False)
    if labels.dtype.kind == "b":
        return labels.astype(np.int64)
    if labels.dtype.kind in "iu":
        if labels.dtype.kind == "u" and labels.size and labels.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(labels))
            raise input_error(path, name, first_row + row, f"label {labels[row]} is too large")
        return labels.astype(np.int64)
    if labels.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(labels) & (labels == np.round(labels))
        if not whole.all():
            row = int(np.flatnonzero(~whole)[0])
            what = ("has no label (NaN); every row needs one" if np.isnan(labels[row]) else
                    f"label {float(labels[row])!r} is not a whole number; labels must be integers 0 .. K-1")
            raise input_error(path, name, first_row + row, what)
        huge = np.abs(labels) >= 2.0 ** 53  # beyond any class index, and beyond exact integers in float64
        if huge.any():
            row = int(np.flatnonzero(huge)[0])
            raise input_error(path, name, first_row + row,
                        f"label {float(labels[row]):g} is not a class index; labels must be integers 0 .. K-1")
        return labels.astype(np.int64)
    raise input_error(path, name, None, f"has dtype {labels.dtype}; labels must be integers 0 .. K-1")


from .probs import as_logits  # noqa: E402  (probs uses input_error)
