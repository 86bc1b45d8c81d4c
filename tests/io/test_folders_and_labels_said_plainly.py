"""Hostile round five, inputs: a folder of Parquet parts with a dump of another kind beside them (its CSV
was silently not read: the folder was one model of the Parquet rows), a NaN label in Parquet (said as
'label nan is not a whole number'), and a JSON Lines row of another K (named 'line 31' and 'row 0' in
one sentence)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from selcal.errors import SelcalError
from selcal.io import read_dump

RNG = np.random.default_rng(5)
LOGITS = RNG.normal(size=(50, 3))
LABELS = RNG.integers(0, 3, 50)


def refused(path) -> str:
    with pytest.raises(SelcalError) as error:
        read_dump(str(path))
    return str(error.value)


def parquet(path, labels=LABELS):
    pq.write_table(pa.table({"label": labels, "logits": list(LOGITS)}), path)
    return path


@pytest.mark.parametrize("other", ["b.csv", "b.npz", "b.jsonl.gz", "b.npy"])
def test_a_folder_of_parts_with_a_dump_of_another_kind_is_refused_naming_it(tmp_path, other):
    folder = tmp_path / "mixed"
    folder.mkdir()
    parquet(folder / "part-0.parquet")
    parquet(folder / "part-1.parquet")
    if other.endswith(".npz"):
        np.savez(folder / other, logits=LOGITS, labels=LABELS)
    elif other.endswith(".npy"):
        np.save(folder / other, LOGITS)
    else:
        (folder / other).write_bytes(b"label,logit_0\n0,1\n")
    assert refused(folder) == (f"{folder}: holds Parquet parts and {other}, a dump of another kind that is not one "
                               "of them; move it out, or give each file on its own")


def test_a_folder_of_parts_with_notes_and_metadata_beside_them_is_read(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    parquet(folder / "part-0.parquet")
    parquet(folder / "part-1.parquet")
    (folder / "README.md").write_text("notes")
    (folder / "dataset_info.json").write_text("{}")
    (folder / "_SUCCESS").write_text("")
    assert read_dump(str(folder)).labels.size == 100


def test_a_nan_label_in_parquet_is_said_as_a_missing_label(tmp_path):
    labels = LABELS.astype(float)
    labels[7] = np.nan
    path = parquet(tmp_path / "m.parquet", labels)
    assert refused(path) == f"{path}: column 'label', row 7: has no label (NaN); every row needs one"
    labels[7] = 1.5
    path = parquet(tmp_path / "m.parquet", labels)
    assert refused(path) == (f"{path}: column 'label', row 7: label 1.5 is not a whole number; labels must be "
                             "integers 0 .. K-1")


def test_a_json_lines_row_of_another_k_is_named_by_its_line_only(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join('{"label": %d, "logits": [1, 2]}\n' % (i % 2) for i in range(30))
                    + '{"label": 1, "logits": [1, 2, 3]}\n')
    assert refused(path) == (f"{path}: column 'logits', line 31: has 3 logits but the first row has 2; every row "
                             "needs the same K")


def test_a_json_array_given_as_a_dump_is_called_a_json_array_not_csv(tmp_path):
    path = tmp_path / "numbers.json"
    path.write_text("[1, 2, 3]\n")
    assert refused(path) == (f"{path}: is a JSON array; this command reads logit dumps (Parquet, CSV, JSON Lines, "
                             ".npz, .npy, .pt)")


@pytest.mark.parametrize("name, row, value, hint", [
    ("m.tsv", "0\t1,5\t2,0", "1,5", "a decimal comma? write numbers with a decimal point (1.5)"),
    ("m.csv", '0,"1,5",2.0', '"1,5"', "a decimal comma? write numbers with a decimal point (1.5)"),
    ("m.csv", "0, 1.5 ,2.0", " 1.5 ", "remove the spaces around the number"),
    ("m.csv", "0,abc,2.0", "abc", "store numbers only"),
])
def test_a_value_that_is_not_a_number_gets_a_hint_for_its_kind(tmp_path, name, row, value, hint):
    path = tmp_path / name
    lines = ["label,logit_0,logit_1"] + [f"{i % 2},1.5,2.0" for i in range(5)] + [row]
    path.write_text("\n".join(lines).replace(",", "\t") if name.endswith(".tsv") else "\n".join(lines) + "\n")
    if name.endswith(".tsv"):
        path.write_text("\n".join(line.replace(",", "\t") for line in lines[:-1]) + "\n" + row + "\n")
    assert refused(path) == (f"{path}: column 'logit_0', line 7: holds {value!r}, which is not a number; {hint}")
