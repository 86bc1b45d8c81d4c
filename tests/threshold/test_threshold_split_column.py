"""A split column is honoured by ``selcal threshold`` (issue 33, "Threshold edges"): one that holds only
'val' rows was ignored and the threshold certified on a silent 20% random hold-out. A column with no
evaluation rows, or no calibration rows, is now refused in one line (no output written); one with both
is followed whatever --val-fraction and --seed say."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_data, one_error_line, strict_json

import selcal
from selcal.errors import SelcalError


@pytest.mark.parametrize("fmt", ["parquet", "npz"])
def test_a_split_column_of_only_val_rows_is_refused_not_replaced_by_a_hold_out(cli, dumps, tmp_path, fmt):
    logits, labels = make_data(n=300, accuracy=0.9)
    write = dumps.parquet if fmt == "parquet" else dumps.npz
    path = write(f"val_only.{fmt}", logits, labels, split=["val"] * 300)
    out = tmp_path / "answer.json"
    one_error_line(cli("threshold", path, "--risk", "0.3", "--json", out), str(path),
             "column 'split' holds only 'val' rows (300 'val')", "no evaluation rows", "--val FILE")
    assert not out.exists()


def test_a_split_column_without_val_rows_is_refused_unless_a_val_file_calibrates(cli, dumps):
    logits, labels = make_data(n=600, accuracy=0.9)
    test = dumps.parquet("test_only.parquet", logits[:300], labels[:300], split=["test"] * 300)
    one_error_line(cli("threshold", test, "--risk", "0.3"), "column 'split' has no 'val' rows (it holds 300 'test')",
             "no calibration rows", "give --val FILE")
    val = dumps.parquet("val.parquet", logits[300:], labels[300:])
    answer = strict_json(cli("threshold", test, "--val", val, "--risk", "0.3", "--json", "-").stdout)
    assert answer["calibration"]["n"] == 300 and answer["evaluation"]["n"] == 300


def test_the_streamed_path_refuses_the_same(dumps):
    logits, labels = make_data(n=300, accuracy=0.9)
    path = dumps.parquet("val_only.parquet", logits, labels, split=["val"] * 300)
    for stream in (False, True):
        with pytest.raises(SelcalError, match="holds only 'val' rows"):
            selcal.threshold(str(path), risk=0.3, stream=stream)


def test_a_file_of_confidences_refuses_the_same(cli, dumps):
    import pyarrow as pa

    n = 200
    rng = np.random.default_rng(0)
    path = dumps.table("conf.parquet", {"confidence": pa.array(rng.random(n)), "pred": pa.array(np.zeros(n, np.int64)),
                                        "label": pa.array(np.zeros(n, np.int64)), "split": pa.array(["val"] * n)})
    one_error_line(cli("threshold", path, "--risk", "0.3"), "holds only 'val' rows (200 'val')")


def test_a_split_column_decides_the_rows_whatever_the_hold_out_options(cli, dumps):
    logits, labels = make_data(n=600, accuracy=0.9)
    both = dumps.parquet("both.parquet", logits, labels, split=["val"] * 250 + ["test"] * 350)
    answers = [strict_json(cli("threshold", both, "--risk", "0.3", "--json", "-", *more).stdout)
               for more in ([], ["--val-fraction", "0.5", "--seed", "7"])]
    assert answers[0] == answers[1]
    assert answers[0]["calibration"]["n"] == 250 and answers[0]["evaluation"]["n"] == 350
    # the same file with only its 'val' rows: no hold-out of them, whatever --val-fraction says
    val_only = dumps.parquet("val_only.parquet", logits[:250], labels[:250], split=["val"] * 250)
    one_error_line(cli("threshold", val_only, "--risk", "0.3", "--val-fraction", "0.5"), "holds only 'val' rows")
