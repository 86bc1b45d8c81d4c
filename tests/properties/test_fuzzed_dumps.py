"""Fuzz ``selcal evaluate FILE --json -`` with random valid and invalid Parquet dumps ("never wrong silently").

The contract under test (CONVENTIONS.md, "Input" and "Units and output"; README, "Input"):

* a valid dump: exit status 0, one strict JSON document on stdout, every metric finite and
  within its bounds (fractions in [0, 1], NLL >= 0, Brier in [0, 2], T > 0), ``null`` only
  where the quantity is undefined for the data (AUROC and FPR@95 with no error or no correct
  prediction), the evaluation rows and the rule named as the conventions say, and the
  accuracy equal to the one computed here from the file;
* an invalid dump (NaN/inf logits, labels outside [0, K), null or fractional labels, ragged
  rows, missing or non-float logits, bad split values, empty file, no validation rows, a
  truncated or corrupted file): exit status 2, exactly one stderr line ``selcal: error: ...``
  naming the file (and, for a single row-level defect, its column and the offending row),
  nothing on stdout;
* never an uncaught exception;
* the same outcome and the same JSON bytes whether the file is read whole or streamed
  (the reader of files over the 64 MiB memory budget, forced here for every file).

Every example writes a new file (list, large_list, fixed_size_list or logit_k columns;
float16/32/64, integer or string values, nested lists; K = 1 .. 12, N = 0 .. 70; NaN, inf,
1e30, values that overflow float16; labels of any integer type, in and out of range, null,
float, negative, 2**64 - 1; optional split (string, large_string, dictionary), id, group
columns; sometimes --ignore-label, --scores msp,max_logit or a --val file) and runs the CLI
in-process (Typer's CliRunner). The oracle, in ``cases``, is written from the conventions,
not from selcal's code. Where the conventions leave the outcome open (``EITHER``), a clean
refusal and a correct result are both accepted, never a crash or a wrong number. A second
fuzz cuts and corrupts valid files. Problems the fuzz found are pinned down as plain tests
at the end of the module. ``SELCAL_FUZZ_EXAMPLES=5000`` runs a longer hunt.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import (
    assert_refused,  # noqa: E402  (exit 2, one 'selcal: error:' line, row named, stdout empty)
    check_bounds,
)
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from selcal.api import evaluate as evaluate_function  # noqa: E402

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

LAYOUTS = ["list", "large_list", "fixed_size_list", "wide"]
FLOATS = {"float16": (np.float16, pa.float16()), "float32": (np.float32, pa.float32()),
          "float64": (np.float64, pa.float64())}
LABEL_TYPES = {name: (np.dtype(name), pa.from_numpy_dtype(np.dtype(name)))
               for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}

# What can be wrong with a file (the oracle in `cases` decides which of these make it invalid).
LOGIT_DEFECTS = ["nan", "inf", "value_70000", "null_value", "null_row", "ragged", "empty_lists", "int_values",
                 "string_values", "nested", "string_column", "wide_gap", "no_logits"]
LABEL_DEFECTS = ["label_high", "label_negative", "label_null", "label_float_frac", "label_float_whole",
                 "label_nan", "label_string", "label_missing", "label_uint64_max"]
SPLIT_DEFECTS = ["split_bad", "split_null", "split_int"]
ID_DEFECTS = ["id_duplicate", "id_null"]
DEFECTS = LOGIT_DEFECTS + LABEL_DEFECTS + SPLIT_DEFECTS + ID_DEFECTS + ["huge_1e30", "duplicate_column"]

# Cases the conventions leave open: refusing them cleanly or evaluating them correctly are both right.
EITHER = {
    "int_values/wide": "integer logit_k columns ('K numeric columns' in CONVENTIONS.md, float in README)",
    "label_float_whole": "a float label column holding whole numbers",
    "id_duplicate": "duplicate ids (nothing in the conventions)",
    "id_null": "a null id (nothing in the conventions)",
    "split_one_kind": "a split column with only 'val' or only 'test' rows while pnorm/temp need a fit",
    "id_type": "an id column of list or struct values (the conventions do not type the id)",
}

_file_numbers = itertools.count()
EXAMPLES = int(os.environ.get("SELCAL_FUZZ_EXAMPLES", "150"))
IGNORE = 255  # the --ignore-label value of the examples that use it
VAL_ROWS = 40  # rows of the clean --val file of the examples that have one


@dataclass
class Case:
    """One fuzzed dump: its Arrow columns, the CLI arguments, and what the conventions expect."""

    n: int
    k: int
    layout: str
    dtype: str
    columns: dict = field(default_factory=dict)
    val_k: int | None = None  # K of a clean --val file, when the example has one
    val_seed: int = 0
    args: list = field(default_factory=list)
    invalid: list = field(default_factory=list)  # reasons the file must be refused
    either: list = field(default_factory=list)  # reasons the outcome is open
    where: tuple | None = None  # (column, row) a single row-level defect must be named by
    where_candidates: list = field(default_factory=list)  # (column, row) of every row-level defect
    duplicates: list = field(default_factory=list)  # columns written twice under the same name
    effective: np.ndarray | None = None  # the logits as float64, as the file holds them
    labels: np.ndarray | None = None  # int64 labels, as the file holds them
    kept: np.ndarray | None = None  # rows whose label is not the ignored one
    split: np.ndarray | None = None  # split values (when the column is valid)
    needs_validation: bool = True
    description: str = ""


def clean_columns(h, n: int, k: int, seed: int, layout: str = "list", dtype: str = "float32") -> dict:
    """The columns of a valid dump (conftest's make_data; K = 1 as one binary logit)."""
    logits, labels = h.make_data(n=n, k=max(k, 2), seed=seed)
    if k == 1:
        logits, labels = logits[:, 1:] - logits[:, :1], (logits[:, 1] > logits[:, 0]).astype(np.int64)
    np_float, pa_float = FLOATS[dtype]
    columns = {}
    if layout == "wide":
        for j in range(logits.shape[1]):
            columns[f"logit_{j}"] = pa.array(logits[:, j].astype(np_float), type=pa_float)
    else:
        columns["logits"] = h.logits_array(logits, layout, dtype)
    columns["label"] = pa.array(labels)
    return columns


def _first_true(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@st.composite
def cases(draw) -> Case:
    n = draw(st.one_of(st.integers(5, 70), st.integers(5, 70), st.sampled_from([0, 1, 2, 3, 4])))
    k = draw(st.sampled_from([1, 2, 3, 4, 7, 12]))
    layout = draw(st.sampled_from(LAYOUTS))
    dtype = draw(st.sampled_from(sorted(FLOATS)))
    magnitude = draw(st.sampled_from([1.0, 10.0, 1e4, 1e30, 1e38]))
    style = draw(st.sampled_from(["normal", "grid", "tied_rows", "constant_rows"]))
    accuracy = draw(st.sampled_from([0.0, 0.3, 0.8, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    defects = draw(st.one_of(st.just([]), st.just([]), st.lists(st.sampled_from(DEFECTS), min_size=1, max_size=2,
                                                                unique=True)))
    label_type = draw(st.sampled_from(sorted(LABEL_TYPES)))
    split_kind = draw(st.sampled_from([None, None, "mixed", "all_val", "all_test"]))
    id_kind = draw(st.sampled_from([None, None, "int", "str", "float", "list", "struct"]))
    split_type = draw(st.sampled_from(["string", "large_string", "dictionary"]))
    logits_name = draw(st.sampled_from(["logits", "logits", "emb"]))  # 'emb': the only list column
    group = draw(st.booleans())
    fast_scores = draw(st.booleans())  # --scores msp,max_logit: nothing to fit
    ignore = draw(st.sampled_from([False, False, False, True]))  # --ignore-label 255 on some rows
    val_kind = draw(st.sampled_from([None, None, None, "same_k", "other_k"]))  # a clean --val file
    rows = st.integers(0, max(n - 1, 0))

    case = Case(n=n, k=k, layout=layout, dtype=dtype, needs_validation=not fast_scores)
    case.description = (f"n={n} k={k} layout={layout} dtype={dtype} magnitude={magnitude:g} style={style} "
                        f"accuracy={accuracy} seed={seed} defects={defects} labels={label_type} split={split_kind} "
                        f"split_type={split_type} id={id_kind} logits_name={logits_name} group={group} "
                        f"fast={fast_scores} ignore={ignore} val={val_kind}")
    if fast_scores:
        case.args += ["--scores", "msp,max_logit"]
    if ignore:
        case.args += ["--ignore-label", str(IGNORE)]
        if LABEL_TYPES[label_type][0].itemsize == 1 and label_type != "uint8":
            label_type = "int16"
    rng = np.random.default_rng(seed)

    # ---- the layout, as some defects need it
    if "wide_gap" in defects:
        layout = "wide"
    elif {"ragged", "nested", "empty_lists"} & set(defects):
        layout = "list" if layout in ("wide", "fixed_size_list") else layout
    case.layout = layout
    column_name = logits_name if layout != "wide" else None

    # ---- logit values, stored in the file's dtype; null cells and rows
    values = rng.standard_normal((n, k)) * magnitude
    if style == "grid":
        values = np.round(values / magnitude * 4) / 4 * magnitude  # few distinct values: ties
    elif style == "tied_rows" and n:
        values[:] = values[:1]
    elif style == "constant_rows":
        values[:] = values[:, :1]
    np_float, pa_float = FLOATS[dtype]
    with np.errstate(over="ignore", invalid="ignore"):
        stored = values.astype(np_float)
    null_cells = np.zeros((n, k), dtype=bool)
    null_rows = np.zeros(n, dtype=bool)
    ragged_row = None
    for defect in defects:
        if n == 0:
            break
        r, j = draw(rows), draw(st.integers(0, k - 1))
        with np.errstate(over="ignore", invalid="ignore"):
            if defect == "nan":
                stored[r, j] = np.nan
            elif defect == "inf":
                stored[r, j] = draw(st.sampled_from([np.inf, -np.inf]))
            elif defect == "value_70000":  # overflows float16 (max 65504), fine in float32/64
                stored[r, j] = np_float(draw(st.sampled_from([7e4, -7e4])))
            elif defect == "huge_1e30":  # finite in float32/64, inf in float16
                stored[r, j] = np_float(draw(st.sampled_from([1e30, -1e30])))
            elif defect == "null_value":
                null_cells[r, j] = True
            elif defect == "null_row":
                null_rows[r] = True
            elif defect == "ragged" and n >= 2:
                ragged_row = r
    if "ragged" in defects and ragged_row is not None:
        null_cells[:] = False  # keep the ragged example about row lengths only
    effective = stored.astype(np.float64)
    cells_null = null_cells | null_rows[:, None]
    int_values = "int_values" in defects
    if int_values:
        with np.errstate(invalid="ignore", over="ignore"):
            ints = np.clip(np.nan_to_num(np.round(effective), posinf=2**31 - 1, neginf=-(2**31)),
                           -(2**31), 2**31 - 1).astype(np.int32)
        effective = ints.astype(np.float64)

    # What is wrong with the logits, structurally, and in which rows.
    structural = [d for d in ("no_logits", "string_column", "nested", "string_values", "empty_lists", "wide_gap")
                  if d in defects]
    if structural:
        case.invalid.append(f"logits: {structural[0]}")
    elif int_values and layout != "wide":
        case.invalid.append("integer values in the logits list")
    else:
        if int_values:
            case.either.append(EITHER["int_values/wide"])
        # A null row and a null value inside a row are told apart (test_null_logit_value_before_a_null_row pins
        # down which row must be named when both occur).
        for nulls, reason in ((null_cells & ~null_rows[:, None], "null logit value"),
                              (null_rows[:, None] & cells_null, "null logit row")):
            if nulls.any():
                r = _first_true(nulls.any(axis=1))
                case.invalid.append(reason)
                case.where_candidates.append((f"logit_{_first_true(nulls[r])}" if layout == "wide" else column_name, r))
        finite = np.isfinite(np.where(cells_null, 0.0, effective))
        if not finite.all():
            r = _first_true(~finite.all(axis=1))
            case.invalid.append("non-finite logit")
            case.where_candidates.append((f"logit_{_first_true(~finite[r])}" if layout == "wide" else column_name, r))
        if ragged_row is not None:
            case.invalid.append("ragged rows")  # row 0 of another length: either row may be called the offender
            case.where_candidates.append((column_name, None if ragged_row == 0 else ragged_row))

    # ---- labels: about `accuracy` of them agree with the argmax of the stored logits
    n_classes = max(k, 2)
    if k == 1:
        pred = (effective[:, 0] > 0).astype(np.int64)
    else:
        pred = np.argmax(effective, axis=1) if n else np.zeros(0, dtype=np.int64)
    labels = np.where(rng.random(n) < accuracy, pred, (pred + rng.integers(1, n_classes, size=n)) % n_classes)
    labels = labels.astype(np.int64)
    label_defects = [d for d in ("label_high", "label_negative", "label_null", "label_float_frac", "label_nan",
                                 "label_uint64_max") if d in defects]
    label_row = draw(rows) if n and label_defects else None
    if label_row is not None:
        for defect in label_defects:
            case.invalid.append(defect)
            case.where_candidates.append(("label", label_row))
    if "label_high" in defects and label_row is not None:
        labels[label_row] = n_classes + draw(st.integers(0, 5))
    if "label_negative" in defects and label_row is not None:
        labels[label_row] = -draw(st.integers(1, 5))
        if label_type.startswith("u"):
            label_type = "int64"
    if "label_string" in defects:
        case.invalid.append("string labels")
    if "label_missing" in defects:
        case.invalid.append("no label column")

    # ---- --ignore-label: some rows (none with a defect) get the ignored label and are dropped
    problem_rows = {r for _, r in case.where_candidates if r is not None} | set(np.flatnonzero(null_rows))
    problem_rows |= {0} if ragged_row == 0 else set()
    kept = np.ones(n, dtype=bool)
    if ignore and n:
        chosen = draw(st.lists(rows, max_size=n, unique=True)) if n else []
        ignored = [r for r in chosen if r not in problem_rows and r != ragged_row]
        labels[ignored] = IGNORE
        kept[ignored] = False
        if ignored and not kept.any():
            case.invalid.append("every row has the ignored label")

    # ---- the label column
    np_label, pa_label = LABEL_TYPES[label_type]
    label_mask = None
    if "label_null" in defects and label_row is not None:
        label_mask = np.zeros(n, dtype=bool)
        label_mask[label_row] = True
    if "label_string" in defects:
        label_array = pa.array([str(v) for v in labels], type=pa.string())
    elif "label_uint64_max" in defects and label_row is not None:
        big = labels.astype(np.uint64)
        big[label_row] = np.iinfo(np.uint64).max
        label_array = pa.array(big, type=pa.uint64(), mask=label_mask)
    elif {"label_float_frac", "label_float_whole", "label_nan"} & set(defects):
        floats = labels.astype(np.float64)
        if "label_float_frac" in defects and label_row is not None:
            floats[label_row] += 0.5
        if "label_nan" in defects and label_row is not None:
            floats[label_row] = np.nan
        if "label_float_whole" in defects:
            case.either.append(EITHER["label_float_whole"])
        label_array = pa.array(floats, type=pa.float64(), mask=label_mask)
    else:
        label_array = pa.array(labels.astype(np_label), type=pa_label, mask=label_mask)

    # ---- the logit columns
    if "no_logits" in defects:
        case.columns["weight"] = pa.array(rng.standard_normal(n))  # a float 'score' would be one binary logit
    elif "string_column" in defects and layout != "wide":
        case.columns[column_name] = pa.array([json.dumps([float(v) for v in row]) for row in effective])
    elif "nested" in defects:
        case.columns[column_name] = pa.array([[[float(v)] for v in row] for row in np.nan_to_num(effective)],
                                             type=pa.list_(pa.list_(pa.float64())))
    elif "string_values" in defects or "string_column" in defects:
        text = [[str(float(v)) for v in row] for row in effective]
        if layout == "wide":
            for j in range(k):
                case.columns[f"logit_{j}"] = pa.array([row[j] for row in text], type=pa.string())
        else:
            case.columns[column_name] = pa.array(text, type=pa.list_(pa.string()))
    elif "empty_lists" in defects:
        offsets = pa.array(np.zeros(n + 1, dtype=np.int32))
        case.columns[column_name] = pa.ListArray.from_arrays(offsets, pa.array(np.zeros(0, np_float), type=pa_float))
    else:
        column_values, value_type = (ints, pa.int32()) if int_values else (stored, pa_float)
        if layout == "wide":
            skip = draw(st.integers(0, max(k - 2, 0))) if "wide_gap" in defects else None
            for j in range(k):
                if j != skip:
                    case.columns[f"logit_{j}"] = pa.array(column_values[:, j], type=value_type, mask=cells_null[:, j])
        else:
            mask = pa.array(null_rows) if null_rows.any() else None
            lengths = np.full(n, k)
            if ragged_row is not None:
                lengths[ragged_row] = draw(st.sampled_from([d for d in (k - 1, k + 1) if d >= 0]))
            def cut(row, length, pad):  # the row as `length` values: cut short, or its first value repeated
                return row[:length] if length <= len(row) else np.append(row, pad)

            pieces, piece_masks = [], []
            for i in range(n):
                pieces.append(cut(column_values[i], lengths[i], column_values[i, :1]))
                piece_masks.append(cut(null_cells[i], lengths[i], False))
            flat_values = np.concatenate(pieces) if n else np.zeros(0, column_values.dtype)
            flat_mask = np.concatenate(piece_masks) if n else np.zeros(0, dtype=bool)
            flat = pa.array(flat_values, type=value_type, mask=flat_mask)
            if layout == "fixed_size_list":
                case.columns[column_name] = pa.FixedSizeListArray.from_arrays(flat, k, mask=mask)
            else:
                offsets = np.concatenate([[0], np.cumsum(lengths)])
                kind, offset_type = ((pa.LargeListArray, pa.int64()) if layout == "large_list"
                                     else (pa.ListArray, pa.int32()))
                case.columns[column_name] = kind.from_arrays(pa.array(offsets, offset_type), flat, mask=mask)
    case.columns["truth" if "label_missing" in defects else "label"] = label_array

    # ---- optional split, id and group columns
    split = None
    if set(SPLIT_DEFECTS) & set(defects) and split_kind is None:
        split_kind = "mixed"
    if split_kind is not None:
        if split_kind == "mixed":
            split = np.where(rng.random(n) < 0.3, "val", "test").astype(object)
        else:
            split = np.full(n, "val" if split_kind == "all_val" else "test", dtype=object)
        kept_rows = st.sampled_from(list(np.flatnonzero(kept))) if kept.any() else None
        if "split_int" in defects:
            case.invalid.append("integer split column")
            case.columns["split"] = pa.array((split == "val").astype(np.int64))
            split = None
        else:
            mask = None
            if "split_bad" in defects and kept_rows is not None:
                r = draw(kept_rows)
                split[r] = draw(st.sampled_from(["", " val", "tset", "training", "vall"]))
                case.invalid.append("unknown split value")
                case.where_candidates.append(("split", r))
            if "split_null" in defects and kept_rows is not None:
                r = draw(kept_rows)
                mask = np.zeros(n, dtype=bool)
                mask[r] = True
                case.invalid.append("null split")
                case.where_candidates.append(("split", r))
            column = pa.array(list(split), type=pa.large_string() if split_type == "large_string" else pa.string(),
                              mask=mask)
            case.columns["split"] = column.dictionary_encode() if split_type == "dictionary" else column
            if mask is not None or "split_bad" in defects:
                split = None
    if id_kind is not None or set(ID_DEFECTS) & set(defects):
        ids = np.arange(n) * 7 + 3
        mask = None
        if "id_duplicate" in defects and n >= 2:
            a, b = draw(rows), draw(rows)
            if a != b:
                ids[b] = ids[a]
                case.either.append(EITHER["id_duplicate"])
        if "id_null" in defects and n:
            mask = np.zeros(n, dtype=bool)
            mask[draw(rows)] = True
            case.either.append(EITHER["id_null"])
        if id_kind == "str":
            case.columns["id"] = pa.array([f"img_{i:05d}" for i in ids], mask=mask)
        elif id_kind == "float":
            case.columns["id"] = pa.array(ids / 2.0, mask=mask)
        elif id_kind == "list":
            case.columns["id"] = pa.array([[int(i), 0] for i in ids], mask=mask)
            case.either.append(EITHER["id_type"])
        elif id_kind == "struct":
            case.columns["id"] = pa.array([{"image": int(i), "crop": 0} for i in ids], mask=mask)
            case.either.append(EITHER["id_type"])
        else:
            case.columns["id"] = pa.array(ids, mask=mask)
    if group:
        case.columns["source"] = pa.array(rng.choice(["a", "b"], size=n).tolist(), type=pa.string())
    if "duplicate_column" in defects:  # Arrow and Parquet allow two columns of one name: which one is meant?
        used = [name for name in case.columns if name in ("label", "split", "id") or name == column_name
                or name.startswith("logit_")]
        if used:
            case.duplicates.append(draw(st.sampled_from(used)))
            case.invalid.append(f"two columns named {case.duplicates[0]!r}")

    # ---- a --val file (always valid; of another K when val_kind == "other_k")
    if val_kind is not None:
        case.val_k = k if val_kind == "same_k" else (3 if k == 1 else k + 1)
        case.val_seed = seed % 1000
        if val_kind == "other_k":
            case.invalid.append(f"--val file has K = {case.val_k}, the TEST file K = {k}")

    # ---- what the conventions say about the file as a whole
    if n == 0:
        case.invalid.append("no rows")
    case.effective, case.labels, case.kept, case.split = effective, labels, kept, split
    kept_split = None if split is None else split[kept]
    if val_kind is not None:
        if kept_split is not None and not (kept_split == "test").any():
            case.either.append("a --val file and a split column without 'test' rows")
    elif kept_split is not None and (kept_split == "val").any() and (kept_split == "test").any():
        pass  # split-column
    elif case.needs_validation and kept_split is not None:
        case.either.append(EITHER["split_one_kind"])
    elif case.needs_validation:
        n_kept = int(kept.sum())
        n_val = math.floor(0.2 * n_kept + 0.5)
        if n_kept and not 1 <= n_val <= n_kept - 1:
            case.invalid.append(f"a hold-out of 0.2 x {n_kept} rows leaves no validation or no evaluation rows")
    if len(case.invalid) == 1 and len(case.where_candidates) == 1 and not case.either:
        case.where = case.where_candidates[0]
    return case


# ------------------------------------------------------------------ checking a result


def check_valid_result(model: dict, case: Case):
    """Bounds, nulls, and the numbers the file determines (K, rows, rule, accuracy, ignored rows)."""
    chosen = {"msp", "max_logit"} | ({"pnorm", "temp"} if case.needs_validation else set())
    # a score that means nothing on these logits (max_logit on detected log-probabilities) is left out, named
    left_out = set((model.get("not_available") or {}).get("scores", []))
    check_bounds(model, chosen - left_out)
    assert model["num_classes"] == max(case.k, 2), (model["num_classes"], case.k)
    accuracy = model["accuracy"]
    # Which rows were evaluated, and their accuracy, follow from the file alone.
    kept = case.kept
    n = int(kept.sum())
    split = None if case.split is None else case.split[kept]
    if case.val_k is not None:
        assert model["split"] == "val-file", model["split"]
        # The TEST file's 'test' rows (a split column of 'val' rows only is an open case: all rows evaluated).
        evaluated = split == "test" if split is not None and (split == "test").any() else np.ones(n, dtype=bool)
        assert (model["n_eval"], model["n_val"]) == (int(evaluated.sum()), VAL_ROWS)
    elif split is not None and (split == "val").any() and (split == "test").any():
        assert model["split"] == "split-column", model["split"]
        evaluated = split == "test"
        assert (model["n_eval"], model["n_val"]) == (int(evaluated.sum()), int((split == "val").sum()))
    elif not case.needs_validation:
        assert model["split"] == "none", model["split"]
        evaluated = np.ones(n, dtype=bool)
        assert (model["n_eval"], model["n_val"]) == (n, 0)
    else:
        assert model["split"] == "holdout", model["split"]
        n_val = math.floor(0.2 * n + 0.5)
        assert (model["n_eval"], model["n_val"]) == (n - n_val, n_val)
        evaluated = None
    if evaluated is not None:
        logits, labels = case.effective[kept][evaluated], case.labels[kept][evaluated]
        pred = (logits[:, 0] > 0).astype(np.int64) if case.k == 1 else np.argmax(logits, axis=1)
        hits = int(np.count_nonzero(pred == labels))
        assert accuracy == hits / labels.size, (accuracy, hits, labels.size)
    assert model.get("n_ignored", 0) == int((~kept).sum()), (model.get("n_ignored"), int((~kept).sum()))
    if case.k == 1:
        assert model.get("binary_logit") is True, model.get("binary_logit")


def run_cli(cli, path, *args):
    """``selcal evaluate PATH ARGS --json -`` in-process. An uncaught exception is raised again as it is,
    so that hypothesis reports every distinct crash on its own."""
    result = cli("evaluate", path, "--json", "-", *args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output
    return result


def check_outcome(result, path, *, invalid: bool, either: bool, where=None, case: Case | None = None, h=None):
    if invalid:
        column, row = where if where else (None, None)
        assert_refused(result, [str(path)] + ([column] if column else []), row)
        return "refused"
    if either and result.exit_code == 2:
        assert_refused(result, [str(path)])
        return "refused"
    assert result.exit_code == 0, f"a valid file was refused (exit {result.exit_code}): {result.stderr}"
    out = h.strict_json(result.stdout)
    assert out["schema"] == 1 and len(out["models"]) == 1
    for line in result.stderr.splitlines():
        assert line.startswith("selcal: warning:"), f"stray stderr line on success: {line!r}"
    if case is not None:
        check_valid_result(out["models"][0], case)
    return "valid"


# ------------------------------------------------------------------ the fuzz tests
@pytest.mark.slow
@settings(max_examples=EXAMPLES, **SETTINGS)
@given(case=cases())
def test_fuzz_valid_and_invalid_dumps(cli, dumps, h, case):
    number = next(_file_numbers)
    path = dumps.path(f"case{number:04d}.parquet")
    names = list(case.columns) + case.duplicates
    pq.write_table(pa.Table.from_arrays([case.columns[name] for name in names], names=names), path)
    args = list(case.args)
    if case.val_k is not None:
        args += ["--val", dumps.table(f"case{number:04d}_val.parquet", clean_columns(h, VAL_ROWS, case.val_k,
                                                                                     case.val_seed))]
    note(case.description)
    note(f"invalid: {case.invalid}; open: {case.either}; where: {case.where}")
    results = {}
    for reading in ("in-memory", "streamed"):
        with pytest.MonkeyPatch.context() as patch:
            if reading == "streamed":  # the path of files over the memory budget (64 MiB), for every file
                patch.setitem(evaluate_function.__kwdefaults__, "memory_budget", 0)
            result = results[reading] = run_cli(cli, path, *args)
        note(f"{reading}: exit {result.exit_code}; stderr: {result.stderr!r}")
        outcome = check_outcome(result, path, invalid=bool(case.invalid), either=bool(case.either),
                                where=case.where, case=case, h=h)
    event(f"{outcome}" + (" (open case)" if case.either and not case.invalid else "")
          + (" with column and row named" if case.where and case.where[1] is not None else ""))
    # Streamed or read whole, the same file gives the same outcome and the same bytes (README, "Definitions").
    # (Duplicate ids are left to test_streamed_path_checks_ids below, which pins that difference down.)
    memory, streamed = results["in-memory"], results["streamed"]
    if EITHER["id_duplicate"] not in case.either:
        assert memory.exit_code == streamed.exit_code, (memory.stderr, streamed.stderr)
        assert memory.stdout == streamed.stdout, "streamed and in-memory JSON differ"


@st.composite
def damaged_files(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 300))
    k = draw(st.sampled_from([1, 2, 4, 10]))
    layout = draw(st.sampled_from(LAYOUTS))
    dtype = draw(st.sampled_from(sorted(FLOATS)))
    compression = draw(st.sampled_from(["snappy", "none", "zstd", "gzip"]))
    row_group_size = draw(st.sampled_from([None, 16, 64]))
    with_split = draw(st.booleans())
    damage = draw(st.sampled_from(["truncate", "truncate", "flip", "flip", "garbage_with_magic"]))
    return dict(seed=seed, n=n, k=k, layout=layout, dtype=dtype, compression=compression,
                row_group_size=row_group_size, with_split=with_split, damage=damage,
                cut=draw(st.floats(0, 1, exclude_max=True)),
                flips=draw(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
                                    min_size=1, max_size=8)))


@pytest.mark.slow
@settings(max_examples=max(EXAMPLES * 4 // 5, 1), **SETTINGS)
@given(spec=damaged_files())
def test_fuzz_truncated_and_corrupted_parquet(cli, dumps, h, spec):
    """A cut file is always refused; a file with flipped bytes is refused or evaluated within bounds."""
    note(repr(spec))
    columns = clean_columns(h, spec["n"], spec["k"], spec["seed"] % 10_000, spec["layout"], spec["dtype"])
    if spec["with_split"]:
        columns["split"] = pa.array(np.where(np.arange(spec["n"]) % 3 == 0, "val", "test").tolist())
    path = dumps.path(f"damaged{next(_file_numbers):04d}.parquet")
    pq.write_table(pa.table(columns), path, compression=spec["compression"], row_group_size=spec["row_group_size"])
    content = bytearray(path.read_bytes())
    if spec["damage"] == "truncate":
        content = content[: int(spec["cut"] * len(content))]
    elif spec["damage"] == "flip":
        for where, xor in spec["flips"]:
            content[int(where * len(content))] ^= xor
    else:
        rng = np.random.default_rng(spec["seed"])
        content = b"PAR1" + rng.integers(0, 256, len(content) - 8, dtype=np.uint8).tobytes() + b"PAR1"
    path.write_bytes(bytes(content))
    result = run_cli(cli, path, "--scores", "msp,max_logit")
    note(f"exit {result.exit_code}; stderr: {result.stderr!r}")
    event(f"{spec['damage']}: exit {result.exit_code}")
    if spec["damage"] == "flip":
        outcome = check_outcome(result, path, invalid=False, either=True, h=h)
        if outcome == "valid":  # flipped bytes that Parquet cannot detect: the result must still be sane
            check_bounds(h.strict_json(result.stdout)["models"][0], {"msp", "max_logit"})
    else:
        check_outcome(result, path, invalid=True, either=False)


# ------------------------------------------------------------------ found by the fuzz
@pytest.mark.parametrize("decoy", ["list", "fixed_size_list"])
def test_wide_logits_beside_another_list_column_are_not_replaced_by_it(cli, dumps, h, decoy):
    """A file with logit_0 .. logit_{K-1} and one unrelated list column (e.g. embeddings).

    The conventions allow logits "in one list column ... or in K numeric columns named
    logit_0 .. logit_{K-1}". When a file has both, the explicitly named logit_k columns must
    be evaluated, or the file refused as ambiguous; evaluating the other list column as if
    it held the logits gives a complete, plausible and wrong result.
    """
    logits, labels = h.make_data(n=200, k=3, seed=5)
    rng = np.random.default_rng(6)
    columns = {f"logit_{j}": pa.array(logits[:, j]) for j in range(3)}
    embedding = rng.standard_normal((200, 8))
    columns["embedding"] = h.logits_array(embedding, decoy, "float64")
    columns["label"] = pa.array(labels)
    path = dumps.table("wide_and_embedding.parquet", columns)
    result = run_cli(cli, path, "--scores", "msp,max_logit")
    if result.exit_code == 2:
        assert_refused(result, [str(path)])
        return
    model = h.strict_json(result.stdout)["models"][0]
    reference = h.strict_json(run_cli(cli, dumps.parquet("wide_only.parquet", logits, labels, layout="wide",
                                                         dtype="float64"), "--scores", "msp,max_logit").stdout)
    assert model["num_classes"] == 3, (
        f"evaluated the 'embedding' column as the logits: K = {model['num_classes']}, "
        f"accuracy {model['accuracy']} (the logit_k columns give {reference['models'][0]['accuracy']})")
    h.assert_same_numbers(model, reference["models"][0])


@pytest.mark.parametrize("layout", ["list", "large_list", "fixed_size_list"])
def test_null_logit_value_before_a_null_row(cli, dumps, h, layout):
    """Row 2 holds a null logit, row 5 is null as a whole: the first offending row is 2.

    CONVENTIONS.md, "Input": invalid input is refused with one line naming the file, the
    column and the *first* offending row.
    """
    logits, labels = h.make_data(n=40, k=3, seed=8)
    values = pa.array(logits.ravel(), mask=np.isin(np.arange(logits.size), [2 * 3 + 1]))
    row_mask = pa.array(np.arange(40) == 5)
    if layout == "fixed_size_list":
        column = pa.FixedSizeListArray.from_arrays(values, 3, mask=row_mask)
    else:
        kind, offset_type = (pa.LargeListArray, pa.int64()) if layout == "large_list" else (pa.ListArray, pa.int32())
        column = kind.from_arrays(pa.array(np.arange(0, 121, 3), offset_type), values, mask=row_mask)
    path = dumps.table(f"nulls_{layout}.parquet", {"logits": column, "label": pa.array(labels)})
    assert_refused(run_cli(cli, path, "--scores", "msp,max_logit"), [str(path), "logits"], 2)


def test_streamed_path_checks_ids(cli, dumps, h):
    """Found by the fuzz: ids are checked when a file is read whole, not when it is streamed.

    Read whole, a duplicate id is refused. A file over the memory budget (64 MiB) is streamed;
    the README promises the same numbers either way, so it must be refused the same way.
    (Ids shared with a --val file are allowed: ids are unique within a file only; see
    tests/io/test_user_layouts.py.)
    """
    logits, labels = h.make_data(n=200, k=4, seed=11)
    ids = [f"img_{i:04d}" for i in range(200)]
    ids[150] = ids[20]
    path = dumps.parquet("test.parquet", logits, labels, extra={"id": pa.array(ids)})
    for reading in ("in-memory", "streamed"):
        with pytest.MonkeyPatch.context() as patch:
            if reading == "streamed":
                patch.setitem(evaluate_function.__kwdefaults__, "memory_budget", 0)
            result = run_cli(cli, path)
        assert result.exit_code == 2, (
            f"{reading}: exit {result.exit_code}, the ids were not checked; stderr: {result.stderr!r}")
        assert_refused(result, ["id", "img_0020"])


@pytest.mark.parametrize("column", ["label", "logits", "logit_1", "split", "id"])
def test_two_columns_of_one_name_are_refused_in_one_line(cli, dumps, h, column):
    """Found by the fuzz. Arrow and Parquet allow two columns with the same name; the file is
    ambiguous (which one holds the labels?) and must be refused as bad input: exit 2, one line
    naming the file, not a traceback."""
    logits, labels = h.make_data(n=60, k=3, seed=21)
    columns = ({f"logit_{j}": pa.array(logits[:, j]) for j in range(3)} if column == "logit_1"
               else {"logits": h.logits_array(logits)})
    columns.update(label=pa.array(labels), split=pa.array(split_every(60)), id=pa.array(np.arange(60)))
    names = list(columns) + [column]
    path = dumps.path(f"two_{column}.parquet")
    pq.write_table(pa.Table.from_arrays([columns[name] for name in names], names=names), path)
    result = cli("evaluate", path, "--json", "-")
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"uncaught {type(result.exception).__name__}: {result.exception}")
    assert_refused(result, [str(path)])


@pytest.mark.parametrize("kind", ["list", "struct"])
def test_an_id_column_of_list_or_struct_values_does_not_crash(cli, dumps, h, kind):
    """Found by the fuzz. The conventions do not type the optional ``id`` column; an id of
    list or struct values must be used or refused with one line, not end in a traceback."""
    logits, labels = h.make_data(n=60, k=3, seed=22)
    ids = [[i, 0] for i in range(60)] if kind == "list" else [{"image": i, "crop": 0} for i in range(60)]
    path = dumps.parquet(f"id_{kind}.parquet", logits, labels, extra={"id": pa.array(ids)})
    result = cli("evaluate", path, "--json", "-")
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"uncaught {type(result.exception).__name__}: {result.exception}")
    if result.exit_code == 2:
        assert_refused(result, [str(path), "id"])
    else:
        assert result.exit_code == 0, result.stderr
        check_bounds(h.strict_json(result.stdout)["models"][0], {"msp", "max_logit", "pnorm", "temp"})


def split_every(n: int, every: int = 3) -> list[str]:
    return ["val" if i % every == 0 else "test" for i in range(n)]
