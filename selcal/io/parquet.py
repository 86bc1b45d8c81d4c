"""Parquet dumps, read by record batches: constant memory whatever their size."""

from __future__ import annotations

from collections import Counter

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .base import DumpSource, SelcalError, input_error, first_null_row, finite_values, labels_to_int, first_line, split_values, string_values
from .columns import BOOL_LOGITS, FLOAT_LOGITS, NUMBER_LOGITS, ID_NAME, SPLIT_NAME, Kind, find_label, find_logits, optional_column

_FLOAT_TYPES = (pa.float16(), pa.float32(), pa.float64())


def local_file(path: str):
    """``path`` as pyarrow opens it: a name that is not UTF-8 (bytes kept by Python as lone
    surrogates, which pyarrow cannot encode) is opened by its bytes."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return pa.OSFile(os.fsencode(path))


def _corrupt(path: str, exc: BaseException) -> SelcalError | MemoryError:
    """A file that cannot be read as Parquet: said as what it is when its first bytes tell (a result
    JSON given to evaluate), else as a damaged Parquet file; Arrow out of memory (``malloc of size N
    failed``, a worker thread it could not start) is a MemoryError, the run's out-of-memory line."""
    from ..errors import out_of_memory
    from .kinds import sniff, wrong_kind

    if out_of_memory(exc):
        return MemoryError(first_line(exc))

    kind = sniff(path)
    if kind is not None and not kind.what.startswith("a Parquet"):
        return input_error(path, None, None, wrong_kind(kind, "this command reads logit dumps (Parquet, CSV, JSON Lines, "
                                                        ".npz, .npy, .pt)"))
    return input_error(path, None, None, f"not a readable Parquet file ({first_line(exc)}); was it truncated or corrupted?")


def arrow_kind(data_type: pa.DataType) -> Kind:
    """The :class:`~selcal.io.columns.Kind` of an Arrow column type."""
    if _is_list(data_type):
        return Kind.LIST
    if pa.types.is_floating(data_type):
        return Kind.FLOAT
    if pa.types.is_integer(data_type):
        return Kind.INTEGER
    if pa.types.is_boolean(data_type):
        return Kind.BOOL
    if _is_text(data_type):
        return Kind.STRING
    return Kind.OTHER


def not_float_type(data_type: pa.DataType) -> str:
    """What to do with logits of an Arrow type that is not a float: cast integers (scaled), store numbers."""
    return FLOAT_LOGITS if pa.types.is_integer(data_type) else NUMBER_LOGITS


def _is_text(data_type: pa.DataType) -> bool:
    return (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)
            or pa.types.is_string_view(data_type) or pa.types.is_dictionary(data_type))


def refuse_duplicated(path: str, names, row=None, where: str = "the file") -> None:
    """One line naming the first column name (in sorted order) that ``names`` holds twice."""
    duplicated = sorted(name for name, count in Counter(names).items() if count > 1)  # (linear: 10^5 columns)
    if duplicated:
        raise input_error(path, duplicated[0], row, f"appears more than once in {where}; give every column its own name")


class ParquetSource(DumpSource):
    """A Parquet dump read by record batches: constant memory whatever its size.

    ``named_split`` (set by :class:`~selcal.io.parts.PartsSource` for a part whose file or
    folder name names a split) is the split of every row when the file has no split column.
    """

    named_split: str | None = None

    def __init__(self, path: str, label_col: str | None, logits_col: str | None, ignore_label: int | None,
                 group_col: str | None):
        self.path, self.ignore_label = path, ignore_label
        try:
            # No read-ahead, and column chunks read 8 MB at a time: a row group of a wide dump can
            # hold hundreds of MB, which would otherwise be decompressed whole. Page checksums,
            # where the writer stored them, are verified.
            self.file = self._open(path)
            schema = self.file.schema_arrow
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(path, exc) from None
        metadata = self.file.metadata
        self.num_rows = int(metadata.num_rows)
        if self.num_rows < 0:
            raise input_error(path, None, None, "has a negative row count in its metadata; was it truncated or corrupted?")
        in_groups = sum(int(getattr(metadata.row_group(i), "num_rows", 0)) for i in range(metadata.num_row_groups)) \
            if isinstance(self.file, pq.ParquetFile) else self.num_rows
        if in_groups != self.num_rows:  # nothing is allocated by a count the row groups do not back
            raise input_error(path, None, None, f"its metadata claims {self.num_rows} rows but its row groups hold "
                                          f"{in_groups}; was it truncated or corrupted?")
        names = schema.names
        refuse_duplicated(path, names)
        kinds = {f.name: arrow_kind(f.type) for f in schema}
        self.label_col = label_col = find_label(path, kinds, label_col)
        label_type = schema.field(label_col).type
        if kinds[label_col] not in (Kind.INTEGER, Kind.FLOAT, Kind.BOOL):
            raise input_error(path, label_col, None, f"has type {label_type}; labels must be integers 0 .. K-1")
        self.logits_col, self.wide_columns = self._resolve_logits(schema, kinds, logits_col)
        self.split_col = None
        self.split_col = optional_column(path, names, SPLIT_NAME)
        if self.split_col is not None:
            split_type = schema.field(SPLIT_NAME).type
            if not _is_text(split_type):
                raise input_error(path, SPLIT_NAME, None, f"has type {split_type}; it must hold the strings 'val' and 'test'")
        self.id_col = optional_column(path, names, ID_NAME)
        if self.id_col is not None:
            id_type = schema.field(ID_NAME).type
            if pa.types.is_nested(id_type):
                raise input_error(path, ID_NAME, None, f"has type {id_type}; ids must be single values (strings or numbers)")
        logits_columns = self.wide_columns or [self.logits_col]
        if group_col is not None:
            if group_col not in names:
                raise input_error(path, None, None, f"no group column '{group_col}' (columns: {', '.join(names)})")
            if group_col in logits_columns:
                raise input_error(path, group_col, None, "holds the logits; --group-col names a column of group names "
                                                   "(e.g. the source of each row)")
            group_type = schema.field(group_col).type
            if pa.types.is_nested(group_type):
                raise input_error(path, group_col, None, f"has type {group_type}; --group-col needs one name or number "
                                                   "per row")
        self.group_col = group_col
        self.metadata = {k.decode(errors="replace"): v.decode(errors="replace")
                         for k, v in (schema.metadata or {}).items() if k.startswith(b"selcal.")}
        wanted = [label_col, *logits_columns, self.split_col, self.id_col, self.group_col]
        self.columns = list(dict.fromkeys(c for c in wanted if c is not None))

    @staticmethod
    def _open(path: str):
        """The file read by batches (:class:`selcal.io.text.PolarsFile` stands in for text files)."""
        return pq.ParquetFile(local_file(path), pre_buffer=False, buffer_size=1 << 23, page_checksum_verification=True)

    def _resolve_logits(self, schema: pa.Schema, kinds: dict, logits_col: str | None):
        path = self.path
        layout = find_logits(path, kinds, logits_col, exclude=(self.label_col,))
        if layout.wide:
            for name in layout.columns:
                data_type = schema.field(name).type
                if pa.types.is_boolean(data_type):
                    raise input_error(path, name, None, BOOL_LOGITS)
                if data_type not in _FLOAT_TYPES:
                    raise input_error(path, name, None, f"has type {data_type}; {not_float_type(data_type)}")
            return layout.name, list(layout.columns)
        logits_col = layout.name
        data_type = schema.field(logits_col).type
        if pa.types.is_boolean(data_type):
            raise input_error(path, logits_col, None, BOOL_LOGITS)
        if not _is_list(data_type):
            raise input_error(
                path, logits_col, None,
                f"has type {data_type}; logits must be a list of float16/float32/float64 per row "
                "or columns logit_0 .. logit_{K-1}",
            )
        value_type = data_type.value_type
        if _is_list(value_type):
            raise input_error(path, logits_col, None,
                        f"holds nested lists ({data_type}); store one flat list of K logits per row")
        if pa.types.is_boolean(value_type):
            raise input_error(path, logits_col, None, BOOL_LOGITS)
        if value_type not in _FLOAT_TYPES:
            raise self._not_float_values(logits_col, value_type)
        return logits_col, None

    def _not_float_values(self, logits_col: str, value_type: pa.DataType):
        """The refusal of a logits list column of ``value_type`` values (not floats, not booleans)."""
        return input_error(self.path, logits_col, None, f"holds {value_type} values; {not_float_type(value_type)}")

    def id_column(self) -> np.ndarray | None:
        """The id of every kept row, read once (the split, the leak check, the fingerprint and the
        confident-errors table all ask for it: 24 ms a read for 50 000 ids)."""
        if self.id_col is None:
            return None
        if getattr(self, "_ids", None) is None:
            column, keep = self._column_and_kept_rows(self.id_col)
            ids = string_values(self.path, self.id_col, column)
            self._ids = ids if keep is None else ids[keep]
            self._ids.flags.writeable = False  # shared by every caller
        return self._ids

    def value_column(self, name: str) -> np.ndarray:
        names = self.file.schema_arrow.names
        if name not in names:
            raise input_error(self.path, None, None, f"no column '{name}' (columns: {', '.join(names)})")
        data_type = self.file.schema_arrow.field(name).type
        if not (pa.types.is_integer(data_type) or pa.types.is_floating(data_type) or pa.types.is_boolean(data_type)):
            raise input_error(self.path, name, None, f"has type {data_type}; expected one number per row")
        column, keep = self._column_and_kept_rows(name)
        column = column.combine_chunks()
        if column.null_count:
            raise input_error(self.path, name, first_null_row(column), "is empty (null); store a number for every row")
        return finite_values(self.path, name, column.to_numpy(zero_copy_only=False), keep)

    def _column_and_kept_rows(self, name: str) -> tuple[pa.ChunkedArray, np.ndarray | None]:
        """The column ``name`` of every row, and the rows kept as for the logits: not the ignored
        label, not the split 'train' (None: every row)."""
        try:
            table = self.file.read(columns=list(dict.fromkeys(
                [self.label_col, name] + ([self.split_col] if self.split_col else []))))
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(self.path, exc) from None
        keep = None
        if self.ignore_label is not None:
            labels = labels_to_int(self.path, self.label_col, None, table.column(self.label_col).combine_chunks())
            keep = labels != self.ignore_label
        split = self._split_values(table.column(self.split_col) if self.split_col else None, table.num_rows)
        if split is not None:
            keep = split != "train" if keep is None else keep & (split != "train")
        return table.column(name), keep

    def image_column(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The ``image`` column of a pixel dump (``selcal.pixels`` in its metadata), as
        (index into the sorted image ids, image ids); None for any other file."""
        if "selcal.pixels" not in self.metadata or "image" not in self.file.schema_arrow.names:
            return None
        try:
            table = self.file.read(columns=[self.label_col, "image"])
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(self.path, exc) from None
        column = table.column("image")
        if column.null_count:
            raise input_error(self.path, "image", first_null_row(column.combine_chunks()), "is empty (null); "
                        "give every pixel its image")
        encoded = pc.dictionary_encode(column.combine_chunks().cast(pa.string()))
        names = np.array(encoded.dictionary.to_pylist(), dtype=str)
        order = np.argsort(names, kind="stable")
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        images = rank[encoded.indices.to_numpy(zero_copy_only=False)]
        if self.ignore_label is not None:
            labels = labels_to_int(self.path, self.label_col, None, table.column(self.label_col).combine_chunks())
            images = images[labels != self.ignore_label]
        return images, names[order]

    def _labels_and_split(self):
        columns = [self.label_col] + ([self.split_col] if self.split_col else [])
        try:
            table = self.file.read(columns=columns)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _corrupt(self.path, exc) from None
        labels = labels_to_int(self.path, self.label_col, None, table.column(self.label_col).combine_chunks())
        split = self._split_values(table.column(self.split_col) if self.split_col else None, table.num_rows)
        return labels, split

    def _split_values(self, column, n_rows: int, first_row: int = 0) -> np.ndarray | None:
        """The canonical split of ``n_rows`` rows: the split column's, else the part's named split
        (None when neither); a split column that disagrees with its file's name is refused."""
        if column is not None and isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        split = None if column is None else split_values(self.path, self.split_col, column, first_row)
        if self.named_split is None:
            return split
        if split is None:
            return np.full(n_rows, self.named_split, dtype="<U5")
        other = np.flatnonzero(split != self.named_split)
        if other.size:
            row = int(other[0])
            raise input_error(self.path, self.split_col, first_row + row,
                        f"says '{split[row]}' but the file's name puts its rows in the split '{self.named_split}'; "
                        "drop the split column or rename the file")
        return split

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
        """The logits' size once decoded: the values of their column chunks (``num_values`` of
        the row groups' metadata) times their width. Not the encoded size: a dictionary or RLE
        page of a few bytes may decode to gigabytes. (For a footer that lies about the values,
        the reading stops when the pages end: it never allocates by this number.)"""
        names = set(self.wide_columns or [self.logits_col])
        arrow = self.file.schema_arrow
        width = {name: (arrow.field(name).type if self.wide_columns else arrow.field(name).type.value_type).byte_width
                 for name in names}
        if not isinstance(self.file, pq.ParquetFile):  # a text file read as batches: its rows times K values
            return int(self.num_rows * max(self.num_classes, 1) * max(width.values()))
        metadata, schema = self.file.metadata, self.file.schema
        leaves = [i for i in range(len(schema)) if schema.column(i).path.split(".")[0] in names]
        return int(sum(metadata.row_group(g).column(i).num_values * width[schema.column(i).path.split(".")[0]]
                       for g in range(metadata.num_row_groups) for i in leaves))

    def _batch_columns(self, ids: bool) -> list[str]:
        """The columns a batch reads: all of them, or without the id column (read once, :meth:`id_column`)."""
        also = {self.label_col, self.split_col, self.group_col, self.logits_col, *(self.wide_columns or ())}
        if ids or self.id_col is None or self.id_col in also:  # (a column read for something else stays)
            return self.columns
        return [c for c in self.columns if c != self.id_col]

    def raw_batches(self, batch_rows: int, ids: bool = True):
        iterator = iter(self.file.iter_batches(batch_size=batch_rows, columns=self._batch_columns(ids)))
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
            labels=labels_to_int(path, self.label_col, None, batch.column(self.label_col), first_row),
            split=self._split_values(batch.column(self.split_col) if self.split_col else None, batch.num_rows,
                                     first_row),
            ids=None if self.id_col not in batch.schema.names else string_values(path, self.id_col,
                                                                                 batch.column(self.id_col), first_row),
            groups=None if self.group_col is None else string_values(path, self.group_col, batch.column(self.group_col),
                                                                  first_row),
        )


def _list_logits(path: str, array: pa.Array, name: str, first_row: int, n_classes: int | None) -> np.ndarray:
    """The (rows, K) logits of a list column; ``n_classes`` is row 0's K once known.

    Of null rows, null logits, rows of another length and empty rows, the first offending
    row is the one named.
    """
    problems = []
    if array.null_count:
        problems.append((first_null_row(array), "is null; every row needs its K logits"))
    values = array.flatten()
    if values.null_count:
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        problems.append((int(parents[first_null_row(values)]), "holds a null logit; store finite numbers"))
    # Null rows' lengths are masked with numpy (the null mask is read once, and only when there are nulls).
    present = None if not array.null_count else ~pc.is_null(array).to_numpy(zero_copy_only=False)
    lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
    if present is not None:
        lengths = np.where(present, lengths, 0).astype(np.int64)
    if lengths.size == 0:
        return np.empty((0, max(getattr(array.type, "list_size", 1), 1)), dtype=np.float32)
    if n_classes is None:
        n_classes = int(lengths[0 if present is None else np.flatnonzero(present)[0]]) \
            if array.null_count < len(array) else 1
    ragged = np.flatnonzero(lengths != n_classes) if present is None else \
        np.flatnonzero((lengths != n_classes) & present)
    if ragged.size:
        row = int(ragged[0])
        problems.append((row, f"has {lengths[row]} logits but the first row has {n_classes}; every row needs the same K"))
    if n_classes == 0:
        problems.append((0, "is an empty list; every row needs its K logits"))
    if problems:
        row, message = min(problems)
        raise input_error(path, name, first_row + row, message)
    return values.to_numpy(zero_copy_only=False).reshape(-1, n_classes)


def _is_list(data_type) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type)


def _wide_logits(path: str, batch: pa.RecordBatch, names: list[str], first_row: int) -> np.ndarray:
    columns = []
    for name in names:
        column = batch.column(name)
        if column.null_count:
            raise input_error(path, name, first_row + first_null_row(column), "is null; store finite numbers")
        columns.append(column.to_numpy())
    return np.stack(columns, axis=1).astype(np.result_type(*columns), copy=False)


def parquet_schema_metadata(path) -> dict[str, str]:
    """Every key of a Parquet file's schema metadata, decoded (e.g. a hyperparameter for
    ``--sweep NAME``); empty for anything that is not a readable Parquet file (the reader
    reports those when the file is evaluated)."""
    try:
        schema = pq.read_schema(local_file(str(path)))
    except (pa.ArrowException, OSError, ValueError, TypeError):
        return {}
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (schema.metadata or {}).items()}
