"""pandas and polars objects in the forms users hold them, given to the Python API: a pandas column of
arrays (the way a logits column is stored) is stacked as a polars list column is; a LazyFrame is
collected; nullable pandas dtypes read NA as NaN (named with its row); a frame given to
``selcal.evaluate`` (which takes paths) is refused pointing to ``evaluate_arrays``. Every refusal is
one SelcalError naming the argument, never a traceback."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import selcal
from selcal.errors import SelcalError

pd = pytest.importorskip("pandas")

RNG = np.random.default_rng(3)
LOGITS = RNG.normal(0, 2, (60, 4))
LABELS = RNG.integers(0, 4, 60)


def aurc(logits, labels=LABELS) -> float:
    return selcal.evaluate_arrays(logits, labels, scores="msp").scores["msp"]["aurc"]


def refused(call) -> str:
    with pytest.raises(SelcalError) as error:
        call()
    assert "\n" not in str(error.value)
    return str(error.value)


@pytest.mark.parametrize("column, same", [
    (pd.Series(list(LOGITS)), LOGITS),
    (pd.Series(list(LOGITS.astype(np.float32))), LOGITS.astype(np.float32)),
    (pd.Series([list(row) for row in LOGITS]), LOGITS),
    (pd.DataFrame({"logits": list(LOGITS)}), LOGITS),
    (pl.Series([list(row) for row in LOGITS]), LOGITS),
    (pl.DataFrame({"logits": [list(row) for row in LOGITS]}), LOGITS),
    (pl.DataFrame(LOGITS).lazy(), LOGITS),
], ids=["pandas arrays", "pandas float32 arrays", "pandas lists", "pandas frame of arrays", "polars list",
        "polars frame of lists", "polars lazy frame"])
def test_a_column_of_rows_or_a_lazy_frame_gives_the_numbers_of_the_array(column, same):
    assert aurc(column) == aurc(same)


def test_the_metric_functions_read_a_pandas_column_of_probability_rows():
    probs = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True)
    assert selcal.metrics.ece(LABELS, pd.Series(list(probs))) == selcal.metrics.ece(LABELS, probs)


def test_a_lazy_frame_of_labels_is_collected():
    assert selcal.evaluate_arrays(LOGITS, pl.DataFrame({"y": LABELS}).lazy(), scores="msp").scores["msp"]["aurc"] \
        == aurc(LOGITS)


def test_a_lazy_frame_whose_query_fails_is_one_line():
    frame = pl.DataFrame(LOGITS).lazy().select(pl.col("missing"))
    text = refused(lambda: aurc(frame))
    assert text.startswith("logits: the polars LazyFrame cannot be collected (") and text.endswith("; pass a DataFrame")


@pytest.mark.parametrize("column, message", [
    (pd.Series([np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0])] * 30),
     "logits: row 1 has 3 values where row 0 has 2; pass the same K values on every row"),
    (pl.Series([[1.0, 2.0], [1.0, 2.0, 3.0]] * 30),
     "logits: row 1 has 3 values where row 0 has 2; pass the same K values on every row"),
    (pl.Series([[1.0, 2.0], None] * 30), "logits: row 1 is null (None); pass one list of K values per row"),
    (pl.Series([None, [1.0, 2.0]] * 30), "logits: row 0 is null (None); pass one list of K values per row"),
    (pd.Series([np.array([1.0, 2.0]), 3.0] * 30),
     "logits: row 1 holds a float, not a row of values; pass one list of K values per row"),
    (pd.Series([np.array([1.0, np.nan])] * 60), "logits: row 0 holds NaN for class 1; logits must be finite"),
    (pd.DataFrame(LOGITS, dtype="Float64").mask(lambda d: d > 3), None),
])
def test_a_bad_row_of_a_column_is_named_with_the_checks_of_an_array(column, message):
    if message is None:  # pandas' nullable Float64: NA is a NaN logit, named with its row
        row, k = map(int, np.argwhere(LOGITS > 3)[0])
        message = f"logits: row {row} holds NaN for class {k}; logits must be finite"
    labels = LABELS if isinstance(column, pd.DataFrame) else LABELS % 2
    assert refused(lambda: aurc(column, labels)) == message


def test_nullable_pandas_labels_read_na_as_a_missing_label():
    labels = pd.Series(list(LABELS[:-1]) + [None], dtype="Int64")
    assert refused(lambda: aurc(LOGITS, labels)) == "labels: row 59: has no label (NaN or null); labels must be " \
                                                    "integers 0 .. K-1"
    assert aurc(LOGITS, pd.Series(LABELS, dtype="Int64")) == aurc(LOGITS)


@pytest.mark.parametrize("value, what", [
    (pl.DataFrame(LOGITS), "polars.DataFrame"),
    (pl.DataFrame(LOGITS).lazy(), "polars.LazyFrame"),
    (pd.DataFrame(LOGITS), "pandas.DataFrame"),
    (LOGITS, "numpy.ndarray"),
    (3, "int"),
])
def test_a_frame_or_array_given_to_evaluate_is_refused_pointing_to_evaluate_arrays(value, what):
    assert refused(lambda: selcal.evaluate(value, scores="msp")) == (
        f"paths: got {what}, not a path; pass the path of a dump (or a list of paths), or arrays in memory to "
        "selcal.evaluate_arrays(logits, labels)")


def test_a_bytes_path_is_read_as_the_path(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("label,logit_0,logit_1\n" + "".join(f"{i % 2},{i % 3}.5,-1\n" for i in range(30)))
    assert selcal.evaluate(bytes(path), scores="msp").models[0].name == "m"


def test_duplicate_ids_are_named_as_the_ids_argument():
    ids = [f"r{i}" for i in range(59)] + ["r3"]
    assert refused(lambda: selcal.evaluate_arrays(LOGITS, LABELS, scores="msp", ids=ids)) == (
        "ids: row 59: id 'r3' also at row 3; every row needs its own id")


@pytest.mark.parametrize("logits, where", [
    (LOGITS > 0, "logits: holds"),
    ((LOGITS > 0).tolist(), "logits: holds"),
    (pl.DataFrame({"a": LOGITS[:, 0], "b": LOGITS[:, 1] > 0}), "logits: column 'b' holds"),  # polars: 1.0 and 0.0
    (pd.DataFrame({"a": LOGITS[:, 0], "b": pd.array(LOGITS[:, 1] > 0, dtype="boolean")}), "logits: column 'b' holds"),
    (pd.Series(pd.array(LOGITS[:, 0] > 0, dtype="boolean")), "logits: holds"),
    (pl.DataFrame({"a": LOGITS[:, 0], "b": LOGITS[:, 1] > 0}).lazy(), "logits: column 'b' holds"),
], ids=["numpy", "list", "polars-mixed", "pandas-nullable", "pandas-series", "polars-lazy"])
def test_boolean_logits_are_refused_not_read_as_0_and_1(logits, where):
    assert refused(lambda: aurc(logits)).startswith(f"{where} True/False values; logits must be numbers")


def test_the_metric_functions_refuse_boolean_predictions():
    one_hot = np.eye(4, dtype=bool)[LABELS]  # hard decisions: as probabilities they would give ECE 0
    assert refused(lambda: selcal.metrics.ece(LABELS, one_hot)).startswith("y_pred: holds True/False values")


# --------------------------------------------------------------------------- integer logits: what a file's would be
WHOLE = np.round(LOGITS).astype(np.int64)
INT_WORDS = "logits must be floats: pass {cast} (quantised codes multiplied by their scale first"


@pytest.mark.parametrize("logits, where, cast", [
    (WHOLE, "logits: holds integers (int64)", "logits.astype(np.float32)"),
    (WHOLE.astype(np.int8), "logits: holds integers (int8)", "logits.astype(np.float32)"),
    (WHOLE[:, 0].astype(np.uint8), "logits: holds integers (uint8)", "logits.astype(np.float32)"),
    (list(WHOLE), "logits: holds integers (int64)", "np.asarray(logits, dtype=np.float32)"),
    (pd.DataFrame(WHOLE), "logits: column '0' holds integers (int64)", "logits.astype('float32')"),
    (pd.DataFrame({"a": LOGITS[:, 0], "b": WHOLE[:, 1]}), "logits: column 'b' holds integers (int64)",
     "logits.astype('float32')"),  # pandas: the frame's array is float64
    (pd.DataFrame({"a": LOGITS[:, 0], "b": pd.array(WHOLE[:, 1], dtype="Int64")}),
     "logits: column 'b' holds integers (Int64)", "logits.astype('float32')"),
    (pd.Series(list(WHOLE)), "logits: holds integers (int64)", "np.stack(logits).astype(np.float32)"),
    (pl.DataFrame({"a": LOGITS[:, 0], "b": WHOLE[:, 1]}), "logits: column 'b' holds integers (Int64)",
     "logits.cast(pl.Float32)"),  # polars: the frame's array is float64
    (pl.DataFrame({"a": LOGITS[:, 0], "b": WHOLE[:, 1]}).lazy(), "logits: column 'b' holds integers (Int64)",
     "logits.cast(pl.Float32)"),
    (pl.Series(WHOLE.tolist()), "logits: holds integers (List(Int64))", "logits.cast(pl.List(pl.Float32))"),
], ids=["numpy", "int8", "uint8-binary", "list-of-arrays", "pandas", "pandas-mixed", "pandas-nullable",
        "pandas-arrays", "polars-mixed", "polars-lazy", "polars-list"])
def test_integer_logits_are_refused_saying_how_to_cast_them(logits, where, cast):
    # int8 codes of a quantised model read as logits give a wrong softmax; a Parquet or .npy file of them is
    # refused (was: cast to float64 here, silently, and a frame mixing them with floats even before selcal saw it)
    assert refused(lambda: aurc(logits)) == f"{where}; " + INT_WORDS.format(cast=cast) + \
        ": raw integer codes would give a wrong softmax)"


def test_the_metric_functions_refuse_integer_predictions_naming_y_pred():
    assert refused(lambda: selcal.metrics.ece(LABELS, WHOLE)).startswith(
        "y_pred: holds integers (int64); " + INT_WORDS.format(cast="y_pred.astype(np.float32)"))
    assert refused(lambda: selcal.evaluate_arrays(LOGITS, LABELS, WHOLE, LABELS, scores="msp,temp")).startswith(
        "val_logits: holds integers (int64); " + INT_WORDS.format(cast="val_logits.astype(np.float32)"))


@pytest.mark.parametrize("as_python", [
    lambda whole: whole.tolist(),
    lambda whole: tuple(map(tuple, whole.tolist())),
    lambda whole: pd.Series(whole.tolist()),  # pandas.read_json(lines=True) of a JSON Lines file
    lambda whole: [[v + 0.5 if i == 0 and k == 0 else v for k, v in enumerate(row)] for i, row in enumerate(whole.tolist())],
], ids=["list", "tuple", "pandas-lists", "mixed"])
def test_python_integers_are_the_numbers_they_are_as_in_a_json_lines_file(tmp_path, as_python):
    # no dtype says whether 2 is an integer: as in a JSON Lines file, where [1, 2] is read as float64
    given = as_python(WHOLE)
    floats = np.array(given.tolist() if hasattr(given, "tolist") else given, dtype=np.float64)
    assert aurc(given) == aurc(floats)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"label": int(y), "logits": list(row)}) + "\n"
                            for y, row in zip(LABELS, given.tolist() if hasattr(given, "tolist") else given)))
    from_file = selcal.evaluate(path, scores="msp").scores["msp"]["aurc"]
    assert from_file == aurc(given)


@pytest.mark.parametrize("logits, where", [
    ([[1.5, True]] + LOGITS[1:, :2].tolist(), "logits: row 0 holds True/False for class 1"),
    (LOGITS[:, :2].tolist()[:7] + [[True, 2]] + LOGITS[8:, :2].tolist(), "logits: row 7 holds True/False for class 0"),
    ([1.5, 0.5, False] + LOGITS[3:, 0].tolist(), "logits: row 2 holds True/False"),
    (pd.Series([[1.5, True]] + LOGITS[1:, :2].tolist()), "logits: row 0 holds True/False for class 1"),
], ids=["list", "list-of-ints", "binary", "pandas-lists"])
def test_a_boolean_among_numbers_in_a_list_is_refused_as_in_a_json_lines_file(logits, where):
    # numpy reads [1.5, True] as [1.5, 1.0]: the boolean was a logit of 1
    assert refused(lambda: aurc(logits, LABELS % 2)) == (
        f"{where} among numbers; logits must be numbers: pass the model's logit for each class (booleans are not "
        "read as 1 and 0)")
