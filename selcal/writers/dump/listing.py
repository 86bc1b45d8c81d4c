"""Which images a dump holds: an image folder (class folders, or flat with a labels CSV), the
class map, and the ``--limit`` sample and the split, both by a seeded hash of each id (pure: no torch)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass

import numpy as np

from ...errors import SelcalError

#: The extensions torchvision's ImageFolder accepts (compared case-insensitively); other files are ignored.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


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
    from ...io.lists import csv_rows

    data = _check_data_folder(data)
    csv_path = str(csv_path)
    rows = csv_rows(csv_path, "--labels takes a CSV with the columns path,label")
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


def shard_rows(n_images: int, index: int, count: int) -> np.ndarray:
    """Rows of part ``index`` of ``count``: contiguous, sizes differing by at most one."""
    return np.arange(index * n_images // count, (index + 1) * n_images // count)
