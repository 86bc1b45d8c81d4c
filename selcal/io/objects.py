"""Arrays handed to the Python API, as validated numpy arrays.

``selcal.evaluate_arrays`` takes numpy arrays, nested lists, torch tensors (any device,
``requires_grad``, float16 or bfloat16), pandas and polars Series and DataFrames (a
DataFrame of logits columns, one column per class). Everything becomes numpy here, once;
the rest of selcal sees only numpy. torch is never imported: a tensor is recognised by
the module of its type and converted with its own methods, so selcal works (and stays
fast to import) without torch.

Errors name the Python argument and the first offending row (``logits: row 3 holds NaN
for class 0; logits must be finite``), as the readers of files name the file and column.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from ..errors import SelcalError
from .base import OOD_GROUPS, OOD_LABEL, Dump, expand_binary, first_nonfinite
from .messages import first_line

__all__ = ["to_numpy", "as_logits", "as_labels", "array_dump"]



def _library(value) -> str:
    return type(value).__module__.split(".", 1)[0]


def to_numpy(value, name: str) -> np.ndarray:
    """``value`` as a numpy array, whatever library holds it; a column whose values are rows (a pandas
    Series of arrays or lists, a polars list column, a frame of one such column) stacked N x K.

    Examples
    --------
    >>> to_numpy([[1.0, 2.0], [3.0, 4.0]], "logits").shape
    (2, 2)
    """
    return _stacked(_any_numpy(value, name), name)


def _any_numpy(value, name: str) -> np.ndarray:
    library = _library(value)
    if library == "torch":
        try:
            tensor = value.detach()
            if tensor.device.type != "cpu":
                tensor = tensor.cpu()
            if str(tensor.dtype) == "torch.bfloat16":
                tensor = tensor.float()  # exact: bfloat16 is float32 with the low 16 bits of the mantissa zero
            return tensor.numpy()
        except Exception as exc:  # a meta tensor, a complex or quantised dtype, ...: torch's own words, in one line
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SelcalError(f"{name}: a {value.dtype} tensor on {value.device} cannot be read ({reason}); "
                              "pass a tensor of numbers") from None
    if library == "polars":
        if type(value).__name__ == "LazyFrame":  # the query the user wrote, run: what they would do
            try:
                value = value.collect()
            except Exception as exc:  # noqa: BLE001  (polars' error: its own words, in one line)
                raise SelcalError(f"{name}: the polars LazyFrame cannot be collected ({first_line(exc)}); "
                                  "pass a DataFrame") from None
        return value.to_numpy()  # a DataFrame: one column per class; a list column: an object array of rows
    if library == "pandas":
        array = value.to_numpy()
        if array.dtype == object:  # nullable Int64/Float64/boolean: NA is NaN, named as a file's null is
            try:
                return value.to_numpy(dtype=np.float64, na_value=np.nan)
            except (TypeError, ValueError):  # text, or a column of arrays (stacked)
                return array
        return array
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise SelcalError(f"{name}: cannot be read as an array ({exc}); pass a numpy array, a list of rows, "
                          "a torch tensor or a pandas/polars object") from None


def _numbers(array: np.ndarray, name: str, what: str) -> np.ndarray:
    """``array`` as float64 when it holds Python objects (a list of mixed rows); refused in one line when
    they are not numbers (``what``: what the values must be)."""
    if array.dtype != object:
        return array
    try:
        return array.astype(np.float64)
    except (TypeError, ValueError):
        raise SelcalError(f"{name}: holds values that are not numbers; {what}") from None


def _stacked(array: np.ndarray, name: str) -> np.ndarray:
    """An object array of rows (a pandas column of arrays or lists, a polars list column, a frame of
    one such column) stacked N x K; any other array as it is."""
    if array.dtype != object or array.ndim not in (1, 2) or array.ndim == 2 and array.shape[1] != 1 or not array.size:
        return array
    rows = array.ravel()
    first = next((values for values in rows if values is not None), None)
    if not isinstance(first, (np.ndarray, list, tuple)):
        return array  # numbers (or text) as Python objects: read by the caller
    for row, values in enumerate(rows):
        if not isinstance(values, (np.ndarray, list, tuple)):
            what = "is null (None)" if values is None else f"holds a {type(values).__name__}, not a row of values"
            raise SelcalError(f"{name}: row {row} {what}; pass one list of K values per row")
        if len(values) != len(first):
            raise SelcalError(f"{name}: row {row} has {len(values)} values where row 0 has {len(first)}; "
                              "pass the same K values on every row")
    return np.stack([np.asarray(values) for values in rows])


BOOL_LOGITS = ("holds True/False values; logits must be numbers: pass the model's float logits, not a yes/no per "
               "class (booleans are not read as 0 and 1)")


def int_logits(dtype, cast: str) -> str:
    """Why integer logits of ``dtype`` are refused and what to do (``cast``: the conversion in the user's
    library, e.g. ``logits.float()``), as a file's integer logit columns are (:data:`selcal.io.columns.FLOAT_LOGITS`)."""
    return (f"holds integers ({dtype}); logits must be floats: pass {cast} (quantised codes multiplied by their "
            "scale first: raw integer codes would give a wrong softmax)")


def _cast(value, name: str, value_type: str) -> str:
    """The conversion of ``value`` (the argument ``name``, of ``value_type``) to float32 in its own library's words."""
    library = _library(value)
    if library == "torch":
        return f"{name}.float()"
    if library == "polars":
        return (f"{name}.cast(pl.List(pl.Float32))" if value_type.startswith(("List", "Array"))
                else f"{name}.cast(pl.Float32)")
    if library == "pandas":
        return f"{name}.astype('float32')" if value_type != "object" else f"np.stack({name}).astype(np.float32)"
    if isinstance(value, np.ndarray):
        return f"{name}.astype(np.float32)"
    return f"np.asarray({name}, dtype=np.float32)"


_BOOL_TYPE = re.compile(r"^((list|array)\()?bool(ean)?\b")
_INT_TYPE = re.compile(r"^((list|array)\()?u?int\d*\b")


def _typed_column(value) -> tuple[str, str] | None:
    """(column, dtype) of the first column of a pandas or polars DataFrame that holds booleans or integers
    (plain, nullable, or a list of them), column ``""`` for such a Series, None otherwise: a frame that mixes
    them with floats converts to floats (True as 1.0, nullable Int64 too) before its dtype can tell."""
    if _library(value) not in ("pandas", "polars"):
        return None
    if type(value).__name__ == "LazyFrame":  # its schema, without running the query (whose errors are said later)
        try:
            types = value.collect_schema().items()
        except Exception:  # noqa: BLE001  (polars' error, said in one line when the frame is collected)
            return None
    elif hasattr(value, "columns"):
        types = value.schema.items() if _library(value) == "polars" else value.dtypes.items()
    else:
        types = [("", getattr(value, "dtype", None))]
    return next(((str(column), str(dtype)) for column, dtype in types
                 if _BOOL_TYPE.match(str(dtype).lower()) or _INT_TYPE.match(str(dtype).lower())), None)


def _python_rows(value) -> list | tuple | None:
    """``value`` as the Python list it is (a list or tuple, a pandas column of Python lists: what
    ``pandas.read_json`` makes of a JSON Lines file), None when it is an array of a library."""
    if isinstance(value, (list, tuple)):
        return value
    if _library(value) == "pandas" and hasattr(value, "columns") and value.shape[1] == 1:
        value = value.iloc[:, 0]
    if _library(value) == "pandas" and getattr(value, "dtype", None) == object and not hasattr(value, "columns"):
        rows = value.tolist()
        return rows if rows and isinstance(rows[0], (list, tuple)) else None
    return None


def _python_numbers(value) -> bool:
    """Whether ``value`` is a list (or tuple) of Python numbers, or of rows of them: no dtype says whether
    they are integers or floats, as in a JSON Lines file (``[1, 2]``). A numpy value among them has one."""
    rows = _python_rows(value)
    if rows is None:
        return False
    nested = all(map(isinstance, rows, itertools.repeat((list, tuple))))
    return set(map(type, itertools.chain.from_iterable(rows) if nested else rows)) <= {int, float}


def _first_bool(value) -> tuple[int, int | None] | None:
    """(row, class) of the first bool in a list of numbers (class None: a list of binary logits), or of rows of
    them, that numpy read as floats (True as 1.0); None when there is none, the usual case, found by one
    pass over the values' types."""
    value = _python_rows(value)
    if not value:
        return None
    bools = (bool, np.bool_)
    if not isinstance(value[0], (list, tuple, np.ndarray)):  # binary logits, one per row
        if not set(map(type, value)) & set(bools):
            return None
        return next((row, None) for row, item in enumerate(value) if isinstance(item, bools))
    if all(map(isinstance, value, itertools.repeat((list, tuple)))):
        if not set(map(type, itertools.chain.from_iterable(value))) & set(bools):
            return None
    for row, values in enumerate(value):
        if isinstance(values, np.ndarray):
            if values.dtype.kind == "b":
                return row, 0
        elif isinstance(values, (list, tuple)):
            k = next((k for k, item in enumerate(values) if isinstance(item, bools)), None)
            if k is not None:
                return row, k
    return None


def as_logits(value, name: str) -> tuple[np.ndarray, bool]:
    """(logits N x K, binary): validated logits; a 1-D array or K = 1 is one binary logit v,
    returned as the two columns (0, v) with ``binary`` True (CONVENTIONS.md, "Input"). Booleans
    are refused (:data:`BOOL_LOGITS`), never read as 0 and 1; so are integers of a dtype (a numpy
    array, a tensor, a frame's column: :func:`int_logits`), as a file's integer columns are, while
    Python integers in lists are the numbers they are, as ``[1, 2]`` in a JSON Lines file is."""
    typed = _typed_column(value)
    if typed is not None:
        column, dtype = typed
        where = f"column {column!r} " if column else ""
        if _BOOL_TYPE.match(dtype.lower()):
            raise SelcalError(f"{name}: {where}{BOOL_LOGITS}")
        raise SelcalError(f"{name}: {where}{int_logits(dtype, _cast(value, name, dtype))}")
    logits = to_numpy(value, name)
    if logits.dtype.kind == "b":
        raise SelcalError(f"{name}: {BOOL_LOGITS}")
    if logits.ndim == 1:
        logits = logits[:, None]
    if logits.ndim != 2:
        raise SelcalError(f"{name}: has shape {logits.shape}; pass N x K logits (or N binary logits)")
    logits = _numbers(logits, name, "logits must be numbers")
    if logits.dtype.kind in "iuf":  # numpy reads True among numbers as 1 (or 1.0)
        found = _first_bool(value)
        if found is not None:
            row, k = found
            where = f"row {row} holds True/False" + ("" if k is None else f" for class {k}")
            raise SelcalError(f"{name}: {where} among numbers; logits must be numbers: pass the model's logit "
                              "for each class (booleans are not read as 1 and 0)")
    if logits.dtype.kind in "iu":
        if not _python_numbers(value):
            cast = _cast(value, name, str(getattr(value, "dtype", "")))
            raise SelcalError(f"{name}: {int_logits(logits.dtype, cast)}")
        logits = logits.astype(np.float64)
    if logits.dtype not in (np.float16, np.float32, np.float64):
        raise SelcalError(f"{name}: has dtype {logits.dtype}; pass float16, float32 or float64 logits")
    if logits.shape[0] == 0:
        raise SelcalError(f"{name}: has no rows")
    if logits.shape[1] == 0:
        raise SelcalError(f"{name}: has K = 0 columns; pass N x K logits")
    nonfinite = first_nonfinite(logits)
    if nonfinite is not None:
        row, k, what = nonfinite
        raise SelcalError(f"{name}: row {row} holds {what} for class {k}; logits must be finite")
    binary = logits.shape[1] == 1
    return (expand_binary(logits) if binary else logits), binary


def as_labels(value, name: str, n_rows: int, n_classes: int, rows_name: str,
              ignore_label: int | None = None, ood_label: int | None = None) -> np.ndarray:
    """Validated int64 labels in 0 .. K-1 (or ``ignore_label``), one per row of the logits; a
    row labelled ``ood_label`` (no class) gets the label :data:`selcal.io.OOD_LABEL`."""
    labels = to_numpy(value, name)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise SelcalError(f"{name}: has shape {labels.shape}; pass one label per row")
    if labels.size != n_rows:
        raise SelcalError(f"{name}: has {labels.size} labels but {rows_name} has {n_rows} rows; pass one label per row")
    labels = _numbers(labels, name, "labels must be integers 0 .. K-1")
    if labels.dtype.kind == "b":
        labels = labels.astype(np.int64)
    elif labels.dtype.kind == "f":
        whole = np.isfinite(labels) & (labels == np.round(labels))
        if not whole.all():
            row = int(np.flatnonzero(~whole)[0])
            what = "no label (NaN or null)" if np.isnan(labels[row]) else f"label {float(labels[row])!r}, not a whole number"
            raise SelcalError(f"{name}: row {row}: has {what}; labels must be integers 0 .. K-1")
        huge = np.abs(labels) >= 2.0**62
        if huge.any():
            row = int(np.flatnonzero(huge)[0])
            raise SelcalError(f"{name}: row {row}: label {float(labels[row]):g} is outside 0 .. {n_classes - 1}")
        labels = labels.astype(np.int64)
    elif labels.dtype.kind in "iu":
        if labels.dtype.kind == "u" and labels.size and labels.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(labels))
            raise SelcalError(f"{name}: row {row}: label {labels[row]} is too large; labels must be integers 0 .. K-1")
        labels = labels.astype(np.int64)
    else:
        raise SelcalError(f"{name}: has dtype {labels.dtype}; labels must be integers 0 .. K-1")
    outside = (labels < 0) | (labels >= n_classes)
    if ignore_label is not None:
        outside &= labels != ignore_label
    if ood_label is not None:
        outside &= labels != ood_label
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        kept = labels if ignore_label is None else labels[labels != ignore_label]
        if labels[row] == n_classes and kept.min() >= 1 and kept.max() == n_classes:
            hint = f"; the labels look 1-based (1 .. {n_classes}): subtract 1 from every label"
        else:
            hint = (" (pass ignore_label= for a void label, ood_label= for rows of no class)"
                    if labels[row] >= n_classes or labels[row] < 0 else "")
        raise SelcalError(f"{name}: row {row}: label {int(labels[row])} is outside 0 .. {n_classes - 1}{hint}")
    if ood_label is not None:
        labels = np.where(labels == ood_label, OOD_LABEL, labels)
    return labels


def array_dump(logits, labels, names: tuple[str, str], *, ignore_label: int | None = None, groups=None,
               ids=None, input_kind: str | None = None, ood_label: int | None = None) -> Dump:
    """A :class:`~selcal.io.Dump` of arrays from Python, as a reader would give it (its path
    is the logits' argument name, so that every later message names the argument).
    ``input_kind`` and ``ood_label`` as for files (:func:`selcal.io.open_dump`)."""
    from types import SimpleNamespace

    from .probs import INPUT_KINDS
    from .probs import as_logits as input_logits

    if input_kind is not None and input_kind not in INPUT_KINDS:
        raise SelcalError(f"input_kind must be one of {', '.join(INPUT_KINDS)}, got {input_kind!r}")
    if ood_label is not None and ood_label == ignore_label:
        raise SelcalError(f"ood_label and ignore_label are both {ood_label}; give two values")
    logits_name, labels_name = names
    logits, binary = as_logits(logits, logits_name)
    labels = as_labels(labels, labels_name, logits.shape[0], logits.shape[1], logits_name, ignore_label, ood_label)
    kept = np.ones(labels.size, dtype=bool) if ignore_label is None else labels != ignore_label
    reading = SimpleNamespace(path=logits_name, input_kind=input_kind, detected_input=None, logits_col=None,
                              python=True)  # messages name input_kind=, not --input
    own = input_logits(reading, logits[:, 1:] if binary else logits, kept, 0)  # probabilities: their logarithms
    logits = expand_binary(own) if binary else own
    if ood_label is not None and groups is None:
        groups = np.where(labels == OOD_LABEL, OOD_GROUPS[1], OOD_GROUPS[0])
    if groups is not None:
        groups = to_numpy(groups, "groups")
        if groups.ndim != 1 or groups.size != labels.size:
            raise SelcalError(f"groups: has shape {groups.shape}; pass one group per row of {logits_name}")
    if ids is not None:  # names of the rows, as an id column (the most-confident-errors table)
        ids = to_numpy(ids, "ids")
        if ids.ndim != 1 or ids.size != labels.size:
            raise SelcalError(f"ids: has shape {ids.shape}; pass one id per row of {logits_name}")
        from ..pipeline.split import check_ids

        check_ids("ids", ids, column="")  # named as the argument, not as a file's column 'id'
    n_ignored = 0
    if ignore_label is not None:
        keep = labels != ignore_label
        n_ignored = int(labels.size - keep.sum())
        if n_ignored == labels.size:
            raise SelcalError(f"{labels_name}: every row has the ignored label {ignore_label}; nothing to evaluate")
        if n_ignored:
            logits, labels = logits[keep], labels[keep]
            groups = None if groups is None else groups[keep]
            ids = None if ids is None else ids[keep]
    return Dump(path=logits_name, logits=logits, labels=labels, groups=groups, n_ignored=n_ignored, binary=binary,
                ids=ids, input=reading.detected_input or "logits")
