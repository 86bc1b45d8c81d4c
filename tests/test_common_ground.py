"""Comparisons on common ground (issue 20; CONVENTIONS.md, "Validation split" and
"Comparisons on common ground"): the same rows for every model, split-naming folders,
results that know their data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import selcal
from selcal.identity import id_hashes, position_hashes

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logits"
CE = SAMPLES / "calibrator_cifar10_resnet50_ce.parquet"
FOCAL = SAMPLES / "calibrator_cifar10_resnet50_focal.parquet"



def sample(path=CE, split=None):
    """(logits float32, labels, ids, split) of a sample dump, optionally one split only."""
    table = pq.read_table(path)
    logits = np.stack(table.column("logits").to_numpy(zero_copy_only=False)).astype(np.float32)
    labels = table.column("label").to_numpy()
    ids = np.array(table.column("id").to_pylist())
    splits = np.array(table.column("split").to_pylist())
    if split is not None:
        keep = splits == split
        return logits[keep], labels[keep], ids[keep], splits[keep]
    return logits, labels, ids, splits


def write(path, logits, labels, ids=None, split=None, dtype=pa.float32()):
    columns = {"label": pa.array(labels, pa.int64()),
               "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel(), dtype), logits.shape[1])}
    if ids is not None:
        columns["id"] = pa.array(ids)
    if split is not None:
        columns["split"] = pa.array(split)
    os.makedirs(os.path.dirname(str(path)) or ".", exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return str(path)


def strip_place(model: dict) -> dict:
    return {k: v for k, v in model.items() if k not in ("name", "path", "val_path")}


# ============================================================ the same rows for every model
def test_identity_hash_ignores_width_and_type_and_differs_by_seed():
    ids = np.array(["a", "bb", "test/004211", "ü€𝄞"])
    wide = np.array(["a", "bb", "test/004211", "ü€𝄞", "x" * 40])
    assert np.array_equal(id_hashes(ids, 0), id_hashes(wide, 0)[:4])
    assert np.array_equal(id_hashes(np.arange(5), 3), id_hashes(np.arange(5).astype(str), 3))
    assert len(set(id_hashes(ids, 0).tolist())) == 4
    assert not np.array_equal(id_hashes(ids, 0), id_hashes(ids, 1))
    assert not np.array_equal(position_hashes(10, 0), position_hashes(10, 1))


@pytest.mark.parametrize("with_ids", [False, True])
def test_identical_prediction_copies_give_identical_numbers_in_one_leaderboard(tmp_path, with_ids):
    """Test-only dumps of one model: as saved, with every logit + 1 (no probability changes)
    and in float16. The hold-out picks the same rows for all three, so the leaderboard's
    numbers agree (they differed by 0.1% accuracy when the hold-out hashed row content)."""
    logits, labels, ids, _ = sample(split="test")
    ids = ids if with_ids else None
    plain = write(tmp_path / "plain.parquet", logits, labels, ids)
    shifted = write(tmp_path / "shifted.parquet", logits + np.float32(1), labels, ids)
    half = write(tmp_path / "half.parquet", logits.astype(np.float16), labels, ids, dtype=pa.float16())
    result = selcal.evaluate([plain, shifted, half])
    a, b, c = result.models
    assert a.split == b.split == c.split == "holdout"
    assert a.n_eval == b.n_eval == c.n_eval == 8000
    assert a.accuracy == b.accuracy  # the very same rows: the same predictions, the same count of errors
    assert a.extra["holdout_by"] == ("id" if with_ids else "position")
    pred16 = logits.astype(np.float16).argmax(1)
    if np.array_equal(pred16, logits.argmax(1)):
        assert a.accuracy == c.accuracy
    for key in ("aurc", "ece", "auroc"):
        assert b.scores["msp"][key] == pytest.approx(a.scores["msp"][key], rel=1e-5), key
        assert c.scores["msp"][key] == pytest.approx(a.scores["msp"][key], rel=2e-2, abs=2e-4), key


def test_shuffled_file_with_ids_gives_identical_json(tmp_path):
    logits, labels, ids, _ = sample(split="test")
    perm = np.random.default_rng(5).permutation(labels.size)
    a = write(tmp_path / "a.parquet", logits, labels, ids)
    b = write(tmp_path / "b.parquet", logits[perm], labels[perm], ids[perm])
    for stream in (False, True):
        ja, jb = (selcal.evaluate(p, stream=stream).to_dict()["models"][0] for p in (a, b))
        assert ja["split"] == "holdout"
        assert json.dumps(strip_place(ja), sort_keys=True) == json.dumps(strip_place(jb), sort_keys=True)


def test_holdout_is_the_same_streamed_and_in_memory(tmp_path):
    logits, labels, ids, _ = sample(split="test")
    for rows in (ids, None):
        path = write(tmp_path / f"d{rows is None}.parquet", logits, labels, rows)
        memory = selcal.evaluate(path, stream=False).to_json()
        assert selcal.evaluate(path, stream=True, chunk_rows=999).to_json() == memory


def test_holdout_by_position_ignores_dropped_rows_of_other_splits(tmp_path):
    """Without ids a row is known by its position among the rows that can be evaluated: a dump
    that also holds 'train' rows holds out the same test rows as one without them."""
    logits, labels, _, _ = sample(split="test")
    extra, extra_labels, _, _ = sample(split="val")
    plain = write(tmp_path / "plain.parquet", logits, labels, split=["test"] * labels.size)
    mixed = write(tmp_path / "mixed.parquet", np.concatenate([extra[:700], logits, extra[700:900]]),
                  np.concatenate([extra_labels[:700], labels, extra_labels[700:900]]),
                  split=["train"] * 700 + ["test"] * labels.size + ["train"] * 200)
    a, b = (selcal.evaluate(p).to_dict()["models"][0] for p in (plain, mixed))
    b.pop("n_train_dropped")
    assert json.dumps(strip_place(a), sort_keys=True) == json.dumps(strip_place(b), sort_keys=True)


# ============================================================ folders whose names name splits
def _split_layouts(tmp_path):
    val = sample(split="val")
    test = sample(split="test")
    train_logits = val[0][:50] + np.float32(3)
    layouts = {
        "huggingface": {"data/validation-00000-of-00001.parquet": val, "data/test-00000-of-00002.parquet":
                        tuple(a[:6000] for a in test), "data/test-00001-of-00002.parquet": tuple(a[6000:] for a in test),
                        "data/train-00000-of-00001.parquet": (train_logits, val[1][:50], val[2][:50], None)},
        "hive": {"split=val/part-0.parquet": val, "split=test/part-0.parquet": test},
        "folders": {"val/0.parquet": val, "test/0.parquet": test},
    }
    out = {}
    for name, files in layouts.items():
        for relative, (logits, labels, ids, _) in files.items():
            write(tmp_path / name / relative, logits, labels, ids)
        out[name] = str(tmp_path / name)
    write(tmp_path / "val.parquet", val[0], val[1], val[2])
    write(tmp_path / "test.parquet", test[0], test[1], test[2])
    return out


def test_split_naming_folders_equal_val_file(tmp_path):
    layouts = _split_layouts(tmp_path)
    reference = selcal.evaluate(str(tmp_path / "test.parquet"), str(tmp_path / "val.parquet")).to_dict()["models"][0]
    assert reference["split"] == "val-file"
    keys = ("n_eval", "n_val", "accuracy", "nll", "brier", "scores")
    for name, folder in layouts.items():
        for stream in (False, True):
            model = selcal.evaluate(folder, stream=stream).to_dict()["models"][0]
            assert model["split"] == "split-names", name
            for key in keys:
                assert model[key] == reference[key], (name, key)
        assert selcal.evaluate(folder + "/*/*.parquet" if name != "huggingface" else folder + "/data/*.parquet"
                               ).models[0].split == "split-names"


def test_split_naming_folder_report_names_the_rule(tmp_path, cli):
    folder = _split_layouts(tmp_path)["huggingface"]
    result = cli("evaluate", folder)
    assert result.exit_code == 0, result.output
    assert "named by their file or folder names" in result.stdout


def test_split_naming_folder_refuses_unnamed_parts_and_disagreeing_columns(tmp_path, cli):
    logits, labels, ids, _ = sample(split="test")
    write(tmp_path / "mixed/test-0.parquet", logits[:100], labels[:100])
    write(tmp_path / "mixed/part-1.parquet", logits[100:200], labels[100:200])
    result = cli("evaluate", tmp_path / "mixed")
    assert result.exit_code == 2 and "names no split" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    write(tmp_path / "both/val/0.parquet", logits[:100], labels[:100], split=["test"] * 100)
    write(tmp_path / "both/test/0.parquet", logits[100:200], labels[100:200], split=["test"] * 100)
    result = cli("evaluate", tmp_path / "both")
    assert result.exit_code == 2 and "the file's name puts its rows in the split 'val'" in result.stderr
    write(tmp_path / "two/val/test-0.parquet", logits[:100], labels[:100])
    result = cli("evaluate", tmp_path / "two")
    assert result.exit_code == 2 and "name two splits" in result.stderr


def test_plain_part_folders_still_have_no_split(tmp_path):
    logits, labels, ids, _ = sample(split="test")
    write(tmp_path / "shards/part-0.parquet", logits[:5000], labels[:5000], ids[:5000])
    write(tmp_path / "shards/part-1.parquet", logits[5000:], labels[5000:], ids[5000:])
    assert selcal.evaluate(str(tmp_path / "shards")).models[0].split == "holdout"
