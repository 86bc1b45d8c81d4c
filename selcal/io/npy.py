"""``.npy`` dumps: one N x K array of logits (or N binary logits) with its labels in a sibling
file (:func:`~selcal.io.arrays.sibling_labels`: ``X_logits.npy`` + ``X_labels.npy``,
``X.npy`` + ``X_labels.npy``, or ``labels.npy`` in the same folder). Read whole, never unpickled."""

from __future__ import annotations

import os

import numpy as np

from .arrays import ArraysSource, sibling_labels
from .base import PARQUET_ADVICE, input_error, first_line, check_decoded
from .npz import npy_bytes
from .tensors import load_torch

SAVE_NPZ = "save both with numpy.savez('model.npz', logits=logits, labels=labels)"


def load_npy(path: str) -> np.ndarray:
    """One ``.npy`` array (plain values only: an array of Python objects is refused)."""
    try:
        with open(path, "rb") as stream:
            check_decoded(path, {os.path.basename(path): npy_bytes(path, stream, None, os.fstat(stream.fileno()).st_size)},
                          advice=PARQUET_ADVICE)
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        reason = "it holds Python objects, not plain numbers" if "pickle" in str(exc) else first_line(exc)
        raise input_error(path, None, None, f"not a readable .npy file ({reason}); {SAVE_NPZ}") from None


def load_labels_beside(path: str) -> tuple[str, np.ndarray]:
    """(path, array) of the labels file beside the logits-only file ``path``."""
    labels_path = sibling_labels(path)
    if labels_path is None:
        stem = os.path.splitext(os.path.basename(path))[0]
        wanted = stem.replace("logits", "labels") if "logits" in stem else f"{stem}_labels"
        raise input_error(path, None, None, f"holds only logits and no labels file was found beside it "
                                      f"(looked for {wanted}.npy and labels.npy); {SAVE_NPZ}")
    if labels_path.lower().endswith((".pt", ".pth")):
        loaded = load_torch(labels_path)
        if isinstance(loaded, dict):
            raise input_error(labels_path, None, None, "holds a dict, not one tensor of labels; " + SAVE_NPZ)
        return labels_path, loaded
    return labels_path, load_npy(labels_path)


class NpySource(ArraysSource):
    """An ``.npy`` file of logits and the labels file beside it."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None):
        logits = load_npy(path)
        if group_col is not None:
            raise input_error(path, None, None, f"a .npy file holds no group names for --group-col '{group_col}'; "
                                          f"save an .npz with a '{group_col}' array")
        self.labels_path, labels = load_labels_beside(path)
        name = os.path.basename(self.labels_path)  # messages about the labels name their file
        super().__init__(path, {"logits": logits, name: labels}, name, ignore_label, None, None)
