"""CSV, TSV and JSON Lines dumps, read with polars in row batches (streamed: memory bounded by a batch).

The columns are those of a Parquet dump (:mod:`selcal.io.columns`): ``logit_k``, ``class_k``
or ``prob_k`` columns in any of the three, a ``logits`` list per row in JSON Lines; every check
and message of :class:`~selcal.io.parquet.ParquetSource` holds, which reads the batches
through :class:`PolarsFile`, a stand-in for :class:`pyarrow.parquet.ParquetFile`. Messages name
the line of the file (a CSV's header is line 1; lines are counted as if no quoted value spans
two lines and JSON Lines has no blank line).
"""

from __future__ import annotations

import json
import os
import re
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pyarrow as pa

from .base import Line, _fail, _short
from .columns import _WIDE, LABEL_NAMES
from .parquet import ParquetSource

if TYPE_CHECKING:
    import polars as pl

SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_INFER_ROWS = 10_000
# polars is imported where a text file is read, not with selcal: about 35 MB of resident memory
# and 65 ms of start-up that a Parquet or .npz user never needs (tests/test_import_cycles.py).


def text_format(path: str) -> str | None:
    """``csv``, ``tsv`` or ``jsonl`` for a file of that extension (any case), else None."""
    return SUFFIXES.get(os.path.splitext(path)[1].lower())


class PolarsFile:
    """What :class:`~selcal.io.parquet.ParquetSource` asks of a Parquet file (``schema_arrow``,
    ``metadata``, ``read``, ``iter_batches``), answered by a polars scan of a text file.

    Whole numbers in logit columns (``2`` in a CSV, ``[1, 2]`` in JSON Lines) are read as
    float64, as the file means them; so are numbered and label columns whose values are
    not all numbers, so that the first bad value is named with its line.
    """

    def __init__(self, path: str, fmt: str):
        import polars as pl

        integers = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)
        self.path, self.fmt = path, fmt
        if os.path.getsize(path) == 0:  # (polars would say "no label column" or "cannot infer types")
            raise _fail(path, None, None, "is empty (0 bytes): no header and no rows; was it written completely?")
        self.offset = 2 if fmt in ("csv", "tsv") else 1
        schema = self._guard(lambda: self._scan().collect_schema())
        overrides = {}
        for name, dtype in schema.items():  # a number column with a bad value (inferred as text): its line is named
            if (_WIDE.match(name) and (dtype in integers or dtype == pl.String)) or (
                    name in LABEL_NAMES and dtype == pl.String):
                overrides[name] = pl.Float64
            elif isinstance(dtype, pl.List) and dtype.inner in integers:
                overrides[name] = pl.List(pl.Float64)
        self.lazy = self._scan(overrides)
        empty = self._guard(lambda: self.lazy.head(0).collect())
        self.schema_arrow = empty.to_arrow().schema
        num_rows = self._guard(lambda: self.lazy.select(pl.len()).collect().item())
        row_group = SimpleNamespace(total_byte_size=os.path.getsize(path))
        self.metadata = SimpleNamespace(num_rows=num_rows, num_row_groups=1, row_group=lambda i: row_group)

    def _scan(self, overrides: dict | None = None) -> pl.LazyFrame:
        import polars as pl

        if self.fmt == "jsonl":
            return pl.scan_ndjson(self.path, infer_schema_length=_INFER_ROWS, schema_overrides=overrides)
        return pl.scan_csv(self.path, separator="\t" if self.fmt == "tsv" else ",", infer_schema_length=_INFER_ROWS,
                           schema_overrides=overrides, raise_if_empty=False)

    def read(self, columns) -> pa.Table:
        return self._guard(lambda: self.lazy.select(columns).collect().to_arrow())

    def iter_batches(self, batch_size: int, columns):
        batches = iter(self.lazy.select(columns).collect_batches(chunk_size=batch_size))
        while True:
            frame = self._guard(lambda: next(batches, None))
            if frame is None:
                return
            for batch in frame.to_arrow().combine_chunks().to_batches():
                yield batch

    def line(self, row: int) -> Line:
        return Line(row, self.offset)

    def _guard(self, work):
        """``work()``, with a polars error turned into one line naming the file's line."""
        import polars as pl

        try:
            return work()
        except (pl.exceptions.PolarsError, OSError, ValueError, UnicodeDecodeError) as exc:
            raise self._locate(exc) from None

    def _locate(self, exc: BaseException):
        """The first line polars could not read: a value not of its column's type (CSV), or a
        line that is not a JSON object (JSON Lines), found by reading again more simply."""
        import polars as pl

        text = str(exc)
        if self.fmt == "jsonl":
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, start=1):
                    try:
                        value = json.loads(line)
                    except ValueError as error:
                        return _fail(self.path, None, Line(number - 1, 1),
                                     f"is not valid JSON ({error.msg}); write one JSON object per line")
                    if not isinstance(value, dict):
                        return _fail(self.path, None, Line(number - 1, 1),
                                     f"holds a JSON {type(value).__name__}, not an object; write one object per line")
        found = re.search(r"could not parse `(.*?)` as dtype `(\w+)` at column '(.*?)'", text)
        if found:
            value, _, column = found.groups()
            strings = pl.scan_csv(self.path, separator="\t" if self.fmt == "tsv" else ",", infer_schema=False)
            try:
                rows = strings.with_row_index("_row").filter(pl.col(column) == value).select("_row").head(1).collect()
            except pl.exceptions.PolarsError:
                rows = None
            row = None if rows is None or rows.height == 0 else Line(int(rows.item()), self.offset)
            return _fail(self.path, column, row, f"holds {value!r}, which is not a number; store numbers only")
        kind = {"csv": "CSV", "tsv": "TSV", "jsonl": "JSON Lines"}[self.fmt]
        return _fail(self.path, None, None, f"not a readable {kind} file ({_short(exc)})")


class TextSource(ParquetSource):
    """A CSV, TSV or JSON Lines dump: the checks of a Parquet dump, read in row batches."""

    def __init__(self, path: str, label_col: str | None, logits_col: str | None, ignore_label: int | None,
                 group_col: str | None):
        self._format = text_format(path)
        super().__init__(path, label_col, logits_col, ignore_label, group_col)

    def _open(self, path: str) -> PolarsFile:
        return PolarsFile(path, self._format)

    def raw_batches(self, batch_rows: int):
        first_row = 0
        for batch in self.file.iter_batches(batch_size=batch_rows, columns=self.columns):
            yield self._columns(batch, self.file.line(first_row)), self.file.line(first_row)
            first_row += batch.num_rows
