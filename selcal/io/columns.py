"""Which column holds what: the one place of the naming rules every reader follows.

A reader describes its columns (Parquet columns, ``.npz`` arrays, the keys of a ``.pt``
dict) as a mapping name -> :class:`Kind` and asks :func:`find_label`, :func:`find_logits`
and :func:`canonical_splits`; the rules below are CONVENTIONS.md, "Inputs and layouts".

- Labels: ``--label-col`` if given, else the one column among :data:`LABEL_NAMES` (a prediction,
  for a file of confidences: the one among :data:`PREDICTION_NAMES`).
- Logits, first match wins: ``--logits-col`` (or ``--logits-cols``: per-class columns of any name, as a
  list, a prefix or a regular expression, :func:`named_columns`); a column ``logits``; numbered columns of one
  naming family (:data:`WIDE_PREFIXES`: ``logit_0``, ``logits_0``, ``logit0``, ``logits0``,
  ``class_0``, ``prob_0``, ``probs_0``, then plain ``0`` as ``pandas.DataFrame(logits)`` writes
  them; the ``prob`` families hold probabilities, :data:`PROBABILITY_PREFIXES`); the only list
  column; a single float column among :data:`BINARY_NAMES` (one binary logit per row).
- Split and ids: the optional columns :data:`SPLIT_NAME` and :data:`ID_NAME`. Split values are
  case-insensitive, with the aliases of :data:`SPLIT_ALIASES`; ``train`` rows are left out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..errors import SelcalError, naming_flags, said

# The spellings of a label column and of a prediction column (a file of confidences), one list each
# (CONVENTIONS.md, "Column names"); a file with two of one list names the one to use with --label-col.
LABEL_NAMES = ("label", "labels", "target", "targets", "y", "true_label", "true_labels", "y_true", "gt",
               "ground_truth")
PREDICTION_NAMES = ("pred", "prediction", "preds", "predictions", "predicted", "pred_label", "pred_labels",
                    "predicted_label", "y_pred")
SPLIT_NAME = "split"  # optional: which rows fit (val) and which are evaluated (test)
ID_NAME = "id"  # optional: unique within a file
BINARY_NAMES = ("logits", "logit", "score")
WIDE_PREFIXES = ("logit_", "logits_", "logit", "logits", "class_", "class", "prob_", "probs_", "prob", "probs",
                 "")  # "" (plain 0 .. K-1) only when no other
PROBABILITY_PREFIXES = ("prob_", "probs_", "prob", "probs")  # numbered columns that hold probabilities
WIDE_COLUMN = re.compile(r"^(logits?_?|class_?|probs?_?)?(\d+)$")
SPLIT_ALIASES = {"val": "val", "validation": "val", "valid": "val", "dev": "val", "test": "test", "train": "train"}
ACCEPTED_SPLITS = ", ".join(repr(v) for v in SPLIT_ALIASES)


class Kind(Enum):
    """What one column holds, as far as column discovery cares."""

    LIST = "list"  # K floats per row (a list column, or a 2-D array)
    FLOAT = "float"  # one float per row
    INTEGER = "integer"
    BOOL = "bool"
    STRING = "string"
    OTHER = "other"


FLOAT_LOGITS = ("logits must be float16, float32 or float64: cast integer logits to float (quantised ones "
                "multiplied by their scale first: raw integer codes would give a wrong softmax)")
NUMBER_LOGITS = "logits must be numbers (float16, float32 or float64): store the model's logits as floats"
BOOL_LOGITS = ("holds true/false values; logits must be numbers (float16, float32 or float64): save the model's logits, "
               "not a yes/no per class (booleans are not read as 0 and 1)")


def not_float(kind: Kind) -> str:
    """Why a logits column of ``kind`` (not :attr:`Kind.FLOAT`) is refused, said as its kind calls for."""
    if kind is Kind.BOOL:
        return BOOL_LOGITS
    return "is not a float column; " + (FLOAT_LOGITS if kind is Kind.INTEGER else NUMBER_LOGITS)


def _fail(path, column, message: str) -> SelcalError:
    return SelcalError(f"{path}: column '{column}': {message}" if column else f"{path}: {message}")


def listed(names) -> str:
    """Column names for a message, comma-separated; a name with white space around it (or none but
    white space) shown as Python shows it, quoted, so its spaces can be seen.

    >>> listed(["label", " logit_0", "logit_1 "])
    "label, ' logit_0', 'logit_1 '"
    """
    return ", ".join(repr(name) if name != name.strip() or not name else name for name in map(str, names))


def _padded(names, wanted) -> list[str]:
    """The names of ``names`` with white space around them whose bare form ``wanted(bare)`` accepts."""
    return [name for name in map(str, names) if name != name.strip() and name.strip() and wanted(name.strip())]


def padded_name(path, name: str) -> SelcalError:
    """The refusal of a column whose name is one selcal looks for with white space around it (``' logit_1'``, a
    CSV header typed with spaces after the commas): names are matched exactly, so it would be ignored.

    >>> str(padded_name("m.csv", " logit_1"))
    "m.csv: column ' logit_1': its name begins with a space, so it is not the column 'logit_1' (names are matched exactly); rename it 'logit_1' (in a CSV header: no space after the commas)"
    """
    bare = name.strip()
    lead, trail = name[:len(name) - len(name.lstrip())], name[len(name.rstrip()):]
    space = "a space" if lead + trail == " " else "spaces" if set(lead + trail) == {" "} else "white space"
    where = f"begins with {space}" if not trail else f"ends with {space}" if not lead else f"has {space} around it"
    side = "after" if not trail else "before" if not lead else "around"
    base = os.path.basename(str(path)).lower()
    kind = ("CSV", "commas") if ".csv" in base else ("TSV", "tabs") if ".tsv" in base or ".tab" in base else None
    hint = f" (in a {kind[0]} header: no space {side} the {kind[1]})" if kind else ""
    return _fail(path, name, f"its name {where}, so it is not the column {bare!r} (names are matched exactly); "
                             f"rename it {bare!r}{hint}")


def optional_column(path, names, name: str) -> str | None:
    """``name`` when a column has it exactly (``split``, ``id``), None when none has; refused when a column
    has it with white space around (:func:`padded_name`): its rows would be read as if it were not there.

    >>> optional_column("m.parquet", ["label", "logits", "split"], "split"), optional_column("m.parquet", ["label"], "id")
    ('split', None)
    """
    if name in names:
        return name
    padded = _padded(names, lambda bare: bare == name)
    if padded:
        raise padded_name(path, padded[0])
    return None


def find_label(path: str, kinds: dict, requested: str | None = None) -> str:
    """The label column: ``requested`` (``--label-col``) or the one of :data:`LABEL_NAMES`.

    >>> find_label("m.parquet", {"logits": Kind.LIST, "target": Kind.INTEGER})
    'target'
    """
    names = list(kinds)
    if requested is not None:
        if requested not in kinds:
            raise _fail(path, None, f"no label column '{requested}' (columns: {listed(names)}); "
                                    f"name it with {said('label_col')}")
        return requested
    padded = _padded(names, lambda bare: bare in LABEL_NAMES)  # never found by its exact name: never silently passed by
    if padded:
        raise padded_name(path, padded[0])
    found = [name for name in LABEL_NAMES if name in kinds]
    if len(found) == 1:
        return found[0]
    if not found:
        raise _fail(path, None, f"no label column (looked for {', '.join(LABEL_NAMES)}; columns: {listed(names)}); "
                                f"name it with {said('label_col')}")
    raise _fail(path, None, f"several label columns ({', '.join(found)}); name the one to use with {said('label_col')}")


@dataclass(frozen=True)
class LogitsLayout:
    """Where the logits are: one list column (``columns`` = [name]) or one column per class
    (``wide``; K = 1 for a single binary logit)."""

    name: str  # the column named in messages ("logit_*" for wide columns)
    columns: tuple[str, ...]
    wide: bool


def _wide_family(path: str, kinds: dict) -> LogitsLayout | None:
    families: dict[str, dict[int, list[str]]] = {}
    for name in kinds:
        match = WIDE_COLUMN.match(name)
        if match:
            families.setdefault(match.group(1) or "", {}).setdefault(int(match.group(2)), []).append(name)
    if not families:
        return None
    named = [p for p in WIDE_PREFIXES if p and p in families]
    if len(named) > 1:
        sets = ", ".join(f"{p}0 .." for p in named)
        raise _fail(path, None, f"logits in several sets of numbered columns ({sets}); keep one set")
    prefix = named[0] if named else ""
    indexed = families[prefix]
    for k, names in sorted(indexed.items()):
        if len(names) > 1:
            raise _fail(path, names[1], f"names class {k}, as '{names[0]}' does; give every class one column")
    n_classes = len(indexed)
    missing = [k for k in range(n_classes) if k not in indexed]
    if missing:
        raise _fail(path, None, f"has {n_classes} {prefix}k columns but no '{prefix}{missing[0]}'; "
                                "number them 0 .. K-1")
    columns = tuple(indexed[k][0] for k in range(n_classes))
    for name in columns:
        if kinds[name] is not Kind.FLOAT:
            raise _fail(path, name, not_float(kinds[name]))
    return LogitsLayout(f"{prefix}*", columns, True)


def holds_probabilities(logits_col: str | None) -> bool:
    """Whether the logits were found in numbered columns named as probabilities (``prob_*``).

    >>> holds_probabilities("prob_*"), holds_probabilities("logit_*")
    (True, False)
    """
    return bool(logits_col) and logits_col.endswith("*") and logits_col[:-1] in PROBABILITY_PREFIXES


def find_logits(path: str, kinds: dict, requested: str | None = None, *, exclude=()) -> LogitsLayout:
    """Where the logits are (see the module docstring for the order of the rules).

    ``exclude``: columns that hold something else (the labels).

    >>> find_logits("m.parquet", {"0": Kind.FLOAT, "1": Kind.FLOAT, "label": Kind.INTEGER}).columns
    ('0', '1')
    """
    kinds = {name: kind for name, kind in kinds.items() if name not in exclude}
    names = list(kinds)
    if requested is not None:
        if requested in kinds:
            return _one_column(path, requested, kinds[requested])
        columns = named_columns(path, requested, names)
        if columns is None:
            raise _fail(path, None, f"no logits column '{requested}' (columns: {listed(names)})")
        for name in columns:
            if kinds[name] is not Kind.FLOAT:
                raise _fail(path, name, not_float(kinds[name]))
        return LogitsLayout(requested, columns, True)
    # A name of the rules with white space around it is never matched: refused when the rules did not use it
    # (label,logit_0, logit_1 read logit_0 alone, one binary logit), and named when they found nothing.
    padded = _padded(names, _logits_name)
    try:
        layout = _found_logits(path, kinds)
    except SelcalError:
        if padded:
            raise padded_name(path, padded[0]) from None
        raise
    ignored = [name for name in padded if name not in layout.columns and (layout.name == "*" or not name.strip().isdigit())]
    if ignored:
        raise padded_name(path, ignored[0])
    return layout


def _logits_name(bare: str) -> bool:
    """Whether the rules of :func:`find_logits` look for a column of this name."""
    return bare == "logits" or bare in BINARY_NAMES or WIDE_COLUMN.match(bare) is not None


def _found_logits(path: str, kinds: dict) -> LogitsLayout:
    """The logits by the rules, none requested."""
    names = list(kinds)
    if "logits" in kinds:
        return _one_column(path, "logits", kinds["logits"])
    wide = _wide_family(path, kinds)
    if wide is not None:
        return wide
    lists = [name for name in names if kinds[name] is Kind.LIST]
    if len(lists) == 1:
        return LogitsLayout(lists[0], (lists[0],), False)
    if len(lists) > 1:
        raise _fail(path, None, f"several list columns ({listed(lists)}); name the logits with {said('logits_col')}")
    single = [name for name in BINARY_NAMES if kinds.get(name) is Kind.FLOAT]
    if single:
        return LogitsLayout(single[0], (single[0],), True)
    flags = [name for name in BINARY_NAMES if kinds.get(name) is Kind.BOOL]  # a binary logit saved as a decision
    if flags:
        raise _fail(path, flags[0], BOOL_LOGITS)
    raise _fail(path, None, f"no logits found (columns: {listed(names)}); store them in a list column 'logits', "
                            "in columns logit_0 .. logit_{K-1} (or class_k, or probabilities prob_k), or one binary logit in a float column 'logit'")


def named_columns(path: str, spec: str, names) -> tuple[str, ...] | None:
    """The per-class columns that ``--logits-cols`` names, in class order: ``A,B,C`` (those columns, in
    that order), ``PREFIX*`` (the columns whose name starts with PREFIX) or ``/REGEX/`` (those the
    regular expression matches whole), the last two in the file's order. None: ``spec`` is one
    column's name (no comma, no ``*`` at its end, not between slashes).

    >>> named_columns("m.csv", "cat,dog", ["label", "dog", "cat"]), named_columns("m.csv", "p_*", ["p_a", "y", "p_b"])
    (('cat', 'dog'), ('p_a', 'p_b'))
    >>> named_columns("m.csv", "/(cat|dog)/", ["label", "dog", "cat"])
    ('dog', 'cat')
    """
    names = list(names)
    if len(spec) > 2 and spec.startswith("/") and spec.endswith("/"):
        try:
            pattern = re.compile(spec[1:-1])
        except re.error as exc:
            raise _fail(path, None, f"{_spec_said(spec)}: not a regular expression ({exc})") from None
        found, what = [n for n in names if pattern.fullmatch(n)], f"match {spec}"
    elif spec.endswith("*") and "," not in spec:
        found, what = [n for n in names if n.startswith(spec[:-1])], f"start with '{spec[:-1]}'"
    elif "," in spec:
        found = [name.strip() for name in spec.split(",") if name.strip()]
        missing = [name for name in found if name not in names]
        if missing:
            raise _fail(path, None, f"{_spec_said(spec)} names '{missing[0]}', which is not a column "
                                    f"(columns: {listed(names)})")
        if len(set(found)) < len(found):
            raise _fail(path, None, f"{_spec_said(spec)}: a column is named twice")
        what = ""
    else:
        return None
    if not found:
        raise _fail(path, None, f"{_spec_said(spec)}: no column names {what} (columns: {listed(names)})")
    return tuple(found)


def _spec_said(spec: str) -> str:
    """A spec of per-class columns as its caller gave it: ``logits_col='p_*'`` to Python, ``--logits-cols p_*`` on
    the command line (the plural spelling of ``--logits-col``, which names per-class columns in the docs)."""
    return f"--logits-cols {spec}" if naming_flags() else said("logits_col", spec)


def _one_column(path: str, name: str, kind: Kind) -> LogitsLayout:
    if kind is Kind.LIST:
        return LogitsLayout(name, (name,), False)
    if kind is Kind.FLOAT:  # one binary logit per row
        return LogitsLayout(name, (name,), True)
    return LogitsLayout(name, (), False)  # the reader names the type it found


def canonical_splits(values: np.ndarray) -> np.ndarray:
    """Each split value as ``val``, ``test`` or ``train`` (case-insensitive, with the aliases of
    :data:`SPLIT_ALIASES`); ``""`` for a value that is none of them.

    >>> canonical_splits(np.array(["Validation", "TEST", "dev", "holdout"])).tolist()
    ['val', 'test', 'val', '']
    """
    values = np.asarray(values, dtype=str)
    lowered = np.char.lower(values) if values.size else values
    out = np.full(values.shape, "", dtype="<U5")
    for alias, canonical in SPLIT_ALIASES.items():
        out[lowered == alias] = canonical
    return out


def unknown_split_message(value) -> str:
    return f"has the value {str(value)!r}; use one of {ACCEPTED_SPLITS} (any case; 'train' rows are left out)"
