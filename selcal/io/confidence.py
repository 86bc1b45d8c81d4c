"""Files with no logits: a confidence, a prediction and a label per row.

Several public calibration repositories publish only ``true_label, pred_label, confidence``
per image. Such a file (Parquet, ``.npz``, CSV, TSV or JSON Lines) has a prediction column (one of
:data:`~selcal.io.columns.PREDICTION_NAMES`: ``pred``, ``pred_label``, ...), a label column, and no logits; its confidence is the column ``confidence``
(or the columns given by ``--score-col`` / ``--uncertainty-col``). Every selective metric
and the top-label calibration are computed from it; what needs logits is reported as not
available (:func:`selcal.api.evaluate_confidences`).
"""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import SelcalError
from .arrays import array_kind
from .base import DumpSource, input_error, first_null_row, labels_to_int, first_line, string_values, canonical_split_array, finite_values
from .columns import PREDICTION_NAMES, SPLIT_NAME, find_label, find_logits, optional_column
from .parquet import arrow_kind, local_file
from .text import TextFile, text_format

CONFIDENCE_NAME = "confidence"


def _kinds(path: str) -> dict | None:
    """Column name -> :class:`~selcal.io.columns.Kind` read from the file's header (None: unreadable)."""
    if text_format(path) is not None:  # CSV, TSV, JSON Lines: the types of the first rows
        try:
            schema = TextFile(path, text_format(path)).schema_arrow
        except SelcalError:
            return None
        return {field.name: arrow_kind(field.type) for field in schema}
    if path.lower().endswith(".npz"):
        from .npz import npz_headers

        try:
            headers = npz_headers(path)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            return None
        return {name: array_kind(np.empty((0,) * len(shape), dtype)) for name, (shape, dtype) in headers.items()}
    try:
        schema = pq.read_schema(local_file(path))
    except (pa.ArrowException, OSError, ValueError):
        return None
    return {field.name: arrow_kind(field.type) for field in schema}


def is_confidence_file(path: str) -> bool:
    """A file with a ``pred``/``prediction`` column and no logits by the naming rules of
    :mod:`selcal.io.columns` (read from its header only)."""
    if not os.path.isfile(path):
        return False
    kinds = _kinds(path)
    if kinds is None or not any(p in kinds for p in PREDICTION_NAMES):
        return False
    try:
        find_logits(path, kinds)
    except SelcalError:
        return True  # no logits
    return False


class ConfidenceSource(DumpSource):
    """A file of (confidence, prediction, label) rows and no logits; read whole (a few numbers per row)."""

    confidence_only = True

    def __init__(self, path: str, label_col: str | None = None, ignore_label: int | None = None):
        self.path, self.ignore_label, self.metadata = path, ignore_label, {}
        if path.lower().endswith(".npz"):
            from .npz import load_npz

            self._arrays = load_npz(path)
            names = list(self._arrays)
        elif text_format(path) is not None:
            self._arrays = None
            self.file = TextFile(path, text_format(path))
            names = self.file.schema_arrow.names
        else:
            self._arrays = None
            try:
                self.file = pq.ParquetFile(local_file(path))
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise input_error(path, None, None, f"not a readable Parquet file ({first_line(exc)})") from None
            names = self.file.schema_arrow.names
        kinds = _kinds(path) or {}
        label_col = find_label(path, {k: v for k, v in kinds.items() if k not in PREDICTION_NAMES}, label_col)
        self.label_col, self.logits_col = label_col, None
        predictions = [p for p in PREDICTION_NAMES if p in names]
        if len(predictions) > 1:
            raise input_error(path, None, None, f"several prediction columns ({', '.join(predictions)}); keep one")
        self.pred_col = predictions[0]
        self.split_col = optional_column(path, names, SPLIT_NAME)
        self._names = names
        labels = self._integers(label_col)
        self.num_rows = int(labels.size)
        if self.num_rows == 0:
            raise input_error(path, None, None, "has no rows")
        predictions = self._integers(self.pred_col)
        self._keep = None if ignore_label is None else labels != ignore_label
        split = self._split_values()
        if split is not None and (split == "train").any():  # train rows are left out, as in every reader
            self._keep = (split != "train") if self._keep is None else self._keep & (split != "train")
        self._split = None if split is None else self._keep_rows(split)
        for name, values in ((label_col, labels), (self.pred_col, predictions)):
            negative = (values < 0) if self._keep is None else (values < 0) & self._keep
            if negative.any():
                row = int(np.flatnonzero(negative)[0])
                raise input_error(path, name, row, f"holds {int(values[row])}; classes are numbered from 0")
        if self._keep is not None and not self._keep.any():
            raise input_error(path, label_col, None, "no row is left: every row has the ignored label or the split 'train'")
        self.labels, self.predictions = self._keep_rows(labels), self._keep_rows(predictions)

    # ------------------------------------------------------------------ columns
    def _raw(self, name: str):
        if name not in self._names:
            raise input_error(self.path, None, None, f"no column '{name}' (columns: {', '.join(self._names)})")
        if self._arrays is not None:
            values = self._arrays[name]
            if values.ndim != 1 or (hasattr(self, "num_rows") and values.size != self.num_rows):
                raise input_error(self.path, name, None, f"has shape {values.shape}; expected one value per row")
            return values, None
        try:
            column = self.file.read(columns=[name]).column(name).combine_chunks()
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise input_error(self.path, None, None, f"not a readable Parquet file ({first_line(exc)})") from None
        return None, column

    def _integers(self, name: str) -> np.ndarray:
        values, column = self._raw(name)
        return labels_to_int(self.path, name, values, column)

    def _keep_rows(self, values: np.ndarray) -> np.ndarray:
        return values if self._keep is None else values[self._keep]

    def value_column(self, name: str) -> np.ndarray:
        values, column = self._raw(name)
        if column is not None:
            if column.null_count:
                raise input_error(self.path, name, first_null_row(column), "is empty (null); store a number for every row")
            if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                    or pa.types.is_boolean(column.type)):
                raise input_error(self.path, name, None, f"has type {column.type}; expected one number per row")
            values = column.to_numpy(zero_copy_only=False)
        return finite_values(self.path, name, values, self._keep)

    def _split_values(self) -> np.ndarray | None:
        """The split of every row as 'val', 'test' or 'train' (aliases as every reader reads them)."""
        if self.split_col is None:
            return None
        values, column = self._raw(self.split_col)
        split = values.astype(str) if column is None else string_values(self.path, "split", column)
        return canonical_split_array(self.path, "split", split)

    def split_column(self) -> np.ndarray | None:
        return self._split

    @property
    def num_kept_rows(self) -> int:
        return int(self.labels.size)

    @property
    def num_classes(self) -> int:
        """Not known without logits: at least the largest class number seen, plus one."""
        return int(max(self.labels.max(), self.predictions.max())) + 1

    @property
    def logits_bytes(self) -> int:
        return 0

    def raw_batches(self, batch_rows: int, ids: bool = True):
        raise input_error(self.path, None, None, "holds no logits, only a confidence, a prediction and a label per row")

    def _labels_and_split(self):
        return self.labels, self.split_column()
