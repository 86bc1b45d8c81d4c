"""Every input layout a reasonable user writes (README "Input", CONVENTIONS.md "Inputs and layouts").

Each layout is compared with the canonical one, a Parquet file with a ``logits`` list column,
an int64 ``label`` and a ``split`` column (or a TEST file and its --val file): the JSON of
``selcal.evaluate(...).to_json()`` must hold the very same numbers; only the keys naming
the file (name, path, val_path) may differ. Bad variants are refused in one line naming
the file and the column. The ``.pt`` layouts are in tests/io/test_torch_files.py.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import PickleBomb, canonical_model, model_json, one_error_line, split_data

import selcal
from selcal.api import evaluate as evaluate_function
from selcal.errors import SelcalError

N, K = 300, 4


def both_paths(*paths, **kwargs) -> dict:
    """The model read whole and streamed: both must give the same JSON (paths aside)."""
    whole = model_json(*paths, stream=False, **kwargs)
    streamed = model_json(*paths, stream=True, **kwargs)
    assert json.dumps(whole, sort_keys=True) == json.dumps(streamed, sort_keys=True)
    return whole


@pytest.fixture
def data():
    return split_data(N, K, seed=3, val_every=3)


@pytest.fixture
def canonical(dumps, data):
    return canonical_model(dumps, *data)


@pytest.fixture
def two_files(dumps, data):
    """(test path, val path) of the canonical two-file layout, and its JSON."""
    logits, labels, split = data
    val, test = split == "val", split == "test"
    t = dumps.parquet("two/test.parquet", logits[test], labels[test])
    v = dumps.parquet("two/val.parquet", logits[val], labels[val])
    return t, v, model_json(t, val=v)


def wide(logits, names) -> dict:
    return {name: pa.array(logits[:, k].astype(np.float32)) for k, name in enumerate(names)}


# ------------------------------------------------------------- separate files, ids, leaks
def test_val_and_test_files_with_the_same_row_ids_are_read(dumps, data, two_files, h):
    """Both files number their rows 0 .. N-1 in an ``id`` column (refused before: 'is also in')."""
    logits, labels, split = data
    val, test = split == "val", split == "test"
    t = dumps.parquet("ids/test.parquet", logits[test], labels[test], extra={"id": pa.array(np.arange(test.sum()))})
    v = dumps.parquet("ids/val.parquet", logits[val], labels[val], extra={"id": pa.array(np.arange(val.sum()))})
    model = both_paths(t, val=v)
    h.assert_same_numbers(model, two_files[2])
    assert not any("validation rows of" in w for w in model["warnings"])


def test_a_real_leak_is_warned_with_its_count_on_both_paths(dumps, data, two_files, h):
    logits, labels, split = data
    val, test = np.flatnonzero(split == "val"), np.flatnonzero(split == "test")
    leaked = np.concatenate([val, test[:7]])  # 7 TEST rows copied into the validation file
    v = dumps.parquet("leak/val.parquet", logits[leaked], labels[leaked])
    model = both_paths(two_files[0], val=v)
    assert [w for w in model["warnings"] if "validation rows of" in w] == [
        f"7 evaluation rows are also validation rows of {v} (same logits and label): the fit has seen them; "
        "pass a val file without the TEST rows"]  # (selcal.evaluate's val; the command line says --val)


def test_the_same_file_as_test_and_val_is_warned(dumps, data, canonical, h):
    logits, labels, split = data
    path = dumps.parquet("same.parquet", logits, labels, split=split)
    model = both_paths(path, val=path)  # its val rows fit, its test rows are evaluated: the numbers stand
    h.assert_same_numbers(model, canonical, drop=("split", "warnings"))
    assert f"val={str(path)!r} is the TEST file itself" in model["warnings"]  # (--val on the command line)
    no_split = dumps.parquet("same_nosplit.parquet", logits, labels)
    warned = both_paths(no_split, val=no_split)["warnings"]
    assert f"val={str(no_split)!r} is the TEST file itself" in warned
    assert any(w.startswith(f"{N} evaluation rows are also validation rows") for w in warned)


def test_duplicate_ids_within_a_file_are_still_refused(dumps, data):
    logits, labels, split = data
    ids = np.arange(N)
    ids[10] = 4  # rows 4 and 10 are both 'test' rows
    path = dumps.parquet("dup.parquet", logits, labels, split=split, extra={"id": pa.array(ids)})
    for stream in (False, True):
        with pytest.raises(SelcalError, match=r"column 'id', row 10: id '4' also at row 4 of the split 'test'; "
                                              r"every row needs its own id"):
            model_json(path, stream=stream)


def test_one_file_whose_splits_number_their_rows_apart(dumps, data, canonical, h):
    """Validation and test rows concatenated, each part with its own row numbers 0 .. n-1."""
    logits, labels, split = data
    ids = np.zeros(N, dtype=np.int64)
    for part in ("val", "test"):
        ids[split == part] = np.arange(np.count_nonzero(split == part))
    path = dumps.parquet("per_split_ids.parquet", logits, labels, split=np.where(split == "val", "validation", "test"),
                         extra={"id": pa.array(ids)})
    h.assert_same_numbers(both_paths(path), canonical)


# ------------------------------------------------------------- split values
@pytest.mark.parametrize("val_name,test_name", [("validation", "test"), ("VAL", "Test"), ("valid", "TEST"),
                                                ("dev", "test"), ("Validation", "tEsT")])
def test_split_values_are_case_insensitive_with_aliases(dumps, data, canonical, h, val_name, test_name):
    logits, labels, split = data
    named = np.where(split == "val", val_name, test_name)
    h.assert_same_numbers(both_paths(dumps.parquet(f"s_{val_name}_{test_name}.parquet", logits, labels,
                                                   split=named)), canonical)


@pytest.mark.parametrize("split_type", ["large_string", "string_view", "dictionary"])
def test_split_column_arrow_string_types(dumps, data, canonical, h, split_type):
    logits, labels, split = data
    column = pa.array(split.tolist(), type=pa.large_string() if split_type == "large_string" else pa.string())
    if split_type == "dictionary":
        column = column.dictionary_encode()
    table = pa.table({"logits": h.logits_array(logits), "label": pa.array(labels), "split": column})
    if split_type == "string_view":
        table = table.cast(pa.schema([table.schema.field(0), table.schema.field(1), pa.field("split", pa.string_view())]))
    path = dumps.path(f"split_{split_type}.parquet")
    pq.write_table(table, path, store_schema=True)
    if split_type == "string_view":
        assert pq.read_schema(path).field("split").type == pa.string_view()
    h.assert_same_numbers(both_paths(path), canonical)


def test_polars_written_split_column_is_read(dumps, data, canonical, h):
    logits, labels, split = data
    path = dumps.path("polars.parquet")
    pl.DataFrame({"logits": logits.astype(np.float32), "label": labels, "split": split}).write_parquet(path)
    h.assert_same_numbers(both_paths(path), canonical)


def test_train_rows_are_left_out_and_counted(dumps, data, canonical, h, cli):
    logits, labels, split = data
    rng = np.random.default_rng(0)
    extra_logits = rng.normal(size=(25, K))  # other rows, of the split 'train'
    path = dumps.parquet("train.parquet", np.concatenate([logits[:100], extra_logits, logits[100:]]),
                         np.concatenate([labels[:100], rng.integers(0, K, 25), labels[100:]]),
                         split=np.concatenate([split[:100], ["Train"] * 25, split[100:]]))
    model = both_paths(path)
    assert model.pop("n_train_dropped") == 25
    h.assert_same_numbers(model, canonical)
    shown = cli("evaluate", path)
    assert shown.exit_code == 0 and "25 rows of the split 'train' left out" in shown.stdout


def test_train_rows_and_ignored_labels_are_counted_apart(dumps, data, h):
    logits, labels, split = data
    labels, split = labels.copy(), split.astype(object)
    labels[[1, 2]] = 255
    split[[2, 4, 5]] = "train"  # row 2 is both: counted as ignored
    model = both_paths(dumps.parquet("both.parquet", logits, labels, split=split), ignore_label=255)
    assert (model["n_ignored"], model["n_train_dropped"]) == (2, 2)


def test_a_file_of_train_rows_only_is_refused(dumps, data):
    logits, labels, _ = data
    path = dumps.parquet("allTrain.parquet", logits, labels, split=["train"] * N)
    for stream in (False, True):
        with pytest.raises(SelcalError, match="every row is of the split 'train'; nothing to evaluate"):
            model_json(path, stream=stream)


def test_an_unknown_split_value_names_the_accepted_ones(dumps, data):
    logits, labels, split = data
    split = split.astype(object)
    split[7] = "holdout"
    for path in (dumps.parquet("unknown.parquet", logits, labels, split=split),
                 dumps.npz("unknown.npz", logits, labels, split=split)):
        with pytest.raises(SelcalError, match=r"column 'split', row 7: has the value 'holdout'; use one of 'val', "
                                              r"'validation', 'valid', 'dev', 'test', 'train'"):
            model_json(path)


# ------------------------------------------------------------- label column
@pytest.mark.parametrize("name", ["labels", "target", "y"])
def test_label_column_names(dumps, data, canonical, h, name):
    logits, labels, split = data
    h.assert_same_numbers(both_paths(dumps.parquet(f"{name}.parquet", logits, labels, split=split,
                                                   label_col=name)), canonical)
    path = dumps.path(f"{name}.npz")
    np.savez(path, logits=logits.astype(np.float32), split=split, **{name: labels})
    h.assert_same_numbers(both_paths(path), canonical)


def test_ambiguous_label_columns_are_named_and_label_col_wins(dumps, data, canonical, h, cli):
    logits, labels, split = data
    path = dumps.parquet("two_labels.parquet", logits, labels, split=split, label_col="y",
                         extra={"target": pa.array((labels + 1) % K)})
    result = cli("evaluate", path)
    assert result.exit_code == 2
    assert result.stderr == (f"selcal: error: {path}: several label columns (target, y); name the one to use with "
                             "--label-col\n")
    h.assert_same_numbers(both_paths(path, label_col="y"), canonical)


def test_no_label_column_lists_the_names_looked_for(dumps, data):
    logits, labels, split = data
    path = dumps.parquet("truth.parquet", logits, labels, label_col="truth")
    from selcal.io.columns import LABEL_NAMES

    with pytest.raises(SelcalError, match=re.escape(f"no label column (looked for {', '.join(LABEL_NAMES)}; columns: "
                                                    "logits, truth); name it with label_col")):
        model_json(path)


@pytest.mark.parametrize("label_type", ["bool_binary", "int8", "uint16", "int32", "uint64", "float32", "float64"])
def test_label_storage_types(dumps, data, canonical, h, label_type):
    logits, labels, split = data
    if label_type == "bool_binary":
        binary = logits[:, :1]
        reference = model_json(dumps.parquet("bin_ref.parquet", binary, (binary[:, 0] > 0.3).astype(int), split=split))
        stored = pa.array(binary[:, 0] > 0.3)
        columns = {"logits": pa.array(binary[:, 0]), "label": stored, "split": pa.array(split)}
        h.assert_same_numbers(both_paths(dumps.table("bool.parquet", columns)), reference)
        return
    columns = {"logits": h.logits_array(logits), "label": pa.array(labels.astype(label_type)), "split": pa.array(split)}
    h.assert_same_numbers(both_paths(dumps.table(f"label_{label_type}.parquet", columns)), canonical)


def test_a_huge_float_label_is_one_clear_line_without_a_numpy_warning(dumps, data):
    logits, labels, split = data
    for layout in ("parquet", "npz"):
        big = labels.astype(np.float64)
        big[11] = 1e20
        path = (dumps.table("huge.parquet", {"logits": pa.array(list(logits)), "label": pa.array(big)})
                if layout == "parquet" else dumps.npz("huge.npz", logits, big))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a numpy RuntimeWarning fails the test
            with pytest.raises(SelcalError, match=r"column 'labels?', row 11: label 1e\+20 is not a class index; "
                                                  r"labels must be integers 0 .. K-1$"):
                model_json(path)


def test_one_based_labels_are_named_as_such(dumps, data, cli):
    logits, labels, split = data
    path = dumps.parquet("onebased.parquet", logits, labels + 1, split=split)
    result = cli("evaluate", path)
    assert result.exit_code == 2
    line = result.stderr
    assert "the labels look 1-based (1 .. 4): subtract 1 from every label" in line and "--ignore-label" not in line
    assert line.count("\n") == 1
    void = labels.copy()
    void[3] = 255  # a void label is still pointed to --ignore-label
    result = cli("evaluate", dumps.parquet("void.parquet", logits, void))
    assert "use --ignore-label for a void label" in result.stderr and "1-based" not in result.stderr


# ------------------------------------------------------------- logit columns
@pytest.mark.parametrize("naming", ["{k}", "logit{k}", "logit_{k}", "logits_{k}", "logits{k}", "logit_{k:02d}"])
def test_numbered_logit_columns(dumps, data, canonical, h, naming):
    logits, labels, split = data
    names = [naming.format(k=k) for k in range(K)][::-1]  # any column order
    columns = wide(logits[:, ::-1], names) | {"label": pa.array(labels), "split": pa.array(split)}
    h.assert_same_numbers(both_paths(dumps.table(f"wide_{naming.replace('{', '').replace('}', '')}.parquet",
                                                 columns)), canonical)


def test_polars_dataframe_of_numbered_columns(dumps, data, canonical, h):
    """What ``pandas.DataFrame(logits)`` gives (columns '0' .. 'K-1'), written by polars."""
    logits, labels, split = data
    frame = pl.DataFrame({str(k): logits[:, k].astype(np.float32) for k in range(K)})
    frame = frame.with_columns(pl.Series("label", labels), pl.Series("split", split))
    path = dumps.path("polars_wide.parquet")
    frame.write_parquet(path)
    h.assert_same_numbers(both_paths(path), canonical)


def test_two_columns_naming_one_class_are_refused(dumps, data):
    logits, labels, _ = data
    columns = wide(logits, ["logit_0", "logit_1", "logit_2", "logit_3"]) | {"logit_01": pa.array(logits[:, 0]),
                                                                            "label": pa.array(labels)}
    with pytest.raises(SelcalError, match=r"column 'logit_01': names class 1, as 'logit_1' does; give every class "
                                          r"one column"):
        model_json(dumps.table("twice.parquet", columns))


def test_two_sets_of_numbered_columns_are_refused(dumps, data):
    logits, labels, _ = data
    columns = wide(logits, [f"logit_{k}" for k in range(K)]) | wide(logits, [f"logits_{k}" for k in range(K)])
    with pytest.raises(SelcalError, match=r"logits in several sets of numbered columns \(logit_0 .., logits_0 ..\)"):
        model_json(dumps.table("two_sets.parquet", columns | {"label": pa.array(labels)}))


@pytest.mark.parametrize("name", ["logit", "logits", "score"])
@pytest.mark.parametrize("label_type", ["int64", "bool"])
def test_one_binary_logit_column(dumps, data, h, name, label_type):
    logits, _, split = data
    v = logits[:, 0] - logits[:, 1]
    y = (v + logits[:, 2] / 4 > 0)
    reference = model_json(dumps.parquet("binary_ref.parquet", v[:, None], y.astype(int), split=split))
    assert reference["binary_logit"] is True and reference["num_classes"] == 2
    columns = {name: pa.array(v), "label": pa.array(y if label_type == "bool" else y.astype(np.int64)),
               "split": pa.array(split)}
    h.assert_same_numbers(both_paths(dumps.table(f"binary_{name}_{label_type}.parquet", columns)), reference)


def test_a_score_column_with_more_than_two_labels_says_how_it_was_read(dumps, data):
    logits, labels, _ = data
    path = dumps.table("score.parquet", {"score": pa.array(logits[:, 0]), "label": pa.array(labels)})
    with pytest.raises(SelcalError, match=r"label [23] is outside 0 .. 1"):
        model_json(path)


def _csv(dumps, name: str, header: str, logits, labels, split=None):
    """A CSV written by hand: ``header`` as typed, the values without spaces."""
    path = dumps.path(name)
    rows = (",".join([str(y), *(repr(float(v)) for v in row), *([] if split is None else [s])])
            for y, row, s in zip(labels, logits, split if split is not None else labels))
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows))
    return path


@pytest.mark.parametrize("header, column, says", [
    ("label,logit_0, logit_1, logit_2, logit_3", " logit_1", "begins with a space"),  # was K = 1: logit_0 alone
    ("label, logit_0, logit_1, logit_2, logit_3", " logit_0", "begins with a space"),  # was "no logits found"
    ("label ,logit_0,logit_1,logit_2,logit_3", "label ", "ends with a space"),
    ("label,logit_0,logit_1,logit_2,logit_3,split ", "split ", "ends with a space"),  # was a random hold-out
    ("label, 0, 1, 2, 3", " 0", "begins with a space"),
])
def test_a_column_name_with_spaces_around_it_is_named_never_ignored(dumps, data, cli, header, column, says):
    logits, labels, split = data
    path = _csv(dumps, "hand.csv", header, logits, labels, split if "split" in header else None)
    bare = column.strip()
    side = "after" if column.startswith(" ") else "before"
    one_error_line(cli("evaluate", path), f"hand.csv: column '{column}': its name {says}, so it is not the column "
                                          f"'{bare}' (names are matched exactly); rename it '{bare}' (in a CSV header: "
                                          f"no space {side} the commas)")


def test_a_parquet_column_name_with_a_space_is_named_with_its_space(dumps, data):
    logits, labels, _ = data
    columns = wide(logits, ["logit_0", "logit_1 ", "logit_2", "logit_3"]) | {"label": pa.array(labels)}
    with pytest.raises(SelcalError, match=re.escape("column 'logit_1 ': its name ends with a space, so it is not the "
                                                    "column 'logit_1' (names are matched exactly); rename it "
                                                    "'logit_1'") + "$"):
        model_json(dumps.table("padded.parquet", columns))


def test_a_name_with_spaces_is_read_when_it_is_named_or_the_rules_find_it_anyway(dumps, data, canonical, h):
    logits, labels, split = data
    padded = wide(logits, [f" logit_{k}" for k in range(K)]) | {"label ": pa.array(labels), "split": pa.array(split)}
    path = dumps.table("named.parquet", padded)
    h.assert_same_numbers(both_paths(path, label_col="label ", logits_col=" logit_*"), canonical)
    only_list = {"logits ": h.logits_array(logits), "label": pa.array(labels), "split": pa.array(split)}
    h.assert_same_numbers(both_paths(dumps.table("only_list.parquet", only_list)), canonical)


# ------------------------------------------------------------- .npz
def test_npz_extension_in_capitals_and_big_endian_arrays(dumps, data, canonical, h):
    logits, labels, split = data
    path = dumps.path("MODEL.NPZ")
    np.savez(dumps.path("tmp.npz"), logits=logits.astype(">f4"), labels=labels.astype(">i8"), split=split)
    dumps.path("tmp.npz").rename(path)
    h.assert_same_numbers(both_paths(path), canonical)


def test_npz_id_and_group_arrays_are_read(dumps, data, canonical, h):
    logits, labels, split = data
    source = np.where(np.arange(N) % 2 == 0, "a", "b")
    reference = model_json(dumps.parquet("grouped.parquet", logits, labels, split=split,
                                         extra={"source": pa.array(source)}), group_col="source")
    path = dumps.npz("grouped.npz", logits, labels, split=split, id=np.arange(N), source=source)
    h.assert_same_numbers(both_paths(path, group_col="source"), reference)
    ids = np.arange(N)
    ids[5] = 0
    with pytest.raises(SelcalError, match=r"column 'id', row 5: id '0' also at row 0"):
        model_json(dumps.npz("dup_ids.npz", logits, labels, id=ids))


@pytest.mark.parametrize("name", ["split", "id", "source"])
def test_npz_arrays_of_the_wrong_length_are_one_line(dumps, data, cli, name):
    logits, labels, split = data
    arrays = {"split": split, "id": np.arange(N), "source": np.array(["a"] * N)}
    arrays[name] = arrays[name][:-1]
    path = dumps.npz(f"short_{name}.npz", logits, labels, **arrays)
    result = cli("evaluate", path, "--group-col", "source")
    assert (result.exit_code, result.stderr) == (
        2, f"selcal: error: {path}: column '{name}': has shape ({N - 1},); expected ({N},), one value per row\n")


def test_group_col_on_an_input_without_groups_is_refused(dumps, data, cli):
    logits, labels, _ = data
    path = dumps.npz("nogroups.npz", logits, labels)
    result = cli("evaluate", path, "--group-col", "source")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"selcal: error: {path}: no array 'source' for --group-col") and \
        result.stderr.count("\n") == 1


# ------------------------------------------------------------- .npy, .p
@pytest.mark.parametrize("names", [("{s}_logits.npy", "{s}_labels.npy"), ("{s}.npy", "{s}_labels.npy")])
def test_npy_with_a_sibling_labels_file(dumps, data, two_files, h, names):
    logits, labels, split = data
    files = {}
    for part in ("val", "test"):
        rows = split == part
        files[part] = dumps.path(names[0].format(s=part))
        np.save(files[part], logits[rows].astype(np.float32))
        np.save(dumps.path(names[1].format(s=part)), labels[rows])
    h.assert_same_numbers(both_paths(files["test"], val=files["val"]), two_files[2])


def test_npy_with_labels_npy_in_its_folder(dumps, data, canonical, h):
    logits, labels, split = data
    np.save(dumps.path("folder/model.npy"), logits.astype(np.float32))
    np.save(dumps.path("folder/labels.npy"), labels)
    reference = model_json(dumps.parquet("nosplit.parquet", logits, labels))
    h.assert_same_numbers(both_paths(dumps.path("folder/model.npy")), reference)


@pytest.mark.slow
def test_npy_without_labels_says_how_to_save_an_npz(dumps, data, cli):
    logits, _, _ = data
    path = dumps.path("alone/model.npy")
    np.save(path, logits)
    result = cli("evaluate", path)
    assert (result.exit_code, result.stderr) == (2, (
        f"selcal: error: {path}: holds only logits and no labels file was found beside it (looked for "
        "model_labels.npy and labels.npy); save both with numpy.savez('model.npz', logits=logits, labels=labels)\n"))


@pytest.mark.parametrize("suffix", [".p", ".pkl", ".pickle"])
def test_pickles_are_never_unpickled(dumps, data, cli, tmp_path, suffix):
    import pickle

    marker = tmp_path / "ran"
    path = dumps.path(f"model{suffix}")
    path.write_bytes(pickle.dumps(PickleBomb(str(marker))))
    result = cli("evaluate", path)
    assert result.exit_code == 2 and not marker.exists()
    assert "selcal does not unpickle files" in result.stderr and "numpy.savez" in result.stderr
    assert result.stderr.count("\n") == 1


# ------------------------------------------------------------- hostile Parquet (issue 16)
def test_a_binary_id_column_that_is_not_utf8_is_one_line(dumps, data, cli):
    logits, labels, _ = data
    ids = [i.to_bytes(2, "big") + b"\xff\xfe" for i in range(N)]
    path = dumps.parquet("binary_ids.parquet", logits, labels, extra={"id": pa.array(ids, type=pa.binary())})
    for budget in (None, 0):
        with pytest.MonkeyPatch.context() as patch:
            if budget is not None:
                patch.setitem(evaluate_function.__kwdefaults__, "memory_budget", budget)
            result = cli("evaluate", path)
        assert result.exit_code == 2, result.stderr
        assert result.stderr == (f"selcal: error: {path}: column 'id', row 0: holds bytes that are not UTF-8 text; "
                                 "store strings or integers\n")
    utf8 = dumps.parquet("utf8_ids.parquet", logits, labels,
                         extra={"id": pa.array([f"img{i}".encode() for i in range(N)], type=pa.binary())})
    assert cli("evaluate", utf8).exit_code == 0


@pytest.mark.parametrize("column", ["logits", "logit_2", "emb", "meta"])
def test_group_col_naming_the_logits_or_a_nested_column_is_one_line(dumps, data, h, cli, column):
    logits, labels, _ = data
    if column == "logit_2":
        columns = wide(logits, [f"logit_{k}" for k in range(K)])
    else:
        columns = {"logits": h.logits_array(logits)}
    columns |= {"label": pa.array(labels), "emb": h.logits_array(logits[:, :2]),
                "meta": pa.array([{"a": i} for i in range(N)])}
    path = dumps.table(f"group_{column}.parquet", columns)
    result = cli("evaluate", path, "--group-col", column)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"selcal: error: {path}: column '{column}': ") and result.stderr.count("\n") == 1


def test_a_corrupted_page_is_caught_by_its_checksum(dumps, data, cli):
    logits, labels, _ = data
    path = dumps.path("checksummed.parquet")
    table = pa.table({"logits": pa.array(list(logits.astype(np.float64))), "label": pa.array(labels)})
    pq.write_table(table, path, compression="NONE", write_page_checksum=True)
    content = bytearray(path.read_bytes())
    needle = np.float64(logits[150, 2]).tobytes()
    at = content.find(needle)
    assert at > 0
    content[at + 3] ^= 0x10  # a silent change of one logit, were the checksum not verified
    path.write_bytes(bytes(content))
    result = cli("evaluate", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"selcal: error: {path}: not a readable Parquet file (") and \
        "was it truncated or corrupted?" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.slow
def test_shared_rows_are_counted_exactly_also_when_the_probe_columns_agree_and_others_differ():
    from selcal.api import SharedRows, count_shared_rows

    rng = np.random.default_rng(5)
    k = 9
    val = rng.normal(size=(300, k)).astype(np.float32)
    val_labels = rng.integers(0, k, 300)
    test = rng.normal(size=(500, k)).astype(np.float32)
    test_labels = rng.integers(0, k, 500)
    test[:40], test_labels[:40] = val[:40], val_labels[:40]  # 40 real leaks
    test[40:70], test_labels[40:70] = val[40:70], val_labels[40:70]
    test[40:70, 3] += 1.0  # probe columns (0, 4, 8) and label agree, another column differs: not a leak
    test[70:80], test_labels[70:80] = val[80:90], (val_labels[80:90] + 1) % k  # same logits, other label
    brute = sum(any(np.array_equal(row, v) and y == w for v, w in zip(val, val_labels))
                for row, y in zip(test, test_labels))
    assert brute == 40
    assert count_shared_rows(test, test_labels, SharedRows(val, val_labels)) == 40
    assert count_shared_rows(test[40:], test_labels[40:], SharedRows(val, val_labels)) == 0


@pytest.mark.parametrize("values", [["validation"], ["val", "train"]])
def test_a_split_column_without_test_rows_is_ignored_with_a_warning(tmp_path, values):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    logits = rng.normal(size=(400, 4)) + 2 * np.eye(4)[rng.integers(0, 4, 400)]
    labels = rng.integers(0, 4, 400)
    split = [values[i % len(values)] for i in range(400)]
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"logits": list(logits), "label": labels, "split": split}), path)
    for stream in (False, True):
        model = selcal.evaluate(str(path), stream=stream, scores=["msp", "temp"]).models[0]
        assert any("no 'test' rows" in w for w in model.warnings), model.warnings
    normal = tmp_path / "n.parquet"
    pq.write_table(pa.table({"logits": list(logits), "label": labels, "split": ["val", "test"] * 200}), normal)
    assert not any("no 'test' rows" in w for w in selcal.evaluate(str(normal)).models[0].warnings)


def test_a_dictionary_split_column_may_hold_unused_unknown_values(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(4)
    logits = rng.normal(size=(6, 3))
    split = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 1, 0, 1], pa.int32()), pa.array(["val", "test", "bogus"]))
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"logits": list(logits), "label": [0, 1, 2, 0, 1, 2], "split": split}), path)
    model = selcal.evaluate(str(path), scores=["msp", "temp"]).models[0]
    assert model.n_eval == 3 and model.n_val == 3
    used = pa.DictionaryArray.from_arrays(pa.array([0, 2, 0, 1, 0, 1], pa.int32()), pa.array(["val", "test", "bogus"]))
    pq.write_table(pa.table({"logits": list(logits), "label": [0, 1, 2, 0, 1, 2], "split": used}), path)
    with pytest.raises(selcal.SelcalError, match=r"row 1: has the value 'bogus'"):
        selcal.evaluate(str(path))
