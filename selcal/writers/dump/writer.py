"""Writing a dump: the row groups streamed into ``OUT.parquet.partial`` (:class:`DumpWriter`),
renamed when complete; the settings in the schema metadata, and the resume check (pure: no torch)."""

from __future__ import annotations

import base64
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import SelcalError
from ...options import DUMP_DTYPES

# --dtype: the numpy and Arrow types of each name (selcal.options.DUMP_DTYPES)
DTYPES = {name: (np.dtype(name).type, pa.from_numpy_dtype(np.dtype(name))) for name in DUMP_DTYPES}
#: The settings that decide what a dump holds: a complete output with other values is not reused.
IDENTITY_KEYS = (
    "selcal.model", "selcal.pretrained", "selcal.checkpoint_sha256", "selcal.num_classes_option",
    "selcal.n_images", "selcal.data_sha256", "selcal.val_fraction", "selcal.seed", "selcal.limit", "selcal.dtype",
)
_ROW_GROUP_BYTES = 32 << 20  # logits buffered before a row group is written (constant memory)
_MAX_ROW_GROUP_ROWS = 8192


# ===================================================================== resume
def read_metadata(path) -> dict[str, str]:
    """The ``selcal.*`` key-value metadata of a Parquet file (the file footer's, which holds
    the keys added when the dump was completed)."""
    raw = pq.read_metadata(str(path)).metadata or {}
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in raw.items()
            if k.startswith(b"selcal.")}


def check_existing(out, identity: dict[str, str], overwrite: bool) -> bool:
    """True when ``out`` is a complete dump made with the same settings (skip the run).

    False when there is nothing to reuse (no file, or ``overwrite``). Any other existing
    file is refused: a complete dump with other settings, or a file that is not one.
    """
    out = Path(out)
    if overwrite or not out.exists():
        return False
    if out.is_dir():
        raise SelcalError(f"{out}: is a folder; give a file name for --out")
    try:
        found = read_metadata(out)
    except (pa.ArrowException, OSError, ValueError):
        raise SelcalError(f"{out}: exists and is not a Parquet file; pass --overwrite to replace it, "
                          "or choose another --out") from None
    if found.get("selcal.complete") != "true":
        raise SelcalError(f"{out}: exists and is not a complete selcal dump; pass --overwrite to replace it, "
                          "or choose another --out")
    differences = [
        f"{key[len('selcal.'):]} {_short_value(found.get(key))} there, {_short_value(value)} now"
        for key, value in identity.items() if found.get(key) != value
    ]
    if differences:
        raise SelcalError(f"{out}: exists with other settings ({'; '.join(differences)}); pass --overwrite to "
                          "replace it, or choose another --out")
    return True


def _short_value(value) -> str:
    if value is None:
        return "(none)"
    text = repr(value) if value else "''"
    return text if len(text) <= 24 else text[:12] + "..." + text[-8:]


# ===================================================================== writing
def batch_table(ids, splits, labels, logits: np.ndarray, schema: pa.Schema) -> pa.Table:
    """One batch as a table of the dump's schema (``logits`` a fixed_size_list of K values)."""
    value_type = schema.field("logits").type.value_type
    k = schema.field("logits").type.list_size
    logits = np.ascontiguousarray(logits, dtype=np.float16 if value_type == pa.float16() else np.float32)
    if logits.ndim != 2 or logits.shape[1] != k or logits.shape[0] != len(ids):
        raise ValueError(f"logits of shape {logits.shape} for {len(ids)} rows of K = {k}")
    return pa.table({
        "id": pa.array(list(ids), pa.string()),
        "split": pa.array(list(splits), pa.string()),
        "label": pa.array(np.asarray(labels, dtype=np.int64), pa.int64()),
        "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.reshape(-1), value_type), k),
    }, schema=schema)


def dump_schema(num_classes: int, dtype: str, metadata: dict[str, str]) -> pa.Schema:
    value_type = DTYPES[dtype][1]
    return pa.schema([("id", pa.string()), ("split", pa.string()), ("label", pa.int64()),
                      ("logits", pa.list_(value_type, int(num_classes)))], metadata=metadata)


class PartialParquet:
    """Streams tables into ``OUT.partial`` as row groups of about ``row_group_rows`` rows;
    :meth:`finish` adds the final metadata and renames the file to ``OUT``, so a reader never
    sees a half-written file (a folder's reader skips ``*.partial``: it is no Parquet part).

    A run that fails or is interrupted removes the partial file (:meth:`abort`; a killed one
    leaves it, never a file under the final name). Rows are buffered up to ``row_group_rows``,
    so memory does not grow with the rows written.
    """

    def __init__(self, out, schema: pa.Schema, row_group_rows: int):
        self.out = Path(out)
        self.partial = Path(str(self.out) + ".partial")
        self.schema = schema
        self.row_group_rows = row_group_rows
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer = pq.ParquetWriter(str(self.partial), self.schema, compression="zstd")

    def append(self, table: pa.Table) -> None:
        """Buffer ``table`` (of :attr:`schema`); a row group is written when enough rows wait."""
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.concat_tables(self._pending), row_group_size=max(self._pending_rows, 1))
            self._pending, self._pending_rows = [], 0

    def finish(self, metadata: dict[str, str]) -> None:
        """Write what is buffered, the final metadata, and move the file to its final name."""
        self._flush()
        final = {**(self.schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}}
        # The Arrow schema stored in the footer carries the schema metadata that readers
        # (pq.read_schema, selcal's reader) show: store it again with the final keys.
        schema = self.schema.with_metadata(final)
        self._writer.add_key_value_metadata(
            {**metadata, "ARROW:schema": base64.b64encode(schema.serialize().to_pybytes()).decode()})
        self._writer.close()
        self._writer = None
        descriptor = os.open(self.partial, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(self.partial, self.out)

    def abort(self) -> None:
        """Close and remove the partial file (after an error or an interruption)."""
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the file is removed anyway
                pass
            self._writer = None
        try:
            os.unlink(self.partial)
        except FileNotFoundError:
            pass


def rows_per_group(itemsize: int, num_classes: int) -> int:
    """Rows of a row group: at most 32 MiB of logits, at most 8192 rows."""
    return max(1, min(_MAX_ROW_GROUP_ROWS, _ROW_GROUP_BYTES // (itemsize * max(num_classes, 1))))


class DumpWriter(PartialParquet):
    """``selcal dump``'s file: rows of (id, split, label, logits) streamed into ``OUT.parquet.partial``;
    :meth:`finish` adds the final metadata (``selcal.complete = true`` and the counts) and renames
    the file to ``OUT.parquet`` (:class:`PartialParquet`). At most 32 MiB of logits are buffered,
    so memory does not grow with the number of images.
    """

    def __init__(self, out, num_classes: int, dtype: str, metadata: dict[str, str], row_group_rows: int | None = None):
        rows = row_group_rows or rows_per_group(np.dtype(DTYPES[dtype][0]).itemsize, num_classes)
        super().__init__(out, dump_schema(num_classes, dtype, metadata), rows)

    def write(self, ids, splits, labels, logits: np.ndarray) -> None:
        if len(ids) == 0:
            return
        self.append(batch_table(ids, splits, labels, logits, self.schema))


# ===================================================================== the run
@dataclass
class DumpSummary:
    out: str
    skipped_complete: bool = False
    rows: int = 0
    n_images: int = 0
    n_unreadable: int = 0
    n_other_files: int = 0
    n_nonfinite: int = 0
    num_classes: int = 0
    seconds: float = 0.0
    device: str = ""
    errors_path: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def images_per_second(self) -> float:
        return (self.rows + self.n_unreadable) / self.seconds if self.seconds > 0 else 0.0


def check_output_path(path, option: str) -> None:
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SelcalError(f"{path}: folder '{folder}' does not exist; create it first (mkdir -p {folder})")
    if path.is_dir():
        raise SelcalError(f"{path}: is a folder; give a file name for {option}")
    if not os.access(folder, os.W_OK):
        raise SelcalError(f"{path}: folder '{folder}' is not writable; choose another {option}")
