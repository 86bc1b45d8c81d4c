"""``selcal.DumpWriter`` (a training loop's dump): what it writes is read back by ``selcal evaluate``
with no option, equal to the arrays given, through bounded memory, and never half-written."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import assert_same_numbers, make_data
from typer.testing import CliRunner

import selcal
from selcal.cli import app
from selcal.errors import SelcalError
from selcal.io import read_dump
from selcal.writers import training


def write(folder, split, logits, labels, batch=37, **kwargs):
    ids, groups = kwargs.pop("ids", None), kwargs.pop("groups", None)
    with selcal.DumpWriter(folder, split=split, **kwargs) as writer:
        for start in range(0, len(labels), batch):
            rows = slice(start, start + batch)
            writer.add(logits[rows], labels[rows], None if ids is None else ids[rows],
                       None if groups is None else groups[rows])
    return writer.path


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_what_it_writes_reads_back_equal_to_the_arrays_given(tmp_path, dtype):
    logits, labels = make_data(n=300, k=5, seed=41)
    logits = logits.astype(dtype)
    ids = np.array([f"img{i:04d}" for i in range(300)])
    groups = np.where(np.arange(300) % 4 == 0, "night", "day")
    write(tmp_path / "dump", "test", logits, labels, ids=ids, groups=groups, classes=[f"c{i}" for i in range(5)])
    part = tmp_path / "dump" / "test-00000.parquet"
    assert sorted(p.name for p in (tmp_path / "dump").iterdir()) == ["test-00000.parquet"]
    table = pq.read_table(part)
    assert table.column_names == ["id", "label", "logits", "group"]
    assert table.schema.field("logits").type.value_type.to_pandas_dtype() == dtype
    metadata = {k.decode(): v.decode() for k, v in table.schema.metadata.items() if k.startswith(b"selcal.")}
    assert json.loads(metadata["selcal.classes"]) == [f"c{i}" for i in range(5)]
    assert metadata["selcal.n_rows"] == "300" and metadata["selcal.split"] == "test"
    dump = read_dump(str(tmp_path / "dump"), group_col="group")
    assert np.array_equal(dump.logits, logits) and dump.logits.dtype == dtype
    assert np.array_equal(dump.labels, labels) and list(dump.ids) == list(ids) and list(dump.groups) == list(groups)


def test_selcal_evaluate_reads_val_and_test_with_no_option(tmp_path):
    logits, labels = make_data(n=600, k=4, seed=42)
    folder = tmp_path / "run"
    write(folder, "validation", logits[:200], labels[:200])  # "validation" is the split val
    write(folder, "test", logits[200:], labels[200:])
    result = selcal.evaluate(str(folder))
    model = result.models[0]
    assert (model.split, model.n_val, model.n_eval) == ("split-names", 200, 400)
    expected = selcal.evaluate_arrays(logits[200:], labels[200:], logits[:200], labels[:200])
    assert_same_numbers(model.to_dict(), expected.models[0].to_dict(), drop=("split",))
    out = CliRunner().invoke(app, ["evaluate", str(folder), "--json", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    assert json.loads((tmp_path / "r.json").read_text())["models"][0]["n_eval"] == 400


def test_memory_stays_bounded_by_a_row_group(tmp_path, monkeypatch):
    monkeypatch.setattr(training, "rows_per_group", lambda itemsize, k: 100)
    logits, labels = make_data(n=1000, k=3, seed=43)
    most = 0
    with selcal.DumpWriter(tmp_path / "d", split="val") as writer:
        for start in range(0, 1000, 30):
            writer.add(logits[start:start + 30], labels[start:start + 30])
            most = max(most, writer._file._pending_rows)
    assert most < 130  # never more than a row group and a batch held
    assert pq.ParquetFile(writer.path).metadata.num_row_groups >= 9
    assert np.array_equal(read_dump(str(tmp_path / "d")).logits, logits.astype(np.float64))


def test_an_interrupted_loop_leaves_no_part_and_a_new_epoch_replaces_the_old(tmp_path):
    logits, labels = make_data(n=100, k=3, seed=44)
    with pytest.raises(RuntimeError):
        with selcal.DumpWriter(tmp_path / "d", split="val") as writer:
            writer.add(logits, labels)
            raise RuntimeError("the loop died")
    assert list((tmp_path / "d").iterdir()) == []  # neither a part nor a .partial
    write(tmp_path / "d", "val", logits, labels, metadata={"epoch": 1})
    write(tmp_path / "d", "val", logits[:60], labels[:60], metadata={"epoch": 2})
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["val-00000.parquet"]
    assert pq.read_metadata(tmp_path / "d" / "val-00000.parquet").num_rows == 60
    with selcal.DumpWriter(tmp_path / "empty", split="test") as nothing:
        pass
    assert nothing.path.exists() is False


def test_shards_of_a_distributed_loop_are_one_dump(tmp_path):
    logits, labels = make_data(n=400, k=3, seed=45)
    for rank in range(2):
        for split, rows in (("val", slice(0, 100)), ("test", slice(100, 400))):
            part = np.arange(400)[rows][rank::2]
            write(tmp_path / "d", split, logits[part], labels[part], shard=rank)
    result = selcal.evaluate(str(tmp_path / "d"))
    assert (result.models[0].n_val, result.models[0].n_eval) == (100, 300)


@pytest.mark.parametrize("call, message", [
    (lambda w: w.add([[0.0, np.nan, 1.0]], [0]), r"val-00000.parquet, batch 1: logits row 0 holds NaN for class 1"),
    (lambda w: (w.add(np.zeros((2, 3)), [0, 1]), w.add(np.zeros((2, 4)), [0, 1])), "K = 4 columns, the dump has K = 3"),
    (lambda w: w.add(np.zeros((2, 3)), [0, 3]), "label 3 is outside 0 .. 2"),
    (lambda w: w.add(np.zeros((2, 3), dtype=int), [0, 1]), "pass float logits"),
    (lambda w: (w.add(np.zeros((2, 3), np.float32), [0, 1]), w.add(np.full((1, 3), 0.1), [0])),
     "float64 logits would change as float32"),
    (lambda w: (w.add(np.zeros((2, 3)), [0, 1], ids=["a", "b"]), w.add(np.zeros((1, 3)), [0])),
     "ids are given in some batches and not in others"),
    (lambda w: w.add(np.zeros((2, 3)), [0, 1], ids=["a"]), r"ids have shape \(1,\); pass one per row"),
])
def test_bad_batches_are_one_line_naming_the_part_and_batch(tmp_path, call, message):
    writer = selcal.DumpWriter(tmp_path / "d", split="val")
    with pytest.raises(SelcalError, match=message) as error:
        call(writer)
    assert "\n" not in str(error.value)
    writer.abort()


def test_bad_settings_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(SelcalError, match="split must be one of val, test, train"):
        selcal.DumpWriter(tmp_path / "d", split="holdout")
    with pytest.raises(SelcalError, match="dtype must be one of float16, float32, float64"):
        selcal.DumpWriter(tmp_path / "d", dtype="bfloat16")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SelcalError, match="is a file"):
        selcal.DumpWriter(tmp_path / "file")
    assert not (tmp_path / "d").exists()
