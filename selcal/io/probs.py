"""What the logit column holds: logits, probabilities or log-probabilities (CONVENTIONS.md, "Input").

Saved probabilities (what netcal, torchmetrics and many training loops store) are detected:
when every kept row of the first batch lies in [0, 1] and sums to 1 within
:data:`TOLERANCE`, the file is read as probabilities and their logarithms are the logits
(softmax(log p) = p, so every softmax-based number is that of the logits p came from). Later
batches must then hold probabilities too (a row that does not is refused naming it). ``--input
logits|probs|logprobs`` overrides the detection; numbered columns ``prob_k`` mean ``probs``.

A probability of exactly 0 has no logarithm: it is read as :data:`LOG_ZERO`, the logarithm of
the smallest positive float64 (its softmax share is below 1e-300 at any temperature T < 2).
For one column (K = 1) ``probs`` means p(class 1), read as the binary logit log p - log(1 - p).
"""

from __future__ import annotations

import numpy as np

from ..errors import said as said_as
from ..options import INPUT_KINDS  # noqa: F401  (the values of --input)
from .columns import holds_probabilities

TOLERANCE = 1e-3
LOG_ZERO = float(np.log(np.nextafter(0.0, 1.0)))  # -744.44


def tolerance(values: np.ndarray) -> float:
    """How far from 1 a row of probabilities may sum: 1e-3, or K times half the float type's
    epsilon when that is more (float16 softmax of many classes)."""
    dtype = values.dtype if np.issubdtype(values.dtype, np.floating) else np.float64
    return max(TOLERANCE, values.shape[1] * float(np.finfo(dtype).eps) / 2)


def probability_rows(values: np.ndarray) -> np.ndarray:
    """Which rows are probability vectors: every value in [0, 1], the sum within :func:`tolerance` of 1.

    >>> probability_rows(np.array([[0.25, 0.75], [0.5, 0.7], [-0.1, 1.1]])).tolist()
    [True, False, False]
    """
    tol = tolerance(np.asarray(values))
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (values.min(axis=1) >= 0) & (values.max(axis=1) <= 1) & (np.abs(values.sum(axis=1) - 1) <= tol)


def _logprob_rows(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return probability_rows(np.exp(np.asarray(values, dtype=np.float64)))


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        out = np.log(p)
    out[p == 0] = LOG_ZERO
    return out


def said(source, kind: str) -> str:
    """How the user names ``kind``: ``--input probs`` on the command line, ``input_kind='probs'`` to
    the Python functions of arrays (whose reading sets ``source.python``)."""
    return said_as("input_kind", kind, python=getattr(source, "python", False))


def as_logits(source, values: np.ndarray, keep: np.ndarray, first_row: int) -> np.ndarray:
    """The logits of one batch of ``source`` (a :class:`~selcal.io.base.DumpSource`): ``values``
    as they are, or log-probabilities of probabilities; the kind is ``source.input_kind``
    (``--input``), else the one ``prob_k`` columns name, else detected on the first batch and
    kept in ``source.detected_input``."""
    from .messages import input_error

    requested = source.input_kind or ("probs" if holds_probabilities(source.logits_col) else None)
    kind = requested or source.detected_input
    if kind is None:  # a negative value or one above 1 settles it without a copy (the common case)
        kept = values if keep.all() else values[keep]
        kind = "probs" if (values.shape[1] > 1 and kept.size and kept.min() >= 0 and kept.max() <= 1
                           and probability_rows(kept).all()) else "logits"
    source.detected_input = kind
    if kind == "logits" or values.shape[0] == 0:
        return values
    wide = getattr(source, "wide_columns", None)
    column = source.logits_col if not wide else wide[0]
    if values.shape[1] == 1:  # one column: p(class 1), or its logarithm
        p = np.asarray(values[:, 0], dtype=np.float64)
        p = np.exp(p) if kind == "logprobs" else p
        bad = keep & ~((p >= 0) & (p <= 1))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise input_error(source.path, column, first_row + row, f"holds {float(values[row, 0])!r}, not a probability "
                              f"of class 1 ({said(source, kind)}); pass {said(source, 'logits')} to read it as a logit")
        return (_log(p) - _log(1 - p))[:, None]
    rows = probability_rows(values) if kind == "probs" else _logprob_rows(values)
    bad = keep & ~rows
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        what = "probabilities (each in [0, 1], summing to 1 within 1e-3)" if kind == "probs" else \
            "log-probabilities (their exponentials summing to 1 within 1e-3)"
        why = (getattr(source, "input_reason", None) or f"{said(source, kind)} was given" if source.input_kind
               else "columns prob_k hold probabilities"
               if requested else "the rows before it are probabilities, so the file was read as probabilities")
        raise input_error(source.path, column, first_row + row,
                    f"is not a row of {what}, but {why}; fix the row, or pass {said(source, 'logits')}")
    if kind == "logprobs":
        out = np.asarray(values, dtype=np.float64).copy()
        out[np.isneginf(out)] = LOG_ZERO
        return out
    return _log(np.asarray(values, dtype=np.float64))
