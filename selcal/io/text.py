"""CSV, TSV and JSON Lines dumps, read in blocks of whole lines (memory bounded by a block).

The columns are those of a Parquet dump (:mod:`selcal.io.columns`): ``logit_k``, ``class_k``
or ``prob_k`` columns in any of the three, a ``logits`` list per row in JSON Lines; every check
and message of :class:`~selcal.io.parquet.ParquetSource` holds, which reads the batches
through :class:`TextFile`, a stand-in for :class:`pyarrow.parquet.ParquetFile`.

selcal reads the bytes itself and gives polars one block of whole lines at a time
(:data:`BLOCK_BYTES`), never the file: so the header's width (:data:`MAX_COLUMNS`), the length
of a line (:data:`MAX_LINE_BYTES`) and what a compressed file inflates to are bounded before
polars sees any of it (CONVENTIONS.md, "Text files"). A gzip, bzip2 or xz file is decompressed
as a stream (any name: ``m.csv.gz``, or a ``.csv`` that is compressed); any other compressed or
binary file is refused by its magic bytes. A value that cannot be read is named with its line;
so is every error of a JSON Lines line (a ``NaN`` literal included).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import math
import os
import re
import zlib
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pyarrow as pa

from .columns import WIDE_COLUMN, LABEL_NAMES
from .messages import Line, input_error, first_line
from .parquet import ParquetSource, refuse_duplicated

if TYPE_CHECKING:
    import polars as pl

SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")
_INFER_ROWS = 10_000
# polars is imported where a text file is read, not with selcal: about 35 MB of resident memory
# and 65 ms of start-up that a Parquet or .npz user never needs (tests/test_import_cycles.py).

MAX_COLUMNS = 1 << 17  # 131 072: more classes than any vocabulary's logits in a CSV (Parquet or .npy beyond)
MAX_LINE_BYTES = 64 << 20  # one line, the header included (a row of 131 072 logits is about 3 MB)
BLOCK_BYTES = 2 << 20  # the lines handed to polars at once (peak memory about 15 times this: tests/io)
# What a compressed file may inflate to: INFLATE_RATIO times its size on disk, and INFLATE_FLOOR whatever its size.
# A dump's text compresses 2 to 20 times; a bomb (1 MB of gzip, 560 MB of rows) far more: refused once read
# past the bound, in seconds (parsing 560 MB took minutes). Decompressed first, the same file is read whole.
INFLATE_RATIO = 100
INFLATE_FLOOR = 128 << 20

# Magic bytes: streamed (stdlib decompressors) and refused (no stream reader in the standard library,
# or not a text file at all).
_STREAMED = {b"\x1f\x8b": ("gzip", gzip.open), b"BZh": ("bzip2", bz2.open), b"\xfd7zXZ\x00": ("xz", lzma.open)}
_REFUSED = {
    b"\x28\xb5\x2f\xfd": "zstd-compressed; decompress it (zstd -d) or give it gzip-, bzip2- or xz-compressed",
    b"\x04\x22\x4d\x18": "lz4-compressed; decompress it (lz4 -d) or give it gzip-, bzip2- or xz-compressed",
    b"PK\x03\x04": "a zip archive (an .npz is one): name an .npz file .npz, or unzip the text file",
    b"PAR1": "a Parquet file: give it a .parquet name",
    b"\x93NUMPY": "a NumPy .npy array: give it a .npy name",
    b"7z\xbc\xaf\x27\x1c": "a 7-zip archive; extract the text file from it",
}
_UTF8_BOM = b"\xef\xbb\xbf"
_STREAM_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


def text_format(path: str) -> str | None:
    """``csv``, ``tsv`` or ``jsonl`` for a file of that extension (any case; also ``.csv.gz``,
    ``.jsonl.bz2``, ``.tsv.xz``), else None."""
    root, extension = os.path.splitext(path)
    if extension.lower() in COMPRESSED_SUFFIXES:
        extension = os.path.splitext(root)[1]
    return SUFFIXES.get(extension.lower())


def stem_of(name: str) -> str:
    """``name`` without its text suffix (and its compression suffix): ``m.csv.gz`` -> ``m``."""
    root, extension = os.path.splitext(name)
    if extension.lower() in COMPRESSED_SUFFIXES:
        root, extension = os.path.splitext(root)
    return root if extension.lower() in SUFFIXES else name


def open_text(path: str):
    """The file's bytes as a binary stream, decompressed when its magic bytes say gzip, bzip2 or
    xz; a file another magic names (zstd, zip, Parquet, ...) is refused in one line."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    for magic, what in _REFUSED.items():
        if head.startswith(magic):
            raise input_error(path, None, None, f"is {what}")
    for magic, (_, opener) in _STREAMED.items():
        if head.startswith(magic):
            return opener(path, "rb")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise input_error(path, None, None, "is UTF-16 text; save it as UTF-8")
    return open(path, "rb")


def compression(path: str) -> str | None:
    """``gzip``, ``bzip2`` or ``xz`` when the file's magic bytes say so, else None."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    return next((name for magic, (name, _) in _STREAMED.items() if head.startswith(magic)), None)


class TextFile:
    """What :class:`~selcal.io.parquet.ParquetSource` asks of a Parquet file (``schema_arrow``,
    ``metadata``, ``read``, ``iter_batches``), answered block by block from a text file.

    Whole numbers in logit columns (``2`` in a CSV, ``[1, 2]`` in JSON Lines) are read as
    float64, as the file means them; so are numbered and label columns whose values are
    not all numbers, so that the first bad value is named with its line. The rows are counted
    by a first pass over the blocks (decompressing a compressed file twice).
    """

    def __init__(self, path: str, fmt: str):
        self.path, self.fmt = path, fmt
        self.separator = "\t" if fmt == "tsv" else ","
        self.offset = 2 if fmt in ("csv", "tsv") else 1
        self.header = b""
        self.schema: dict | None = None
        with self._stream() as stream:
            if fmt != "jsonl":
                self.header = self._header(stream)
            blocks = self._blocks(stream, self.offset)
            first = next(blocks, None)
            if first is None and not self.header.strip():
                size = ("0 bytes" if os.path.getsize(path) == 0 else "0 bytes once decompressed" if compression(path)
                        else "only blank lines")
                raise input_error(path, None, None, f"is empty ({size}): no header and no rows; was it written completely?")
            if fmt == "jsonl" and first is not None:
                self._check_keys(*first)
            self.schema = self._infer(first)
        self.schema_arrow = self._arrow(self._empty()).schema
        self._metadata = None

    @property
    def metadata(self):
        """The row count (a pass over the whole file, made when first asked: a reader asks, the check of
        a file's kind does not) and the file's size, as a Parquet file's metadata says them."""
        if self._metadata is None:
            num_rows = sum(self._count(line, block) for line, block in self._each_block())
            row_group = SimpleNamespace(total_byte_size=os.path.getsize(self.path))
            self._metadata = SimpleNamespace(num_rows=num_rows, num_row_groups=1, row_group=lambda i: row_group)
        return self._metadata

    # ----------------------------------------------------------------- bytes
    def _stream(self):
        """The file's (decompressed) bytes, after a UTF-8 byte order mark if there is one (Excel writes one)."""
        try:
            stream = open_text(self.path)
            if compression(self.path):
                stream = _Inflated(stream, self.path)
            if stream.peek(3)[:3] == _UTF8_BOM:
                stream.read(3)
        except _STREAM_ERRORS as exc:
            kind = compression(self.path)
            raise input_error(self.path, None, None, f"its {kind} stream is truncated or corrupted ({first_line(exc)})"
                        if kind else f"cannot be read ({first_line(exc)})") from None
        return stream

    def _read(self, stream, size: int) -> bytes:
        try:
            return stream.read(size)
        except _STREAM_ERRORS as exc:
            kind = compression(self.path)
            raise input_error(self.path, None, None, f"its {kind} stream is truncated or corrupted ({first_line(exc)})"
                        if kind else f"cannot be read ({first_line(exc)})") from None

    def _header(self, stream) -> bytes:
        """The CSV header line, bounded in length and in columns before polars reads it."""
        try:
            header = stream.readline(MAX_LINE_BYTES + 1)
        except _STREAM_ERRORS as exc:
            raise input_error(self.path, None, None, f"cannot be read ({first_line(exc)})") from None
        if len(header) > MAX_LINE_BYTES:
            raise input_error(self.path, None, Line(-1, 2), f"the header is longer than {MAX_LINE_BYTES >> 20} MB; "
                                                      "no dump's header is: is this a CSV file?")
        if b"\0" in header:
            raise input_error(self.path, None, Line(-1, 2), "holds NUL bytes: not UTF-8 text; save it as UTF-8 CSV")
        columns = header.count(self.separator.encode()) + 1
        if columns > MAX_COLUMNS:
            raise input_error(self.path, None, Line(-1, 2), f"the header has {columns} columns, more than the "
                                                      f"{MAX_COLUMNS} selcal reads from a text file; write the logits "
                                                      "as one list column of a Parquet file, or as .npy")
        text = header.decode("utf-8", "replace").rstrip("\r\n")
        try:
            names = next(csv.reader([text], delimiter=self.separator), [])
        except csv.Error:  # a name past csv's field size limit (128 KB): polars says what is wrong with it
            names = text.split(self.separator)
        refuse_duplicated(self.path, names, Line(-1, 2), "the header")  # polars would rename the second one
        return header if header.endswith(b"\n") or not header else header + b"\n"

    def _blocks(self, stream, first_line: int):
        """(number of the block's first line, bytes of whole lines), about :data:`BLOCK_BYTES` at a time."""
        line, carry = first_line, b""
        while True:
            chunk = self._read(stream, BLOCK_BYTES)
            if not chunk:
                break
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data
                self._bounded(carry, line)
                continue
            if carry:  # the line the carry began is whole now: bounded too
                self._bounded(data[:data.find(b"\n")], line)
            block, carry = data[:cut], data[cut:]
            self._bounded(carry, line + block.count(b"\n"))
            yield line, block
            line += block.count(b"\n")
        if carry.strip():
            yield line, carry + b"\n"

    def _bounded(self, partial: bytes, line: int) -> None:
        if len(partial) > MAX_LINE_BYTES:
            raise input_error(self.path, None, Line(line - 1, 1), f"is longer than {MAX_LINE_BYTES >> 20} MB; no row "
                                                            "of a dump is: is this a text file of rows?")

    def _each_block(self):
        with self._stream() as stream:
            if self.fmt != "jsonl":
                stream.readline(MAX_LINE_BYTES + 1)
            yield from self._blocks(stream, self.offset)

    # ----------------------------------------------------------------- parsing
    def _parse(self, block: bytes, columns=None, *, infer: bool = False) -> pl.DataFrame:
        import polars as pl

        if self.fmt == "jsonl":
            frame = pl.read_ndjson(io.BytesIO(block), schema=None if infer else self.schema,
                                   infer_schema_length=_INFER_ROWS)
            return frame if columns is None else frame.select(columns)
        return pl.read_csv(io.BytesIO(self.header + block), separator=self.separator, raise_if_empty=False,
                           schema=None if infer else self.schema, infer_schema_length=_INFER_ROWS,
                           columns=columns, n_rows=_INFER_ROWS if infer else None)

    def _parsed(self, line: int, block: bytes, columns=None, *, infer: bool = False) -> pl.DataFrame:
        """:meth:`_parse`, with an error turned into one line naming the first line that cannot be read."""
        import polars as pl

        try:
            return self._parse(block, columns, infer=infer)
        except (pl.exceptions.PolarsError, ValueError, OSError) as exc:
            raise self._locate(line, block, exc, infer) from None
        except BaseException as exc:  # polars' Rust panic (PanicException is a BaseException): one line too
            if type(exc).__name__ != "PanicException":
                raise
            raise self._locate(line, block, exc, infer) from None

    def _infer(self, first) -> dict:
        """The columns' types from the first rows, whole numbers in logit columns read as float64."""
        import polars as pl

        if first is None:  # a header and no rows
            frame = pl.read_csv(io.BytesIO(self.header), separator=self.separator, raise_if_empty=False)
        else:
            frame = self._parsed(*first, infer=True)
        integers = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)
        schema = dict(frame.schema)
        for name, dtype in schema.items():  # a number column with a bad value (inferred as text): its line is named
            if (WIDE_COLUMN.match(name) and (dtype in integers or dtype == pl.String or dtype == pl.Null)) or (
                    name in LABEL_NAMES and dtype == pl.String):
                schema[name] = pl.Float64
            elif isinstance(dtype, pl.List) and (dtype.inner in integers or dtype.inner == pl.Null):
                schema[name] = pl.List(pl.Float64)
        return schema

    def _empty(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(schema=self.schema)

    def _count(self, line: int, block: bytes) -> int:
        first = next(iter(self.schema), None)
        if first is None:
            return 0
        return self._parsed(line, block, [first]).height

    def _check_keys(self, line: int, block: bytes) -> None:
        """The first JSON Lines object's width, bounded before polars reads it."""
        text = block.split(b"\n", 1)[0]
        keys = text.count(b'":') + text.count(b'" :')
        if keys > MAX_COLUMNS:
            raise input_error(self.path, None, Line(line - 1, 1), f"has about {keys} keys, more than the {MAX_COLUMNS} "
                                                            "selcal reads; write the logits as one list ('logits')")
        try:  # a key given twice: polars keeps the first, a JSON reader the last (every line's writer is the first's)
            pairs = json.loads(text, object_pairs_hook=lambda pairs: pairs)
        except (ValueError, RecursionError):
            return  # polars names what is wrong with the line
        if isinstance(pairs, list) and all(isinstance(pair, tuple) for pair in pairs):
            refuse_duplicated(self.path, [key for key, _ in pairs], Line(line - 1, 1), "the line's object")

    # ----------------------------------------------------------------- errors
    def _locate(self, line: int, block: bytes, exc: BaseException, infer: bool):
        """One line naming the first line of ``block`` (its first line is ``line``) that cannot be read."""
        lines = block.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        low, high = 0, len(lines)  # lines[:low] are read, lines[:high] are not: the first bad line is high - 1
        while high - low > 1:
            middle = (low + high) // 2
            if self._fails(b"\n".join(lines[:middle]) + b"\n", infer):
                high = middle
            else:
                low = middle
        bad = max(high - 1, 0)
        where = Line(line + bad - 1, 1)
        text = lines[bad]
        if self.fmt == "jsonl":
            column, problem = _json_problem(text, self._error(text + b"\n", infer) or exc, None if infer else self.schema,
                                            lines[:bad], line)
            return input_error(self.path, column, where, problem)
        error = self._error(text + b"\n", infer) or exc  # the bad line's own error
        found = re.search(r"could not parse `(.*?)` as dtype `(\w+)` at column '(.*?)'", str(error))
        if found:
            value, _, column = found.groups()
            shown = value if len(value) <= 40 else value[:37] + "..."
            return input_error(self.path, column, where, f"holds {shown!r}, which is not a number; "
                                                         f"{_number_hint(value)}")
        if "more fields" in str(error):
            return input_error(self.path, None, where, "has more values than the header has columns; quote a value "
                                                 "that holds the separator, or fix the line")
        kind = {"csv": "CSV", "tsv": "TSV"}[self.fmt]
        return input_error(self.path, None, where, f"cannot be read as {kind} ({first_line(error)})")

    def _error(self, block: bytes, infer: bool) -> BaseException | None:
        try:
            self._parse(block, infer=infer)
        except BaseException as exc:  # noqa: BLE001  (a polars error, a Rust panic)
            if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)) or type(exc).__name__ == "Signalled":
                raise
            return exc
        return None

    def _fails(self, block: bytes, infer: bool) -> bool:
        return self._error(block, infer) is not None

    def refuse_list_of_non_numbers(self, column: str) -> None:
        """Raise the one line naming the first line whose list ``column`` holds a value that is not a
        number (a boolean, a string, a list): polars read the column as a list of strings (the supertype
        of what the lines mix) and a logits list must hold numbers. Read again with the column's type a
        list of float64, that line is the first polars cannot read, named as any such line is."""
        import copy

        import polars as pl

        numbers = copy.copy(self)
        numbers.schema = {**self.schema, column: pl.List(pl.Float64)}
        for line, block in numbers._each_block():
            numbers._parsed(line, block, [column])

    # ----------------------------------------------------------------- ParquetFile's face
    def read(self, columns) -> pa.Table:
        tables = [self._arrow(self._parsed(line, block, columns)) for line, block in self._each_block()]
        if not tables:
            return self._arrow(self._empty().select(columns))
        return pa.concat_tables(tables, promote_options="permissive")

    def iter_batches(self, batch_size: int, columns):
        for line, block in self._each_block():
            frame = self._parsed(line, block, columns)
            for start in range(0, frame.height, batch_size):
                yield from self._arrow(frame.slice(start, batch_size)).combine_chunks().to_batches()

    def line(self, row: int) -> Line:
        return Line(row, self.offset)

    def _arrow(self, frame) -> pa.Table:
        """``frame.to_arrow()``; polars' Rust panic on text it took (a column name with a NUL) is one line."""
        try:
            return frame.to_arrow()
        except BaseException as exc:
            if type(exc).__name__ != "PanicException":
                raise
            raise input_error(self.path, None, None, f"cannot be read ({first_line(exc)}); save it as UTF-8 text") from None


class _Inflated:
    """A decompressing stream that refuses to give more than ``max(INFLATE_FLOOR, INFLATE_RATIO * size)`` bytes."""

    def __init__(self, stream, path: str):
        self.stream, self.path, self.given = stream, path, 0
        self.bound = max(INFLATE_FLOOR, INFLATE_RATIO * os.path.getsize(path))

    def _count(self, data: bytes) -> bytes:
        self.given += len(data)
        if self.given > self.bound:
            raise input_error(self.path, None, None, f"inflates to more than {self.bound >> 20} MB, the most selcal "
                              f"inflates ({INFLATE_RATIO} times the file's size, at least {INFLATE_FLOOR >> 20} MB; "
                              "a dump's text compresses 2 to 20 times): a compression bomb? If not, decompress it "
                              "and give the plain file, which is read at any size")
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self.stream.read(size))

    def readline(self, size: int = -1) -> bytes:
        return self._count(self.stream.readline(size))

    def peek(self, size: int) -> bytes:
        return self.stream.peek(size)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stream.close()


def _number_hint(value: str) -> str:
    """What to do with a CSV value that is not a number: a decimal comma and padding are named."""
    raw = value.strip('"')  # (polars shows a quoted value with its quotes)
    bare = raw.strip()
    if re.fullmatch(r"[-+]?\d+,\d+", bare):
        return "a decimal comma? write numbers with a decimal point (1.5)"
    if bare != raw and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", bare):
        return "remove the spaces around the number"
    return "store numbers only"


def _reject_constant(name: str):
    raise ValueError(f"holds {name}, which JSON has no literal for (and a logit must be a finite number); "
                     "write finite numbers, or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"holds {text}, a number beyond float64's range; write finite numbers")
    return value


def _json_problem(text: bytes, exc: BaseException, schema: dict | None = None,
                  earlier=(), first: int = 1) -> tuple[str | None, str]:
    """(the column, what is wrong) with one line of a JSON Lines file, for a message that names the line;
    ``schema``: the columns' types the line was read with (None: the types were being inferred from it
    and the ``earlier`` lines of its block, which were read; ``first`` is the number of the first)."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        return None, f"is not valid JSON ({error.msg}); write one JSON object per line"
    except ValueError as error:
        return None, str(error)
    except (RecursionError, UnicodeDecodeError) as error:
        return None, f"cannot be read as JSON ({first_line(error)}); write one JSON object per line"
    if not isinstance(value, dict):
        return None, f"holds a JSON {type(value).__name__}, not an object; write one object per line"
    for column, held in value.items():
        problem = _not_a_number(held, None if schema is None else schema.get(column))
        if problem is not None:
            return column, problem
    if schema is None and earlier:
        found = _first_of_another_type(value, earlier, first)
        if found is not None:
            return found
    return None, f"cannot be read with the columns of the first lines ({first_line(exc)}); give every line the same " \
                 "keys and types"


def _kind(value) -> str:
    return "a number" if _is_number(value) else {bool: "a boolean", str: "a string", list: "a list",
                                                  dict: "an object"}.get(type(value), "null")


def _first_of_another_type(value: dict, earlier, first_line: int) -> tuple[str, str] | None:
    """(column, what is wrong) when a key of ``value`` holds a value of another JSON type than on the
    first of the ``earlier`` lines (numbered from ``first_line``) that has it (null aside): polars reads
    a key with one type on every line."""
    first: dict = {}
    for number, text in enumerate(earlier):
        try:
            line = json.loads(text)
        except (ValueError, RecursionError, UnicodeDecodeError):
            continue
        for key, held in line.items() if isinstance(line, dict) else ():
            if held is not None:
                first.setdefault(key, (number, held))
    for key, held in value.items():
        if held is None or key not in first or _kind(held) == _kind(first[key][1]):
            continue
        number, before = first[key]
        bools = "a boolean" in (_kind(held), _kind(before))
        fix = ("write numbers on every line" if bools and "a number" in
               (_kind(held), _kind(before)) else "give the key one type on every line")
        return key, f"holds {_shown(held)} where line {first_line + number} holds {_shown(before)}; {fix}"
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value) -> str:
    """A JSON value as the line writes it, cut to 40 characters; with what it is (a boolean, a string, ...)."""
    text = json.dumps(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{text} ({_kind(value)})"


def _not_a_number(value, dtype) -> str | None:
    """What is wrong with one value of a line in a column of numbers, or of numbers in a list: a
    boolean, a string, a list or an object where a number belongs (None: nothing found). The column is
    one of numbers when ``dtype`` says so, or, with no ``dtype`` (inferring), a list that holds a number."""
    numeric = getattr(dtype, "is_numeric", lambda: False)()
    inner = getattr(dtype, "inner", None)
    if isinstance(value, list):
        if not (inner is not None and inner.is_numeric() or dtype is None and any(map(_is_number, value))):
            return None
        k, bad = next(((k, item) for k, item in enumerate(value) if item is not None and not _is_number(item)),
                      (None, None))
        if k is None:
            return None
        if isinstance(bad, bool):
            fix = "write the model's logit for each class (true and false are not read as 1 and 0)"
        elif isinstance(bad, str):
            fix = (f"write the number {bad.strip()} without quotes" if _number_text(bad) else "write numbers only")
        else:
            fix = "write one flat list of K numbers per line"
        return f"holds {_shown(bad)} for class {k} of its list, where a number belongs; {fix}"
    if numeric and value is not None and not _is_number(value):
        fix = (f"write the number {value.strip()} without quotes" if isinstance(value, str) and _number_text(value)
               else "write a number")
        return f"holds {_shown(value)}, not a number; {fix}"
    return None


def _number_text(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


class TextSource(ParquetSource):
    """A CSV, TSV or JSON Lines dump: the checks of a Parquet dump, read in row batches."""

    def __init__(self, path: str, label_col: str | None, logits_col: str | None, ignore_label: int | None,
                 group_col: str | None):
        self._format = text_format(path) or "csv"
        super().__init__(path, label_col, logits_col, ignore_label, group_col)

    def _open(self, path: str) -> TextFile:
        return TextFile(path, self._format)

    def _not_float_values(self, logits_col: str, value_type: pa.DataType):
        """A JSON Lines logits list read as strings mixes numbers with something else (``[1.5, true]``,
        ``[1.5, "2"]``): the first such line is named, with the value and what to do."""
        if self._format == "jsonl" and (pa.types.is_string(value_type) or pa.types.is_large_string(value_type)):
            self.file.refuse_list_of_non_numbers(logits_col)
        return super()._not_float_values(logits_col, value_type)

    def raw_batches(self, batch_rows: int, ids: bool = True):
        first_row = 0
        for batch in self.file.iter_batches(batch_size=batch_rows, columns=self._batch_columns(ids)):
            yield self._columns(batch, self.file.line(first_row)), self.file.line(first_row)
            first_row += batch.num_rows
