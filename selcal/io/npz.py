"""``.npz`` dumps: arrays ``logits`` (N x K) and ``labels``, optionally ``split``, ``id`` and a
group array, read whole (column names as for Parquet: :mod:`selcal.io.columns`)."""

from __future__ import annotations

import zipfile
import zlib

import numpy as np

from .arrays import ArraysSource
from .base import PARQUET_ADVICE, input_error, first_line, check_decoded



def npy_header(stream) -> tuple[tuple, np.dtype] | None:
    """(shape, dtype) that the ``.npy`` header at the start of ``stream`` declares; None when it is
    not a header numpy 1.0/2.0 format (numpy's own reading then says what is wrong)."""
    try:
        version = np.lib.format.read_magic(stream)
        reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(
            version)
        if reader is None:
            return None
        shape, _, dtype = reader(stream, max_header_size=1 << 16)
    except (ValueError, EOFError, OSError, zlib.error, zipfile.BadZipFile):
        return None
    return tuple(shape), dtype


def npy_bytes(path: str, stream, name: str | None, stored: int | None = None) -> int:
    """Bytes of the array whose ``.npy`` header starts ``stream``, by its declared shape and dtype
    (read from the header alone); refused when it declares more than the ``stored`` bytes of the
    file or zip member, which numpy would allocate before finding the data short."""
    header = npy_header(stream)
    if header is None:
        return 0
    shape, dtype = header
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if stored is not None and nbytes > stored:
        raise input_error(path, name, None, f"declares shape {shape} of {dtype} ({nbytes} bytes) but holds only "
                                      f"{stored} bytes; was it truncated or corrupted?")
    return nbytes


def _member(archive: zipfile.ZipFile, name: str) -> zipfile.ZipInfo:
    return archive.getinfo(name + ".npy" if name + ".npy" in archive.namelist() else name)


def npz_headers(path: str) -> dict:
    """name -> (shape, dtype) of every array of an ``.npz`` file, from the headers alone (nothing
    inflated but the first bytes of each member); unreadable members are left out."""
    with zipfile.ZipFile(path) as archive:
        found = {}
        for info in archive.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            with archive.open(info) as stream:
                header = npy_header(stream)
            if header is not None:
                found[name] = header
        return found


def load_npz(path: str, names=None, *, advice: str = PARQUET_ADVICE) -> dict:
    """The arrays ``names`` (default: all) of an ``.npz`` file, each checked by its header before
    it is read: a header that declares more bytes than its member holds, or arrays that would
    take more memory than :func:`~selcal.io.base.whole_read_limit` (a zip bomb), are refused in
    one line, and no Python object is ever unpickled."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            wanted = [n for n in archive.files if names is None or n in names]
            sizes = {}
            for name in wanted:
                info = _member(archive.zip, name)
                with archive.zip.open(info) as stream:
                    sizes[name] = npy_bytes(path, stream, name, info.file_size)
            check_decoded(path, sizes, advice=advice)
            return {name: archive[name] for name in wanted}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError) as exc:
        reason = "it holds Python objects, not plain arrays" if "pickle" in str(exc) else first_line(exc)
        raise input_error(path, None, None, f"not a readable .npz file ({reason}); save it with numpy.savez") from None


class NpzSource(ArraysSource):
    """An ``.npz`` file of plain arrays (never unpickled; checked by :func:`load_npz` before reading)."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None):
        super().__init__(path, load_npz(path), label_col, ignore_label, group_col, logits_col)
