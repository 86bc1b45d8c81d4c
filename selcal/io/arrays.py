"""Dumps held as named in-memory arrays (``.npz``, ``.npy``, ``.pt``), read whole.

Each reader of such files loads its arrays into a dict name -> numpy array and hands it to
:class:`ArraysSource`, which finds the columns by the rules of :mod:`selcal.io.columns`
(the same as for Parquet) and checks their shapes.
"""

from __future__ import annotations

import numpy as np

from .base import DumpSource, input_error, labels_to_int, canonical_split_array, finite_values
from .columns import BOOL_LOGITS, FLOAT_LOGITS, ID_NAME, SPLIT_NAME, Kind, find_label, find_logits, optional_column

_FLOATS = (np.float16, np.float32, np.float64)


def array_kind(array: np.ndarray) -> Kind:
    """The :class:`~selcal.io.columns.Kind` of an array (a 2-D float array holds K logits per row)."""
    kind = array.dtype.kind
    if kind == "f":
        return Kind.LIST if array.ndim == 2 else Kind.FLOAT
    if array.ndim == 2:
        return Kind.LIST  # refused with its dtype by the logits check
    return {"i": Kind.INTEGER, "u": Kind.INTEGER, "b": Kind.BOOL, "U": Kind.STRING, "S": Kind.STRING}.get(kind, Kind.OTHER)


def native(array: np.ndarray) -> np.ndarray:
    """``array`` in the machine's byte order (big-endian files are read too)."""
    if not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="))
    return array


class ArraysSource(DumpSource):
    """A dump given as named arrays: logits (N x K, or N for one binary logit), labels, and
    optionally ``split``, ``id`` and a group array, each with N entries."""

    def __init__(self, path: str, arrays: dict, label_col: str | None, ignore_label: int | None,
                 group_col: str | None = None, logits_col: str | None = None, what: str = "array"):
        self.path, self.ignore_label, self.metadata = path, ignore_label, {}
        arrays = {name: native(np.asarray(a)) for name, a in arrays.items()}
        self._arrays = arrays  # for value_column
        kinds = {name: array_kind(a) for name, a in arrays.items()}
        self.label_col = label_col = find_label(path, kinds, label_col)
        layout = find_logits(path, kinds, logits_col, exclude=(label_col,))
        self.logits_col = layout.name
        if layout.wide and len(layout.columns) > 1:
            self.wide_columns = list(layout.columns)
            logits = np.stack([arrays[name] for name in layout.columns], axis=1)
        else:
            logits = arrays[layout.columns[0] if layout.columns else layout.name]
        if logits.ndim == 1:
            logits = logits[:, None]
        if logits.ndim != 2:
            raise input_error(path, self.logits_col, None, f"has {logits.ndim} dimensions; expected N x K")
        if logits.dtype.kind == "b":
            raise input_error(path, self.logits_col, None, BOOL_LOGITS)
        if logits.dtype not in _FLOATS:
            hint = FLOAT_LOGITS if logits.dtype.kind in "iu" else "save float16, float32 or float64 logits"
            raise input_error(path, self.logits_col, None, f"has dtype {logits.dtype}; {hint}")
        if logits.shape[1] == 0:
            raise input_error(path, self.logits_col, None, "has K = 0 columns; save N x K logits")
        n_rows = logits.shape[0]
        labels = arrays[label_col]
        if labels.ndim != 1 or labels.size != n_rows:
            raise input_error(path, label_col, None, f"has shape {labels.shape}; expected ({n_rows},), one label per row")
        self.num_rows = int(n_rows)
        split = self._per_row(arrays, SPLIT_NAME, n_rows)
        ids = self._per_row(arrays, ID_NAME, n_rows)
        groups = None
        self.group_col = group_col
        if group_col is not None:
            if group_col not in arrays:
                raise input_error(path, None, None, f"no {what} '{group_col}' for --group-col (found: "
                                              f"{', '.join(sorted(arrays))}); save one group name per row")
            if group_col == self.logits_col or group_col in getattr(self, "wide_columns", ()):
                raise input_error(path, group_col, None, "holds the logits; --group-col names the group of each row")
            groups = self._per_row(arrays, group_col, n_rows)
        self._columns = dict(
            logits=logits, labels=labels_to_int(path, label_col, labels, None),
            split=None if split is None else canonical_split_array(path, SPLIT_NAME, split),
            ids=ids, groups=groups)

    def _per_row(self, arrays: dict, name: str, n_rows: int) -> np.ndarray | None:
        """The 1-D array ``name`` as strings (None when absent); refused unless it has N entries."""
        if optional_column(self.path, arrays, name) is None:
            return None
        array = arrays[name]
        if array.ndim != 1 or array.size != n_rows:
            raise input_error(self.path, name, None, f"has shape {array.shape}; expected ({n_rows},), one value per row")
        if array.dtype.kind not in "iubfUS":
            raise input_error(self.path, name, None, f"has dtype {array.dtype}; store strings or numbers")
        if array.dtype.kind == "S":
            try:
                return np.char.decode(array, "utf-8")
            except UnicodeDecodeError:
                raise input_error(self.path, name, None, "holds bytes that are not UTF-8 text; store strings or integers") \
                    from None
        return array.astype(str)

    def raw_batches(self, batch_rows: int, ids: bool = True):
        if self.num_rows:
            yield self._columns, 0

    def _labels_and_split(self):
        return self._columns["labels"], self._columns["split"]

    def id_column(self) -> np.ndarray | None:
        ids = self._columns["ids"]
        if ids is None:
            return None
        labels, split = self._columns["labels"], self._columns["split"]
        keep = np.ones(ids.size, dtype=bool) if self.ignore_label is None else labels != self.ignore_label
        if split is not None:
            keep &= split != "train"
        return ids[keep]

    def value_column(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            raise input_error(self.path, None, None, f"no array named '{name}' (found: {', '.join(sorted(self._arrays))})")
        values = self._arrays[name]
        if values.ndim != 1 or values.size != self.num_rows:
            raise input_error(self.path, name, None, f"has shape {values.shape}; expected ({self.num_rows},), one number per row")
        labels, split = self._columns["labels"], self._columns["split"]
        keep = np.ones(self.num_rows, dtype=bool) if self.ignore_label is None else labels != self.ignore_label
        if split is not None:
            keep &= split != "train"
        return finite_values(self.path, name, values, keep)

    @property
    def num_classes(self) -> int:
        return int(self._columns["logits"].shape[1])

    @property
    def logits_bytes(self) -> int:
        return int(self._columns["logits"].nbytes)


def sibling_labels(path: str, suffixes: tuple[str, ...] = (".npy",)) -> str | None:
    """The labels file beside a logits-only file ``DIR/STEM.EXT``, the first that exists of:
    ``STEM`` with ``logits`` replaced by ``labels`` (``test_logits.npy`` -> ``test_labels.npy``),
    ``STEM_labels``, then ``labels`` in the same folder; each with ``EXT`` first, then ``suffixes``.

    >>> sibling_labels("/nonexistent/test_logits.npy") is None
    True
    """
    import os

    folder, name = os.path.split(path)
    stem, ext = os.path.splitext(name)
    stems = ([stem.replace("logits", "labels")] if "logits" in stem else []) + [f"{stem}_labels", "labels"]
    for candidate_stem in stems:
        for suffix in dict.fromkeys((ext, *suffixes)):
            candidate = os.path.join(folder, candidate_stem + suffix)
            if os.path.abspath(candidate) != os.path.abspath(path) and os.path.isfile(candidate):
                return candidate
    return None
