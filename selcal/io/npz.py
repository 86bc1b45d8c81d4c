"""``.npz`` dumps: arrays ``logits`` (N x K) and ``labels``, read whole."""

from __future__ import annotations

import zipfile

import numpy as np

from .base import DumpSource, _fail, _labels_to_int, _short


class NpzSource(DumpSource):
    """An ``.npz`` dump: arrays ``logits`` (N x K) and ``labels``; read whole."""

    def __init__(self, path: str, label_col: str, ignore_label: int | None):
        self.path, self.ignore_label, self.metadata = path, ignore_label, {}
        self.logits_col = "logits"
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            reason = "it holds Python objects, not plain arrays" if "pickle" in str(exc) else _short(exc)
            raise _fail(path, None, None, f"not a readable .npz file ({reason}); save it with numpy.savez") from None
        if "logits" not in arrays:
            found = ", ".join(sorted(arrays)) or "nothing"
            raise _fail(path, None, None, f"no array named 'logits' (found: {found}); save logits and labels")
        label_key = next((k for k in (label_col, "labels", "label") if k in arrays), None)
        if label_key is None:
            raise _fail(path, None, None, "no array named 'labels'; save the labels beside the logits")
        self.label_col = label_key
        logits = arrays["logits"]
        if logits.ndim == 1:
            logits = logits[:, None]
        if logits.ndim != 2:
            raise _fail(path, "logits", None, f"has {logits.ndim} dimensions; expected N x K")
        if logits.dtype not in (np.float16, np.float32, np.float64):
            raise _fail(path, "logits", None, f"has dtype {logits.dtype}; save float16, float32 or float64 logits")
        if logits.shape[1] == 0:
            raise _fail(path, "logits", None, "has K = 0 columns; save N x K logits")
        labels = arrays[label_key]
        if labels.ndim != 1 or labels.size != logits.shape[0]:
            raise _fail(path, label_key, None,
                        f"has shape {labels.shape}; expected ({logits.shape[0]},), one label per row")
        split = arrays.get("split")
        self.num_rows = int(labels.size)
        self._columns = dict(logits=logits, labels=_labels_to_int(path, label_key, labels, None),
                             split=None if split is None else split.astype(str), ids=None, groups=None)

    def raw_batches(self, batch_rows: int):
        if self.num_rows:
            yield self._columns, 0

    def _labels_and_split(self):
        return self._columns["labels"], self._columns["split"]

    @property
    def num_classes(self) -> int:
        return int(self._columns["logits"].shape[1])

    @property
    def logits_bytes(self) -> int:
        return int(self._columns["logits"].nbytes)
