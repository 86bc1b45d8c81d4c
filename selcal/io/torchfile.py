"""``.pt``/``.pth`` dumps written with ``torch.save``: a dict of tensors (``logits``, ``labels``,
optionally ``split``/``id``/groups; names as for Parquet), a list of such dicts, one per batch
(concatenated in order), a pair ``(logits, labels)``, or a tensor of logits alone with its labels in a sibling file (as for ``.npy``). Loaded with
``torch.load(..., weights_only=True, map_location="cpu")``: no arbitrary Python object is
ever unpickled. Needs PyTorch (``pip install torch``)."""

from __future__ import annotations

import os

from .arrays import ArraysSource
from .base import input_error
from .npy import load_labels_beside
from .tensors import SAVE_PT, load_torch


class TorchSource(ArraysSource):
    """A ``.pt``/``.pth`` file of tensors."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None):
        loaded = load_torch(path)
        if not isinstance(loaded, dict):
            if group_col is not None:
                raise input_error(path, None, None, f"a file of logits alone holds no group names for --group-col "
                                              f"'{group_col}'; {SAVE_PT} with a '{group_col}' entry")
            self.labels_path, labels = load_labels_beside(path)
            label_col, logits_col = os.path.basename(self.labels_path), None  # messages name the labels file
            loaded = {"logits": loaded, label_col: labels}
        super().__init__(path, loaded, label_col, ignore_label, group_col, logits_col, what="entry")
