"""Files other tools write (issue 24): CSV, TSV, JSON Lines, class_k/prob_k columns, saved
probabilities, lm-evaluation-harness sample logs and fd-shifts outputs.

Every layout is compared with the canonical one (a Parquet file with a ``logits`` list column,
``label`` and ``split``), as tests/io/test_user_layouts.py does: the JSON of ``selcal.evaluate`` must
hold the very same numbers. The real-data tests use the shared realdata (skipped without it):
a CIFAR-10 model whose logits were saved as logits (``wasscal_cifar10_resnet20``) and one of the
calibration paper's models, whose source saved softmax probabilities as CSV text
(``calpaper_cifar10_resnet18``, README of the realdata).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from helpers import ROOT, SAMPLES, canonical_model, model_json, realdata
from oracles import ref_calibration, ref_selective

import selcal
from selcal.errors import SelcalError
from selcal.io import read_dump

LOGS = SAMPLES / "lm_eval"
sys.path.insert(0, str(ROOT / "scripts"))
import make_lmeval_sample  # noqa: E402


def real(name: str, n: int = 3000):
    """(float64 logits, labels, split) of the first ``n`` test rows of a realdata model."""
    with np.load(realdata(name, "test.npz")) as arrays:
        logits, labels = arrays["logits"][:n].astype(np.float64), arrays["labels"][:n]
    return logits, labels, np.where(np.arange(labels.size) % 4 == 0, "val", "test")


@pytest.fixture(scope="module")
def resnet20():
    return real("wasscal_cifar10_resnet20")


@pytest.fixture
def canonical(dumps, resnet20):
    return canonical_model(dumps, *resnet20, dtype="float64")


def wide(logits, prefix: str) -> dict:
    return {f"{prefix}{k}": logits[:, k] for k in range(logits.shape[1])}


# ------------------------------------------------------------- CSV, TSV, JSON Lines
@pytest.mark.parametrize("layout", ["csv logit_k", "csv class_k", "tsv logit_k", "TSV upper-case suffix",
                                    "jsonl logits list", "ndjson class_k", "csv 0 .. K-1"])
def test_text_layouts_give_the_numbers_of_the_canonical_parquet(dumps, resnet20, canonical, h, layout):
    """CSV, TSV and JSON Lines of real logits (float64 values, written as polars writes them,
    which round-trips them exactly): the same JSON as the Parquet file."""
    logits, labels, split = resnet20
    if "logits list" in layout:
        frame = pl.DataFrame({"logits": logits.tolist(), "label": labels, "split": split})
    else:
        prefix = "class_" if "class_k" in layout else "" if "0 .." in layout else "logit_"
        frame = pl.DataFrame(wide(logits, prefix) | {"label": labels, "split": split})
    if layout.startswith("csv"):
        path = dumps.path("m.csv")
        frame.write_csv(path)
    elif layout.startswith(("tsv", "TSV")):
        path = dumps.path("m.TSV" if "upper" in layout else "m.tsv")
        frame.write_csv(path, separator="\t")
    else:
        path = dumps.path("m.jsonl" if layout.startswith("jsonl") else "m.ndjson")
        frame.write_ndjson(path)
    h.assert_same_numbers(model_json(path), canonical)
    h.assert_same_numbers(model_json(path, stream=True), canonical)


def test_large_text_files_are_read_by_row_batches(dumps, resnet20, canonical, h):
    """Streamed in batches of 64 rows: the batches' numbers are those of the whole file."""
    logits, labels, split = resnet20
    path = dumps.path("m.csv")
    pl.DataFrame(wide(logits, "logit_") | {"label": labels, "split": split}).write_csv(path)
    source = selcal.io.open_dump(path)
    sizes = [len(b.labels) + b.n_train for b in source.batches(64)]
    assert len(sizes) > 40 and sum(sizes) == labels.size
    h.assert_same_numbers(model_json(path, stream=True), canonical)


def test_whole_numbers_in_logit_columns_are_floats(dumps, h):
    logits = np.array([[2, 0, -1], [0, 3, 1], [1, 1, 5], [4, 0, 0]] * 10, dtype=np.float64)
    labels = np.array([0, 1, 2, 1] * 10)
    path = dumps.path("ints.csv")
    pl.DataFrame(wide(logits.astype(np.int64), "logit_") | {"label": labels}).write_csv(path)
    jpath = dumps.path("ints.jsonl")
    pl.DataFrame({"logits": logits.astype(np.int64).tolist(), "label": labels}).write_ndjson(jpath)
    reference = model_json(dumps.parquet("ints.parquet", logits, labels), scores="msp,max_logit")
    h.assert_same_numbers(model_json(path, scores="msp,max_logit"), reference)
    h.assert_same_numbers(model_json(jpath, scores="msp,max_logit"), reference)


def test_text_errors_name_the_line(dumps):
    lines = ["label,logit_0,logit_1"] + [f"{i % 2},{i}.5,-1" for i in range(30)]
    path = dumps.path("bad_value.csv")
    path.write_text("\n".join(lines[:8] + ["1,abc,2"] + lines[8:]) + "\n")
    with pytest.raises(SelcalError) as error:
        read_dump(path)
    assert str(error.value) == f"{path}: column 'logit_0', line 9: holds 'abc', which is not a number; store numbers only"
    path = dumps.path("bad_label.csv")
    path.write_text("\n".join(lines[:5] + ["7,1.5,2"] + lines[5:]) + "\n")
    with pytest.raises(SelcalError, match=r"column 'label', line 6: label 7 is outside 0 \.\. 1"):
        read_dump(path)
    path = dumps.path("nan.tsv")
    path.write_text("\n".join(line.replace(",", "\t") for line in lines[:12] + ["0\tNaN\t1"] + lines[12:]) + "\n")
    with pytest.raises(SelcalError, match=r"column 'logit_0', line 13: holds NaN; logits must be finite"):
        read_dump(path)
    jsonl = dumps.path("bad.jsonl")
    rows = [json.dumps({"logits": [0.5, -1.0], "label": i % 2}) for i in range(20)]
    jsonl.write_text("\n".join(rows[:4] + ['{"logits": [0.5, -1.0], "label": 1'] + rows[4:]) + "\n")
    with pytest.raises(SelcalError, match=r"bad\.jsonl: line 5: is not valid JSON"):
        read_dump(jsonl)
    jsonl.write_text("\n".join(rows[:6] + [json.dumps({"logits": [0.5, -1.0, 2.0], "label": 1})] + rows[6:]) + "\n")
    with pytest.raises(SelcalError, match=r"column 'logits', line 7: has 3 logits but the first row has 2"):
        read_dump(jsonl)


# ------------------------------------------------------------- probabilities
def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def assert_close_numbers(a: dict, b: dict, h, rel: float = 1e-9):
    """Every number of ``a`` within ``rel`` (relative) of ``b``'s: log(softmax(z)) equals z up to
    a per-row constant in exact arithmetic, and up to float rounding here."""
    def close(x, y, where):
        if isinstance(x, dict) and isinstance(y, dict):
            assert set(x) == set(y), where
            for key in x:
                close(x[key], y[key], f"{where}.{key}")
        elif isinstance(x, list) and isinstance(y, list):
            assert len(x) == len(y), where
            for i, (u, v) in enumerate(zip(x, y)):
                close(u, v, f"{where}[{i}]")
        elif isinstance(x, float) and isinstance(y, float):
            assert math.isclose(x, y, rel_tol=rel, abs_tol=1e-12), (where, x, y)
        else:
            assert x == y, (where, x, y)

    close(h.numbers_only(a, ()), h.numbers_only(b, ()), "model")


@pytest.mark.parametrize("layout", ["npz probs", "csv prob_k", "parquet probs list", "jsonl probs list"])
def test_saved_probabilities_are_read_as_probabilities(dumps, resnet20, h, layout):
    """Probabilities of real logits: msp and temp (T itself too) are those of the logits."""
    logits, labels, split = resnet20
    probs = softmax(logits)
    reference = model_json(dumps.parquet("ref.parquet", logits, labels, split=split, dtype="float64"),
                           scores="msp,temp")
    if layout == "npz probs":
        path = dumps.npz("p.npz", probs, labels, split=split, dtype="float64")
    elif layout == "csv prob_k":
        path = dumps.path("p.csv")
        pl.DataFrame(wide(probs, "prob_") | {"label": labels, "split": split}).write_csv(path)
    elif layout == "parquet probs list":
        path = dumps.parquet("p.parquet", probs, labels, split=split, dtype="float64")
    else:
        path = dumps.path("p.jsonl")
        pl.DataFrame({"logits": probs.tolist(), "label": labels, "split": split}).write_ndjson(path)
    got = model_json(path, scores="msp,temp")
    assert not any("look like" in w for w in got["warnings"])
    assert got.pop("input") == "probs"
    got["warnings"] = reference["warnings"] = []
    assert_close_numbers(got, reference, h)
    dump = read_dump(path)
    assert dump.input == "probs"
    shift = np.log(probs) - logits  # log p = z - logsumexp(z): one constant per row
    np.testing.assert_allclose(dump.logits - (logits + shift), 0, atol=1e-12)


def test_the_calibration_papers_probabilities_as_csv(dumps, h):
    """calpaper_cifar10_resnet18: the source saved softmax probabilities as CSV text (float32),
    the realdata keeps their logarithms. The CSV of those probabilities is read as
    probabilities: the same numbers as the logarithms (within float32 rounding of the sums)."""
    log_p, labels, split = real("calpaper_cifar10_resnet18", n=10000)
    probs = np.exp(log_p).astype(np.float32)
    path = dumps.path("vgg.csv")
    pl.DataFrame(wide(probs, "class_") | {"label": labels, "split": split}).write_csv(path)
    reference = model_json(dumps.parquet("ref.parquet", np.log(probs.astype(np.float64)), labels, split=split,
                                         dtype="float64"), scores="msp,temp")
    got = model_json(path, scores="msp,temp")
    assert read_dump(path).input == "probs" and got.pop("input") == "probs"
    got["warnings"] = reference["warnings"] = []
    assert_close_numbers(got, reference, h, rel=1e-6)


def test_input_overrides_the_detection_and_refuses_what_is_not_probabilities(dumps, h):
    logits = np.array([[0.25, 0.75], [0.5, 0.5], [0.9, 0.1], [0.2, 0.8]] * 20)  # logits that look like probabilities
    labels = np.array([1, 0, 0, 1] * 20)
    path = dumps.npz("ambiguous.npz", logits, labels, dtype="float64")
    assert read_dump(path).input == "probs"
    as_logits = read_dump(path, input_kind="logits")
    assert as_logits.input == "logits" and np.array_equal(as_logits.logits, logits)
    bad = logits.copy()
    bad[41] = [0.7, 0.7]
    path = dumps.npz("mixed.npz", bad, labels, dtype="float64")
    assert read_dump(path).input == "logits"  # not every row: logits
    with pytest.raises(SelcalError, match=r"column 'logits', row 41: is not a row of probabilities .* "
                                          r"input_kind='probs' was given; fix the row, or pass input_kind='logits'"):
        read_dump(path, input_kind="probs")  # (a Python caller: its argument is named, not the flag --input)
    log_p = np.log(logits)
    same = read_dump(dumps.npz("logp.npz", log_p, labels, dtype="float64"), input_kind="logprobs")
    assert same.input == "logprobs" and np.array_equal(same.logits, log_p)
    with pytest.raises(SelcalError, match="^input_kind must be one of logits, probs, logprobs"):
        read_dump(path, input_kind="probabilities")


def test_a_probability_of_zero_is_a_very_small_logit(dumps):
    probs = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.2, 0.3, 0.5]] * 10)
    dump = read_dump(dumps.npz("zeros.npz", probs, np.array([0, 1, 2] * 10), dtype="float64"))
    assert dump.input == "probs" and np.isfinite(dump.logits).all()
    assert dump.logits[0, 1] == pytest.approx(-744.44, abs=0.01)
    assert np.exp(dump.logits[0]).sum() == 1.0


def test_probabilities_in_a_later_batch_must_stay_probabilities(dumps):
    probs = softmax(np.random.default_rng(0).normal(size=(300, 3)))
    probs[250] = [2.0, -1.0, 0.0]
    path = dumps.parquet("late.parquet", probs, np.zeros(300, dtype=np.int64), dtype="float64", row_group_size=100)
    source = selcal.io.open_dump(path)
    with pytest.raises(SelcalError, match=r"row 250: is not a row of probabilities .*the rows before it are "
                                          r"probabilities"):
        list(source.batches(100))


# ------------------------------------------------------------- lm-evaluation-harness logs
def harness_log(path: Path):
    """(logits, labels, acc, acc_norm, lengths) of a sample log, read with the json module."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    lls = [np.array([float(pair[0]) for pair in row["filtered_resps"]]) for row in rows]
    choices = [[row["arguments"][f"gen_args_{j}"]["arg_1"][1:] for j in range(len(ll))] for row, ll in zip(rows, lls)]
    return rows, lls, choices


def test_the_shipped_logs_are_what_the_script_writes(tmp_path):
    """sample_logits/lm_eval is reproducible: the script writes the very same bytes."""
    written = make_lmeval_sample.write(tmp_path)
    assert len(written) == 4
    for path in written:
        shipped = LOGS / path.relative_to(tmp_path)
        assert shipped.read_bytes() == path.read_bytes(), shipped


def test_a_log_is_read_as_the_choices_log_likelihoods(dumps):
    """The numbers of the MMLU-style log against a direct computation from its lines: logits,
    labels, the harness's own ``acc`` per question, AURC (brute force over orderings of ties)
    and ECE (an independent binning)."""
    path = next((LOGS / "synthetic__llm-large").glob("samples_mmlu_synth_*.jsonl"))
    rows, lls, _ = harness_log(path)
    dump = read_dump(path)
    assert np.array_equal(dump.logits, np.array(lls))
    assert dump.labels.tolist() == [int(row["target"]) for row in rows]
    assert dump.ids.tolist() == [str(row["doc_id"]) for row in rows]
    correct = dump.logits.argmax(axis=1) == dump.labels
    assert correct.astype(float).tolist() == [row["acc"] for row in rows]
    model = json.loads(selcal.evaluate(str(path), scores="msp,max_logit").to_json())["models"][0]
    assert model["name"] == "synthetic__llm-large/mmlu_synth"
    probs = softmax(np.array(lls))
    msp = probs.max(axis=1)
    assert model["accuracy"] == pytest.approx(correct.mean(), abs=0)
    assert model["scores"]["msp"]["aurc"] == pytest.approx(ref_selective.aurc_by_thresholds(msp, correct), rel=1e-12)
    assert model["scores"]["msp"]["ece"] == pytest.approx(ref_calibration.ece(msp, correct, 15), rel=1e-12)


def test_length_normalised_log_likelihoods_are_lm_evals_acc_norm(dumps):
    path = next((LOGS / "synthetic__llm-small").glob("samples_arc_synth_*.jsonl"))
    rows, lls, choices = harness_log(path)
    for k in (3, 4, 5):
        dump = read_dump(path, lm_norm="chars", lm_choices=k)
        picked = [i for i, ll in enumerate(lls) if ll.size == k]
        expected = np.array([lls[i] / np.array([len(c) for c in choices[i]]) for i in picked])
        np.testing.assert_array_equal(dump.logits, expected)
        correct = dump.logits.argmax(axis=1) == dump.labels
        assert correct.astype(float).tolist() == [rows[i]["acc_norm"] for i in picked]
        raw = read_dump(path, lm_choices=k)
        assert ((raw.logits.argmax(axis=1) == raw.labels).astype(float).tolist()
                == [rows[i]["acc"] for i in picked])
        in_bytes = read_dump(path, lm_norm="bytes", lm_choices=k)
        np.testing.assert_array_equal(in_bytes.logits, expected)  # ASCII choices: bytes = characters


def test_questions_with_different_choice_counts(dumps):
    """One model per choice count when evaluated; read directly, the log is refused naming the
    first question of another count (its line) and the counts."""
    path = next((LOGS / "synthetic__llm-small").glob("samples_arc_synth_*.jsonl"))
    rows, lls, _ = harness_log(path)
    first = next(i for i, ll in enumerate(lls) if ll.size != lls[0].size)
    with pytest.raises(SelcalError, match=rf"column 'filtered_resps', line {first + 1}: has {lls[first].size} "
                                          rf"choices, line 1 {lls[0].size} \(the log holds questions of 3, 4, 5 "
                                          r"choices\)"):
        read_dump(path)
    result = selcal.evaluate(str(path), scores="msp")
    assert [m.name for m in result.models] == [f"synthetic__llm-small/arc_synth ({k} choices)" for k in (3, 4, 5)]
    assert sum(m.n_eval for m in result.models) == len(rows)


def test_a_folder_of_logs_is_a_leaderboard(cli):
    out = cli("evaluate", str(LOGS), "--scores", "msp", "--csv", "-", "-q")
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    names = [row["model"] for row in rows]
    assert all(row["board"] == "task " + row["model"].split("/", 1)[1] for row in rows)  # two models: a board per task
    assert sorted(names) == sorted([f"synthetic__llm-{size}/{task}" for size in ("small", "large")
                                    for task in ("mmlu_synth", "arc_synth (3 choices)", "arc_synth (4 choices)",
                                                 "arc_synth (5 choices)")])


def test_mutual_information_logs_read_the_conditional_requests(dumps):
    """``acc_mutual_info`` adds K unconditional requests (empty context) per question."""
    lines = []
    for doc_id, (lls, gold) in enumerate([([-1.0, -2.0, -3.0], 0), ([-2.5, -0.5, -1.5], 2)]):
        args = {f"gen_args_{j}": {"arg_0": "Q:", "arg_1": f" {c}"} for j, c in enumerate("ABC")}
        args.update({f"gen_args_{3 + j}": {"arg_0": "", "arg_1": f" {c}"} for j, c in enumerate("ABC")})
        resps = [[str(v), "False"] for v in lls + [-9.0, -9.5, -8.0]]
        lines.append(json.dumps({"doc_id": doc_id, "doc": {}, "target": str(gold), "arguments": args,
                                 "resps": [[r] for r in resps], "filtered_resps": resps, "filter": "none"}))
    path = dumps.path("m/samples_copa_mi_2026-01-01T00-00-00.000000.jsonl")
    path.write_text("\n".join(lines) + "\n")
    dump = read_dump(path)
    assert dump.logits.tolist() == [[-1.0, -2.0, -3.0], [-2.5, -0.5, -1.5]] and dump.labels.tolist() == [0, 2]


def test_a_target_given_as_the_choice_text_and_bad_targets(dumps):
    def log(target, name):
        args = {f"gen_args_{j}": {"arg_0": "Q:", "arg_1": f" {c}"} for j, c in enumerate(["yes", "no"])}
        row = {"doc_id": 0, "target": target, "arguments": args, "filtered_resps": [["-1.0", "True"], ["-2.0", "False"]],
               "filter": "none"}
        path = dumps.path(f"m/samples_{name}_2026-01-01T00-00-00.000000.jsonl")
        path.write_text(json.dumps(row) + "\n" + json.dumps(row | {"doc_id": 1}) + "\n")
        return path

    assert read_dump(log("no", "text")).labels.tolist() == [1, 1]
    with pytest.raises(SelcalError, match=r"column 'target', line 1: holds 'maybe', neither a choice's index nor one "
                                          r"of its choices \('yes', 'no'\)"):
        read_dump(log("maybe", "bad"))
    with pytest.raises(SelcalError, match=r"line 1: holds several gold answers"):
        read_dump(log("[0, 1]", "multi"))
    with pytest.raises(SelcalError, match=r"column 'label', line 2: label 5 is outside 0 \.\. 1"):
        path = log("1", "range")
        path.write_text(path.read_text().splitlines()[0] + "\n" + path.read_text().splitlines()[1].replace(
            '"target": "1"', '"target": "5"') + "\n")
        read_dump(path)


# ------------------------------------------------------------- fd-shifts
def test_fd_shifts_raw_logits_with_its_datasets_as_groups(dumps, resnet20, h):
    """raw_logits.npz (K logits, label, dataset index per row, as fd-shifts saves it): dataset 0
    (val_tuning) fits, the others are test rows with per-dataset numbers, as a Parquet file with
    that split and a dataset_idx group column; external_confids.npz is the column of that name."""
    logits, labels, _ = resnet20
    dataset = np.arange(labels.size) % 3
    folder = dumps.path("exp/test_results")
    folder.mkdir(parents=True)
    np.savez_compressed(folder / "raw_logits.npz", np.column_stack([logits, labels, dataset]))
    confids = np.random.default_rng(1).random(labels.size)
    np.savez_compressed(folder / "external_confids.npz", confids)
    reference = model_json(dumps.parquet("ref.parquet", logits, labels, split=np.where(dataset == 0, "val", "test"),
                                         dtype="float64", extra={"dataset_idx": pa.array(dataset.astype(str)),
                                                                 "external_confids": pa.array(confids)}),
                           group_col="dataset_idx", score_cols=["external_confids"])
    got = model_json(folder / "raw_logits.npz", score_cols=["external_confids"])
    assert got["name"] == "exp"
    assert sorted(got["groups"]) == ["1", "2"]
    h.assert_same_numbers(got, reference)
    softmax_file = dumps.path("exp2/test_results/raw_output.npz")
    softmax_file.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(softmax_file, np.column_stack([softmax(logits), labels, dataset]).astype(np.float16))
    assert read_dump(softmax_file).input == "probs"


# ------------------------------------------------------------- what the user reads
def test_help_names_every_format(cli):
    for command in ("evaluate", "compare", "ensemble"):
        text = " ".join(cli(command, "--help", terminal_width=400).output.split())
        for name in ("Parquet", "CSV", "TSV", "JSON Lines", ".npz", ".npy", ".pt", "fd-shifts", "raw_logits.npz",
                     "lm-evaluation-harness", "samples_<task>_<date>.jsonl"):
            assert name in text, (command, name)


def test_lm_norm_without_a_log_is_named_as_ignored(dumps, cli):
    logits, labels = np.array([[1.0, 0.0], [0.0, 2.0]] * 20), np.array([0, 1] * 20)
    out = cli("evaluate", str(dumps.parquet("m.parquet", logits, labels)), "--scores", "msp", "--lm-norm", "chars")
    assert out.exit_code == 0
    assert "--lm-norm (no lm-evaluation-harness log among the TEST inputs)" in out.stderr


def test_logs_of_older_harness_versions(dumps):
    """Before the harness sanitised its samples, ``arguments`` was a list of [context,
    continuation] and ``target`` the gold index as a number."""
    rows = [{"doc_id": i, "target": i % 2, "arguments": [["Q:", " yes"], ["Q:", " no"]],
             "filtered_resps": [["-1.0", "True"], ["-2.0", "False"]], "filter": "none"} for i in range(4)]
    path = dumps.path("m/samples_boolq_2024-01-01T00-00-00.000000.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dump = read_dump(path, lm_norm="chars")
    assert dump.labels.tolist() == [0, 1, 0, 1]
    assert dump.logits[0].tolist() == [-1.0 / 3, -2.0 / 2]


# ------------------------------------------------------------- probabilities: the scores that need raw logits
def test_scores_that_need_raw_logits_are_not_available_on_probabilities(dumps, resnet20, cli):
    """max_logit and pnorm (every registry entry with raw_logits) are never computed on
    probabilities: listed as not available, with one note; --input logits computes them."""
    from selcal.scores import REGISTRY, score_names

    logits, labels, split = resnet20
    path = dumps.npz("probs.npz", softmax(logits), labels, split=split, dtype="float64")
    chosen = score_names(["all"])  # the registry's 'all' (the calibrators are not in it)
    for stream in (False, True):
        model = model_json(path, scores="all", stream=stream)
        raw = [name for name in chosen if REGISTRY[name].raw_logits]
        assert {"max_logit", "pnorm", "energy"} <= set(raw)
        assert model["input"] == "probs" and not set(raw) & set(model["scores"])
        assert model["not_available"] == {"scores": raw, "metrics": [],
                                          "reason": "on probabilities (they need raw logits)"}
        assert set(model["scores"]) == {name for name in chosen if not REGISTRY[name].raw_logits}
    out = cli("evaluate", str(path))
    assert out.exit_code == 0, out.output
    assert out.stdout.count("not available on probabilities (they need raw logits): max_logit, pnorm") == 1
    assert "look like" not in out.stderr
    forced = model_json(path, input_kind="logits", scores="msp,max_logit")
    assert "max_logit" in forced["scores"] and "input" not in forced
    assert any("look like probabilities" in w for w in forced["warnings"])
    with pytest.raises(SelcalError, match=r"holds probabilities, and max_logit needs raw logits; choose scores that "
                                          r"do not \(e\.g\. scores='msp,temp'\), or pass input_kind='logits'"):
        model_json(path, scores="max_logit")  # (selcal.evaluate: its arguments are named, not the flags)


# ------------------------------------------------------------- rows of no class (--ood-label)
@pytest.fixture
def with_ood(dumps, resnet20):
    """The real rows, a third of them given the label 10 (no class of CIFAR-10), as fd-shifts'
    new-class rows are: their logits are a real model's, every prediction is wrong."""
    logits, labels, split = resnet20
    ood = np.arange(labels.size) % 3 == 1
    marked = np.where(ood, 10, labels)
    return logits, labels, split, ood, dumps.npz("ood.npz", logits, marked, split=split, dtype="float64")


def test_ood_rows_are_errors_in_every_selective_and_calibration_metric(with_ood):
    logits, labels, split, ood, path = with_ood
    with pytest.raises(SelcalError, match=r"label 10 is outside 0 \.\. 9 \(use ignore_label for a void label, "
                                          r"ood_label for rows of no class\)"):
        model_json(path)
    model = model_json(path, ood_label=10, scores="msp")
    assert model_json(path, ood_label=10, scores="msp", stream=True) == model
    test = split == "test"
    probs = softmax(logits[test])
    msp = probs.max(axis=1)
    correct = (logits[test].argmax(axis=1) == labels[test]) & ~ood[test]
    assert model["n_eval"] == test.sum() and model["n_ood"] == (ood & test).sum()
    assert model["accuracy"] == correct.mean()
    assert model["scores"]["msp"]["aurc"] == pytest.approx(ref_selective.aurc_by_thresholds(msp, correct), rel=1e-12)
    assert model["scores"]["msp"]["ece"] == pytest.approx(ref_calibration.ece(msp, correct, 15), rel=1e-12)
    known = test & ~ood  # NLL and Brier need a class: over the in-distribution rows
    p_label = softmax(logits[known])[np.arange(known.sum()), labels[known]]
    assert model["nll"] == pytest.approx(float(np.mean(-np.log(p_label))), rel=1e-12)
    assert set(model["groups"]) == {"in-distribution", "out-of-distribution"}
    assert model["groups"]["out-of-distribution"]["accuracy"] == 0.0
    assert model["groups"]["out-of-distribution"]["n_eval"] == (ood & test).sum()


def test_the_in_distribution_group_is_the_file_without_ood_rows(dumps, with_ood, h):
    """The in-distribution group's numbers and the fitted T are those of the same file with the
    rows of no class removed (they are not fitted on, and evaluated apart)."""
    logits, labels, split, ood, path = with_ood
    model = model_json(path, ood_label=10, scores="msp,temp")
    alone = model_json(dumps.npz("id.npz", logits[~ood], labels[~ood], split=split[~ood], dtype="float64"),
                       scores="msp,temp")
    group = model["groups"]["in-distribution"]
    assert group["accuracy"] == alone["accuracy"]
    assert group["scores"]["msp"] == {k: alone["scores"]["msp"][k] for k in group["scores"]["msp"]}
    assert model["scores"]["temp"]["temperature"] == alone["scores"]["temp"]["temperature"]
    assert model["nll"] == pytest.approx(alone["nll"], rel=1e-12) and model["cece"] == alone["cece"]
    assert any("validation rows are of no class" in w for w in model["warnings"])
    with pytest.raises(SelcalError, match="^ood_label and ignore_label are both 10"):
        model_json(path, ood_label=10, ignore_label=10)


def test_ood_with_bootstrap_intervals(with_ood):
    _, _, _, _, path = with_ood
    model = json.loads(selcal.evaluate(str(path), ood_label=10, scores="msp", bootstrap=20).to_json())["models"][0]
    low, high = model["scores"]["msp"]["ci"]["aurc"]
    assert low <= model["scores"]["msp"]["aurc"] <= high
    assert "accuracy" in model["ci"] and "nll" not in model["ci"]  # no NLL for rows of no class: no interval


def test_arrays_from_python_follow_the_rules_of_files(dumps, resnet20, h):
    """evaluate_arrays detects probabilities and takes ood_label= as a file does: the same JSON
    as the same rows in a file (paths aside)."""
    logits, labels, split = resnet20
    test, val = split == "test", split == "val"
    probs = softmax(logits)
    from_file = model_json(dumps.npz("t.npz", probs[test], labels[test], dtype="float64"),
                           val=str(dumps.npz("v.npz", probs[val], labels[val], dtype="float64")))
    arrays = json.loads(selcal.evaluate_arrays(probs[test], labels[test], probs[val], labels[val]).to_json())
    arrays = arrays["models"][0]
    assert arrays["input"] == "probs" and arrays["not_available"]["scores"] == ["max_logit", "pnorm"]
    h.assert_same_numbers(arrays, from_file, drop=("warnings",))
    marked = np.where(np.arange(labels.size) % 3 == 1, -5, labels)
    in_file = model_json(dumps.npz("o.npz", logits, marked, split=split, dtype="float64"), ood_label=-5, scores="msp")
    in_python = json.loads(selcal.evaluate_arrays(logits[test], marked[test], logits[val], marked[val], ood_label=-5,
                                                  scores="msp").to_json())["models"][0]
    h.assert_same_numbers(in_python, in_file, drop=("split", "warnings"))


def test_compare_never_computes_raw_logit_scores_on_probabilities(dumps, resnet20, cli):
    logits, labels, split = resnet20
    a = dumps.npz("a.npz", softmax(logits), labels, split=split, dtype="float64")
    b = dumps.npz("b.npz", logits, labels, split=split, dtype="float64")
    out = cli("compare", str(a), str(b), "--bootstrap", "20", "--all", terminal_width=200)
    assert out.exit_code in (0, 1), out.output
    assert "not compared: max_logit, pnorm (a file holds probabilities; they need raw logits)" in out.stdout
    assert "max_logit AURC" not in out.stdout and "pnorm AURC" not in out.stdout and "msp AURC" in out.stdout


def test_bootstrap_refit_reads_the_files_as_the_evaluation_did(with_ood):
    """--bootstrap-refit reads the dumps again: with --ood-label, --input and lm-eval logs (a
    folder standing for several models) too."""
    _, _, _, _, path = with_ood
    model = json.loads(selcal.evaluate(str(path), ood_label=10, scores="msp,temp", bootstrap=10,
                                       bootstrap_refit=True).to_json())["models"][0]
    low, high = model["scores"]["temp"]["ci"]["temperature"]
    assert low <= model["scores"]["temp"]["temperature"] <= high
    result = selcal.evaluate(str(LOGS / "synthetic__llm-small"), scores="msp,temp", bootstrap=5, bootstrap_refit=True,
                             lm_norm="chars")
    assert len(result.models) == 4


def test_compare_reads_rows_of_no_class_and_probabilities_as_evaluate_does(with_ood, cli):
    logits, labels, split, ood, path = with_ood
    refused = cli("compare", str(path), str(path), "--bootstrap", "10")
    assert refused.exit_code == 2 and "--ood-label for rows of no class" in refused.stderr
    out = cli("compare", str(path), str(path), "--bootstrap", "10", "--ood-label", "10", "--input", "logits")
    assert out.exit_code == 0, out.output
