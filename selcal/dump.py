"""``selcal dump``: run a timm model over an image folder and write its logits as a selcal dump.

The output follows CONVENTIONS.md, "Input": one Parquet file with the columns ``id``
(the image's path relative to the data folder), ``split`` (``val``/``test``), ``label``
(int64) and ``logits`` (``fixed_size_list<float32>[K]``, or float16 with ``--dtype float16``),
and the model, its weights and every setting in the schema metadata (``selcal.*`` keys).

The module is in two parts:

- pure pieces that need neither torch nor timm (and are tested without them): listing an
  image folder, parsing a class map or a labels CSV, choosing the ``--limit`` sample and the
  split by a seeded hash of each id, the resume check, and :class:`DumpWriter`, which
  streams row groups into ``OUT.parquet.partial`` and renames it to ``OUT.parquet`` only
  when the run is complete;
- :func:`run_dump`, which imports torch, torchvision and timm only when it needs them
  (``selcal`` and ``selcal.cli`` never import them).
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import logging
import math
import os
import re
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._version import __version__
from .errors import SelcalError

__all__ = [
    "IMAGE_EXTENSIONS", "INSTALL_HINT", "Listing", "list_image_folder", "read_labels_csv", "parse_class_map",
    "id_hashes", "select_limit", "assign_split", "data_fingerprint", "check_existing", "batch_table",
    "DumpWriter", "DumpSummary", "run_dump",
]

#: The extensions torchvision's ImageFolder accepts (compared case-insensitively); other files are ignored.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
#: What to install, in words that work from a clone of selcal (no registry serves 'selcal[timm]').
INSTALL_HINT = "pip install torch torchvision timm (or, in a clone of selcal, pip install -e '.[timm]')"
DTYPES = {"float32": (np.float32, pa.float32()), "float16": (np.float16, pa.float16())}
#: The settings that decide what a dump holds: a complete output with other values is not reused.
IDENTITY_KEYS = (
    "selcal.model", "selcal.pretrained", "selcal.checkpoint_sha256", "selcal.num_classes_option",
    "selcal.n_images", "selcal.data_sha256", "selcal.val_fraction", "selcal.seed", "selcal.limit", "selcal.dtype",
)
_ROW_GROUP_BYTES = 32 << 20  # logits buffered before a row group is written (constant memory)
_MAX_ROW_GROUP_ROWS = 8192


# ===================================================================== listing the images
@dataclass
class Listing:
    """The images of a data folder, sorted by id, with their labels.

    ``ids`` are paths relative to ``root`` with ``/`` separators; ``classes`` maps class
    folder names to label indices (ImageFolder layout; None for a labels CSV).
    """

    root: str
    ids: list[str]
    labels: np.ndarray
    classes: dict[str, int] | None = None
    n_other_files: int = 0
    layout: str = "folders"

    def __len__(self) -> int:
        return len(self.ids)

    def path(self, i: int) -> str:
        return os.path.join(self.root, *self.ids[i].split("/"))

    def subset(self, rows: np.ndarray) -> Listing:
        return Listing(self.root, [self.ids[i] for i in rows], self.labels[rows], self.classes,
                       self.n_other_files, self.layout)


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _check_data_folder(data) -> str:
    data = str(data)
    if not os.path.exists(data):
        raise SelcalError(f"{data}: no such folder; give the image folder with --data")
    if not os.path.isdir(data):
        raise SelcalError(f"{data}: is a file; --data takes an image folder (DIR/CLASS/IMAGE.jpg)")
    return data


def list_image_folder(data, class_map: dict[str, int] | None = None, class_map_path: str = "--class-map") -> Listing:
    """The images of an ImageFolder layout ``DATA/CLASS/.../IMAGE.ext``, sorted by id.

    Labels are the index of the class folder in sorted order (torchvision's ImageFolder),
    or its index in ``class_map``. Hidden files and folders are skipped, files without an
    image extension are counted in ``n_other_files``.
    """
    data = _check_data_folder(data)
    try:
        entries = sorted(os.scandir(data), key=lambda e: e.name)
    except OSError as exc:
        raise SelcalError(f"{data}: cannot be listed ({exc.strerror or exc})") from None
    folders = [e.name for e in entries if not _hidden(e.name) and e.is_dir()]
    loose = [e.name for e in entries if not _hidden(e.name) and e.is_file() and _is_image(e.name)]
    if not folders:
        if loose:
            raise SelcalError(f"{data}: holds images but no class folders; give --labels CSV (columns path,label) "
                              "for a flat folder, or sort the images into DATA/CLASS/ folders")
        raise SelcalError(f"{data}: is empty: no class folders with images (expected DATA/CLASS/IMAGE.jpg)")
    if class_map is not None:
        unknown = [f for f in folders if f not in class_map]
        if unknown:
            shown = ", ".join(repr(f) for f in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            raise SelcalError(f"{data}: class folder{'s' if len(unknown) > 1 else ''} {shown} not in {class_map_path} "
                              f"({len(class_map)} classes); fix the map or remove the folder")
        classes = {f: int(class_map[f]) for f in folders}
    else:
        classes = {f: i for i, f in enumerate(folders)}
    ids: list[str] = []
    labels: list[int] = []
    other = 0
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(os.path.join(data, folder), followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
            relative = os.path.relpath(dirpath, data).replace(os.sep, "/")
            for name in sorted(filenames):
                if _hidden(name):
                    continue
                if not _is_image(name):
                    other += 1
                    continue
                ids.append(f"{relative}/{name}")
                labels.append(classes[folder])
    if not ids:
        raise SelcalError(f"{data}: is empty: its {len(folders)} class folder{'s' if len(folders) > 1 else ''} hold "
                          f"no images ({', '.join(IMAGE_EXTENSIONS)})")
    order = sorted(range(len(ids)), key=ids.__getitem__)
    return Listing(data, [ids[i] for i in order], np.asarray(labels, dtype=np.int64)[order], classes, other, "folders")


def read_labels_csv(data, csv_path, class_map: dict[str, int] | None = None) -> Listing:
    """The images named in a CSV with the columns ``path`` (relative to ``data``) and ``label``.

    A label is an integer, or a class name looked up in ``class_map``. Images of the
    folder that the CSV does not name are not dumped; a named file that is missing or
    unreadable is skipped and counted like any unreadable image.
    """
    import csv

    data = _check_data_folder(data)
    csv_path = str(csv_path)
    try:
        with open(csv_path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except FileNotFoundError:
        raise SelcalError(f"{csv_path}: no such file; --labels takes a CSV with the columns path,label") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise SelcalError(f"{csv_path}: cannot be read ({exc})") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise SelcalError(f"{csv_path}: is empty; --labels takes a CSV with the columns path,label")
    header = [c.strip().lower() for c in rows[0]]
    if "path" not in header or "label" not in header:
        raise SelcalError(f"{csv_path}: line 1: needs the columns path and label (found: {', '.join(rows[0])})")
    at_path, at_label = header.index("path"), header.index("label")
    if len(rows) == 1:
        raise SelcalError(f"{csv_path}: has a header but no images")
    root = os.path.realpath(data)
    seen: dict[str, int] = {}
    ids, labels = [], []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) <= max(at_path, at_label):
            raise SelcalError(f"{csv_path}: line {line}: has {len(row)} fields; expected path,label")
        raw, label_text = row[at_path].strip(), row[at_label].strip()
        if not raw:
            raise SelcalError(f"{csv_path}: line {line}: empty path")
        relative = os.path.relpath(os.path.realpath(raw), root) if os.path.isabs(raw) else os.path.normpath(raw)
        if relative == os.curdir or relative.startswith(os.pardir):
            raise SelcalError(f"{csv_path}: line {line}: {raw!r} is not inside the data folder {data}")
        image_id = relative.replace(os.sep, "/")
        if image_id in seen:
            raise SelcalError(f"{csv_path}: line {line}: {raw!r} is listed twice (first on line {seen[image_id]})")
        seen[image_id] = line
        ids.append(image_id)
        labels.append(_csv_label(csv_path, line, label_text, class_map))
    order = sorted(range(len(ids)), key=ids.__getitem__)
    return Listing(data, [ids[i] for i in order], np.asarray(labels, dtype=np.int64)[order], None, 0, "labels-csv")


def _csv_label(csv_path: str, line: int, text: str, class_map: dict[str, int] | None) -> int:
    if re.fullmatch(r"[+-]?\d+", text):
        value = int(text)
        if value < 0:
            raise SelcalError(f"{csv_path}: line {line}: label {value} is negative; labels are class indices 0 .. K-1")
        return value
    if class_map is not None and text in class_map:
        return int(class_map[text])
    if class_map is not None:
        raise SelcalError(f"{csv_path}: line {line}: label {text!r} is neither an integer nor a class in --class-map")
    raise SelcalError(f"{csv_path}: line {line}: label {text!r} is not an integer; give class indices, "
                      "or class names together with --class-map")


# ===================================================================== class maps
def parse_class_map(path) -> dict[str, int]:
    """Read a class map: class (folder) name -> label index.

    Accepted forms:

    - JSON object ``{"n01440764": 0, ...}`` (name -> index);
    - JSON object ``{"0": ["n01440764", "tench"], ...}`` (index -> [name, ...]: ImageNet's
      ``imagenet_class_index.json``) or ``{"0": "n01440764", ...}``;
    - JSON list ``["n01440764", ...]`` (index = position);
    - text, one class per line: ``NAME INDEX`` (or ``NAME,INDEX``, ``NAME<TAB>INDEX``) on every
      line, or else the name alone (index = line number among non-empty lines, counted from
      0; only the first word is the name, so ``LOC_synset_mapping.txt`` works). Lines
      starting with ``#`` are comments.
    """
    path = str(path)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise SelcalError(f"{path}: no such file; --class-map takes a JSON or text file (class name -> index)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SelcalError(f"{path}: cannot be read ({exc})") from None
    stripped = text.lstrip()
    if path.lower().endswith(".json") or stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SelcalError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        pairs = _json_pairs(path, data)
    else:
        pairs = _text_pairs(path, text)
    if not pairs:
        raise SelcalError(f"{path}: holds no classes")
    mapping: dict[str, int] = {}
    for where, name, index in pairs:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise SelcalError(f"{path}: {where}: index {index!r} of {name!r} is not a non-negative integer")
        if not isinstance(name, str) or not name:
            raise SelcalError(f"{path}: {where}: class name {name!r} is not a non-empty string")
        if name in mapping and mapping[name] != index:
            raise SelcalError(f"{path}: {where}: class {name!r} is mapped twice ({mapping[name]} and {index})")
        mapping[name] = index
    return mapping


def _json_pairs(path: str, data) -> list[tuple[str, str, int]]:
    if isinstance(data, list):
        return [(f"entry {i}", _first_name(path, f"entry {i}", v), i) for i, v in enumerate(data)]
    if not isinstance(data, dict):
        raise SelcalError(f"{path}: expected a JSON object (name -> index) or list of names; got {type(data).__name__}")
    values = list(data.values())
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return [(f"key {k!r}", k, v) for k, v in data.items()]
    if all(re.fullmatch(r"\d+", str(k)) for k in data):  # index -> name or [name, description]
        return [(f"key {k!r}", _first_name(path, f"key {k!r}", v), int(k)) for k, v in data.items()]
    raise SelcalError(f"{path}: not a class map: expected {{name: index}}, {{\"index\": name}} or "
                      "{\"index\": [name, description]} (imagenet_class_index.json)")


def _first_name(path: str, where: str, value) -> str:
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
        return value[0]
    if isinstance(value, str):
        return value
    raise SelcalError(f"{path}: {where}: expected a class name or [name, description]; got {value!r}")


def _text_pairs(path: str, text: str) -> list[tuple[str, str, int]]:
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    explicit = [re.fullmatch(r"(.+?)\s*[\t,:; ]\s*(\d+)", line) for _, line in lines]
    if lines and all(explicit):
        return [(f"line {n}", m.group(1).strip(), int(m.group(2))) for (n, _), m in zip(lines, explicit)]
    return [(f"line {n}", line.split()[0], i) for i, (n, line) in enumerate(lines)]


# ===================================================================== sample and split by id hash
def id_hashes(ids, seed: int) -> np.ndarray:
    """A seeded 64-bit hash (BLAKE2b) of each id: the split and the sample depend on the ids
    and the seed only, never on the order in which the files were listed."""
    key = str(int(seed)).encode()
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=8, key=key, person=b"selcal.split").digest(),
                        "little") for i in ids),
        dtype=np.uint64, count=len(ids))


def _rank(ids, seed: int) -> np.ndarray:
    """Row indices ordered by seeded hash (ties, practically impossible, by id)."""
    return np.lexsort((np.asarray(ids, dtype=object), id_hashes(ids, seed))) if len(ids) else np.zeros(0, np.int64)


def select_limit(ids, limit: int | None, seed: int) -> np.ndarray:
    """Rows of the ``limit`` images with the smallest seeded hashes (a seeded sample across all
    classes), in id order; all rows when ``limit`` is None or not smaller than the listing."""
    if limit is None or limit >= len(ids):
        return np.arange(len(ids))
    return np.sort(_rank(ids, seed)[:limit])


def assign_split(ids, val_fraction: float, seed: int) -> np.ndarray:
    """``'val'`` for the round(val_fraction x N) ids with the smallest seeded hashes, ``'test'`` for the rest.

    The same rule as the random hold-out of ``selcal evaluate`` (smallest hashes, round half
    up), applied to the ids, so it does not depend on the listing order.

    >>> assign_split(["a.jpg", "b.jpg", "c.jpg", "d.jpg"], 0.5, 0).tolist().count("val")
    2
    """
    n = len(ids)
    n_val = int(math.floor(val_fraction * n + 0.5))
    split = np.full(n, "test", dtype=object)
    split[_rank(ids, seed)[:n_val]] = "val"
    return split


def data_fingerprint(ids, labels) -> str:
    """SHA-256 of the (id, label) pairs in id order: the data a dump was made from."""
    digest = hashlib.sha256()
    for image_id, label in zip(ids, labels):
        digest.update(f"{image_id}\t{int(label)}\n".encode())
    return digest.hexdigest()


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


class DumpWriter:
    """Streams row groups into ``OUT.parquet.partial``; :meth:`finish` adds the final metadata
    (``selcal.complete = true`` and the counts) and renames the file to ``OUT.parquet``.

    A run that fails or is interrupted removes the partial file (a killed one leaves it,
    never a file under the final name). Rows are buffered up to a fixed size (at most
    32 MiB of logits), so memory does not grow with the number of images.
    """

    def __init__(self, out, num_classes: int, dtype: str, metadata: dict[str, str], row_group_rows: int | None = None):
        self.out = Path(out)
        self.partial = Path(str(self.out) + ".partial")
        self.schema = dump_schema(num_classes, dtype, metadata)
        itemsize = np.dtype(DTYPES[dtype][0]).itemsize
        self.row_group_rows = row_group_rows or max(1, min(_MAX_ROW_GROUP_ROWS, _ROW_GROUP_BYTES // (itemsize * num_classes)))
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer = pq.ParquetWriter(str(self.partial), self.schema, compression="zstd")

    def write(self, ids, splits, labels, logits: np.ndarray) -> None:
        if len(ids) == 0:
            return
        self._pending.append(batch_table(ids, splits, labels, logits, self.schema))
        self._pending_rows += len(ids)
        self.rows += len(ids)
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.concat_tables(self._pending), row_group_size=max(self._pending_rows, 1))
            self._pending, self._pending_rows = [], 0

    def finish(self, metadata: dict[str, str]) -> None:
        """Write what is buffered, the final metadata, and move the file to its final name."""
        self._flush()
        final = {**self.schema.metadata, **{k.encode(): v.encode() for k, v in metadata.items()}}
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


def _check_output_path(path, option: str) -> None:
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SelcalError(f"{path}: folder '{folder}' does not exist; create it first (mkdir -p {folder})")
    if path.is_dir():
        raise SelcalError(f"{path}: is a folder; give a file name for {option}")
    if not os.access(folder, os.W_OK):
        raise SelcalError(f"{path}: folder '{folder}' is not writable; choose another {option}")


def require_stack() -> None:
    """Refuse in one line, before any work, when the optional extra is not installed."""
    import importlib.util

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            return True

    missing = [m for m in ("torch", "torchvision", "timm") if absent(m)]
    if missing:
        raise SelcalError(f"selcal dump needs torch, torchvision and timm ({', '.join(missing)} not installed): "
                          f"{INSTALL_HINT}")


def _import_stack():
    modules = []
    for name in ("torch", "torchvision", "timm"):
        try:
            modules.append(__import__(name))
        except ImportError as exc:
            raise SelcalError(f"selcal dump needs torch, torchvision and timm ({name}: {exc}): {INSTALL_HINT}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a torchvision built for another torch
            reason = " ".join(str(exc).split())[:200]
            raise SelcalError(f"selcal dump: cannot import {name} ({type(exc).__name__}: {reason}); torch and "
                              f"torchvision must be matching builds: reinstall with {INSTALL_HINT}") from None
    return modules


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    return exc


def _unknown_model(timm, name: str) -> SelcalError:
    names = timm.list_models()
    close = difflib.get_close_matches(name.split(".")[0], names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return SelcalError(f"unknown timm model {name!r}{hint} (list them with: python -c \"import timm; "
                       f"print(timm.list_models('*{name.split('.')[0][:6]}*'))\")")


def load_model(timm, torch, name: str, *, pretrained: bool, checkpoint: str | None, num_classes: int | None,
               status=None, seed: int = 0):
    """The timm model in eval mode, with timm's weights (``pretrained``), a checkpoint's, or random
    ones drawn with ``seed`` (so every process, and every shard of a dump, makes the same model)."""
    if not timm.is_model(name):
        raise _unknown_model(timm, name)
    kwargs = {} if num_classes is None else {"num_classes": num_classes}
    if pretrained:
        base = name.split(".")[0]
        tags = [p for p in timm.list_pretrained() if p == name or p.split(".")[0] == base]
        if not tags or ("." in name and name not in tags):
            known = f" (known: {', '.join(tags[:4])}{', ...' if len(tags) > 4 else ''})" if tags else ""
            raise SelcalError(f"timm has no pretrained weights for {name!r}{known}; use --checkpoint PATH")
        if status is not None:
            status(f"loading pretrained weights for {name} (downloaded unless cached)")
        hub_logger = logging.getLogger("huggingface_hub")
        level = hub_logger.level
        hub_logger.setLevel(logging.ERROR)  # its retry messages would bury the one line below
        try:
            model = timm.create_model(name, pretrained=True, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure to fetch the weights
            cause = _root_cause(exc)
            reason = _one_line(cause, 200).rstrip(".")
            if cause is not exc:
                reason = f"{type(cause).__name__}: {reason}"
            raise SelcalError(f"could not download weights for {name}: {reason}; use --checkpoint PATH") from None
        finally:
            hub_logger.setLevel(level)
    else:
        try:
            with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
                torch.manual_seed(seed)
                model = timm.create_model(name, pretrained=False, **kwargs)
        except Exception as exc:  # noqa: BLE001
            raise SelcalError(f"cannot create timm model {name!r}{_kwargs_text(kwargs)}: {_one_line(exc)}") from None
        if checkpoint is not None:
            try:
                timm.models.load_checkpoint(model, checkpoint)
            except Exception as exc:  # noqa: BLE001
                hint = "" if num_classes is not None else " (for a checkpoint with another number of classes, pass --num-classes N)"
                raise SelcalError(f"{checkpoint}: cannot load into {name}: {_one_line(exc)}{hint}") from None
    return model.eval()


def _kwargs_text(kwargs: dict) -> str:
    return "".join(f" with {k}={v}" for k, v in kwargs.items())


def resolve_device(torch, device: str):
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError):
        raise SelcalError(f"--device {device!r}: not a device; use cpu, cuda, cuda:1 or auto") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise SelcalError(f"--device {device}: no CUDA device is available (torch.cuda.is_available() is False); "
                          "use --device cpu")
    if resolved.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise SelcalError(f"--device {device}: MPS is not available here; use --device cpu")
    return resolved


def data_config_and_transform(timm, model):
    """timm's own evaluation preprocessing for ``model``: (data config, transform)."""
    from timm.data import create_transform

    try:
        from timm.data import resolve_model_data_config as resolve
        config = resolve(model)
    except ImportError:  # timm < 0.9
        from timm.data import resolve_data_config
        config = resolve_data_config({}, model=model)
    return config, create_transform(**config, is_training=False)


def _image_dataset(torch, listing: Listing, transform):
    from PIL import Image

    class Images(torch.utils.data.Dataset):
        """Image i, preprocessed; an unreadable image gives its reason instead of a tensor."""

        def __len__(self):
            return len(listing)

        def __getitem__(self, i):
            try:
                with warnings.catch_warnings():
                    # PIL's DecompressionBombWarning (an image of more than 89 M pixels, read correctly) is
                    # silenced: it would reach stderr raw from a loader process; an image beyond twice that
                    # raises DecompressionBombError and is listed as unreadable, with its reason.
                    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                    with Image.open(listing.path(i)) as image:
                        rgb = image.convert("RGB")
                return i, transform(rgb), None
            except Exception as exc:  # noqa: BLE001 - skipped, counted and reported
                return i, None, f"{type(exc).__name__}: {_one_line(exc, 500)}"

    return Images()


def _collate(torch):
    def collate(items):
        good = [(i, x) for i, x, _ in items if x is not None]
        bad = [(i, reason) for i, x, reason in items if x is None]
        rows = [i for i, _ in good]
        return rows, (torch.stack([x for _, x in good]) if good else None), bad
    return collate


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=lambda v: list(v) if isinstance(v, tuple) else str(v))


def run_dump(model_name: str, data, out, *, pretrained: bool = False, checkpoint=None, class_map=None,
             labels_csv=None, num_classes: int | None = None, dtype: str = "float32", val_fraction: float = 0.2,
             seed: int = 0, batch_size: int = 64, workers: int | None = None, device: str = "auto",
             limit: int | None = None, errors_path=None, overwrite: bool = False, progress=None,
             status=None, shard: tuple[int, int] | None = None, _after_batch=None) -> DumpSummary:
    """Run ``model_name`` over the images of ``data`` and write the dump ``out``.

    ``progress(done, total)`` is called as batches finish, ``status(text)`` for a message
    before slow steps (a weight download). ``shard = (i, n)`` writes only the i-th of n
    contiguous parts of the images in id order (the sample and the split are those of the
    whole folder, so the parts of a sharded dump are, row for row, the unsharded dump).
    Returns a :class:`DumpSummary`; raises :class:`SelcalError` with one line for anything
    the user must fix.
    """
    # --- options, checked before any work
    if dtype not in DTYPES:
        raise SelcalError(f"--dtype must be float32 or float16; got {dtype!r}")
    if not 0 <= val_fraction <= 1:
        raise SelcalError(f"--val-fraction must be in [0, 1], e.g. 0.2; got {val_fraction:g}")
    if batch_size < 1:
        raise SelcalError(f"--batch-size must be at least 1; got {batch_size}")
    if workers is None:
        workers = min(4, os.cpu_count() or 1)
    if workers < 0:
        raise SelcalError(f"--workers must be 0 (load in the main process) or more; got {workers}")
    if limit is not None and limit < 1:
        raise SelcalError(f"--limit must be at least 1; got {limit}")
    if num_classes is not None and num_classes < 1:
        raise SelcalError(f"--num-classes must be at least 1; got {num_classes}")
    if pretrained and checkpoint is not None:
        raise SelcalError("give --pretrained (timm's weights) or --checkpoint PATH (your weights), not both")
    if checkpoint is not None:
        checkpoint = str(checkpoint)
        if not os.path.isfile(checkpoint):
            raise SelcalError(f"{checkpoint}: no such file; --checkpoint takes a .pth, .pt, .bin or .safetensors file")
    _check_output_path(out, "--out")
    if errors_path is not None:
        _check_output_path(errors_path, "--errors")
    require_stack()

    # --- the images, the sample, the split
    mapping = parse_class_map(class_map) if class_map is not None else None
    if labels_csv is not None:
        listing = read_labels_csv(data, labels_csv, mapping)
    else:
        listing = list_image_folder(data, mapping, str(class_map) if class_map is not None else "--class-map")
    n_other = listing.n_other_files
    listing = listing.subset(select_limit(listing.ids, limit, seed))
    split = assign_split(listing.ids, val_fraction, seed)
    if shard is not None:
        rows = shard_rows(len(listing), *shard)
        listing, split = listing.subset(rows), split[rows]

    identity = {
        "selcal.model": model_name,
        "selcal.pretrained": "true" if pretrained else "false",
        "selcal.checkpoint_sha256": file_sha256(checkpoint) if checkpoint is not None else "",
        "selcal.num_classes_option": "" if num_classes is None else str(num_classes),
        "selcal.n_images": str(len(listing)),
        "selcal.data_sha256": data_fingerprint(listing.ids, listing.labels),
        "selcal.val_fraction": repr(float(val_fraction)),
        "selcal.seed": str(seed),
        "selcal.limit": "" if limit is None else str(limit),
        "selcal.dtype": dtype,
        **({"selcal.shard": f"{shard[0]} of {shard[1]}"} if shard is not None else {}),
    }
    summary = DumpSummary(out=str(out), n_images=len(listing), n_other_files=n_other)
    if check_existing(out, identity, overwrite):
        summary.skipped_complete = True
        return summary

    # --- the model
    torch, torchvision, timm = _import_stack()
    torch_device = resolve_device(torch, device)
    model = load_model(timm, torch, model_name, pretrained=pretrained, checkpoint=checkpoint, num_classes=num_classes,
                       status=status, seed=seed)
    k = int(getattr(model, "num_classes", 0) or 0)
    if k < 1:
        raise SelcalError(f"{model_name} has no classification head (num_classes = {k}); pass --num-classes N")
    if int(listing.labels.max()) >= k:
        worst = int(np.argmax(listing.labels))
        raise SelcalError(f"{listing.ids[worst]}: label {int(listing.labels[worst])} is outside the model's "
                          f"{k} classes (0 .. {k - 1}); check --class-map/--labels, or --num-classes")
    config, transform = data_config_and_transform(timm, model)
    model = model.to(torch_device)
    if not pretrained and checkpoint is None:
        summary.warnings.append("no --pretrained or --checkpoint: the model has random weights")

    metadata = {
        "selcal.tool": f"selcal dump {__version__}",
        **identity,
        "selcal.checkpoint": checkpoint or "",
        "selcal.num_classes": str(k),
        "selcal.dataset": str(data),
        "selcal.data": str(data),
        "selcal.layout": listing.layout,
        "selcal.class_map": "" if class_map is None else str(class_map),
        "selcal.labels_csv": "" if labels_csv is None else str(labels_csv),
        "selcal.classes": _json(listing.classes) if listing.classes is not None else "",
        "selcal.split_method": (f"seeded BLAKE2b hash of id (seed {seed}): the round({val_fraction:g} x N) "
                                "smallest hashes are val, the rest test"),
        "selcal.data_config": _json(config),
        "selcal.transform": " ".join(str(transform).split()),
        "selcal.pretrained_cfg": _json(getattr(model, "pretrained_cfg", {}) or {}),
        "selcal.timm_version": timm.__version__,
        "selcal.torch_version": torch.__version__,
        "selcal.torchvision_version": torchvision.__version__,
        "selcal.device": str(torch_device),
        "selcal.batch_size": str(batch_size),
    }

    # --- the run: batches stream from the loader into row groups
    summary.device, summary.num_classes = str(torch_device), k
    loader = torch.utils.data.DataLoader(
        _image_dataset(torch, listing, transform), batch_size=batch_size, shuffle=False, num_workers=workers,
        collate_fn=_collate(torch), pin_memory=torch_device.type == "cuda")
    unreadable: list[tuple[str, str]] = []
    started = time.monotonic()
    writer = DumpWriter(out, k, dtype, metadata)
    try:
        done = 0
        with torch.inference_mode():
            for rows, images, bad in loader:
                unreadable.extend((listing.path(i), reason) for i, reason in bad)
                if images is not None:
                    output = model(images.to(torch_device, non_blocking=True))
                    if isinstance(output, (tuple, list)):
                        output = output[0]
                    logits = output.float().cpu().numpy()
                    if logits.shape != (len(rows), k):
                        raise SelcalError(f"{model_name} returned logits of shape {tuple(logits.shape)} for a batch "
                                          f"of {len(rows)} images; expected ({len(rows)}, {k})")
                    logits = logits.astype(DTYPES[dtype][0])
                    summary.n_nonfinite += int((~np.isfinite(logits)).any(axis=1).sum())
                    writer.write([listing.ids[i] for i in rows], split[rows], listing.labels[rows], logits)
                    if _after_batch is not None:  # a test hook (a worker killed mid-run)
                        _after_batch()
                done += len(rows) + len(bad)
                if progress is not None:
                    progress(done, len(listing))
        summary.seconds = time.monotonic() - started
        summary.rows, summary.n_unreadable = writer.rows, len(unreadable)
        if writer.rows == 0:
            first = f" (first: {unreadable[0][0]}: {unreadable[0][1]})" if unreadable else ""
            raise SelcalError(f"{data}: none of its {len(listing)} images could be read{first}")
        final = {
            "selcal.complete": "true",
            "selcal.n_rows": str(writer.rows),
            "selcal.n_unreadable": str(len(unreadable)),
            "selcal.n_nonfinite": str(summary.n_nonfinite),
            "selcal.seconds": f"{summary.seconds:.3f}",
            "selcal.created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if errors_path is not None:  # written before the dump is complete: a complete dump has its list
            from .io import atomic_write

            with atomic_write(errors_path) as handle:
                for path, reason in unreadable:
                    handle.write(f"{path}\t{reason}\n")
            summary.errors_path = str(errors_path)
        writer.finish(final)
    except BaseException:
        writer.abort()
        raise
    if summary.n_nonfinite:
        hint = "; use --dtype float32" if dtype == "float16" else ""
        summary.warnings.append(f"{summary.n_nonfinite} rows have NaN or infinite logits (selcal evaluate refuses "
                                f"them){hint}")
    return summary


# ===================================================================== many models, many shards
def shard_rows(n_images: int, index: int, count: int) -> np.ndarray:
    """Rows of part ``index`` of ``count``: contiguous, sizes differing by at most one."""
    return np.arange(index * n_images // count, (index + 1) * n_images // count)


def safe_model_name(model_name: str) -> str:
    """A model name as a file or folder name (``hf-hub:org/name`` -> ``hf-hub_org--name``)."""
    return model_name.replace("/", "--").replace(":", "_")


def part_path(out_dir, model_name: str, index: int, count: int) -> Path:
    """Where a part goes: ``OUT_DIR/MODEL.parquet`` unsharded, ``OUT_DIR/MODEL/part-00001-of-00003.parquet``."""
    name = safe_model_name(model_name)
    if count == 1:
        return Path(out_dir) / f"{name}.parquet"
    return Path(out_dir) / name / f"part-{index:05d}-of-{count:05d}.parquet"


@dataclass(frozen=True)
class DumpTask:
    """One part of one model's dump: a pure function of it (:func:`run_dump_task`)."""

    model_name: str
    data: str
    out: str
    shard: tuple[int, int] | None
    settings: dict
    kill_marker: str | None = None  # test hook: the first attempt of shard 1 dies after one batch


def _die_once(marker: str):
    def after_batch():
        if not os.path.exists(marker):
            Path(marker).touch()
            os._exit(1)  # like a worker lost to an OOM kill or a pre-empted node
    return after_batch


def run_dump_task(task: DumpTask) -> DumpSummary:
    """Dump one part (skipped when already complete with the same settings)."""
    hook = _die_once(task.kill_marker) if task.kill_marker and task.shard and task.shard[0] == 1 else None
    return run_dump(task.model_name, task.data, task.out, shard=task.shard, _after_batch=hook, **task.settings)


def dump_tasks(model_names, data, out_dir, *, shards: int = 1, **settings) -> list[DumpTask]:
    """The parts to dump: every model, split into ``shards`` parts each, in order."""
    if shards < 1:
        raise SelcalError(f"--shards must be at least 1; got {shards}")
    names = list(dict.fromkeys(model_names))
    if not names:
        raise SelcalError("no model given; name timm models, or list them one per line with --models FILE")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SelcalError(f"{out_dir}: is a file; --out-dir takes a folder (created if missing)")
    kill_marker = os.environ.get("SELCAL_TEST_KILL_SHARD_ONCE")
    tasks = []
    for name in names:
        for index in range(shards):
            out = part_path(out_dir, name, index, shards)
            tasks.append(DumpTask(name, str(data), str(out), (index, shards) if shards > 1 else None,
                                  dict(settings), kill_marker))
    return tasks


def read_model_list(path) -> list[str]:
    """Model names from a text file, one per line (blank lines and ``#`` comments skipped)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SelcalError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc}); "
                          "--models takes a text file with one timm model name per line") from None
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def run_dumps(tasks: list[DumpTask], *, engine: str = "local", progress=None) -> list:
    """Run every part on ``engine``: a :class:`DumpSummary` or an :class:`selcal.engines.Failure` each.

    On Ray each part is a task with one GPU when the cluster has GPUs (one CPU otherwise);
    a task whose worker dies is retried by Ray and resumes nothing (the part is written
    again from the start, under a temporary name); a rerun skips the complete parts.
    """
    from .engines import get_engine

    runner = get_engine(engine)
    for task in tasks:
        Path(task.out).parent.mkdir(parents=True, exist_ok=True)
    if runner.name == "ray":
        gpus = runner.gpus_available()
        return runner.run(run_dump_task, tasks, progress=progress, num_cpus=1, num_gpus=1 if gpus >= 1 else 0)
    return runner.run(run_dump_task, tasks, progress=progress)


@contextmanager
def progress_bar(enabled: bool = True):
    """``progress(done, total)``: a bar with images/s on stderr, only on a terminal."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    bar = Progress(TextColumn("images"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                   TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console, transient=True)
    task = bar.add_task("images", total=None, rate="")
    started = time.monotonic()

    def advance(done: int, total: int) -> None:
        if not bar.live.is_started:
            bar.start()
        elapsed = max(time.monotonic() - started, 1e-9)
        bar.update(task, completed=done, total=total, rate=f"{done / elapsed:,.1f} images/s")

    try:
        yield advance
    finally:
        bar.stop()
