"""A column name given twice is refused naming it (CSV, TSV, JSON Lines, Parquet): polars renamed the
second CSV column (``label_duplicated_0``) and read the first, and a JSON Lines key given twice kept the
first value where a JSON reader keeps the last; either way a number was read from a column the user may
not have meant, or the file was refused as having no label column."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from selcal.errors import SelcalError
from selcal.io import read_dump


def refused(path) -> str:
    with pytest.raises(SelcalError) as error:
        read_dump(path)
    return str(error.value)


@pytest.mark.parametrize("header, rows, column", [
    ("label,logit_0,logit_1,label", ["0,1,2,1", "1,2,1,0"], "label"),
    ("label,logit_0,logit_0", ["0,1,2", "1,2,1"], "logit_0"),
    ('label,"logit_1",logit_0,logit_1', ["0,1,2,3", "1,2,1,3"], "logit_1"),
    ("a,b,a", ["0,1,2"], "a"),
])
@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_text_header_naming_a_column_twice_is_refused_naming_it(tmp_path, header, rows, column, suffix):
    separator = "\t" if suffix == ".tsv" else ","
    path = tmp_path / f"m{suffix}"
    path.write_text("\n".join([header] + rows).replace(",", separator) + "\n")
    assert refused(path) == (f"{path}: column '{column}', line 1: appears more than once in the header; give every "
                             "column its own name")


@pytest.mark.parametrize("line, column", [
    ('{"label": 0, "logits": [1, 2], "label": 1}', "label"),
    ('{"label": 0, "logit_0": 1, "logit_1": 2, "logit_0": 5}', "logit_0"),
])
def test_a_json_lines_key_given_twice_is_refused_naming_it(tmp_path, line, column):
    path = tmp_path / "m.jsonl"
    path.write_text(line + "\n" + line + "\n")
    assert refused(path) == (f"{path}: column '{column}', line 1: appears more than once in the line's object; give "
                             "every column its own name")


def test_distinct_names_that_polars_would_give_a_duplicate_are_read(tmp_path):
    path = tmp_path / "m.csv"  # a real column named as polars renames a duplicate: no clash, read as written
    path.write_text("label,logit_0,logit_1,label_duplicated_0\n0,1,2,7\n1,2,1,7\n")
    assert read_dump(path).labels.tolist() == [0, 1]


def test_a_parquet_file_naming_a_column_twice_is_refused_naming_it(tmp_path):
    path = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([0, 1]), pa.array([[1.0, 2.0]] * 2), pa.array([1, 0])],
                                        names=["label", "logits", "label"]), path)
    assert refused(path) == f"{path}: column 'label': appears more than once in the file; give every column its own name"
