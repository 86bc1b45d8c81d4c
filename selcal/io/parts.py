"""A sharded dump: a folder (or a glob) of Parquet parts read as one model.

What ``selcal dump --shards N``, Spark, Ray Data or ``pyarrow.dataset.write_dataset`` write:
``DUMP/part-0.parquet``, ``DUMP/part-1.parquet``, ... The parts are found
recursively (files and folders whose names start with ``.`` or ``_``, such as ``_SUCCESS``,
skipped, as :mod:`pyarrow.dataset` does; each file once, however many paths reach it) and read one after another, each through the Parquet reader, so
every check and error line of a single file holds and names the part and its row. The
parts must agree on K and on their columns. selcal's numbers do not depend on row order,
so they are bit-for-bit those of the same rows in one file, whatever the part boundaries
and the order of the parts.

Parts whose names name splits (CONVENTIONS.md, "Validation split") give their rows that
split, as a split column would: a Hugging Face layout (``data/validation-00000-of-00001.parquet``,
``data/test-*.parquet``, ``train-*``), Hive folders (``split=val/``, ``split=test/``) or plain
folders (``val/``, ``test/``). See :func:`named_split`.
"""

from __future__ import annotations

import glob
import os
import re

import numpy as np

from .base import DumpSource, input_error
from .columns import SPLIT_ALIASES, SPLIT_NAME
from .parquet import ParquetSource

PART_SUFFIXES = (".parquet", ".pq")
SPLIT_NAMES_KEY = "selcal.split_from_names"  # in the metadata of a dump whose parts name their splits
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


def named_split(relative: str) -> str | None:
    """The split a part's path (relative to the folder, or to a glob's fixed prefix) names:
    a Hive folder ``split=X``, a folder named ``X``, or a file name whose first word (up to
    ``-``, ``_`` or ``.``) is ``X``, X being a split name of any case (``val``, ``validation``,
    ``valid``, ``dev``, ``test``, ``train``); None when it names none. Two different splits in
    one path are refused (ValueError).

    >>> named_split("data/validation-00000-of-00001.parquet"), named_split("split=test/part-0.parquet")
    ('val', 'test')
    >>> named_split("val/shard_3.parquet"), named_split("part-0.parquet"), named_split("testing.parquet")
    ('val', None, None)
    """
    *folders, name = relative.replace(os.sep, "/").split("/")
    words = [f[len(SPLIT_NAME) + 1:] if f.lower().startswith(SPLIT_NAME + "=") else f for f in folders]
    words.append(re.split(r"[-_.]", name, maxsplit=1)[0])
    found = {SPLIT_ALIASES[w.lower()] for w in words if w.lower() in SPLIT_ALIASES}
    if len(found) > 1:
        raise ValueError(" and ".join(sorted(found)))
    return found.pop() if found else None


def _relative(path: str, part: str) -> str:
    if not is_glob(path):
        return os.path.relpath(part, path)
    fixed = []
    for name in path.replace(os.sep, "/").split("/")[:-1]:
        if _GLOB_CHARS & set(name):
            break
        fixed.append(name)
    return os.path.relpath(part, "/".join(fixed) or ".")


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
            raise input_error(path, None, None, "holds no Parquet parts (*.parquet); give a dump file or a folder of parts")
        self.parts = [ParquetSource(f, label_col, logits_col, ignore_label, group_col) for f in files]
        self._name_splits(path)
        first = self.parts[0]
        self.label_col, self.logits_col, self.ignore_label = first.label_col, first.logits_col, first.ignore_label
        self.group_col = first.group_col
        self.metadata = dict(first.metadata)
        if self.split_from_names:
            self.metadata[SPLIT_NAMES_KEY] = "1"
        self.num_rows = sum(part.num_rows for part in self.parts)
        self._k = next((part.num_classes for part in self.parts if part.num_rows), None)
        shape = self._shape(first)
        for part in self.parts[1:]:
            if self._shape(part) != shape:
                what = "K" if self._classes(part) != self._classes(first) else "columns"
                raise input_error(part.path, None, None,
                            f"has other {what} than {first.path} ({self._describe(part)} against "
                            f"{self._describe(first)}); every part of a dump needs the same columns and K")

    def _name_splits(self, path: str) -> None:
        """Give each part the split its name names; every part or none must name one."""
        named = []
        for part in self.parts:
            try:
                named.append(named_split(_relative(path, part.path)))
            except ValueError as exc:
                raise input_error(part.path, None, None, f"its folder and file names name two splits ({exc}); "
                            "name one split per part") from None
        self.split_from_names = any(split is not None for split in named)
        if not self.split_from_names:
            return
        unnamed = [part.path for part, split in zip(self.parts, named) if split is None]
        if unnamed:
            raise input_error(unnamed[0], None, None, "names no split, but other parts of this folder do (e.g. "
                        f"{next(p.path for p, s in zip(self.parts, named) if s)}); name every part's split "
                        "(validation-*, test-*, split=val/, val/) or none")
        for part, split in zip(self.parts, named):
            part.named_split = split

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

    def batches(self, batch_rows: int | None = None, *, ids: bool = True):
        """Validated batches of every part in turn (a batch never spans two parts)."""
        if batch_rows is None:
            batch_rows = max(64, (1 << 21) // max(self.num_classes, 1))
        for part in self.parts:  # what the logits hold (--input, or detected on the first part) holds for all
            part.input_kind, part.detected_input, part.ood_label = self.input_kind, self.detected_input, self.ood_label
            part.python = getattr(self, "python", False)  # (its messages name what the caller used)
            for batch in part.batches(batch_rows, ids=ids):
                self.detected_input = part.detected_input
                yield batch

    def raw_batches(self, batch_rows: int, ids: bool = True):  # pragma: no cover - batches() is overridden
        raise NotImplementedError

    def _labels_and_split(self):
        pairs = [part._labels_and_split() for part in self.parts]
        labels = np.concatenate([labels for labels, _ in pairs])
        split = None if pairs[0][1] is None else np.concatenate([split for _, split in pairs])
        return labels, split

    def id_column(self) -> np.ndarray | None:
        ids = [part.id_column() for part in self.parts]
        return None if ids[0] is None else np.concatenate(ids)
