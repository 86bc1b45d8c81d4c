"""What a registered score returns is checked where it enters selcal (CONVENTIONS.md, "Scores
registered from outside"): one line naming the score and what it returned, never a traceback
from deep inside a metric, nor a number computed from values that cannot be what they claim.

- ``score(terms, state)``: one real, finite value per row of the chunk (shape (N,)).
- ``probabilities(terms, state)``: N x K real values in [0, 1], each row summing to 1 within
  :data:`SUM_TOLERANCE`.
- ``fit(val_logits, val_labels, options)``: a state the JSON can hold, once numpy scalars and
  arrays are turned into numbers and lists (:func:`selcal.results.to_jsonable`); checked only when
  the entry writes its state as is (no ``describe``). Every number in its dicts, lists and arrays
  finite, whatever the entry (the JSON wrote NaN as null, and the scores computed from it).

A score from outside selcal (``register_score``, an entry point) that raises is also one line
naming it; a built-in score that raises is a bug of selcal, and keeps its traceback.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import SelcalError
from ..results import to_jsonable
from .registry import ORIGIN, Score, is_builtin

__all__ = ["SUM_TOLERANCE", "fitted_state", "probabilities", "score_values"]

# How far a row of probabilities may sum from 1: a float32 softmax of a million classes, summed in
# float64, is within about 1e-6 of 1; a sum off by more is not a rounding (exp(logits) is off by
# orders of magnitude) and would make every calibration number meaningless.
SUM_TOLERANCE = 1e-5

_REAL_KINDS = "biuf"  # bool, signed and unsigned integers, floats


def score_values(entry: Score, terms, state) -> np.ndarray:
    """``entry.score(terms, state)`` as float64 (N,), or a :class:`SelcalError` saying what it returned."""
    n = terms.logits.shape[0]
    values = _array(entry, "score", _called(entry, "score", entry.score, terms, state))
    if values.shape != (n,):
        raise _refused(entry, "score", f"an array of shape {values.shape} for a chunk of {n} rows; "
                                        f"it must return one value per row, shape ({n},)")
    values = values.astype(np.float64, copy=False)
    _finite(entry, "score", values)
    return values


def probabilities(entry: Score, terms, state) -> np.ndarray:
    """``entry.probabilities(terms, state)`` as float64 (N, K), or a :class:`SelcalError`."""
    n, k = terms.logits.shape
    p = _array(entry, "probabilities", _called(entry, "probabilities", entry.probabilities, terms, state))
    if p.shape != (n, k):
        raise _refused(entry, "probabilities", f"an array of shape {p.shape} for a chunk of {n} rows of "
                                                f"{k} classes; it must return shape ({n}, {k})")
    p = p.astype(np.float64, copy=False)
    _finite(entry, "probabilities", p)
    low, high = float(p.min(initial=0.0)), float(p.max(initial=0.0))
    if low < 0.0 or high > 1.0:
        bad = low if low < 0.0 else high
        raise _refused(entry, "probabilities", f"a value of {bad:.6g}, outside [0, 1]; return probabilities, "
                                                "e.g. a softmax of the logits")
    sums = p.sum(axis=1)
    off = np.abs(sums - 1.0) > SUM_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise _refused(entry, "probabilities", f"{int(np.count_nonzero(off))} of {n} rows that do not sum to 1 "
                                                f"(row {row} of the chunk sums to {sums[row]:.6g}; tolerance "
                                                f"{SUM_TOLERANCE:g}); normalise each row, e.g. a softmax")
    return p


def fitted_state(entry: Score, val_logits, val_labels, options):
    """``entry.fit(...)``: its state, checked to be one the JSON can hold when the entry writes it as
    is (numpy scalars and arrays are converted when it is written, not refused)."""
    state = _called(entry, "fit", entry.fit, val_logits, val_labels, options)
    where = _nonfinite(state, "state")
    if where is not None:
        raise _refused(entry, "fit", f"a state holding {where[1]} at {where[0]}; every number of a fitted state "
                                     "must be finite (a fit that did not converge?)")
    if entry.describe is None:
        try:
            json.dumps(to_jsonable(state), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise _refused(entry, "fit", f"a state the JSON cannot hold ({_short(exc)}); return numbers, "
                                         "strings, lists, dicts and numpy arrays") from None
    return state


def _nonfinite(value, where: str) -> tuple[str, float] | None:
    """(where, value) of the first NaN or infinite number in a state's dicts, lists and arrays, else None."""
    if isinstance(value, dict):
        found = (_nonfinite(item, f"{where}[{key!r}]") for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        found = (_nonfinite(item, f"{where}[{i}]") for i, item in enumerate(value))
    elif isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        bad = np.argwhere(~np.isfinite(value))
        if not bad.size:
            return None
        index = tuple(int(i) for i in bad[0])
        return where + "".join(f"[{i}]" for i in index), value[index].item()
    elif isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return None if np.isfinite(value) else (where, value)
    else:
        return None
    return next((hit for hit in found if hit is not None), None)


def _called(entry: Score, role: str, function, *args):
    """``function(*args)``; an exception of a score from outside selcal becomes one line naming it."""
    if is_builtin(entry.name):
        return function(*args)
    try:
        return function(*args)
    except (SelcalError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001  (any exception of the user's code is reported, not traced)
        raise SelcalError(f"score {entry.name!r} ({ORIGIN.get(entry.name, 'registered')}): its {role} function "
                          f"raised {type(exc).__name__}: {_short(exc)}") from None


def _array(entry: Score, role: str, value) -> np.ndarray:
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001  (ragged lists and the like)
        raise _refused(entry, role, f"a {type(value).__name__} that is no array ({_short(exc)})") from None
    if array.dtype.kind not in _REAL_KINDS:
        what = "None" if value is None else f"values of dtype {array.dtype}"
        raise _refused(entry, role, f"{what}; it must return real numbers (float64)")
    return array


def _finite(entry: Score, role: str, values: np.ndarray) -> None:
    finite = np.isfinite(values)
    if not finite.all():
        bad = ~finite
        first = values.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
        rows = int(np.count_nonzero(bad.any(axis=1) if bad.ndim == 2 else bad))
        raise _refused(entry, role, f"{first} in {rows} of {values.shape[0]} rows of a chunk; every value must "
                                    "be finite")


def _refused(entry: Score, role: str, what: str) -> SelcalError:
    return SelcalError(f"score {entry.name!r} ({ORIGIN.get(entry.name, 'registered')}): its {role} function "
                       f"returned {what}")


def _short(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line, cut to ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."
