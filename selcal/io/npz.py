"""``.npz`` dumps: arrays ``logits`` (N x K) and ``labels``, optionally ``split``, ``id`` and a
group array, read whole (column names as for Parquet: :mod:`selcal.io.columns`)."""

from __future__ import annotations

import zipfile

import numpy as np

from .arrays import ArraysSource
from .base import _fail, _short


class NpzSource(ArraysSource):
    """An ``.npz`` file of plain arrays (never unpickled)."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None):
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            reason = "it holds Python objects, not plain arrays" if "pickle" in str(exc) else _short(exc)
            raise _fail(path, None, None, f"not a readable .npz file ({reason}); save it with numpy.savez") from None
        super().__init__(path, arrays, label_col, ignore_label, group_col, logits_col)
