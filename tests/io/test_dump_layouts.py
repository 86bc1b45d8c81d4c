"""Input layouts (CONVENTIONS.md, "Input") and the atomic writer of selcal.io.

Every layout of the conventions must give the very same numbers: the tests compare
the complete result dicts of ``selcal.evaluate(...).to_dict()`` (exact equality of
every float), leaving out only the keys that name the file.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa
import pytest

import selcal
from selcal.errors import SelcalError
from selcal.io import read_dump
from selcal.writers.output import atomic_write

LIST_LAYOUTS = ["list", "large_list", "fixed_size_list"]
DTYPES = ["float16", "float32", "float64"]


def model_of(path, **kwargs) -> dict:
    result = selcal.evaluate(str(path), **kwargs).to_dict()
    assert len(result["models"]) == 1
    return result["models"][0]


@pytest.fixture
def reference(dumps, data):
    """The result of the plainest layout: float64 list column, no split column."""
    logits, labels = data
    return model_of(dumps.parquet("ref/model.parquet", logits, labels, layout="list", dtype="float64"))


# ---------------------------------------------------------------- same numbers
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LIST_LAYOUTS)
def test_list_layouts_and_dtypes_give_the_same_numbers(dumps, data, reference, h, layout, dtype):
    logits, labels = data
    path = dumps.parquet(f"{layout}_{dtype}.parquet", logits, labels, layout=layout, dtype=dtype)
    model = model_of(path)
    assert model["split"] == "holdout"
    h.assert_same_numbers(model, reference)


@pytest.mark.parametrize("dtype", DTYPES)
def test_wide_logit_columns_give_the_same_numbers(dumps, data, reference, h, dtype):
    logits, labels = data
    path = dumps.parquet(f"wide_{dtype}.parquet", logits, labels, layout="wide", dtype=dtype)
    h.assert_same_numbers(model_of(path), reference)


def test_wide_columns_are_ordered_by_number_not_by_name_or_position(dumps, h):
    """logit_10 comes after logit_9 whatever the column order in the file."""
    logits, labels = h.make_data(n=300, k=12, seed=5)
    listed = model_of(dumps.parquet("list12.parquet", logits, labels))
    scrambled = [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9][::-1]
    wide = model_of(dumps.parquet("wide12.parquet", logits, labels, layout="wide", wide_order=scrambled))
    assert wide["num_classes"] == 12
    h.assert_same_numbers(wide, listed)


@pytest.mark.parametrize("dtype", DTYPES)
def test_npz_gives_the_same_numbers(dumps, data, reference, h, dtype):
    logits, labels = data
    path = dumps.npz(f"model_{dtype}.npz", logits, labels, dtype=dtype)
    h.assert_same_numbers(model_of(path), reference)


def test_several_row_groups_give_the_same_numbers(dumps, data, reference, h):
    logits, labels = data
    path = dumps.parquet("chunked.parquet", logits, labels, row_group_size=37)
    h.assert_same_numbers(model_of(path), reference)


def test_extra_columns_change_nothing(dumps, data, reference, h):
    logits, labels = data
    extra = {  # an 'id' column is not extra: it is the rows' identity, which picks the hold-out (test_common_ground)
        "source": pa.array(["a", "b"] * (labels.size // 2)),
        "confidence": pa.array(np.zeros(labels.size)),
    }
    path = dumps.parquet("extra.parquet", logits, labels, extra=extra)
    h.assert_same_numbers(model_of(path), reference)


# ---------------------------------------------------------------- split column
@pytest.fixture
def split(data):
    """A fixed val/test assignment: every third row is validation."""
    _, labels = data
    return np.where(np.arange(labels.size) % 3 == 0, "val", "test")


@pytest.fixture
def split_reference(dumps, data, split):
    logits, labels = data
    return model_of(dumps.parquet("split_ref.parquet", logits, labels, dtype="float64", split=split))


def test_split_column_decides_the_rows(split_reference, split):
    assert split_reference["split"] == "split-column"
    assert split_reference["n_val"] == int(np.sum(split == "val"))
    assert split_reference["n_eval"] == int(np.sum(split == "test"))


@pytest.mark.parametrize("layout", LIST_LAYOUTS + ["wide"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_split_column_in_every_layout_gives_the_same_numbers(dumps, data, split, split_reference, h, layout, dtype):
    logits, labels = data
    path = dumps.parquet(f"split_{layout}_{dtype}.parquet", logits, labels, layout=layout, dtype=dtype, split=split)
    h.assert_same_numbers(model_of(path), split_reference)


def test_split_array_in_npz_gives_the_same_numbers(dumps, data, split, split_reference, h):
    logits, labels = data
    h.assert_same_numbers(model_of(dumps.npz("split.npz", logits, labels, split=split)), split_reference)


@pytest.mark.parametrize("kind", ["large_string", "dictionary"])
def test_split_column_string_types(dumps, data, split, split_reference, h, kind):
    logits, labels = data
    column = pa.array(list(split), type=pa.large_string()) if kind == "large_string" else \
        pa.array(list(split)).dictionary_encode()
    path = dumps.table(f"split_{kind}.parquet", {"logits": h.logits_array(logits, "list", "float64"),
                                                 "label": pa.array(labels), "split": column})
    h.assert_same_numbers(model_of(path), split_reference)


def test_split_column_results_differ_from_holdout(split_reference, reference):
    """Guard for the comparisons above: the split really changes the numbers."""
    assert split_reference["n_val"] != reference["n_val"]


# ---------------------------------------------------------------- label column, ignore label
def test_label_col_names_the_label_column(dumps, data, reference, h):
    logits, labels = data
    decoy = (labels + 1) % logits.shape[1]  # a 'label' column with other values must not be read
    path = dumps.parquet("target.parquet", logits, labels, label_col="target", extra={"label": pa.array(decoy)})
    h.assert_same_numbers(model_of(path, label_col="target"), reference)
    with pytest.raises(SelcalError, match=r"several label columns \(label, target\); name the one to use with label_col$"):
        model_of(path)  # two candidates: ambiguous, never a silent pick


def test_label_col_in_npz(dumps, data, reference, h):
    logits, labels = data
    path = dumps.path("target.npz")
    np.savez(path, logits=logits.astype(np.float32), target=labels)
    h.assert_same_numbers(model_of(path, label_col="target"), reference)


@pytest.fixture
def with_void_rows(data):
    """The data set with 7 rows of label 255 inserted; some of their logits are NaN or huge."""
    logits, labels = data
    positions = [0, 3, 50, 51, 200, 390, 399]
    void_logits = np.full((len(positions), logits.shape[1]), 1.5)
    void_logits[1, 2] = np.nan
    void_logits[4, 0] = np.inf
    all_logits = np.insert(logits, positions, void_logits, axis=0)
    all_labels = np.insert(labels, positions, 255)
    assert all_labels.size == labels.size + 7
    return all_logits, all_labels


@pytest.mark.parametrize("layout", ["list", "wide"])
def test_ignore_label_drops_and_counts_rows(dumps, with_void_rows, reference, h, layout):
    logits, labels = with_void_rows
    path = dumps.parquet(f"void_{layout}.parquet", logits, labels, layout=layout, dtype="float32")
    model = model_of(path, ignore_label=255)
    h.assert_same_numbers(model, reference, drop=("n_ignored", "warnings"))
    assert model["n_ignored"] == 7
    assert any("7" in w and "ignored" in w for w in model["warnings"]), model["warnings"]


def test_ignore_label_in_npz(dumps, with_void_rows, reference, h):
    logits, labels = with_void_rows
    model = model_of(dumps.npz("void.npz", logits, labels), ignore_label=255)
    h.assert_same_numbers(model, reference, drop=("n_ignored", "warnings"))
    assert model["n_ignored"] == 7


def test_ignore_label_with_split_column(dumps, data, split, split_reference, h):
    logits, labels = data
    positions = [1, 2, 100]
    all_logits = np.insert(logits, positions, 0.5, axis=0)
    all_labels = np.insert(labels, positions, 255)
    all_split = np.insert(split, positions, ["val", "test", "test"])
    path = dumps.parquet("void_split.parquet", all_logits, all_labels, split=all_split)
    model = model_of(path, ignore_label=255)
    h.assert_same_numbers(model, split_reference, drop=("n_ignored", "warnings"))
    assert model["n_ignored"] == 3


# ---------------------------------------------------------------- one binary logit
@pytest.fixture
def binary():
    rng = np.random.default_rng(3)
    v = np.round(rng.normal(0, 2, size=300) * 8) / 8
    labels = np.where(rng.random(300) < 0.8, (v > 0).astype(np.int64), (v <= 0).astype(np.int64))
    return v, labels


@pytest.fixture
def binary_reference(dumps, binary):
    v, labels = binary
    explicit = np.stack([np.zeros_like(v), v], axis=1)
    return model_of(dumps.parquet("binary2.parquet", explicit, labels, dtype="float64"))


def test_explicit_two_column_binary_reference(binary_reference):
    assert binary_reference["num_classes"] == 2


@pytest.mark.parametrize("layout", LIST_LAYOUTS + ["wide"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_binary_logit_is_logits_zero_v(dumps, binary, binary_reference, h, layout, dtype):
    v, labels = binary
    path = dumps.parquet(f"binary1_{layout}_{dtype}.parquet", v[:, None], labels, layout=layout, dtype=dtype)
    h.assert_same_numbers(model_of(path), binary_reference, drop=("binary_logit",))


@pytest.mark.parametrize("shape", ["N", "N x 1"])
def test_single_binary_logit_in_npz(dumps, binary, binary_reference, h, shape):
    v, labels = binary
    logits = v if shape == "N" else v[:, None]
    path = dumps.npz(f"binary_{shape.replace(' ', '')}.npz", logits, labels)
    h.assert_same_numbers(model_of(path), binary_reference, drop=("binary_logit",))


# ---------------------------------------------------------------- several files, --val per file
def test_several_test_files_give_one_result_each(dumps, h):
    a_logits, a_labels = h.make_data(n=300, k=4, seed=11)
    b_logits, b_labels = h.make_data(n=250, k=7, seed=12)
    a = dumps.parquet("a/resnet.parquet", a_logits, a_labels)
    b = dumps.npz("b/vgg.npz", b_logits, b_labels)
    both = selcal.evaluate([str(a), str(b)]).to_dict()["models"]
    assert [m["name"] for m in both] == ["resnet", "vgg"]
    assert [m["path"] for m in both] == [str(a), str(b)]
    assert both[0] == model_of(a)
    assert both[1] == model_of(b)


def test_val_file_per_test_file(dumps, h):
    a_logits, a_labels = h.make_data(n=300, k=4, seed=21)
    av_logits, av_labels = h.make_data(n=200, k=4, seed=22)
    b_logits, b_labels = h.make_data(n=300, k=5, seed=23)
    bv_logits, bv_labels = h.make_data(n=150, k=5, seed=24)
    a, av = dumps.parquet("a.parquet", a_logits, a_labels), dumps.parquet("a_val.parquet", av_logits, av_labels)
    b, bv = dumps.npz("b.npz", b_logits, b_labels), dumps.npz("b_val.npz", bv_logits, bv_labels)
    both = selcal.evaluate([str(a), str(b)], val=[str(av), str(bv)]).to_dict()["models"]
    assert [m["split"] for m in both] == ["val-file", "val-file"]
    assert [(m["n_eval"], m["n_val"]) for m in both] == [(300, 200), (300, 150)]
    assert both[0] == model_of(a, val=str(av))
    assert both[1] == model_of(b, val=str(bv))


# ---------------------------------------------------------------- read_dump itself
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LIST_LAYOUTS + ["wide"])
def test_read_dump_returns_the_values_unchanged(dumps, data, layout, dtype):
    logits, labels = data
    dump = read_dump(dumps.parquet(f"r_{layout}_{dtype}.parquet", logits, labels, layout=layout, dtype=dtype))
    assert dump.logits.shape == logits.shape
    assert np.array_equal(np.asarray(dump.logits, dtype=np.float64), logits)
    assert np.array_equal(dump.labels, labels) and dump.labels.dtype == np.int64
    assert dump.n_ignored == 0 and not dump.binary


def test_read_dump_binary_and_ignored(dumps, binary):
    v, labels = binary
    labels = labels.copy()
    labels[[4, 9]] = 255
    dump = read_dump(dumps.parquet("b.parquet", v[:, None], labels), ignore_label=255)
    assert dump.binary and dump.num_classes == 2 and dump.n_ignored == 2 and len(dump) == v.size - 2
    keep = labels != 255
    assert np.array_equal(np.asarray(dump.logits, dtype=np.float64), np.stack([np.zeros(keep.sum()), v[keep]], 1))


# ---------------------------------------------------------------- atomic_write
def test_atomic_write_writes_the_whole_file_and_no_temp(tmp_path):
    target = tmp_path / "result.json"
    with atomic_write(target) as out:
        out.write("x" * 100_000)
    assert target.read_text() == "x" * 100_000
    assert os.listdir(tmp_path) == ["result.json"]


def test_atomic_write_failure_leaves_nothing(tmp_path):
    target = tmp_path / "result.json"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as out:
            out.write("{\"half\": ")
            raise RuntimeError("killed midway")
    assert os.listdir(tmp_path) == []


def test_atomic_write_failure_keeps_the_previous_file(tmp_path):
    target = tmp_path / "result.json"
    target.write_text("old complete content\n")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as out:
            out.write("new partial")
            raise RuntimeError("killed midway")
    assert target.read_text() == "old complete content\n"
    assert os.listdir(tmp_path) == ["result.json"]


def test_atomic_write_missing_folder(tmp_path):
    with pytest.raises(SelcalError, match="does not exist"):
        with atomic_write(tmp_path / "nope" / "result.json") as out:
            out.write("x")
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- streamed reading
# selcal.evaluate streams a TEST file by row batches when its logits exceed a memory
# budget (64 MiB by default, so the CLI streams only big files); the numbers must be the
# same bit for bit, in every layout.
def _scenario(name, dumps, h):
    logits, labels = h.make_data()
    split = np.where(np.arange(labels.size) % 3 == 0, "val", "test")
    v = logits[:, 0] - logits[:, 1]
    y2 = (labels % 2).astype(np.int64)
    if name == "list float16":
        return dumps.parquet("s.parquet", logits, labels, dtype="float16"), {}
    if name == "fixed_size_list float32 + split":
        return dumps.parquet("s.parquet", logits, labels, layout="fixed_size_list", split=split), {}
    if name == "large_list float64 + val file":
        val = dumps.parquet("v.parquet", *h.make_data(n=150, k=4, seed=8), layout="large_list", dtype="float64")
        return dumps.parquet("s.parquet", logits, labels, layout="large_list", dtype="float64"), {"val": str(val)}
    if name == "wide float64":
        return dumps.parquet("s.parquet", logits, labels, layout="wide", dtype="float64"), {}
    if name == "npz":
        return dumps.npz("s.npz", logits, labels), {}
    if name == "binary":
        return dumps.parquet("s.parquet", v[:, None], y2), {}
    if name == "binary + binary val file":
        val = dumps.parquet("v.parquet", v[:100, None], y2[:100])
        return dumps.parquet("s.parquet", v[100:, None], y2[100:]), {"val": str(val)}
    if name == "binary + two-column val file":
        val = dumps.parquet("v.parquet", np.stack([np.zeros(100), v[:100]], 1), y2[:100])
        return dumps.parquet("s.parquet", v[100:, None], y2[100:]), {"val": str(val)}
    if name == "ignore label + split":
        lab = labels.copy()
        lab[[0, 7, 8, 300]] = 255
        return dumps.parquet("s.parquet", logits, lab, split=split), {"ignore_label": 255}
    if name == "split column + val file":
        val = dumps.parquet("v.parquet", *h.make_data(n=150, k=4, seed=8))
        return dumps.parquet("s.parquet", logits, labels, split=split), {"val": str(val)}
    if name == "several batches":
        big_logits, big_labels = h.make_data(n=70_000, k=3, seed=6)
        big_split = np.where(np.arange(70_000) % 4 == 0, "val", "test")
        return dumps.parquet("s.parquet", big_logits, big_labels, split=big_split, row_group_size=10_000), {}
    raise ValueError(name)


STREAM_SCENARIOS = ["list float16", "fixed_size_list float32 + split", "large_list float64 + val file",
                    "wide float64", "npz", "binary", "binary + binary val file", "binary + two-column val file",
                    "ignore label + split", "split column + val file", "several batches"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STREAM_SCENARIOS)
def test_streamed_reading_gives_the_same_numbers(dumps, h, name):
    path, kwargs = _scenario(name, dumps, h)
    whole = selcal.evaluate(str(path), stream=False, **kwargs).to_dict()
    streamed = selcal.evaluate(str(path), stream=True, **kwargs).to_dict()
    assert streamed == whole


@pytest.mark.parametrize("layout", ["list", "wide"])
def test_streamed_reading_of_an_empty_file_is_refused(dumps, data, layout):
    logits, labels = data
    path = dumps.parquet(f"empty_{layout}.parquet", logits[:0], labels[:0], layout=layout)
    with pytest.raises(SelcalError, match=re.escape(str(path))):
        selcal.evaluate(str(path), stream=True)
