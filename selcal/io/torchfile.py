"""``.pt``/``.pth`` dumps written with ``torch.save``: a dict of tensors (``logits``, ``labels``,
optionally ``split``/``id``/groups; names as for Parquet), a list of such dicts, one per batch
(concatenated in order), a pair ``(logits, labels)``, or a tensor of logits alone with its labels in a sibling file (as for ``.npy``). Loaded with
``torch.load(..., weights_only=True, map_location="cpu")``: no arbitrary Python object is
ever unpickled. Needs PyTorch (``pip install torch``)."""

from __future__ import annotations

import os
import re

import numpy as np

from .arrays import ArraysSource
from .base import _fail, _short

SAVE_PT = ("save a dict of tensors (and plain lists of str): torch.save({'logits': logits, 'labels': labels}, "
           "path)")


def _numpy(value):
    """A tensor, array or list as a numpy array (bf16 and fp16 as float32/float16); None otherwise."""
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        try:
            return np.asarray(value)
        except (ValueError, TypeError):
            return None
    return None


def load_torch(path: str):
    """What ``path`` holds: a dict name -> numpy array, or one numpy array."""
    try:
        import torch
    except ImportError:
        raise _fail(path, None, None, "reading .pt files needs PyTorch (pip install torch); or save the arrays with "
                                      "numpy.savez('model.npz', logits=logits, labels=labels)") from None
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (UnpicklingError, RuntimeError, EOFError, ...)
        text = str(exc)
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        if found or "weights_only" in text:
            what = f" ({found.group(1)})" if found else ""
            reason = f"it holds Python objects{what} that weights_only loading refuses"
        else:
            reason = _short(exc).split(". ")[0]
        raise _fail(path, None, None, f"not a readable .pt file ({reason}); {SAVE_PT}") from None
    if isinstance(loaded, dict):
        arrays = {str(k): a for k, v in loaded.items() if (a := _numpy(v)) is not None}
        return arrays
    if isinstance(loaded, (list, tuple)) and loaded and all(isinstance(v, dict) for v in loaded):
        return _batch_dicts(path, loaded)
    if isinstance(loaded, (tuple, list)) and len(loaded) == 2 and all(_numpy(v) is not None for v in loaded):
        logits, labels = (_numpy(v) for v in loaded)
        if getattr(logits, "ndim", 0) in (1, 2) and getattr(labels, "ndim", 0) == 1 and labels.dtype.kind in "iub":
            return {"logits": logits, "labels": labels}
    array = _numpy(loaded)
    if array is None:
        raise _fail(path, None, None, f"holds a {type(loaded).__name__}, not tensors; {SAVE_PT}")
    return array


def _batch_dicts(path: str, batches: list) -> dict:
    """A list of batch dicts (``outputs.append({"logits": ..., "labels": ...})`` in a loop), each
    entry concatenated along the rows in list order; every batch must have the same entries."""
    keys = list(batches[0])
    arrays: dict = {}
    for i, batch in enumerate(batches):
        if list(batch) != keys:
            raise _fail(path, None, None, f"batch {i} of the list has the entries {', '.join(map(str, batch))}, "
                        f"batch 0 {', '.join(map(str, keys))}; every batch dict needs the same entries")
        for key, value in batch.items():
            array = _numpy(value)
            if array is not None and array.ndim > 0:  # a scalar (a batch's loss) is no column
                arrays.setdefault(str(key), []).append(array)
    out = {}
    for key, parts in arrays.items():
        if len(parts) != len(batches):
            continue  # not an array in every batch (e.g. a loss value): not a column
        if len({p.shape[1:] for p in parts}) > 1:
            shapes = ", ".join(str(tuple(p.shape)) for p in parts[:3])
            raise _fail(path, key, None, f"has shapes {shapes}, ... across the batches; every batch needs the same K")
        out[key] = np.concatenate(parts)
    return out


class TorchSource(ArraysSource):
    """A ``.pt``/``.pth`` file of tensors."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None):
        loaded = load_torch(path)
        if not isinstance(loaded, dict):
            from .npy import load_labels_beside

            if group_col is not None:
                raise _fail(path, None, None, f"a file of logits alone holds no group names for --group-col "
                                              f"'{group_col}'; {SAVE_PT} with a '{group_col}' entry")
            self.labels_path, labels = load_labels_beside(path)
            label_col, logits_col = os.path.basename(self.labels_path), None  # messages name the labels file
            loaded = {"logits": loaded, label_col: labels}
        super().__init__(path, loaded, label_col, ignore_label, group_col, logits_col, what="entry")
