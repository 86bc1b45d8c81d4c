"""``selcal threshold`` on the inputs evaluate reads beyond one in-memory dump: lm-evaluation-harness
logs that mix numbers of choices (``--lm-choices K``), files of confidences without logits, and
large files streamed by row chunks (the same numbers, bit for bit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import strict_json

import selcal
from selcal.deployment import threshold_dump
from selcal.io import read_dump

LOGS = Path(__file__).resolve().parents[1] / "sample_logits" / "lm_eval" / "synthetic__llm-large"
MIXED = LOGS / "samples_arc_synth_2026-11-25T14-00-00.000000.jsonl"  # 11 questions of 3 choices, 63 of 4, 26 of 5
SINGLE = LOGS / "samples_mmlu_synth_2026-11-25T14-00-00.000000.jsonl"


def _one_line_refusal(result, *parts):
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: ") and "Traceback" not in result.stderr, lines
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------ --lm-choices
def test_lm_choices_certifies_on_the_questions_of_k_choices(cli):
    result = cli("threshold", MIXED, "--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert result.exit_code == 0, result.stderr
    answer = strict_json(result.stdout)
    assert answer["calibration"]["n"] + answer["evaluation"]["n"] == 63  # the questions of 4 choices only
    # the same as the threshold of those questions read directly (the reader's lm_choices)
    direct = threshold_dump(read_dump(MIXED, lm_choices=4), risk=0.3, options=selcal.Options(val_fraction=0.5))
    assert answer == strict_json(direct.to_json())
    assert selcal.threshold(str(MIXED), lm_choices=4, risk=0.3, val_fraction=0.5).name == \
        "synthetic__llm-large/arc_synth (4 choices)"


def test_lm_choices_on_a_folder_of_one_mixed_log_and_on_a_log_of_one_count(cli, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / MIXED.name).write_bytes(MIXED.read_bytes())
    a = cli("threshold", folder, "--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    b = cli("threshold", MIXED, "--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert a.exit_code == 0 and a.stdout == b.stdout
    k = read_dump(SINGLE).logits.shape[1]  # a log of one count takes its own count
    same = cli("threshold", SINGLE, "--lm-choices", str(k), "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    plain = cli("threshold", SINGLE, "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert same.exit_code == 0 and same.stdout == plain.stdout


def test_a_mixed_log_without_lm_choices_is_the_readers_refusal(cli):
    line = _one_line_refusal(cli("threshold", MIXED), str(MIXED), "column 'filtered_resps', line 5",
                             "3, 4, 5 choices")
    try:
        read_dump(MIXED)
    except selcal.SelcalError as exc:
        assert line == f"selcal: error: {exc}"  # the same line as reading it directly


def test_lm_choices_that_the_log_lacks_is_one_line(cli):
    _one_line_refusal(cli("threshold", MIXED, "--lm-choices", "7"), str(MIXED),
                      "has no question of 7 choices (it has 3, 4, 5); give --lm-choices one of them")


def test_lm_choices_on_a_file_that_is_no_log_is_refused(cli, dumps):
    logits = np.random.default_rng(0).normal(size=(200, 4))
    path = dumps.parquet("m.parquet", logits, logits.argmax(axis=1))
    _one_line_refusal(cli("threshold", path, "--lm-choices", "4"), str(path), "--lm-choices is for "
                      "lm-evaluation-harness sample logs", "leave out --lm-choices")
    with pytest.raises(selcal.SelcalError, match="lm_choices is for lm-evaluation-harness"):
        selcal.threshold(str(path), lm_choices=4)

