"""Loading a ``torch.save`` file safely (``weights_only=True``, on the CPU) into numpy arrays:
shared by the ``.pt`` reader and the labels file beside a ``.npy`` of logits."""

from __future__ import annotations

import re
import warnings

import numpy as np

from .base import PARQUET_ADVICE, input_error, first_line, check_decoded

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


def _decoded_sizes(loaded) -> dict:
    """name -> bytes of every tensor of what ``torch.load`` returned (a dict, a list or tuple, a
    list of batch dicts, one tensor), by its shape (what it takes once copied into an array), not
    by its storage: an expanded tensor (stride 0) of a few bytes of storage may stand for gigabytes."""
    import torch

    if isinstance(loaded, dict):
        items = [(str(k), v) for k, v in loaded.items()]
    elif isinstance(loaded, (list, tuple)):
        items = [(f"{i}.{k}", v) for i, part in enumerate(loaded)
                 for k, v in (part.items() if isinstance(part, dict) else [("", part)])]
    else:
        items = [("tensor", loaded)]
    return {name: int(value.numel()) * value.element_size() for name, value in items
            if isinstance(value, torch.Tensor)}


def _batch_dicts(path: str, batches: list) -> dict:
    """A list of batch dicts (``outputs.append({"logits": ..., "labels": ...})`` in a loop), each
    entry concatenated along the rows in list order; every batch must have the same entries."""
    keys = list(batches[0])
    arrays: dict = {}
    for i, batch in enumerate(batches):
        if list(batch) != keys:
            raise input_error(path, None, None, f"batch {i} of the list has the entries {', '.join(map(str, batch))}, "
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
            raise input_error(path, key, None, f"has shapes {shapes}, ... across the batches; every batch needs the same K")
        out[key] = np.concatenate(parts)
    return out


def load_torch(path: str):
    """What ``path`` holds: a dict name -> numpy array, or one numpy array. The file is mapped, not
    read, and its tensors are measured by their shapes before any is copied
    (:func:`~selcal.io.base.check_decoded`)."""
    try:
        import torch
    except (ImportError, OSError) as exc:
        import importlib.util

        if isinstance(exc, ModuleNotFoundError) or "No module named" in str(exc) \
                or importlib.util.find_spec("torch") is None:
            raise input_error(path, None, None, "reading .pt files needs PyTorch (pip install torch); or save the arrays "
                                          "with numpy.savez('model.npz', logits=logits, labels=labels)") from None
        # installed, but it could not be loaded (a memory limit, a broken install): say so, not "install it"
        raise input_error(path, None, None, f"PyTorch is installed but could not be loaded ({first_line(exc)}); raise the "
                                      "memory limit (ulimit -v) or save the arrays with numpy.savez('model.npz', "
                                      "logits=logits, labels=labels)") from None
    try:
        with warnings.catch_warnings():  # torch's own warnings (a TorchScript archive, ...): the outcome is said below
            warnings.simplefilter("ignore")
            try:  # mapped, not read: a tensor is measured by its shape before anything is copied
                loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap" not in str(exc):
                    raise
                loaded = torch.load(path, map_location="cpu", weights_only=True)  # the legacy format
    except Exception as exc:  # torch raises many kinds (UnpicklingError, RuntimeError, EOFError, ...)
        text = str(exc)
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        if found or "weights_only" in text:
            what = f" ({found.group(1)})" if found else ""
            reason = f"it holds Python objects{what} that weights_only loading refuses"
        else:
            reason = first_line(exc).split(". ")[0]
        raise input_error(path, None, None, f"not a readable .pt file ({reason}); {SAVE_PT}") from None
    check_decoded(path, _decoded_sizes(loaded), "tensor", advice=PARQUET_ADVICE)
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
        raise input_error(path, None, None, f"holds a {type(loaded).__name__}, not tensors; {SAVE_PT}")
    return array
