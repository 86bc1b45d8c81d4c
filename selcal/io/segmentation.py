"""Semantic segmentation folders: one ``.npz`` per image, sampled into ordinary pixel rows.

A folder holds ``IMAGE.npz`` files (the stem is the image id), each with ``logits``
(K x h x w, float16/32/64) and ``label`` (H x W, integers). Logit cell (i, j) takes the
label at the centre of its cell, ``label[floor((i + 0.5) H / h), floor((j + 0.5) W / w)]``
(PyTorch's ``nearest-exact``), computed in exact integer arithmetic. Cells whose label is
the ignored label (255 by default) are void and never become rows.

Pixel sampling (CONVENTIONS.md, "Semantic segmentation"): of each image's labelled cells,
the ``pixels_per_image`` cells with the smallest seeded 64-bit hash of (image id, row, col)
are drawn (every labelled cell when there are fewer, or when ``pixels_per_image`` is 0).
The draw depends only on the image id, the (downsampled) label map, the seed and P, never
on the logits, so two models evaluated on the same images get exactly the same pixels, and
the draw for a smaller P is a subset of the draw for a larger one.

The drawn pixels become ordinary rows: images in the order of their ids, the pixels of an
image in raster order; ``id`` = ``<image>/<row>/<col>`` on the logit grid. Images are read
one at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile

import numpy as np

from ..options import DEFAULT_PIXELS_PER_IMAGE, DEFAULT_SEED, DEFAULT_SEGMENTATION_IGNORE
from ..errors import said
from .base import DumpSource, input_error, first_line, splitmix64
from .columns import FLOAT_LOGITS

__all__ = ["SegmentationSource", "is_segmentation_folder", "label_grid", "sample_cells", "DEFAULT_PIXELS_PER_IMAGE",
           "DEFAULT_SEGMENTATION_IGNORE", "PIXELS_METADATA", "write_pixels", "image_holdout", "read_image"]

PIXELS_METADATA = "selcal.pixels"  # metadata key: JSON of the sampling settings and counts
_FLOAT_DTYPES = (np.float16, np.float32, np.float64)


def _image_files(path: str) -> list[str]:
    """The names of the per-image files of a folder: regular, not hidden, ending in .npz (any case)."""
    return sorted(n for n in os.listdir(path) if n.lower().endswith(".npz") and not n.startswith(".")
                  and os.path.isfile(os.path.join(path, n)))


def image_file(folder, image: str) -> str:
    """The path of image ``image``'s file in a segmentation folder."""
    name = next((n for n in _image_files(str(folder)) if n[:-4] == image), f"{image}.npz")
    return os.path.join(str(folder), name)


def is_segmentation_folder(path: str) -> bool:
    """A folder holding ``.npz`` files and no Parquet files (other files are ignored)."""
    if not os.path.isdir(path):
        return False
    names = os.listdir(path)
    return bool(_image_files(path)) and not any(n.lower().endswith((".parquet", ".pq")) for n in names)


def image_key(image_id: str, seed: int, purpose: str = "pixels") -> int:
    """A seeded 64-bit key of an image id (blake2b of seed, purpose and id)."""
    text = f"{purpose}\0{int(seed)}\0".encode() + image_id.encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def label_grid(label: np.ndarray, h: int, w: int) -> np.ndarray:
    """The label of every logit cell: ``label[(2i + 1) H // (2h), (2j + 1) W // (2w)]``.

    That is floor((i + 0.5) H / h), PyTorch's ``nearest-exact``, in exact integers. Equal
    sizes give the label as it is.

    Examples
    --------
    >>> label_grid(np.arange(16).reshape(4, 4), 2, 2)
    array([[ 5,  7],
           [13, 15]])
    """
    big_h, big_w = label.shape
    if (big_h, big_w) == (h, w):
        return label
    rows = (2 * np.arange(h, dtype=np.int64) + 1) * big_h // (2 * h)
    cols = (2 * np.arange(w, dtype=np.int64) + 1) * big_w // (2 * w)
    return label[rows[:, None], cols[None, :]]


def sample_cells(image_id: str, labelled: np.ndarray, pixels_per_image: int, seed: int) -> np.ndarray:
    """Flat indices (raster order) of the cells drawn from the boolean (h, w) map ``labelled``.

    The ``pixels_per_image`` labelled cells with the smallest seeded hash of (image id, row,
    col); all labelled cells when there are fewer or when ``pixels_per_image`` is 0.

    Examples
    --------
    >>> labelled = np.ones((4, 4), dtype=bool)
    >>> labelled[0] = False
    >>> cells = sample_cells("a", labelled, 5, seed=0)
    >>> cells.size, bool((cells >= 4).all()), bool(np.all(np.diff(cells) > 0))
    (5, True, True)
    >>> set(sample_cells("a", labelled, 3, 0)) <= set(cells)  # a smaller P draws a subset
    True
    """
    flat = np.flatnonzero(labelled.ravel())
    if pixels_per_image == 0 or flat.size <= pixels_per_image:
        return flat
    h, w = labelled.shape
    rows, cols = np.divmod(flat.astype(np.uint64), np.uint64(w))
    key = np.uint64(image_key(image_id, seed))
    hashes = splitmix64(splitmix64((rows << np.uint64(32)) | cols) ^ key)
    chosen = np.argpartition(hashes, pixels_per_image - 1)[:pixels_per_image]
    return np.sort(flat[chosen])


def image_holdout(names: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Boolean mask over the image ``names``: the floor(fraction n + 1/2) images with the
    smallest seeded hash of their id, held out for validation (independent of their order)."""
    n = names.size
    n_val = int(np.floor(fraction * n + 0.5))
    if n_val < 1 or n_val > n - 1:
        raise ValueError(n_val)
    hashes = np.array([image_key(str(name), seed, "holdout") for name in names], dtype=np.uint64)
    mask = np.zeros(n, dtype=bool)
    mask[np.argsort(hashes, kind="stable")[:n_val]] = True
    return mask


def _array_header(archive: zipfile.ZipFile, name: str):
    """(shape, dtype) of the array ``name`` of an ``.npz`` without reading its data."""
    with archive.open(name + ".npy") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    return shape, dtype


def read_image(file, label_names=("label", "labels")) -> tuple[np.ndarray, np.ndarray]:
    """(logits K x h x w, label of every logit cell h x w) of one image file, e.g. for a figure."""
    from .npz import load_npz

    try:
        arrays = load_npz(str(file), ("logits", *label_names), advice="")
        logits = arrays["logits"]
        label = next(arrays[k] for k in label_names if k in arrays)
    except (KeyError, StopIteration) as exc:
        raise input_error(str(file), None, None, f"not a readable image of a segmentation folder ({first_line(exc)})") from None
    if logits.ndim != 3 or label.ndim != 2:
        raise input_error(str(file), None, None, "expected logits K x h x w and label H x W; was it changed?")
    return logits, label_grid(label, logits.shape[1], logits.shape[2])


class SegmentationSource(DumpSource):
    """A folder of per-image ``.npz`` files read as rows of sampled pixels (see the module notes).

    Opening it reads every file's header and label map (not the logits) to validate the
    shapes, K and dtypes and to count the rows; the logits are read one image at a time.
    """

    label_col = "label"
    logits_col = "logits"
    progress = None  # progress(rows_read, num_rows), called after each image read

    def __init__(self, path: str, label_col: str = "label", ignore_label: int | None = None,
                 group_col: str | None = None, pixels_per_image: int = DEFAULT_PIXELS_PER_IMAGE, seed: int = DEFAULT_SEED):
        self.path = path
        self.ignore_label = DEFAULT_SEGMENTATION_IGNORE if ignore_label is None else int(ignore_label)
        self.label_names = tuple(dict.fromkeys((label_col, "label", "labels")))
        if int(pixels_per_image) != pixels_per_image or pixels_per_image < 0:
            raise input_error(path, None, None, f"--pixels-per-image must be 0 (every labelled pixel) or a positive "
                                          f"number, got {pixels_per_image}")
        if group_col not in (None, "image"):
            raise input_error(path, None, None, f"no group column '{group_col}': a segmentation folder has only the "
                                          "group 'image'")
        self.group_col = group_col
        self.pixels_per_image, self.seed = int(pixels_per_image), int(seed)
        names = sorted(_image_files(path), key=lambda name: name[:-4])
        stems = [name[:-4] for name in names]
        if len(set(stems)) < len(stems):
            twin = next(stem for stem in stems if stems.count(stem) > 1)
            raise input_error(path, None, None, f"holds two files for image {twin!r} (.npz and .NPZ); keep one")
        self.images = np.array(stems, dtype=str)
        self.files = [os.path.join(path, name) for name in names]
        self._shapes: list[tuple[int, int]] = []
        counts, labelled_total, void_total = [], 0, 0
        num_classes, dtypes = None, set()
        for file in self.files:
            k, h, w, dtype, grid = self._open_image(file, num_classes)
            num_classes = num_classes or k
            dtypes.add(dtype)
            labelled = grid != self.ignore_label
            n_labelled = int(np.count_nonzero(labelled))
            self._check_labels(file, grid, labelled, k)
            counts.append(n_labelled if self.pixels_per_image == 0 else min(n_labelled, self.pixels_per_image))
            labelled_total += n_labelled
            void_total += grid.size - n_labelled
            self._shapes.append((h, w))
        self._num_classes = int(num_classes)
        self.dtype = np.result_type(*sorted(dtypes, key=str))
        self.counts = np.array(counts, dtype=np.int64)
        self.num_rows = int(self.counts.sum())
        if self.num_rows == 0:
            raise input_error(path, "label", None, f"every logit cell of every image has the void label "
                                             f"{self.ignore_label}; nothing to evaluate (check {said('ignore_label')})")
        self.metadata = {PIXELS_METADATA: json.dumps({
            "images": len(self.files), "pixels_per_image": self.pixels_per_image, "seed": self.seed,
            "ignore_label": self.ignore_label, "labelled_pixels": labelled_total, "void_pixels": void_total,
            "pixels": self.num_rows,
        }, sort_keys=True)}

    # -------------------------------------------------------------------- reading
    def _load(self, file: str, names: tuple[str, ...]):
        from .npz import load_npz

        return load_npz(file, names, advice="")

    def _open_image(self, file: str, num_classes: int | None):
        """(K, h, w, logits dtype, label of every logit cell) of one image, validated; logits not read."""
        try:
            with zipfile.ZipFile(file) as archive:
                members = {n[:-4] for n in archive.namelist() if n.endswith(".npy")}
                if "logits" not in members:
                    found = ", ".join(sorted(members)) or "nothing"
                    raise input_error(file, None, None, f"no array named 'logits' (found: {found}); save logits=out[0] "
                                                  "(K x h x w) and label=target (H x W)")
                shape, dtype = _array_header(archive, "logits")
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise input_error(file, None, None, f"not a readable .npz file ({first_line(exc)}); save it with numpy.savez") \
                from None
        label_key = next((k for k in self.label_names if k in members), None)
        if label_key is None:
            raise input_error(file, None, None, "no array named 'label'; save the label map (H x W) beside the logits")
        if len(shape) != 3:
            hint = " (save out[0], one image, not the batch)" if len(shape) == 4 else ""
            raise input_error(file, "logits", None, f"has shape {tuple(shape)}; expected K x h x w{hint}")
        k, h, w = (int(s) for s in shape)
        if dtype not in _FLOAT_DTYPES:
            hint = FLOAT_LOGITS if np.dtype(dtype).kind in "iu" else "save float16, float32 or float64 logits"
            raise input_error(file, "logits", None, f"has dtype {dtype}; {hint}")
        if k == 0 or h == 0 or w == 0:
            raise input_error(file, "logits", None, f"has shape {tuple(shape)}; every dimension must be at least 1")
        if num_classes is not None and k != num_classes:
            raise input_error(file, "logits", None, f"has K = {k} classes but {os.path.basename(self.files[0])} has "
                                              f"K = {num_classes}; every image needs the same classes")
        label = self._load(file, (label_key,))[label_key]
        if label.ndim != 2 or 0 in label.shape:
            raise input_error(file, label_key, None, f"has shape {label.shape}; expected the label map H x W")
        if label.dtype.kind not in "iu":
            raise input_error(file, label_key, None, f"has dtype {label.dtype}; labels must be integers")
        big_h, big_w = label.shape
        if max(big_h * w, big_w * h) > 2 * min(big_h * w, big_w * h):  # scale factors H/h, W/w differ 2x+
            raise input_error(file, label_key, None, f"has shape {label.shape} but the logits are {h} x {w}: the label map "
                        f"is scaled by {big_h / h:g} vertically and {big_w / w:g} horizontally; "
                        "save the label map H x W of the same image (was it transposed?)")
        if big_h % h or big_w % w:  # each logit cell must stand for a whole block of label pixels
            raise input_error(file, label_key, None, f"has shape {label.shape} but the logits are {h} x {w}: a label map "
                        f"must be the logits' size or an integer multiple of it (e.g. {4 * h} x {4 * w}); "
                        "resize the logits to the label map (or the label map to the logits) before saving")
        return k, h, w, dtype, label_grid(label, h, w)

    def _check_labels(self, file: str, grid: np.ndarray, labelled: np.ndarray, k: int) -> None:
        classes = max(k, 2)
        bad = labelled & ((grid < 0) | (grid >= classes))
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            hint = f" (void pixels: {said('ignore_label')}, now {self.ignore_label})" if grid[i, j] >= classes else ""
            raise input_error(file, "label", None, f"logit cell ({i}, {j}) has label {int(grid[i, j])}, outside "
                                             f"0 .. {classes - 1}{hint}")

    def image_rows(self):
        """Per image, in id order: (index, image id, cells (flat indices), logits (P, K), labels (P,))."""
        for index, file in enumerate(self.files):
            arrays = self._load(file, ("logits",) + self.label_names)
            logits = arrays["logits"]
            label = next(arrays[k] for k in self.label_names if k in arrays)
            k, h, w = logits.shape
            if (h, w) != self._shapes[index] or k != self._num_classes:
                raise input_error(file, None, None, "changed while being read; run again")
            grid = label_grid(label, h, w)
            labelled = grid != self.ignore_label
            cells = sample_cells(str(self.images[index]), labelled, self.pixels_per_image, self.seed)
            flat = logits.reshape(k, h * w)
            finite = np.isfinite(flat).all(axis=0) | ~labelled.ravel()
            if not finite.all():
                cell = int(np.flatnonzero(~finite)[0])
                what = "NaN" if np.isnan(flat[:, cell]).any() else "an infinite value"
                hint = " (float16 overflows above 65504: save float32)" if logits.dtype == np.float16 else ""
                raise input_error(file, "logits", None, f"logit cell ({cell // w}, {cell % w}) holds {what}{hint}; "
                                                  "logits must be finite")
            rows = np.ascontiguousarray(flat[:, cells].T, dtype=self.dtype)
            del arrays, logits, flat, label
            yield index, str(self.images[index]), cells, rows, grid.ravel()[cells].astype(np.int64)
            if self.progress is not None:
                self.progress(int(self.counts[:index + 1].sum()), self.num_rows)

    def raw_batches(self, batch_rows: int, ids: bool = True):
        first_row = 0
        for index, image, cells, logits, labels in self.image_rows():
            groups = None if self.group_col is None else np.full(labels.size, image)
            yield dict(logits=logits, labels=labels, split=None, ids=None, groups=groups), first_row
            first_row += labels.size

    def _labels_and_split(self):  # the rows hold no void pixel: nothing is dropped later
        return np.zeros(self.num_rows, dtype=np.int64), None

    def _kept(self):
        return self.num_rows, None

    def image_column(self):
        """(image index of every row, image ids), read without the logits."""
        return np.repeat(np.arange(self.counts.size, dtype=np.int64), self.counts), self.images

    def cell_ids(self, index: int, cells: np.ndarray) -> np.ndarray:
        """``<image>/<row>/<col>`` of the logit cells ``cells`` of image ``index``."""
        w = self._shapes[index][1]
        return np.char.add(f"{self.images[index]}/", np.char.add(np.char.add((cells // w).astype(str), "/"),
                                                                  (cells % w).astype(str)))

    @property
    def num_classes(self) -> int:
        return self._num_classes

    @property
    def logits_bytes(self) -> int:
        return int(self.num_rows * self._num_classes * np.dtype(self.dtype).itemsize)


def write_pixels(source: SegmentationSource, out, *, progress=None) -> int:
    """Write the sampled pixels of ``source`` as an ordinary Parquet dump (atomically).

    Columns: ``logits`` (fixed-size list of K, the folder's float dtype), ``label``,
    ``id`` (``<image>/<row>/<col>``) and ``image``; the schema metadata keeps the sampling
    settings and counts under ``selcal.pixels``. Returns the number of rows written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..writers.output import atomic_write

    value_type = pa.from_numpy_dtype(source.dtype)
    schema = pa.schema([("logits", pa.list_(value_type, source.num_classes)), ("label", pa.int64()),
                        ("id", pa.string()), ("image", pa.string())],
                       metadata={PIXELS_METADATA: source.metadata[PIXELS_METADATA]})
    written = 0
    with atomic_write(out, "wb") as handle:
        with pq.ParquetWriter(handle, schema) as writer:
            for index, image, cells, logits, labels in source.image_rows():
                values = pa.array(logits.ravel(), type=value_type)
                table = pa.table({
                    "logits": pa.FixedSizeListArray.from_arrays(values, source.num_classes),
                    "label": pa.array(labels, type=pa.int64()),
                    "id": pa.array(source.cell_ids(index, cells), type=pa.string()),
                    "image": pa.DictionaryArray.from_arrays(np.zeros(labels.size, dtype=np.int32),
                                                            pa.array([image])).cast(pa.string()),
                }, schema=schema)
                writer.write_table(table)
                written += labels.size
                if progress is not None:
                    progress(index + 1, len(source.files))
    return written
