"""A sharded dump: a folder (or a glob) of Parquet parts read as one model.

What ``selcal dump --shards N``, Spark, Ray Data or ``pyarrow.dataset.write_dataset`` write:
``DUMP/part-0.parquet``, ``DUMP/part-1.parquet``, ... The parts are found
recursively (files and folders whose names start with ``.`` or ``_``, such as ``_SUCCESS``,
skipped, as :mod:`pyarrow.dataset` does; each file once, however many paths reach it) and read one after another, each through the Parquet reader, so
every check and error line of a single file holds and names the part and its row. The
parts must agree on K and on their columns. selcal's numbers do not depend on row order,
so they are bit-for-bit those of the same rows in one file, whatever the part boundaries
and the order of the parts.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from .base import DumpSource, _fail
from .parquet import ParquetSource

PART_SUFFIXES = (".parquet", ".pq")
_GLOB_CHARS = set("*?[")


def is_glob(path: str) -> bool:
    """True when ``path`` is a pattern (``dumps/resnet50/part-*.parquet``), not a file name."""
    return bool(_GLOB_CHARS & set(os.path.basename(path.rstrip("/")))) and not os.path.exists(path)


def _is_part(name: str) -> bool:
    base = os.path.basename(name)
    return base.lower().endswith(PART_SUFFIXES) and not base.startswith((".", "_"))


def find_parts(path: str) -> list[str]:
    """The Parquet parts of a folder or a glob, sorted by name (empty when there are none).

    Each file is listed once, however many paths reach it: a folder is walked once (a symlink
    loop such as ``sub/loop -> ..`` is not followed round), and a part reached by two paths (a
    symlink or a hard link to another part, a folder linked twice) is kept under the first of
    its names in sorted order, so that no row is read twice.
    """
    if is_glob(path):
        found = sorted(p for p in glob.glob(path) if os.path.isfile(p) and _is_part(p))
    elif os.path.isdir(path):
        found = sorted(_walk(path))
    else:
        return []
    seen: set = set()
    parts = []
    for name in found:
        identity = _identity(name)
        if identity is not None and identity not in seen:
            seen.add(identity)
            parts.append(name)
    return parts


def _identity(path: str):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _walk(root: str) -> list[str]:
    """Every part file under ``root`` (symlinks followed, each folder entered once), skipping
    names that start with ``.`` or ``_`` (``_SUCCESS``, ``.tmp``), as :mod:`pyarrow.dataset` does."""
    files, folders, visited = [], [root], {_identity(root)}
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith((".", "_")):
                continue
            try:
                is_dir = entry.is_dir()  # through a symlink
            except OSError:
                continue
            if is_dir:
                identity = _identity(entry.path)
                if identity is not None and identity not in visited:
                    visited.add(identity)
                    folders.append(entry.path)
            elif _is_part(entry.name):
                try:
                    if entry.is_file():
                        files.append(entry.path)
                except OSError:
                    continue
    return files


def accepts(path: str) -> bool:
    """A folder holding Parquet parts, or a glob matching some."""
    return (is_glob(path) or os.path.isdir(path)) and bool(find_parts(path))


class PartsSource(DumpSource):
    """Parquet parts read as one dump, part after part (each validated as a single file)."""

    def __init__(self, path: str, *, label_col: str = "label", logits_col: str | None = None,
                 ignore_label: int | None = None, group_col: str | None = None):
        self.path = path
        files = find_parts(path)
        if not files:
            raise _fail(path, None, None, "holds no Parquet parts (*.parquet); give a dump file or a folder of parts")
        self.parts = [ParquetSource(f, label_col, logits_col, ignore_label, group_col) for f in files]
        first = self.parts[0]
        self.label_col, self.logits_col, self.ignore_label = first.label_col, first.logits_col, first.ignore_label
        self.group_col = first.group_col
        self.metadata = first.metadata
        self.num_rows = sum(part.num_rows for part in self.parts)
        self._k = next((part.num_classes for part in self.parts if part.num_rows), None)
        shape = self._shape(first)
        for part in self.parts[1:]:
            if self._shape(part) != shape:
                what = "K" if self._classes(part) != self._classes(first) else "columns"
                raise _fail(part.path, None, None,
                            f"has other {what} than {first.path} ({self._describe(part)} against "
                            f"{self._describe(first)}); every part of a dump needs the same columns and K")

    @staticmethod
    def _classes(part: ParquetSource) -> int | None:
        return part.num_classes if part.num_rows else None

    def _shape(self, part: ParquetSource) -> tuple:
        return (part.logits_col, tuple(part.wide_columns or ()), part.split_col, part.id_col,
                self._classes(part) or self._k)  # a part of no rows has any K

    def _describe(self, part: ParquetSource) -> str:
        columns = [c for c in (part.split_col, part.id_col) if c]
        return f"K = {self._classes(part)}" + (f", columns {', '.join(columns)}" if columns else ", no split or id")

    @property
    def num_classes(self) -> int:
        return self._k or 0

    @property
    def logits_bytes(self) -> int:
        return sum(part.logits_bytes for part in self.parts)

    def batches(self, batch_rows: int | None = None):
        """Validated batches of every part in turn (a batch never spans two parts)."""
        if batch_rows is None:
            batch_rows = max(64, (1 << 21) // max(self.num_classes, 1))
        for part in self.parts:
            yield from part.batches(batch_rows)

    def raw_batches(self, batch_rows: int):  # pragma: no cover - batches() is overridden
        raise NotImplementedError

    def _labels_and_split(self):
        pairs = [part._labels_and_split() for part in self.parts]
        labels = np.concatenate([labels for labels, _ in pairs])
        split = None if pairs[0][1] is None else np.concatenate([split for _, split in pairs])
        return labels, split

    def id_column(self) -> np.ndarray | None:
        ids = [part.id_column() for part in self.parts]
        return None if ids[0] is None else np.concatenate(ids)
