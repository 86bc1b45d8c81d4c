"""``selcal evaluate`` run in-process with Typer's CliRunner (stdout and stderr apart).

What a user of the command must be able to rely on (CONVENTIONS.md, "Input" and
"Units and output"): every input layout gives the same numbers; bad input is refused
with one line ``selcal: error: ...`` on stderr naming the file, the column and the first
offending row, exit status 2 and no output file; the JSON has schema 1, is strict JSON
and does not depend on row order; ``--json PATH`` is written atomically.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import assert_refused, confidence_keys, selective_keys

import selcal
import selcal.api
import selcal.io
from selcal.report import EvaluationResult

SELECTIVE_KEYS = set(selective_keys())
CALIBRATION_KEYS = set(confidence_keys())
MODEL_KEYS = {"name": str, "path": str, "num_classes": int, "n_eval": int, "n_val": int, "split": str,
              "accuracy": float, "error": float, "nll": float, "brier": float, "cece": float, "scores": dict}


# ============================================================== 1. same numbers through the CLI
def test_json_stdout_equals_the_python_api(cli, dumps, data, h):
    logits, labels = data
    path = dumps.parquet("model.parquet", logits, labels)
    assert cli.json(path) == selcal.evaluate(str(path)).to_dict()


@pytest.mark.slow
def test_cli_layouts_give_the_same_numbers(cli, dumps, data, h):
    logits, labels = data
    ref = cli.json(dumps.parquet("ref.parquet", logits, labels, dtype="float64"))["models"][0]
    for layout in ("list", "large_list", "fixed_size_list", "wide"):
        for dtype in ("float16", "float32", "float64"):
            path = dumps.parquet(f"{layout}_{dtype}.parquet", logits, labels, layout=layout, dtype=dtype)
            h.assert_same_numbers(cli.json(path)["models"][0], ref)
    for dtype in ("float16", "float32", "float64"):
        h.assert_same_numbers(cli.json(dumps.npz(f"m_{dtype}.npz", logits, labels, dtype=dtype))["models"][0], ref)


def test_cli_split_column(cli, dumps, data, h):
    logits, labels = data
    split = np.where(np.arange(labels.size) % 4 == 1, "val", "test")
    a = cli.json(dumps.parquet("a.parquet", logits, labels, split=split))["models"][0]
    b = cli.json(dumps.parquet("b.parquet", logits, labels, layout="wide", dtype="float16", split=split))["models"][0]
    c = cli.json(dumps.npz("c.npz", logits, labels, split=split))["models"][0]
    assert a["split"] == "split-column" and a["n_val"] == int((split == "val").sum())
    h.assert_same_numbers(b, a)
    h.assert_same_numbers(c, a)


def test_cli_label_col(cli, dumps, data, h):
    logits, labels = data
    ref = cli.json(dumps.parquet("ref.parquet", logits, labels))["models"][0]
    decoy = pa.array((labels + 1) % logits.shape[1])
    path = dumps.parquet("target.parquet", logits, labels, label_col="target", extra={"label": decoy})
    h.assert_same_numbers(cli.json(path, "--label-col", "target")["models"][0], ref)


def test_cli_ignore_label(cli, dumps, data, h):
    logits, labels = data
    ref = cli.json(dumps.parquet("ref.parquet", logits, labels))["models"][0]
    positions = [0, 10, 11, 250, 400]
    void = np.full((len(positions), logits.shape[1]), np.nan)  # ignored rows are not checked
    path = dumps.parquet("void.parquet", np.insert(logits, positions, void, axis=0), np.insert(labels, positions, 255))
    model = cli.json(path, "--ignore-label", "255")["models"][0]
    h.assert_same_numbers(model, ref, drop=("n_ignored", "warnings"))
    assert model["n_ignored"] == 5


def test_cli_single_binary_logit(cli, dumps, h):
    rng = np.random.default_rng(7)
    v = np.round(rng.normal(0, 2, size=300) * 8) / 8
    labels = np.where(rng.random(300) < 0.8, v > 0, v <= 0).astype(np.int64)
    two = cli.json(dumps.parquet("two.parquet", np.stack([np.zeros_like(v), v], 1), labels))["models"][0]
    one = cli.json(dumps.parquet("one.parquet", v[:, None], labels, dtype="float16"))["models"][0]
    assert two["num_classes"] == 2
    h.assert_same_numbers(one, two, drop=("binary_logit",))


@pytest.mark.slow
def test_cli_several_test_files(cli, dumps, h):
    a = dumps.parquet("x/alpha.parquet", *h.make_data(n=300, k=3, seed=31))
    b = dumps.parquet("y/beta.parquet", *h.make_data(n=280, k=5, seed=32))
    c = dumps.npz("z/gamma.npz", *h.make_data(n=260, k=4, seed=33))
    models = cli.json(a, b, c)["models"]
    assert [m["name"] for m in models] == ["alpha", "beta", "gamma"]
    assert [m["num_classes"] for m in models] == [3, 5, 4]
    for model, path in zip(models, (a, b, c)):
        assert model == cli.json(path)["models"][0]


@pytest.mark.slow
def test_cli_val_repeated_once_per_file(cli, dumps, h):
    a, av = dumps.parquet("a.parquet", *h.make_data(300, 4, 41)), dumps.parquet("av.parquet", *h.make_data(120, 4, 42))
    b, bv = dumps.parquet("b.parquet", *h.make_data(300, 6, 43)), dumps.npz("bv.npz", *h.make_data(150, 6, 44))
    models = cli.json(a, b, "--val", av, "--val", bv)["models"]
    assert [(m["split"], m["n_eval"], m["n_val"]) for m in models] == [("val-file", 300, 120), ("val-file", 300, 150)]
    assert models[0] == cli.json(a, "--val", av)["models"][0]
    assert models[1] == cli.json(b, "--val", bv)["models"][0]


# ============================================================== 2. bad input
def _with(logits, row, col, value):
    logits = np.array(logits, dtype=np.float64)
    logits[row, col] = value
    return logits


def _labels_with(labels, row, value):
    labels = np.array(labels)
    labels[row] = value
    return labels


def _list_rows(rows, value_type=pa.float32(), list_kind=pa.list_):
    return pa.array(rows, type=list_kind(value_type))


def _case_nan(d, x, y):
    p = d.parquet("nan.parquet", _with(x, 7, 2, np.nan), y)
    return [p], [str(p), "logits"], 7


def _case_inf(d, x, y):
    p = d.parquet("inf.parquet", _with(x, 3, 0, -np.inf), y, dtype="float64")
    return [p], [str(p), "logits"], 3


def _case_float16_inf(d, x, y):
    with np.errstate(over="ignore"):
        p = d.parquet("f16.parquet", _with(x, 4, 1, 70000.0), y, dtype="float16")  # overflows to inf
    return [p], [str(p), "logits", "float16"], 4


def _case_nan_wide(d, x, y):
    p = d.parquet("nanwide.parquet", _with(x, 5, 2, np.nan), y, layout="wide")
    return [p], [str(p), "logit_2"], 5


def _case_nan_npz(d, x, y):
    p = d.npz("nan.npz", _with(x, 6, 1, np.nan), y)
    return [p], [str(p), "logits"], 6


def _case_nan_later_row_group(d, x, y):
    p = d.parquet("nanrg.parquet", _with(x, 150, 3, np.nan), y, layout="fixed_size_list", row_group_size=64)
    return [p], [str(p), "logits"], 150


def _case_nan_after_ignored_rows(d, x, y):
    labels = np.array(y)
    labels[[0, 1, 2, 5]] = 255
    p = d.parquet("nanign.parquet", _with(x, 10, 0, np.nan), labels)
    return [p, "--ignore-label", "255"], [str(p), "logits"], 10


def _case_label_too_large(d, x, y):
    p = d.parquet("big.parquet", x, _labels_with(y, 6, 4))
    return [p], [str(p), "label"], 6


def _case_label_negative(d, x, y):
    p = d.parquet("neg.parquet", x, _labels_with(y, 2, -1))
    return [p], [str(p), "label"], 2


def _case_label_out_of_range_npz(d, x, y):
    p = d.npz("big.npz", x, _labels_with(y, 8, 9))
    return [p], [str(p), "label"], 8


def _case_label_not_whole(d, x, y):
    labels = np.asarray(y, dtype=np.float64)
    labels[4] = 2.5
    p = d.table("half.parquet", {"logits": _list_rows(x.tolist()), "label": pa.array(labels)})
    return [p], [str(p), "label"], 4


def _case_ragged(d, x, y):
    rows = x.tolist()
    rows[9] = rows[9][:3]
    p = d.table("ragged.parquet", {"logits": _list_rows(rows), "label": pa.array(y)})
    return [p], [str(p), "logits"], 9


def _case_ragged_later_row_group(d, x, y):
    rows = x.tolist()
    rows[130] = rows[130] + [0.5]
    p = d.table("ragged2.parquet", {"logits": _list_rows(rows, list_kind=pa.large_list), "label": pa.array(y)},
                row_group_size=64)
    return [p], [str(p), "logits"], 130


def _case_null_logit(d, x, y):
    rows = x.tolist()
    rows[5][1] = None
    p = d.table("nullv.parquet", {"logits": _list_rows(rows), "label": pa.array(y)})
    return [p], [str(p), "logits"], 5


def _case_null_logit_later_row_group(d, x, y):
    rows = x.tolist()
    rows[140][3] = None
    p = d.table("nullv2.parquet", {"logits": _list_rows(rows), "label": pa.array(y)}, row_group_size=64)
    return [p], [str(p), "logits"], 140


def _case_null_logit_row(d, x, y):
    rows = x.tolist()
    rows[8] = None
    p = d.table("nullrow.parquet", {"logits": _list_rows(rows), "label": pa.array(y)})
    return [p], [str(p), "logits"], 8


def _case_null_logit_wide(d, x, y):
    columns = {f"logit_{k}": pa.array(x[:, k].tolist(), type=pa.float32()) for k in range(x.shape[1])}
    values = x[:, 1].tolist()
    values[11] = None
    columns["logit_1"] = pa.array(values, type=pa.float32())
    columns["label"] = pa.array(y)
    p = d.table("nullwide.parquet", columns)
    return [p], [str(p), "logit_1"], 11


def _case_null_label(d, x, y):
    labels = list(map(int, y))
    labels[3] = None
    p = d.table("nulllabel.parquet", {"logits": _list_rows(x.tolist()), "label": pa.array(labels, type=pa.int64())})
    return [p], [str(p), "label"], 3


def _case_null_label_later_row_group(d, x, y):
    labels = list(map(int, y))
    labels[130] = None
    p = d.table("nulllabel2.parquet", {"logits": _list_rows(x.tolist()), "label": pa.array(labels, type=pa.int64())},
                row_group_size=64)
    return [p], [str(p), "label"], 130


def _case_missing_label_column(d, x, y):
    p = d.table("nolabel.parquet", {"logits": _list_rows(x.tolist()), "truth": pa.array(y)})
    return [p], [str(p), "label"], None


def _case_missing_label_col_option(d, x, y):
    p = d.parquet("m.parquet", x, y)
    return [p, "--label-col", "truth"], [str(p), "truth"], None


def _case_missing_logits(d, x, y):
    p = d.table("nologits.parquet", {"label": pa.array(y), "score": pa.array(np.zeros(len(y)))})
    return [p], [str(p), "logit"], None


def _case_missing_logits_npz(d, x, y):
    p = d.path("nologits.npz")
    np.savez(p, labels=y, n_classes=np.full(len(y), x.shape[1]))
    return [p], [str(p), "logits"], None


def _case_missing_labels_npz(d, x, y):
    p = d.path("nolabels.npz")
    np.savez(p, logits=x)
    return [p], [str(p), "labels"], None


def _case_logits_as_strings(d, x, y):
    p = d.table("strings.parquet", {"logits": pa.array([json.dumps(r) for r in x.tolist()]), "label": pa.array(y)})
    return [p], [str(p), "logits"], None


def _case_logits_as_list_of_strings(d, x, y):
    rows = [[str(v) for v in r] for r in x.tolist()]
    p = d.table("strlist.parquet", {"logits": pa.array(rows, type=pa.list_(pa.string())), "label": pa.array(y)})
    return [p], [str(p), "logits"], None


def _case_logits_as_strings_npz(d, x, y):
    p = d.path("strings.npz")
    np.savez(p, logits=x.astype(str), labels=y)
    return [p], [str(p), "logits"], None


def _case_nested_lists(d, x, y):
    rows = [[[v] for v in r] for r in x.tolist()]
    p = d.table("nested.parquet", {"logits": pa.array(rows, type=pa.list_(pa.list_(pa.float32()))),
                                   "label": pa.array(y)})
    return [p], [str(p), "logits"], None


def _case_k_mismatch_val(d, x, y):
    t = d.parquet("test4.parquet", x, y)
    v = d.parquet("val3.parquet", x[:, :3], np.minimum(y, 2))
    return [t, "--val", v], [str(v), str(t)], None


def _case_empty_list_file(d, x, y):
    p = d.parquet("empty.parquet", x[:0], y[:0])
    return [p], [str(p)], None


def _case_empty_wide_file(d, x, y):
    p = d.parquet("emptywide.parquet", x[:0], y[:0], layout="wide")
    return [p], [str(p)], None


def _case_empty_npz(d, x, y):
    p = d.npz("empty.npz", x[:0], y[:0])
    return [p], [str(p)], None


def _case_empty_val_file(d, x, y):
    t = d.parquet("t.parquet", x, y)
    v = d.parquet("v_empty.parquet", x[:0], y[:0])
    return [t, "--val", v], [str(v)], None


def _case_random_bytes_parquet(d, x, y):
    p = d.path("garbage.parquet")
    p.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    return [p], [str(p)], None


def _case_random_bytes_npz(d, x, y):
    p = d.path("garbage.npz")
    p.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    return [p], [str(p)], None


def _case_truncated_parquet(d, x, y):
    p = d.parquet("cut.parquet", x, y)
    content = p.read_bytes()
    p.write_bytes(content[: len(content) // 2])
    return [p], [str(p)], None


def _case_missing_file(d, x, y):
    p = d.folder / "does_not_exist.parquet"
    return [p], [str(p)], None


def _case_folder_as_file(d, x, y):
    p = d.folder / "a_folder.parquet"
    p.mkdir()
    return [p], [str(p)], None


def _case_split_unknown_value(d, x, y):
    split = np.where(np.arange(len(y)) % 2 == 0, "val", "test").astype(object)
    split[4] = "tset"
    p = d.parquet("split.parquet", x, y, split=split)
    return [p], [str(p), "split", "'tset'"], 4


def _case_split_null(d, x, y):
    split = list(np.where(np.arange(len(y)) % 2 == 0, "val", "test"))
    split[6] = None
    p = d.table("splitnull.parquet", {"logits": _list_rows(x.tolist()), "label": pa.array(y),
                                      "split": pa.array(split, type=pa.string())})
    return [p], [str(p), "split"], 6


def _case_too_few_val_files(d, x, y):
    a, b = d.parquet("a.parquet", x, y), d.parquet("b.parquet", x, y)
    v = d.parquet("v.parquet", x, y)
    return [a, b, "--val", v], ["--val"], None


def _case_too_many_val_files(d, x, y):
    a, v = d.parquet("a.parquet", x, y), d.parquet("v.parquet", x, y)
    return [a, "--val", v, "--val", v], ["--val"], None


def _case_second_test_file_bad(d, x, y):
    good = d.parquet("good.parquet", x, y)
    bad = d.parquet("bad.parquet", _with(x, 12, 0, np.nan), y)
    return [good, bad], [str(bad), "logits"], 12


def _case_nan_in_val_file(d, x, y):
    t = d.parquet("t.parquet", x, y)
    v = d.npz("v.npz", _with(x, 21, 3, np.inf), y)
    return [t, "--val", v], [str(v), "logits"], 21


def _case_every_row_ignored(d, x, y):
    p = d.parquet("void.parquet", x, np.full_like(y, 255))
    return [p, "--ignore-label", "255"], [str(p)], None


def _case_too_few_rows_for_holdout(d, x, y):
    p = d.parquet("two_rows.parquet", x[:2], y[:2])
    return [p], [str(p)], None


# ---- files of more than one read batch (65536 rows): the row number must count from the file's start
BIG_ROWS = 70_000


@functools.lru_cache(maxsize=1)
def _big_data():
    rng = np.random.default_rng(4)
    logits = rng.normal(0, 2, size=(BIG_ROWS, 4)).astype(np.float32)
    labels = np.where(rng.random(BIG_ROWS) < 0.8, logits.argmax(axis=1), rng.integers(0, 4, BIG_ROWS))
    return logits, labels.astype(np.int64)


def _big():
    logits, labels = _big_data()
    return logits.copy(), labels.copy()


def _case_big_nan(d, x, y):
    logits, labels = _big()
    logits[66_000, 1] = np.nan
    p = d.parquet("bignan.parquet", logits, labels, layout="fixed_size_list")
    return [p], [str(p), "logits"], 66_000


def _case_big_nan_wide(d, x, y):
    logits, labels = _big()
    logits[69_999, 3] = np.inf
    p = d.parquet("bignanwide.parquet", logits, labels, layout="wide")
    return [p], [str(p), "logit_3"], 69_999


def _case_big_ragged_first_row_of_a_batch(d, x, y):
    logits, labels = _big()
    rows = logits.tolist()
    rows[65_536] = rows[65_536] + [0.25]
    p = d.table("bigragged.parquet", {"logits": _list_rows(rows), "label": pa.array(labels)})
    return [p], [str(p), "logits"], 65_536


def _case_big_ragged(d, x, y):
    logits, labels = _big()
    rows = logits.tolist()
    rows[67_000] = rows[67_000][:2]
    p = d.table("bigragged2.parquet", {"logits": _list_rows(rows), "label": pa.array(labels)})
    return [p], [str(p), "logits"], 67_000


def _case_big_null_logit(d, x, y):
    logits, labels = _big()
    rows = logits.tolist()
    rows[65_600][2] = None
    p = d.table("bignull.parquet", {"logits": _list_rows(rows), "label": pa.array(labels)})
    return [p], [str(p), "logits"], 65_600


def _case_big_null_label(d, x, y):
    logits, labels = _big()
    values = labels.tolist()
    values[65_540] = None
    p = d.table("bignulllabel.parquet", {"logits": _list_rows(logits.tolist()),
                                         "label": pa.array(values, type=pa.int64())})
    return [p], [str(p), "label"], 65_540


def _case_big_label_out_of_range(d, x, y):
    logits, labels = _big()
    labels[68_123] = 7
    p = d.parquet("biglabel.parquet", logits, labels)
    return [p], [str(p), "label"], 68_123


def _case_big_split_unknown(d, x, y):
    logits, labels = _big()
    split = np.where(np.arange(BIG_ROWS) % 5 == 0, "val", "test").astype(object)
    split[65_537] = "tset"
    p = d.parquet("bigsplit.parquet", logits, labels, split=split)
    return [p], [str(p), "split", "'tset'"], 65_537


FILE_CASES = {name[len("_case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("_case_")}


@pytest.fixture(params=["in-memory", "streamed"])
def reading(request, monkeypatch):
    """Run the CLI on the in-memory path, or on the streamed path (normally for files over 64 MiB)."""
    if request.param == "streamed":  # every model's job with a memory budget of 0 bytes: every file streams
        from dataclasses import replace

        from selcal.pipeline import jobs

        whole = jobs.evaluate_model
        monkeypatch.setattr(jobs, "evaluate_model", lambda job, *args: whole(replace(job, memory_budget=0), *args))
    return request.param


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_bad_input_is_refused_in_one_line_with_no_output_file(cli, dumps, data, out_dir, reading, case):
    if reading == "streamed" and case.startswith("empty"):
        pytest.skip("a file with no rows is never streamed by the CLI (see test_io for stream=True)")
    logits, labels = data
    args, must_contain, row = FILE_CASES[case](dumps, logits, labels)
    target = out_dir / "result.json"
    result = cli("evaluate", *args, "--json", target)
    assert_refused(result, must_contain, row)
    assert sorted(os.listdir(out_dir)) == [], "output files left behind"


@pytest.mark.parametrize("case", ["nan", "label_too_large", "ragged", "truncated_parquet", "k_mismatch_val"])
@pytest.mark.parametrize("mode", ["table", "json-stdout"])
def test_bad_input_refused_in_every_output_mode(cli, dumps, data, case, mode):
    logits, labels = data
    args, must_contain, row = FILE_CASES[case](dumps, logits, labels)
    extra = ["--json", "-"] if mode == "json-stdout" else []
    assert_refused(cli("evaluate", *args, *extra), must_contain, row)


def test_bad_input_keeps_a_previous_output_file(cli, dumps, data, out_dir):
    logits, labels = data
    target = out_dir / "result.json"
    target.write_text("previous\n")
    bad = dumps.parquet("bad.parquet", _with(logits, 1, 1, np.nan), labels)
    assert_refused(cli("evaluate", bad, "--json", target), [str(bad)], 1)
    assert target.read_text() == "previous\n"
    assert sorted(os.listdir(out_dir)) == ["result.json"]


OPTION_CASES = {
    "bins 0": (["--bins", "0"], ["--bins"]),
    "bins -3": (["--bins", "-3"], ["--bins"]),
    "risks abc": (["--risks", "abc"], ["--risks"]),
    "risks 1.5": (["--risks", "0.01,1.5"], ["--risks"]),
    "risks empty": (["--risks", ","], ["--risks"]),
    "coverages 1.5": (["--coverages", "1.5"], ["--coverages"]),
    "coverages 0": (["--coverages", "0"], ["--coverages"]),
    "coverages x": (["--coverages", "half"], ["--coverages"]),
    "p-grid 0": (["--p-grid", "0"], ["--p-grid"]),
    "p-grid abc": (["--p-grid", "abc"], ["--p-grid"]),
    "p-grid 3-1": (["--p-grid", "3-1"], ["--p-grid"]),
    "aurc-estimator foo": (["--aurc-estimator", "foo"], ["--aurc-estimator"]),
    "scores foo": (["--scores", "foo"], ["foo"]),
    "scores msp,foo": (["--scores", "msp,foo"], ["foo"]),
    "val-fraction 0": (["--val-fraction", "0"], ["--val-fraction"]),
    "val-fraction 1.5": (["--val-fraction", "1.5"], ["--val-fraction"]),
    "pnorm-objective foo": (["--pnorm-objective", "foo"], ["--pnorm-objective"]),
}


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_nonsense_options_are_refused(cli, dumps, data, out_dir, case):
    args, must_contain = OPTION_CASES[case]
    path = dumps.parquet("m.parquet", *data)
    assert_refused(cli("evaluate", path, *args, "--json", out_dir / "r.json"), must_contain)
    assert os.listdir(out_dir) == []


# An empty item of a list option was dropped (--risks 0.05,,0.1 measured two risks, exit 0) and
# --figures '' drew every figure: each is now refused in one line naming the flag.
EMPTY_ITEM_CASES = {
    "risks": (["--risks", "0.05,,0.1"], "--risks has an empty item"),
    "risks trailing comma": (["--risks", "0.05,"], "--risks has an empty item"),
    "coverages": (["--coverages", ",0.5"], "--coverages has an empty item"),
    "p-grid": (["--p-grid", "1,,3"], "--p-grid has an empty item"),
    "scores": (["--scores", "msp,,temp"], "--scores has an empty item"),
    "figures empty": (["--figures", "", "--plots", "PLOTS"], "--figures needs at least one value"),
    "figures": (["--figures", "rc,,sweep", "--plots", "PLOTS"], "--figures has an empty item"),
    "ls-alpha": (["--ls-alpha", "0.1,", "--plots", "PLOTS"], "--ls-alpha has an empty item"),
}


@pytest.mark.parametrize("case", sorted(EMPTY_ITEM_CASES))
def test_an_empty_item_of_a_list_option_is_refused_not_dropped(cli, dumps, data, out_dir, case):
    args, message = EMPTY_ITEM_CASES[case]
    path = dumps.parquet("m.parquet", *data)
    args = [str(out_dir / "plots") if a == "PLOTS" else a for a in args]
    line = assert_refused(cli("evaluate", path, *args, "--json", out_dir / "r.json"), [message])
    assert "----" not in line
    assert os.listdir(out_dir) == []


def test_an_empty_risk_target_of_threshold_is_refused(cli, dumps, data):
    path = dumps.parquet("m.parquet", *data)
    assert_refused(cli("threshold", path, "--risk", "0.05,,0.1"), ["--risk has an empty item in '0.05,,0.1'"])


def test_the_python_api_refuses_an_empty_item_too():
    with pytest.raises(selcal.SelcalError, match="risks has an empty item"):
        selcal.Options(risks="0.05,,0.1")
    assert selcal.Options(risks=" 0.05, 0.1 ").risks == (0.05, 0.1)


def test_json_into_a_missing_folder(cli, dumps, data, tmp_path):
    path = dumps.parquet("m.parquet", *data)
    target = tmp_path / "no" / "such" / "folder" / "result.json"
    line = assert_refused(cli("evaluate", path, "--json", target))
    assert str(target.parent) in line
    assert not (tmp_path / "no").exists()


def test_json_onto_a_folder(cli, dumps, data, out_dir):
    path = dumps.parquet("m.parquet", *data)
    (out_dir / "result.json").mkdir()
    line = assert_refused(cli("evaluate", path, "--json", out_dir / "result.json"))
    assert str(out_dir / "result.json") in line
    assert os.listdir(out_dir) == ["result.json"] and not os.listdir(out_dir / "result.json")


# ============================================================== 3. JSON schema 1
@pytest.fixture
def split_file(dumps, data):
    logits, labels = data
    split = np.where(np.arange(labels.size) % 3 == 0, "val", "test")
    return dumps.parquet("resnet.parquet", logits, labels, split=split)


def test_json_schema_1_keys_and_types(cli, split_file, h):
    out = cli.json(split_file)
    assert out["schema"] == 1
    assert out["selcal"] == selcal.__version__
    assert isinstance(out["models"], list) and len(out["models"]) == 1
    model = out["models"][0]
    for key, kind in MODEL_KEYS.items():
        assert key in model, key
        if kind is float:
            assert h.is_number(model[key]), (key, model[key])
        else:
            assert isinstance(model[key], kind) and not isinstance(model[key], bool), (key, model[key])
    assert model["name"] == "resnet" and model["path"] == str(split_file)
    assert model["num_classes"] == 4 and model["n_eval"] + model["n_val"] == 400
    assert model["split"] == "split-column"
    assert model["accuracy"] + model["error"] == pytest.approx(1.0, abs=1e-15)
    scores = model["scores"]
    assert set(scores) >= {"msp", "max_logit", "pnorm", "temp"}
    expected = {
        "msp": SELECTIVE_KEYS | CALIBRATION_KEYS,
        "max_logit": SELECTIVE_KEYS,
        "pnorm": SELECTIVE_KEYS | {"p", "fallback"},
        "temp": SELECTIVE_KEYS | CALIBRATION_KEYS | {"temperature", "nll", "brier"},
    }
    for score, keys in expected.items():
        missing = keys - set(scores[score])
        assert not missing, f"{score} lacks {sorted(missing)}"
        for key in keys - {"p", "fallback"}:
            assert h.is_number(scores[score][key]), (score, key, scores[score][key])
    assert isinstance(scores["pnorm"]["fallback"], bool)
    p = scores["pnorm"]["p"]
    assert p is None or (isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 10)
    assert scores["temp"]["temperature"] > 0


def test_json_keys_follow_risks_and_coverages(cli, split_file):
    model = cli.json(split_file, "--risks", "0.02,0.2", "--coverages", "0.75")["models"][0]
    for score in ("msp", "max_logit", "pnorm", "temp"):
        keys = set(model["scores"][score])
        assert {"cov@0.02", "cov@0.2", "risk@0.75"} <= keys
        assert not keys & {"cov@0.01", "cov@0.05", "cov@0.1", "risk@0.5", "risk@0.8", "risk@0.9"}


def test_json_scores_option_limits_the_scores(cli, split_file):
    model = cli.json(split_file, "--scores", "msp,max_logit")["models"][0]
    assert set(model["scores"]) == {"msp", "max_logit"}


def test_json_dash_writes_json_to_stdout_only(cli, split_file, tmp_path, h):
    before = sorted(os.listdir(split_file.parent))
    result = cli("evaluate", split_file, "--json", "-")
    assert result.exit_code == 0, result.stderr
    h.strict_json(result.stdout)  # the whole of stdout is one JSON document, no table
    assert result.stdout.lstrip().startswith("{") and result.stdout.rstrip().endswith("}")
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir(split_file.parent)) == before
    assert not (tmp_path / "-").exists() and not os.path.exists("-")


@pytest.mark.parametrize("kind", ["all correct", "all wrong"])
@pytest.mark.parametrize("where", ["stdout", "file"])
def test_undefined_values_are_null_never_nan(cli, dumps, data, out_dir, h, kind, where):
    logits, _ = data
    labels = logits.argmax(axis=1)
    if kind == "all wrong":
        labels = (labels + 1) % logits.shape[1]
    split = np.where(np.arange(labels.size) % 3 == 0, "val", "test")
    path = dumps.parquet("extreme.parquet", logits, labels, split=split)
    if where == "stdout":
        result = cli("evaluate", path, "--json", "-")
        text = result.stdout
    else:
        result = cli("evaluate", path, "--json", out_dir / "r.json", "-q")
        text = (out_dir / "r.json").read_text()
    assert result.exit_code == 0, (result.stderr, repr(result.exception))
    for bad in ("NaN", "Infinity"):
        assert bad not in text
    model = h.strict_json(text)["models"][0]
    assert model["accuracy"] == (1.0 if kind == "all correct" else 0.0)
    for score in ("msp", "max_logit", "pnorm", "temp"):
        metrics = model["scores"][score]
        assert metrics["auroc"] is None, (score, metrics["auroc"])
        assert metrics["fpr95"] is None, (score, metrics["fpr95"])
        assert h.is_number(metrics["aurc"]) and h.is_number(metrics["augrc"])


# ---------------------------------------------------------------- determinism
def _tied_data(n=600, k=6, seed=9):
    """float32 logits with exact duplicate rows and tied scores, labels ~70 % correct."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, size=(n, k)).astype(np.float32)
    logits[: n // 4] = np.round(logits[: n // 4])  # many ties
    logits[n // 4: n // 4 + 60] = logits[:60]  # exact duplicate rows
    pred = logits.argmax(axis=1)
    labels = np.where(rng.random(n) < 0.7, pred, (pred + 1) % k).astype(np.int64)
    return logits, labels


def test_same_input_gives_byte_identical_json(cli, dumps):
    path = dumps.parquet("m.parquet", *_tied_data())
    first = cli("evaluate", path, "--json", "-")
    second = cli("evaluate", path, "--json", "-")
    assert first.exit_code == 0 and first.stdout_bytes == second.stdout_bytes


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["split-column", "holdout"])
def test_shuffled_rows_give_byte_identical_json(cli, dumps, out_dir, rule):
    logits, labels = _tied_data()
    split = np.where(np.random.default_rng(2).random(labels.size) < 0.3, "val", "test") if rule == "split-column" else None
    path, target = dumps.path("m.parquet"), out_dir / "r.json"

    ids = np.array([f"r{i}" for i in range(labels.size)])  # without ids a hold-out is by position: order matters

    def run(order, **kwargs):
        dumps.parquet("m.parquet", logits[order], labels[order], split=None if split is None else split[order],
                      extra={"id": pa.array(ids[order])}, **kwargs)
        result = cli("evaluate", path, "--json", target, "-q")
        assert result.exit_code == 0, result.stderr
        return target.read_bytes()

    original = run(np.arange(labels.size))
    assert json.loads(original)["models"][0]["split"] == rule
    for seed in range(3):
        order = np.random.default_rng(100 + seed).permutation(labels.size)
        assert run(order, row_group_size=97) == original, f"permutation {seed} changed the JSON"
    assert run(np.arange(labels.size)[::-1]) == original
    assert path.exists()


def test_shuffled_rows_with_val_file_give_byte_identical_json(cli, dumps):
    logits, labels = _tied_data()
    val_logits, val_labels = _tied_data(n=300, seed=10)
    test, val = dumps.path("t.parquet"), dumps.path("v.parquet")
    outputs = []
    for seed in (None, 1, 2):
        order = np.arange(600) if seed is None else np.random.default_rng(seed).permutation(600)
        val_order = np.arange(300) if seed is None else np.random.default_rng(seed + 50).permutation(300)
        dumps.parquet("t.parquet", logits[order], labels[order])
        dumps.parquet("v.parquet", val_logits[val_order], val_labels[val_order], layout="wide")
        result = cli("evaluate", test, "--val", val, "--json", "-")
        assert result.exit_code == 0, result.stderr
        document = json.loads(result.stdout)
        document["models"][0].pop("fingerprint")  # without ids the rows are known by their order
        outputs.append(json.dumps(document))
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]


# ============================================================== 4. --json PATH is atomic
def test_json_path_is_complete_and_alone(cli, split_file, out_dir):
    target = out_dir / "result.json"
    result = cli("evaluate", split_file, "--json", target, "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert os.listdir(out_dir) == ["result.json"]
    assert target.read_text() == cli("evaluate", split_file, "--json", "-").stdout


def test_json_path_overwrites_a_previous_file(cli, split_file, out_dir):
    target = out_dir / "result.json"
    target.write_text("x" * 1_000_000)
    assert cli("evaluate", split_file, "--json", target, "-q").exit_code == 0
    json.loads(target.read_text())
    assert os.listdir(out_dir) == ["result.json"]


def _render_then_fail(exc_type):
    real = EvaluationResult.to_json

    def to_json(self):
        text = real(self)
        half = text[: len(text) // 2]
        assert half  # the rendering got halfway
        raise exc_type("rendering failed midway")

    return to_json


@pytest.mark.slow
@pytest.mark.parametrize("exc_type", [RuntimeError, MemoryError, KeyboardInterrupt])
@pytest.mark.parametrize("previous", [False, True])
def test_json_path_failed_rendering_leaves_no_file(cli, split_file, out_dir, monkeypatch, exc_type, previous):
    target = out_dir / "result.json"
    if previous:
        target.write_text("previous\n")
    monkeypatch.setattr(EvaluationResult, "to_json", _render_then_fail(exc_type))
    result = cli("evaluate", split_file, "--json", target)
    assert result.exit_code != 0
    if exc_type is not KeyboardInterrupt:  # Click turns KeyboardInterrupt into "Aborted!", exit 1
        assert isinstance(result.exception, exc_type), repr(result.exception)
    assert sorted(os.listdir(out_dir)) == (["result.json"] if previous else []), "file or temp file left"
    if previous:
        assert target.read_text() == "previous\n"


@pytest.mark.parametrize("stage", ["write", "fsync", "replace"])
def test_json_path_failure_while_writing_leaves_no_file(cli, split_file, out_dir, monkeypatch, stage):
    """The temp file already holds (part of) the JSON when the failure comes."""
    target = out_dir / "result.json"
    if stage == "write":
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, handle):
                self.handle = handle

            def write(self, text):
                self.handle.write(text[: len(text) // 2])
                self.handle.flush()
                raise OSError(28, "No space left on device")

            def __getattr__(self, name):
                return getattr(self.handle, name)

            def __enter__(self):
                self.handle.__enter__()
                return self

            def __exit__(self, *exc):
                return self.handle.__exit__(*exc)

        monkeypatch.setattr(selcal.io.os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    elif stage == "fsync":
        def fail_fsync(fd):
            raise OSError(5, "Input/output error")
        monkeypatch.setattr(selcal.io.os, "fsync", fail_fsync)
    else:
        def fail_replace(src, dst):
            assert os.path.getsize(src) > 0  # the complete temp file exists beside the target
            raise OSError(18, "Invalid cross-device link")
        monkeypatch.setattr(selcal.io.os, "replace", fail_replace)
    result = cli("evaluate", split_file, "--json", target)
    # The injected failure was reached and reported as one line, exit status 2.
    assert result.exit_code == 2, repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error:") and "cannot write" in lines[0], lines
    assert os.listdir(out_dir) == [], "file or temp file left"


# ============================================================== 5. the terminal table
def test_table_shows_model_and_scores(cli, split_file):
    result = cli("evaluate", split_file)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "resnet" in text
    for score in ("msp", "max_logit", "pnorm", "temp"):
        assert score in text, score
    for label in ("AURC", "AUROC", "ECE", "%"):
        assert label in text, label
    assert "Traceback" not in result.output


def test_table_for_several_models_and_some_scores(cli, dumps, h):
    a = dumps.parquet("alpha.parquet", *h.make_data(300, 3, 51))
    b = dumps.npz("beta.npz", *h.make_data(300, 5, 52))
    result = cli("evaluate", a, b, "--scores", "msp,max_logit")
    assert result.exit_code == 0, result.stderr
    assert "alpha" in result.stdout and "beta" in result.stdout
    assert "msp" in result.stdout and "max_logit" in result.stdout
    assert "pnorm" not in result.stdout and "temp" not in result.stdout


def test_table_with_undefined_values_prints(cli, dumps, data):
    logits, _ = data
    path = dumps.parquet("perfect.parquet", logits, logits.argmax(axis=1))
    result = cli("evaluate", path)
    assert result.exit_code == 0, (result.stderr, repr(result.exception))
    assert "perfect" in result.stdout
    assert not re.search(r"\b(nan|inf|infinity)\b", result.stdout, re.IGNORECASE), result.stdout


def test_table_and_json_file_together(cli, split_file, out_dir):
    result = cli("evaluate", split_file, "--json", out_dir / "r.json")
    assert result.exit_code == 0, result.stderr
    assert "resnet" in result.stdout and "msp" in result.stdout
    json.loads((out_dir / "r.json").read_text())


def test_quiet_prints_nothing(cli, split_file, out_dir):
    result = cli("evaluate", split_file, "-q", "--json", out_dir / "r.json")
    assert result.exit_code == 0 and result.stdout == ""


def _dump(path):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 3)).astype(np.float32)
    pq.write_table(pa.table({"logits": list(logits), "label": rng.integers(0, 3, 200)}), path)


def test_backslash_and_brackets_in_a_file_name_stay_in_the_model_name(tmp_path):
    (tmp_path / "runs").mkdir()
    odd = [tmp_path / "$x_y^z\\.parquet", tmp_path / "runs" / "resnet[v2].parquet",
           tmp_path / "runs" / "vit*.parquet"]
    for path in odd:
        _dump(path)
    result = selcal.evaluate([str(p) for p in odd], scores="msp")
    assert [m.name for m in result.models] == ["$x_y^z\\", "resnet[v2]", "vit*"]


@pytest.mark.slow
@pytest.mark.parametrize("flag,value,said", [
    ("--risks", "{x}", "--risks takes numbers, e.g. 0.01,0.05 or 1%,5%; got '{x}'"),
    ("--p-grid", "1-{2}", "--p-grid takes positive integers such as 1-10 or 1,2,4; got '1-{2}'"),
    ("--scores", "msp,{oops}", "unknown score {oops}; choose from"),
])
def test_braces_in_an_option_value_are_refused_in_one_line(tmp_path, flag, value, said):
    # An option's message is a template whose "{option}" becomes the flag (or the keyword): any other
    # brace, in a value the user typed, is text (str.format raised KeyError or IndexError on it).
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    path = tmp_path / "dump.parquet"
    pq.write_table(pa.table({"logits": rng.normal(size=(200, 3)).tolist(), "label": rng.integers(0, 3, 200)}), path)
    out = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(path), flag, value],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line, = out.stderr.strip().splitlines()
    assert line.startswith("selcal: error: " + said)
