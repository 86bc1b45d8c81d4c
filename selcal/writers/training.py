"""A dump from a training loop: :class:`DumpWriter` writes what ``selcal evaluate`` reads with no option.

``DumpWriter("dumps/run1", split="val", classes=10)`` writes the part ``dumps/run1/val-00000.parquet``
(``test-00000.parquet`` for ``split="test"``): the folder is one dump whose part names name their
split (:mod:`selcal.io.parts`), so ``selcal evaluate dumps/run1`` fits the fitted scores on the
``val`` rows and measures the ``test`` rows. Each part holds ``label`` (int64), ``logits`` (a
fixed-size list of K floats, in the dtype given: bfloat16 is stored as float32, which holds it
exactly), and ``id`` and ``group`` when given.

:meth:`DumpWriter.add` takes numpy arrays, torch tensors (any device, any float dtype,
``requires_grad``), lists, pandas or polars objects (:mod:`selcal.io.objects`). Rows are streamed
to disk in row groups (at most 32 MiB of logits are held), into ``PART.partial``, renamed when
:meth:`DumpWriter.close` is called: an interrupted loop leaves no part a reader would take.
Writing a part again (the same split and shard, e.g. every validation epoch) replaces it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import SelcalError
from ..io.base import first_nonfinite
from ..io.columns import SPLIT_ALIASES
from ..io.objects import as_labels, to_numpy
from .dump.writer import PartialParquet, rows_per_group
from .output import AllOrNothing

__all__ = ["DumpWriter", "FLOAT_TYPES"]

FLOAT_TYPES = {"float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64()}


class DumpWriter(AllOrNothing):
    """Logits of a training loop's evaluation rows, written as one part of a selcal dump.

    Parameters
    ----------
    path : str or Path
        The dump's folder (made if missing); every split of one model goes into the same folder.
    split : {"val", "test", "train"}, optional
        The rows' split, named by the part's file name (``val-00000.parquet``); ``validation``,
        ``valid``, ``dev`` mean ``val``. None: a dump with no split (``part-00000.parquet``; then
        no part of the folder may name one).
    classes : int or sequence of str, optional
        K, or the classes' names (kept in the part's metadata, ``selcal.classes``). None: K of the
        first :meth:`add`.
    shard : int, default 0
        The part's number: one per process of a distributed loop (its rank), so that the parts
        of one split never overwrite each other.
    dtype : {"float16", "float32", "float64"}, optional
        The logits' type on disk. None: that of the first :meth:`add` (bfloat16 as float32).
        Later logits of another type are converted when that keeps every value, else refused.
    metadata : dict, optional
        More key-value metadata of the part (``{"epoch": "3"}``: ``selcal evaluate --sweep epoch``
        reads it).

    Examples
    --------
    >>> import numpy as np, selcal, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> for split in ("val", "test"):
    ...     with selcal.DumpWriter(folder, split=split, classes=3) as writer:
    ...         for _ in range(4):  # the batches of an evaluation loop
    ...             writer.add(rng.normal(size=(50, 3)), rng.integers(0, 3, 50))
    >>> result = selcal.evaluate(folder)
    >>> result.models[0].n_val, result.models[0].n_eval
    (200, 200)
    """

    def __init__(self, path, split: str | None = None, classes: int | Sequence[str] | None = None, *,
                 shard: int = 0, dtype: str | None = None, metadata: dict[str, str] | None = None):
        if split is not None and str(split).lower() not in SPLIT_ALIASES:
            raise SelcalError(f"split must be one of val, test, train (or validation, valid, dev), got {split!r}")
        self.split = None if split is None else SPLIT_ALIASES[str(split).lower()]
        self.classes: list[str] | None = None
        self.num_classes: int | None = None
        if isinstance(classes, (int, np.integer)):
            self.num_classes = int(classes)
        elif classes is not None:
            self.classes = [str(c) for c in classes]
            self.num_classes = len(self.classes)
        if self.num_classes is not None and self.num_classes < 1:
            raise SelcalError(f"classes must be at least 1 (K), got {classes!r}")
        if dtype is not None and dtype not in FLOAT_TYPES:
            raise SelcalError(f"dtype must be one of {', '.join(FLOAT_TYPES)}, got {dtype!r}")
        if isinstance(shard, bool) or not isinstance(shard, (int, np.integer)) or shard < 0:
            raise SelcalError(f"shard must be a whole number >= 0 (e.g. the process's rank), got {shard!r}")
        self.folder = Path(path)
        if self.folder.exists() and not self.folder.is_dir():
            raise SelcalError(f"{self.folder}: is a file; a dump written by DumpWriter is a folder of parts")
        self.path = self.folder / f"{self.split or 'part'}-{int(shard):05d}.parquet"
        self.dtype = dtype
        self.metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
        self.rows = 0
        self._batches = 0
        self._file: PartialParquet | None = None
        self._columns: tuple[bool, bool] | None = None  # (ids, groups) given: fixed by the first add

    # ------------------------------------------------------------------ writing
    def add(self, logits, labels, ids=None, groups=None) -> None:
        """Append the rows of one batch: ``logits`` (N, K) (or (N,): one binary logit), ``labels``
        (N,) in 0 .. K-1, and optionally ``ids`` (N,) (a name per row: strings or integers) and
        ``groups`` (N,) (e.g. the source data set; ``selcal evaluate --group-col group``). Every
        batch gives ids (and groups) or none does."""
        self._batches += 1
        where = f"{self.path.name}, batch {self._batches}"
        values = self._logits(logits, where)
        n = values.shape[0]
        if n == 0:
            return
        k = values.shape[1]
        if self.num_classes is None:
            self.num_classes = k
        if k != self.num_classes:
            raise SelcalError(f"{where}: logits have K = {k} columns, the dump has K = {self.num_classes}")
        y = as_labels(labels, f"{where}: labels", n, max(k, 2), "logits")
        columns = (ids is not None, groups is not None)
        if self._columns is None:
            self._columns = columns
        if columns != self._columns:
            what = "ids" if columns[0] != self._columns[0] else "groups"
            raise SelcalError(f"{where}: {what} are given in some batches and not in others; give them in every "
                              "batch or in none")
        table = {"label": pa.array(y, pa.int64()),
                 "logits": pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), FLOAT_TYPES[str(self.dtype)]),
                                                             k)}
        for name, value in (("id", ids), ("group", groups)):
            if value is not None:
                array = to_numpy(value, f"{where}: {name}s")
                if array.ndim != 1 or array.size != n:
                    raise SelcalError(f"{where}: {name}s have shape {array.shape}; pass one per row ({n})")
                try:
                    table[name] = pa.array(array.tolist())
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    raise SelcalError(f"{where}: {name}s mix types; give strings or integers") from None
        try:
            batch = pa.table(table)
            file = self._file if self._file is not None else self._open(batch.schema, k)
            file.append(batch.select(file.schema.names).cast(file.schema))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            reason = (str(exc).strip().splitlines() or ["?"])[0]
            raise SelcalError(f"{where}: ids or groups of another type than in the first batch ({reason}); "
                              "give them one type (strings or integers)") from None
        self.rows += n

    def _logits(self, value, where: str) -> np.ndarray:
        values = to_numpy(value, f"{where}: logits")
        if values.ndim == 1:
            values = values[:, None]
        if values.ndim != 2:
            raise SelcalError(f"{where}: logits have shape {values.shape}; pass N x K logits (or N binary logits)")
        if values.dtype.kind != "f" or values.dtype.name not in FLOAT_TYPES:
            raise SelcalError(f"{where}: logits have dtype {values.dtype}; pass float logits (16, 32 or 64 bits)")
        nonfinite = first_nonfinite(values)
        if nonfinite is not None:
            row, k, what = nonfinite
            raise SelcalError(f"{where}: logits row {row} holds {what} for class {k}; logits must be finite")
        if self.dtype is None:
            self.dtype = values.dtype.name
        with np.errstate(over="ignore"):  # a value beyond the type's range is refused below, in one line, not warned of
            stored = values.astype(self.dtype, copy=False)
        if stored.dtype != values.dtype and not np.array_equal(stored.astype(values.dtype), values):
            raise SelcalError(f"{where}: {values.dtype} logits would change as {self.dtype}, the dump's type; "
                              f"pass dtype='{values.dtype}' to DumpWriter (or convert them yourself)")
        return np.ascontiguousarray(stored)

    def _open(self, schema: pa.Schema, k: int) -> PartialParquet:
        self.folder.mkdir(parents=True, exist_ok=True)
        order = [name for name in ("id", "label", "logits", "group") if name in schema.names]
        schema = pa.schema([schema.field(name) for name in order])
        itemsize = np.dtype(self.dtype).itemsize
        self._file = PartialParquet(self.path, schema, rows_per_group(itemsize, k))
        return self._file

    # ------------------------------------------------------------------ the end
    def close(self) -> Path | None:
        """Write what is buffered and give the part its name; returns its path (None: no rows were added)."""
        if self._file is None:
            return None
        metadata = {**self.metadata, "selcal.writer": "DumpWriter", "selcal.complete": "true",
                    "selcal.n_rows": str(self.rows), "selcal.num_classes": str(self.num_classes)}
        if self.split is not None:
            metadata["selcal.split"] = self.split
        if self.classes is not None:
            metadata["selcal.classes"] = json.dumps(self.classes)
        file, self._file = self._file, None
        try:
            file.finish(metadata)
        except BaseException:
            file.abort()
            raise
        return self.path

    def abort(self) -> None:
        """Drop what was written (no part appears)."""
        if self._file is not None:
            self._file.abort()
            self._file = None

    _keep, _drop = close, abort  # (AllOrNothing: the end of a with block)
