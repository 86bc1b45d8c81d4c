"""fd-shifts test outputs: ``raw_logits.npz`` (or ``raw_output.npz``, softmax) and ``external_confids.npz``.

fd-shifts (IML-DKFZ/fd-shifts, ``fd_shifts/models/callbacks/confid_monitor.py``,
``on_test_end``) saves its test outputs with ``np.savez_compressed(path, array)``: one array
``arr_0`` of N rows and K + 2 columns, the K logits (``raw_logits.npz``; softmax probabilities
in ``raw_output.npz``), the label, and the index of the test dataloader the row came from
(``dataset_idx``). Its analysis (``fd_shifts/analysis/__init__.py``) reads them back the same
way: dataset 0 is ``val_tuning`` (the validation set its confidence scaling is fitted on, when
``eval.val_tuning`` is on, its default), 1 the in-distribution test set, 2 and up the shifted
or new-class test sets. A method's own confidence per row (``ext``) is ``arr_0`` of
``external_confids.npz`` beside it.

selcal reads dataset 0 as the validation split and every other row as a test row; the
dataset index is the group column (``dataset_idx``), so each test set gets its own numbers,
and the external confidences are the column ``external_confids`` (``--score-col
external_confids``). Rows of a new-class set keep the labels they were saved with; give them
a label of their own and ``--ood-label`` to count them as errors, as fd-shifts does.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from .arrays import ArraysSource
from ..errors import said
from .base import input_error, first_line

NAMES = {"raw_logits.npz": "logits", "raw_output.npz": "probs"}
EXTERNAL = "external_confids"


def is_fdshifts(path: str) -> bool:
    return os.path.basename(path) in NAMES and os.path.isfile(path)


def model_name(path: str) -> str:
    """The experiment's folder (fd-shifts writes ``<experiment>/test_results/raw_logits.npz``).

    >>> model_name("runs/cifar10_dg_run1/test_results/raw_logits.npz")
    'cifar10_dg_run1'
    """
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    return parts[-3] if len(parts) >= 3 and parts[-2] == "test_results" else parts[-2] or parts[-1]


def _load(path: str) -> np.ndarray:
    from .npz import load_npz, npz_headers

    try:
        names = list(npz_headers(path))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise input_error(path, None, None, f"not a readable .npz file ({first_line(exc)})") from None
    if names != ["arr_0"]:
        raise input_error(path, None, None, f"holds the arrays {', '.join(names)}; an fd-shifts output "
                    "holds one array arr_0 (np.savez_compressed(path, array))")
    return load_npz(path, ["arr_0"])["arr_0"]  # measured by its header before it is inflated


class FdShiftsSource(ArraysSource):
    """An fd-shifts ``raw_logits.npz``/``raw_output.npz`` (with ``external_confids.npz`` beside it)."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None):
        for option, value in ((said("label_col"), label_col), (said("logits_col"), logits_col)):
            if value is not None:
                raise input_error(path, None, None, f"{option} is not available for an fd-shifts output (its columns are "
                                              "fixed: K logits, the label, the dataset index)")
        raw = _load(path)
        if raw.ndim != 2 or raw.shape[1] < 4 or raw.dtype.kind != "f":
            raise input_error(path, "arr_0", None, f"has shape {raw.shape} and dtype {raw.dtype}; an fd-shifts output has "
                        "N rows of K logits, the label and the dataset index (float)")
        dataset = raw[:, -1]
        if not np.all(np.isfinite(dataset) & (dataset == np.round(dataset)) & (dataset >= 0)):
            row = int(np.flatnonzero(~(np.isfinite(dataset) & (dataset == np.round(dataset)) & (dataset >= 0)))[0])
            raise input_error(path, "dataset_idx", row, f"holds {dataset[row]!r}; the last column of an fd-shifts output is "
                        "the index of the test set (0, 1, 2, ...)")
        dataset = dataset.astype(np.int64)
        arrays = {"logits": raw[:, :-2], "label": raw[:, -2].astype(np.float64), "dataset_idx": dataset,
                  "split": np.where(dataset == 0, "val", "test")}
        external = os.path.join(os.path.dirname(path), EXTERNAL + ".npz")
        if os.path.isfile(external):
            confids = _load(external)
            confids = confids.reshape(-1) if confids.ndim == 2 and 1 in confids.shape else confids
            if confids.ndim != 1 or confids.size != raw.shape[0]:
                raise input_error(external, "arr_0", None, f"has shape {confids.shape}; expected ({raw.shape[0]},), one "
                            f"confidence per row of {os.path.basename(path)}")
            arrays[EXTERNAL] = confids
        super().__init__(path, arrays, "label", ignore_label, group_col or "dataset_idx", "logits")
        if NAMES[os.path.basename(path)] == "probs":
            self.input_kind, self.input_reason = "probs", "raw_output.npz holds softmax probabilities"
