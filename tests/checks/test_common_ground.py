"""Comparisons on common ground (issue 20; CONVENTIONS.md, "Validation split" and
"Comparisons on common ground"): the same rows for every model, split-naming folders,
results that know their data."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import CE, FOCAL, SAMPLES

import selcal
from selcal.checks.common_ground import leaderboard_warning
from selcal.pipeline.identity import id_hashes, position_hashes


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_shuffled_file_with_ids_gives_identical_json(tmp_path):
    logits, labels, ids, _ = sample(split="test")
    perm = np.random.default_rng(5).permutation(labels.size)
    a = write(tmp_path / "a.parquet", logits, labels, ids)
    b = write(tmp_path / "b.parquet", logits[perm], labels[perm], ids[perm])
    for stream in (False, True):
        ja, jb = (selcal.evaluate(p, stream=stream).to_dict()["models"][0] for p in (a, b))
        assert ja["split"] == "holdout"
        assert json.dumps(strip_place(ja), sort_keys=True) == json.dumps(strip_place(jb), sort_keys=True)


@pytest.mark.slow
def test_holdout_is_the_same_streamed_and_in_memory(tmp_path):
    logits, labels, ids, _ = sample(split="test")
    for rows in (ids, None):
        path = write(tmp_path / f"d{rows is None}.parquet", logits, labels, rows)
        memory = selcal.evaluate(path, stream=False).to_json()
        assert selcal.evaluate(path, stream=True, chunk_rows=999).to_json() == memory


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ============================================================ results that know their data
@pytest.mark.slow
def test_every_models_json_has_the_fingerprint_of_its_evaluation_rows(tmp_path, cli):
    logits, labels, ids, _ = sample(split="test")
    with_ids = write(tmp_path / "ids.parquet", logits, labels, ids)
    without = write(tmp_path / "plain.parquet", logits, labels)
    split = selcal.evaluate(str(CE)).to_dict()["models"][0]["fingerprint"]
    assert split["rows"] == 10000 and set(split) == {"rows", "labels", "ids"}
    for path in (with_ids, without):
        memory = selcal.evaluate(path, stream=False).to_dict()["models"][0]
        streamed = selcal.evaluate(path, stream=True).to_dict()["models"][0]
        assert memory["fingerprint"] == streamed["fingerprint"]
        assert memory["fingerprint"]["rows"] == memory["n_eval"] == 8000
        assert ("ids" in memory["fingerprint"]) == (path == with_ids)
    # the same rows in another order: with ids the same fingerprint, without ids another one
    perm = np.random.default_rng(1).permutation(labels.size)
    shuffled = write(tmp_path / "shuffled.parquet", logits[perm], labels[perm], ids[perm])
    assert (selcal.evaluate(shuffled).models[0].extra["fingerprint"]
            == selcal.evaluate(with_ids).models[0].extra["fingerprint"])
    # arrays: the fingerprint of the rows given (errors-top numbering is not an id)
    model = selcal.evaluate_arrays(logits, labels, scores=("msp",))
    assert model.extra["fingerprint"] == selcal.evaluate(without, scores=("msp",)).models[0].extra["fingerprint"]
    numbered = cli("evaluate", without, "--errors-top", "3", "--errors-csv", tmp_path / "e.csv", "--json", "-")
    assert json.loads(numbered.stdout)["models"][0]["fingerprint"] == \
        selcal.evaluate(without).models[0].extra["fingerprint"]


@pytest.mark.slow
def test_leaderboard_of_other_rows_is_a_board_per_group_naming_its_rows(tmp_path, cli):
    logits, labels, _, _ = sample(split="test")
    a = write(tmp_path / "a.parquet", logits, labels)
    b = write(tmp_path / "b.parquet", logits + np.float32(1), labels)
    c = write(tmp_path / "c.parquet", logits[:9000], labels[:9000])
    same = cli("evaluate", a, b)
    assert same.exit_code == 0 and "not evaluated on the same rows" not in same.stderr
    assert "boards" not in same.stdout
    other = cli("evaluate", a, b, c)
    # grouped by their rows, each group named by what it shares (issue 34): a board each, no warning
    assert "not evaluated on the same rows" not in other.stderr, other.stderr
    lines = other.stdout.splitlines()
    assert lines[0] == "the models were split into 2 boards: they were not all evaluated on the same rows"
    assert "8,000 rows: 2 models on the same rows" in lines and "7,200 rows: 1 model" in lines
    assert "2 groups, a and b of 8,000 rows and c of 7,200 rows" in leaderboard_warning(
        selcal.evaluate([str(a), str(b), str(c)]).models)  # (the words study refuses with)


@pytest.mark.slow
def test_check_refuses_a_baseline_of_other_data_unless_allowed(tmp_path, cli):
    logits, labels, ids, _ = sample(split="test")
    base = cli.json_file(tmp_path / "base.json", write(tmp_path / "a.parquet", logits, labels, ids))
    relabelled = labels.copy()
    relabelled[:50] = (relabelled[:50] + 1) % 10  # same N, same K, same split rule: other data
    other = cli.json_file(tmp_path / "other.json", write(tmp_path / "b.parquet", logits, relabelled, ids))
    result = cli("check", other, "--baseline", base)
    assert result.exit_code == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "evaluated on other data" in result.stderr and "--allow-other-data" in result.stderr
    allowed = cli("check", other, "--baseline", base, "--allow-other-data")
    assert allowed.exit_code in (0, 1) and "--allow-other-data" in " ".join(allowed.stdout.split())
    # a baseline written before fingerprints existed: judged as before
    old = json.loads(base.read_text())
    old["models"][0].pop("fingerprint")
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert cli("check", base, "--baseline", tmp_path / "old.json").exit_code == 0


@pytest.mark.slow
def test_compare_refuses_other_data_and_notes_rows_aligned_by_order(tmp_path, cli):
    logits, labels, _, _ = sample(split="test")
    a = write(tmp_path / "a.parquet", logits, labels)
    relabelled = labels.copy()
    relabelled[:50] = (relabelled[:50] + 1) % 10
    b = write(tmp_path / "b.parquet", logits, relabelled)
    refused = cli("compare", a, b, "--bootstrap", "20", "--scores", "msp")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--allow-other-data" in refused.stderr
    allowed = cli("compare", a, b, "--bootstrap", "20", "--scores", "msp", "--allow-other-data")
    assert allowed.exit_code in (0, 1), allowed.stderr
    text = " ".join(allowed.stdout.split())  # notes are wrapped at 100 columns
    assert "rows aligned by their order" in text and "not on the same data" in text
    by_id = cli("compare", CE, FOCAL, "--bootstrap", "20", "--scores", "msp")
    assert by_id.exit_code == 0 and "aligned by their order" not in by_id.stdout


@pytest.mark.slow
def test_ensemble_of_members_without_ids_says_they_are_aligned_by_order(tmp_path, cli):
    logits, labels, ids, _ = sample(split="test")
    a = write(tmp_path / "a.parquet", logits, labels)
    b = write(tmp_path / "b.parquet", logits * np.float32(0.5), labels)
    result = cli("ensemble", a, b, "--out", tmp_path / "e.parquet", "-q")
    assert result.exit_code == 0 and "aligned by row order" in result.stderr
    a = write(tmp_path / "ai.parquet", logits, labels, ids)
    b = write(tmp_path / "bi.parquet", logits * np.float32(0.5), labels, ids)
    assert "aligned by row order" not in cli("ensemble", a, b, "--out", tmp_path / "ei.parquet", "-q").stderr


# ============================================================ a leaderboard that says what it means
@pytest.mark.slow
def test_best_is_the_best_of_every_score_msp_included_and_labelled_so(tmp_path):
    from rich.console import Console

    from selcal.report import leaderboard, leaderboard_csv, render_leaderboard

    result = selcal.evaluate([str(CE), str(FOCAL)], scores="msp,max_logit,temp")
    rows = leaderboard(result)
    for row, model in zip(rows, sorted(result.models, key=lambda m: min(s["aurc"] for s in m.scores.values()))):
        aurc = {name: values["aurc"] for name, values in model.scores.items()}
        assert row["model"] == model.name
        assert row["best_score"] == min(aurc, key=aurc.get) and row["aurc_best_score"] == min(aurc.values())
    focal = next(row for row in rows if "focal" in row["model"])
    # focal: msp AURC 0.654% < temp 0.661%: the best is msp, which "best post-hoc" could never name
    assert focal["best_score"] == "msp" and focal["best_posthoc"] == "temp"
    console = Console(width=160, record=True)
    render_leaderboard(rows, console)
    text = " ".join(console.export_text().split())  # (the note is wrapped at word boundaries)
    assert "best score" in text and "lowest AURC of every evaluated score (msp included)" in text
    header = leaderboard_csv(rows).splitlines()[0].split(",")
    assert {"best_score", "aurc_best_score", "best_posthoc", "aurc_best_posthoc"} <= set(header)


@pytest.mark.slow
def test_sort_by_accepts_every_column_of_the_csv(tmp_path, cli):
    logits, labels, _, _ = sample(split="test")
    paths = []
    for i, share in enumerate((0.0, 0.3)):
        pred = logits.argmax(1)
        conf = np.where(np.random.default_rng(i).random(labels.size) < share, 0.5, 0.9)
        table = pa.table({"label": labels, "prediction": pred, "confidence": conf})
        paths.append(tmp_path / f"conf{i}.parquet")
        pq.write_table(table, paths[-1])
    csv_out = cli("evaluate", *paths, "--csv", "-", "--sort-by", "aurc_confidence")
    assert csv_out.exit_code == 0, csv_out.stderr
    header = csv_out.stdout.splitlines()[0].split(",")
    assert "aurc_confidence" in header
    for column in header:
        result = cli("evaluate", CE, FOCAL, "--scores", "msp,max_logit", "--sort-by", column, "--csv", "-")
        assert result.exit_code == 0 or "aurc_confidence" in column, (column, result.stderr)


@pytest.mark.slow
def test_a_sweep_is_ordered_by_the_swept_value_unless_sort_by_says_otherwise(cli):
    files = sorted(SAMPLES.glob("lspair_alpha*.parquet"))
    result = cli("evaluate", *files, "--sweep", "alpha", "--scores", "msp,max_logit", "--csv", "-")
    assert result.exit_code == 0, result.stderr
    alphas = [float(line.split(",")[1]) for line in result.stdout.splitlines()[1:]]
    assert alphas == sorted(alphas) == [0.0, 0.05, 0.1, 0.2]
    by_aurc = cli("evaluate", *files, "--sweep", "alpha", "--scores", "msp,max_logit", "--csv", "-",
                  "--sort-by", "aurc_msp")
    header = by_aurc.stdout.splitlines()[0].split(",")
    aurcs = [float(line.split(",")[header.index("aurc_msp")]) for line in by_aurc.stdout.splitlines()[1:]]
    assert aurcs == sorted(aurcs)


def test_array_results_never_share_the_name_model(tmp_path):
    logits, labels, _, _ = sample(split="test")
    a = selcal.evaluate_arrays(logits, labels, scores="msp")
    b = selcal.evaluate_arrays(logits[::-1], labels[::-1], scores="msp")
    named = selcal.evaluate_arrays(logits, labels, scores="msp", name="resnet")
    from_path = selcal.evaluate_arrays(logits, labels, scores="msp", path="runs/vit_b16.parquet")
    assert a.models[0].name == b.models[0].name == "model" and from_path.models[0].name == "vit_b16"
    gathered = selcal.EvaluationResult([a, b, named, from_path])
    assert [m.name for m in gathered.models] == ["model", "model 2", "resnet", "vit_b16"]
    assert a.models[0].name == "model" and b.models[0].name == "model"  # the callers' results keep theirs
    from selcal.report import leaderboard
    assert len({row["model"] for row in leaderboard(gathered)}) == 4
