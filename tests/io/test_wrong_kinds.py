"""Inputs of the wrong kind, and inputs of the right kind in another shape (CONVENTIONS.md, "Inputs of
the wrong kind", "Column names").

- A file given to the wrong command is one line saying what it is and which command reads it.
- A folder holding one ordinary dump is read as that dump (a folder of segmentation images is not).
- A file of confidences (label, prediction, confidence) is read from CSV as from npz and Parquet.
- Labels and predictions are found under the common spellings, one list each.
- ``--logits-cols`` names per-class columns of any name: a list, a prefix or a regular expression.
- The error of an lm-evaluation-harness log with a missing field is said once.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import one_error_line
from typer.testing import CliRunner

import selcal
from selcal.cli import app
from selcal.errors import SelcalError
from selcal.io import read_dump
from selcal.io.columns import LABEL_NAMES, PREDICTION_NAMES

runner = CliRunner()
N, K = 240, 4


def data(seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, N)
    logits = np.round(rng.normal(0.0, 2.0, (N, K)) * 8) / 8  # exact in a CSV
    logits[np.arange(N), labels] += 1.5
    return logits, labels


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kinds")
    logits, labels = data()
    np.savez(folder / "m.npz", logits=logits, labels=labels)
    pq.write_table(pa.table({"logits": list(logits), "label": labels}), folder / "m.parquet")
    (folder / "m.csv").write_text("label," + ",".join(f"logit_{k}" for k in range(K)) + "\n" + "".join(
        f"{y}," + ",".join(repr(v) for v in row) + "\n" for row, y in zip(logits.tolist(), labels.tolist())))
    (folder / "m.jsonl").write_text("".join(json.dumps({"logits": row.tolist(), "label": int(y)}) + "\n"
                                            for row, y in zip(logits, labels)))
    out = runner.invoke(app, ["evaluate", str(folder / "m.npz"), "--json", str(folder / "result.json"), "-q"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(app, ["check", str(folder / "result.json"), "--baseline", str(folder / "result.json"),
                              "--json", str(folder / "report.json"), "-q"])
    assert out.exit_code == 0, out.output
    return folder


# --------------------------------------------------------------------------- a file given to the wrong command
@pytest.mark.parametrize("name, what", [("m.parquet", "a Parquet file (a logit dump)"),
                                        ("m.npz", "an .npz archive of arrays (a logit dump)"),
                                        ("m.csv", "CSV text (a dump?)"),
                                        ("m.jsonl", "a JSON Lines file (a dump, or an lm-evaluation-harness log)"),
                                        ("report.json", "a selcal check report JSON")])
def test_check_given_another_kind_of_file_says_what_it_is(files, name, what):
    line = one_error_line(runner.invoke(app, ["check", str(files / name)]))
    assert line.startswith(f"selcal: error: {files / name}: is {what}")
    assert "check reads the result JSON `selcal evaluate --json` writes" in line
    assert ("`selcal evaluate` reads" in line) == (name != "report.json")


@pytest.mark.parametrize("command", [["evaluate"], ["threshold", "--risk", "0.1"]])
def test_a_result_json_given_to_a_command_of_dumps_says_check_reads_it(files, command):
    shutil.copy(files / "result.json", files / "result.data")
    for name in ("result.json", "result.data"):  # by its bytes, whatever its name
        line = one_error_line(runner.invoke(app, [*command[:1], str(files / name), *command[1:]]))
        assert line == (f"selcal: error: {files / name}: is a selcal result JSON (written by selcal evaluate --json), "
                        "which `selcal check` reads; this command reads logit dumps (Parquet, CSV, JSON Lines, .npz, "
                        ".npy, .pt)")


def test_compare_given_a_result_json_says_so(files):
    line = one_error_line(runner.invoke(app, ["compare", str(files / "result.json"), str(files / "m.npz")]))
    assert "is a selcal result JSON" in line and "`selcal check` reads" in line


# --------------------------------------------------------------------------- a folder of one dump
def test_a_folder_holding_one_dump_is_read_as_that_dump(files, tmp_path):
    folder = tmp_path / "resnet"
    folder.mkdir()
    shutil.copy(files / "m.npz", folder / "test.npz")
    (folder / "README.txt").write_text("the test logits")  # beside it, other files are ignored
    whole = selcal.evaluate(str(files / "m.npz"), scores="msp,max_logit")
    in_folder = selcal.evaluate(str(folder), scores="msp,max_logit")
    assert in_folder.models[0].name == "resnet"
    assert in_folder.scores["msp"] == whole.scores["msp"]
    for name in ("m.csv", "m.parquet"):
        other = tmp_path / f"one_{name.split('.')[1]}"
        other.mkdir()
        shutil.copy(files / name, other / name)
        assert selcal.evaluate(str(other), scores="msp").scores["msp"]["aurc"] == whole.scores["msp"]["aurc"]


def test_a_folder_of_one_segmentation_image_is_still_a_segmentation_folder(tmp_path):
    folder = tmp_path / "seg"
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.savez(folder / "img0.npz", logits=rng.normal(size=(3, 8, 8)).astype(np.float32),
             label=rng.integers(0, 3, (8, 8)))
    result = selcal.evaluate(str(folder), scores="msp")
    assert result.models[0].n_eval + result.models[0].n_val == 64


def test_a_folder_of_two_dumps_is_not_guessed(files, tmp_path):
    folder = tmp_path / "two"
    folder.mkdir()
    shutil.copy(files / "m.npz", folder / "a.npz")
    shutil.copy(files / "m.npz", folder / "b.npz")
    with pytest.raises(SelcalError):  # (two ordinary dumps: a segmentation folder's messages, as before)
        read_dump(folder)


# --------------------------------------------------------------------------- confidences, spellings
def _confidences(path, label="label", pred="pred"):
    logits, labels = data()
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    columns = {label: labels, pred: p.argmax(axis=1), "confidence": p.max(axis=1)}
    if path.suffix == ".npz":
        np.savez(path, **columns)
    elif path.suffix == ".parquet":
        pq.write_table(pa.table(columns), path)
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        rows = zip(*(values.tolist() for values in columns.values()))
        path.write_text(sep.join(columns) + "\n" + "".join(sep.join(repr(v) for v in row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_file_of_confidences_is_read_from_csv_with_the_numbers_of_npz(tmp_path, suffix):
    reference = selcal.evaluate(str(_confidences(tmp_path / "c.npz")))
    text = selcal.evaluate(str(_confidences(tmp_path / f"c{suffix}")))
    assert text.scores["confidence"] == reference.scores["confidence"]
    assert text.models[0].n_eval == reference.models[0].n_eval


@pytest.mark.parametrize("label", LABEL_NAMES)
def test_every_label_spelling_is_found(tmp_path, label):
    logits, labels = data()
    path = tmp_path / "m.npz"
    np.savez(path, logits=logits, **{label: labels})
    assert np.array_equal(read_dump(path).labels, labels)


@pytest.mark.parametrize("pred", PREDICTION_NAMES)
@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".npz"])
def test_every_prediction_spelling_makes_a_file_of_confidences(tmp_path, pred, suffix):
    path = _confidences(tmp_path / f"c{suffix}", label="true_label", pred=pred)
    reference = selcal.evaluate(str(_confidences(tmp_path / "ref.npz")))
    assert selcal.evaluate(str(path)).scores["confidence"] == reference.scores["confidence"]


def test_two_spellings_of_the_label_are_refused_naming_both(tmp_path):
    logits, labels = data()
    path = tmp_path / "m.npz"
    np.savez(path, logits=logits, label=labels, true_label=labels)
    with pytest.raises(SelcalError, match=r"several label columns \(label, true_label\)"):
        read_dump(path)


# --------------------------------------------------------------------------- --logits-cols
NAMES = ["cat", "dog", "bird", "fish"]


@pytest.fixture
def named(tmp_path):
    logits, labels = data()
    frame = {**{f"p_{name}": logits[:, k] for k, name in enumerate(NAMES)}, "label": labels, "note": ["x"] * N}
    pq.write_table(pa.table(frame), tmp_path / "named.parquet")
    (tmp_path / "named.csv").write_text(",".join(frame) + "\n" + "".join(
        ",".join(repr(float(frame[c][i])) if c != "note" else "x" for c in frame) + "\n" for i in range(N)))
    return tmp_path, logits, labels


@pytest.mark.parametrize("spec", ["p_cat,p_dog,p_bird,p_fish", "p_*", "/p_(cat|dog|bird|fish)/"])
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_logits_cols_names_per_class_columns_of_any_name(named, spec, suffix):
    folder, logits, labels = named
    dump = read_dump(folder / f"named{suffix}", logits_col=spec)
    assert np.array_equal(dump.logits, logits) and np.array_equal(dump.labels, labels)


def test_logits_cols_keeps_the_order_given(named):
    folder, logits, _ = named
    dump = read_dump(folder / "named.parquet", logits_col="p_fish,p_cat,p_dog,p_bird")
    assert np.array_equal(dump.logits, logits[:, [3, 0, 1, 2]])


def test_logits_cols_on_the_command_line(named):
    folder, logits, labels = named
    out = runner.invoke(app, ["evaluate", str(folder / "named.csv"), "--logits-cols", "p_*", "--scores", "msp",
                              "--json", "-"])
    assert out.exit_code == 0, out.output
    reference = selcal.evaluate_arrays(logits, labels, scores="msp")
    assert json.loads(out.stdout)["models"][0]["scores"]["msp"]["aurc"] == reference.scores["msp"]["aurc"]


@pytest.mark.parametrize("spec, words", [("p_cat,p_wolf", "names 'p_wolf', which is not a column"),
                                         ("q_*", "no column names start with 'q_'"),
                                         ("/p_(/", "not a regular expression"),
                                         ("/note|p_cat/", "column 'note': is not a float column"),
                                         ("p_cat,p_cat", "a column is named twice")])
def test_a_bad_logits_cols_is_one_line(named, spec, words):
    folder, _, _ = named
    with pytest.raises(SelcalError) as error:
        read_dump(folder / "named.parquet", logits_col=spec)
    assert words in str(error.value) and "\n" not in str(error.value)


# --------------------------------------------------------------------------- lm-eval: an error said once
def test_an_lm_eval_log_missing_a_field_says_so_once(tmp_path):
    from pathlib import Path

    source = sorted((Path(__file__).parents[2] / "sample_logits" / "lm_eval" / "synthetic__llm-small").glob(
        "samples_arc*.jsonl"))[0]
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    assert len({len(json.dumps(r["filtered_resps"])) for r in rows}) > 1  # several choice counts: several models
    del rows[3]["target"]
    path = tmp_path / source.name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = runner.invoke(app, ["evaluate", str(path)])
    line = one_error_line(out)
    assert "column 'target', line 4: is missing" in line
