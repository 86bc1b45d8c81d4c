"""What a board of many models says (issue 34): a score that means nothing on a model's logits has
no number anywhere (board, CSV, JSON, best score) and the note says why; a model evaluated on a
random hold-out is marked, with its rows; warnings about many models are one line per kind, and
the "not the same rows" warning groups the models by what they share."""

from __future__ import annotations

import pytest

import csv
import io
import json
from pathlib import Path

import numpy as np
from helpers import make_data

import selcal
from selcal.checks.common_ground import describe_names, leaderboard_warning, name_pattern
from selcal.report import leaderboard, leaderboard_csv, leaderboard_markdown
from selcal.report.warning_groups import group_warnings, warning_lines

LM = Path(__file__).resolve().parents[2] / "sample_logits" / "lm_eval"


def log_probabilities(logits):
    return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))


def stderr_warnings(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("selcal: warning:")]


# ------------------------------------------------------------------ no number for a meaningless score
def test_log_probabilities_get_no_max_logit_anywhere(cli, dumps, tmp_path):
    logits, labels = make_data(n=600, k=5, seed=3)
    plain = dumps.npz("plain.npz", logits, labels)
    logp = dumps.npz("logp.npz", log_probabilities(logits), labels)
    board_csv, out = tmp_path / "board.csv", tmp_path / "out.json"
    result = cli("evaluate", plain, logp, "--csv", board_csv, "--json", out, "--scores", "msp,max_logit,energy,temp")
    assert result.exit_code == 0, result.stderr
    models = {m["name"]: m for m in json.loads(out.read_text())["models"]}
    assert set(models["logp"]["scores"]) == {"msp", "temp"}
    assert models["logp"]["not_available"]["scores"] == ["max_logit", "energy"]
    assert "log-probabilities" in models["logp"]["not_available"]["reason"]
    assert set(models["plain"]["scores"]) == {"msp", "max_logit", "energy", "temp"}  # plain logits keep them
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(board_csv.read_text()))}
    assert rows["logp"]["aurc_max_logit"] == "" and rows["logp"]["aurc_energy"] == ""
    assert rows["logp"]["best_score"] in ("msp", "temp")
    assert rows["plain"]["aurc_max_logit"] != ""
    note = " ".join(result.stdout.split())
    assert "max_logit, energy: no number for logp, not meaningful on logits that look like log-probabilities" in note
    # the warning still says it, and that they were left out
    assert any("not meaningful (left out)" in line for line in stderr_warnings(result))


def test_a_run_of_scale_reading_scores_only_keeps_them_under_the_warning():
    logits, labels = make_data(n=300, k=4, seed=5)
    model = selcal.evaluate_arrays(log_probabilities(logits), labels, scores="max_logit")
    assert "max_logit" in model.scores and "not_available" not in model.extra
    assert any("max_logit is not meaningful" in w for w in model.warnings)


def test_language_model_logs_never_name_max_logit_best():
    result = selcal.evaluate(str(LM), scores="msp,max_logit,energy,temp")
    assert len(result.models) == 8
    for model in result.models:
        assert set(model.scores) == {"msp", "temp"}, model.name
        assert model.extra["not_available"]["scores"] == ["max_logit", "energy"]
        assert "lm-evaluation-harness" in model.extra["not_available"]["reason"]
    board = leaderboard(result)
    assert {row["best_score"] for row in board} <= {"msp", "temp"}
    assert all(row["aurc_max_logit"] is None for row in board)


# ------------------------------------------------------------------ hold-out on the board
def test_the_board_says_which_models_were_held_out_and_on_how_many_rows(cli, dumps, tmp_path):
    logits, labels = make_data(n=500, k=4, seed=7)
    held = dumps.npz("held.npz", logits, labels)  # test only: T and p fitted on a random 20%
    split = np.where(np.arange(500) % 5 == 0, "val", "test")
    whole = dumps.npz("whole.npz", logits, labels, split=split)
    md, board_csv = tmp_path / "board.md", tmp_path / "board.csv"
    result = cli("evaluate", held, whole, "--markdown", md, "--csv", board_csv)
    assert result.exit_code == 0, result.stderr
    lines: dict[str, str] = {}
    for line in result.stdout.splitlines():  # (the first of the stacked tables holds the rows column)
        if line.startswith(("held", "whole")):
            lines.setdefault(line.split()[0], line)
    assert "400 (h)" in lines["held"] and "(h)" not in lines["whole"] and "400" in lines["whole"]
    assert "(h): a random hold-out of the file" in " ".join(result.stdout.split())
    assert "| 400 (h) |" in md.read_text()
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(board_csv.read_text()))}
    assert (rows["held"]["n_eval"], rows["held"]["holdout"]) == ("400", "true")
    assert (rows["whole"]["n_eval"], rows["whole"]["holdout"]) == ("400", "false")


def test_no_rows_column_when_no_model_was_held_out(dumps):
    logits, labels = make_data(n=300, seed=8)
    split = np.where(np.arange(300) % 4 == 0, "val", "test")
    a = dumps.npz("a.npz", logits, labels, split=split)
    board = leaderboard(selcal.evaluate([str(a), str(a)]))
    assert "rows" not in leaderboard_markdown(board).splitlines()[0]
    assert "n_eval" in leaderboard_csv(board).splitlines()[0]  # (the CSV has it always)


# ------------------------------------------------------------------ warnings, one line per kind
def test_warnings_of_one_kind_are_one_line_with_ranges():
    pairs = [("m_1", "only 9 evaluation rows: every metric is noisy"), ("m_2", "only 50 evaluation rows: every "
             "metric is noisy"), ("m_3", "only 12 evaluation rows: every metric is noisy"),
             ("m_4", "only 9 evaluation rows: every metric is noisy"), ("m_2", "T = 1 kept")]
    groups = group_warnings(pairs)
    assert [g.text for g in groups] == ["only 9–50 evaluation rows: every metric is noisy", "T = 1 kept"]
    assert groups[0].models == ["m_1", "m_2", "m_3", "m_4"] and len(groups[0].texts) == 4
    assert warning_lines(pairs) == ["4 models (m_*): only 9–50 evaluation rows: every metric is noisy",
                                    "m_2: T = 1 kept"]
    assert warning_lines(pairs, of=4)[0].startswith("all 4 models: ")


def test_names_are_described_by_their_shared_part():
    names = [f"calpaper_cifar10_{n}/test" for n in ("vgg11", "resnet18", "densenet121", "googlenet")]
    assert name_pattern(names) == "calpaper_cifar10_*/test"
    assert describe_names(names) == "4 models (calpaper_cifar10_*/test)"
    assert describe_names(["wasscal_a", "calpaper_b", "x_c", "y_d"]) == "4 models (wasscal_a, calpaper_b and 2 more)"
    assert name_pattern(["m (3 choices)", "m (4 choices)"]) is None  # no half of a bracket


def test_the_same_warning_about_many_models_is_one_stderr_line(cli, dumps):
    paths = []
    for i in range(5):
        logits, labels = make_data(n=300, k=4, seed=20 + i)
        paths.append(dumps.npz(f"zoo_{i}.npz", log_probabilities(logits), labels))
    result = cli("evaluate", *paths, "-q")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in stderr_warnings(result) if "log-probabilities" in line]
    assert lines == [lines[0]] and lines[0].startswith("selcal: warning: all 5 models: the logits look like")


def test_the_rows_warning_groups_models_by_what_they_share():
    def model(name, k, rows, labels):
        return {"name": name, "num_classes": k, "path": f"{name}.npz",
                "fingerprint": {"rows": rows, "labels": labels}}

    zoo = [model(f"wasscal_cifar100_m{i}/test", 100, 8000, "a") for i in range(20)] + \
        [model(f"wasscal_cifar10_m{i}/test", 10, 8000, "b") for i in range(15)] + \
        [model(f"calpaper_cifar10_m{i}/test", 10, 8000, "b") for i in range(20)]
    warning = leaderboard_warning(zoo)
    assert "2 groups, 20 models with K = 100 (wasscal_cifar100_*/test) and 35 with K = 10;" in warning
    assert "give each its own board" in warning and "wasscal_cifar10_m3" not in warning
    assert len(warning) < 300  # was ~3 000 characters naming all 55
    # the same K, other row counts: grouped by rows
    fewer = [model("a", 10, 100, "x"), model("b", 10, 100, "x"), model("c", 10, 90, "y")]
    assert "2 groups, a and b of 100 rows and c of 90 rows" in leaderboard_warning(fewer)


@pytest.mark.slow
def test_one_language_models_tasks_do_not_warn_about_rows_and_two_models_get_a_board_per_task(cli):
    one = cli("evaluate", LM / "synthetic__llm-large", "-q")
    assert one.exit_code == 0 and not [line for line in stderr_warnings(one) if "rows" in line and "task" in line]
    assert "not evaluated on the same rows" not in one.stderr
    both = cli("evaluate", LM)
    assert not [line for line in stderr_warnings(both) if "tasks" in line]  # the boards say it
    assert both.stdout.startswith("the models were split into 4 boards: they were not all evaluated on the same rows")
    assert "\ntask arc_synth (3 choices): 2 models on the same 9 rows\n" in both.stdout
    assert "not evaluated on the same rows" not in both.stderr


def test_markdown_lists_warnings_grouped(dumps):
    paths = []
    for i in range(4):
        logits, labels = make_data(n=300, k=4, seed=40 + i)
        paths.append(str(dumps.npz(f"lp_{i}.npz", log_probabilities(logits), labels)))
    text = leaderboard_markdown(leaderboard(selcal.evaluate(paths)))
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert listed == ["- all 4 models: only 60 validation rows: the fitted scores are fitted on little data",
                      listed[1]] and listed[1].startswith("- all 4 models: the logits look like log")
