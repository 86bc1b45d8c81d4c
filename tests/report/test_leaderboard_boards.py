"""A board per group of models evaluated on the same rows: a zoo that mixes data sets (two K's here)
gets one leaderboard per group in the terminal and the Markdown, each under one heading line and
ranked on its own, a ``board`` column in the CSV and a summary table per group in the report; a zoo
of one group is shown exactly as before (no heading, no column)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from helpers import mixed_zoo

import selcal
from selcal.checks.common_ground import board_warning, boards, leaderboard_warning
from selcal.report import leaderboard, leaderboard_csv, leaderboard_markdown
from selcal.report.html import render_report

LM = Path(__file__).resolve().parents[2] / "sample_logits" / "lm_eval"
SPLIT = "the models were split into 2 boards: they were not all evaluated on the same rows"


def board_of(lines: list[str], heading: str) -> list[str]:
    """The model names of the board under ``heading`` (the first of its stacked tables), in its order."""
    start = lines.index(heading)
    names = []
    for line in lines[start + 3:]:
        if not line.strip():
            break
        names.append(line.split()[0])
    return names


def test_a_mixed_zoo_gets_a_board_per_group_each_ranked_on_its_own(cli, dumps, tmp_path):
    md, board_csv, out = tmp_path / "board.md", tmp_path / "board.csv", tmp_path / "out.json"
    result = cli("evaluate", *mixed_zoo(dumps), "--markdown", md, "--csv", board_csv, "--json", out,
                 "--sort-by", "accuracy")
    assert result.exit_code == 0, result.stderr
    models = {m["name"]: m for m in json.loads(out.read_text())["models"]}
    accuracy = {name: m["accuracy"] for name, m in models.items()}
    # the terminal: the line saying so, then each board under its heading, best first within it
    lines = result.stdout.splitlines()
    assert lines[0] == SPLIT and lines[1] == ""
    first, second = "K = 4: 3 models on the same 240 rows", "K = 6: 3 models on the same 240 rows"
    assert lines.index(first) < lines.index(second)  # in the order of the files: k4 first
    for heading, k in ((first, 4), (second, 6)):
        names = board_of(lines, heading)
        assert sorted(names) == [f"k{k}_m{j}" for j in range(3)], names
        assert [accuracy[name] for name in names] == sorted((accuracy[n] for n in names), reverse=True)
    assert "not evaluated on the same rows" not in result.stderr  # the boards say it: no warning
    # the Markdown: the same line, a table per board under its heading in bold
    text = md.read_text()
    assert text.startswith(SPLIT.capitalize() + ".\n\n**K = 4: 3 models on the same 240 rows**\n\n| model |")
    assert text.count("| model |") == 2 and "\n\n**K = 6: 3 models on the same 240 rows**\n\n| model |" in text
    assert text.index("| k4\\_m") < text.index("**K = 6") < text.index("| k6\\_m")  # (_ escaped)
    # the CSV: one table, a board column first, the rows board by board, ranked within each
    rows = list(csv.DictReader(io.StringIO(board_csv.read_text())))
    assert list(rows[0])[:2] == ["board", "model"]
    assert [row["board"] for row in rows] == ["K = 4"] * 3 + ["K = 6"] * 3
    for label in ("K = 4", "K = 6"):
        values = [float(row["accuracy"]) for row in rows if row["board"] == label]
        assert values == sorted(values, reverse=True)
    assert {row["model"] for row in rows[:3]} == {"k4_m0", "k4_m1", "k4_m2"}


def test_the_boards_and_the_rows_warning_group_alike():
    def model(name, k, rows, labels):
        return {"name": name, "num_classes": k, "path": f"{name}.npz", "fingerprint": {"rows": rows, "labels": labels}}

    zoo55 = [model(f"wasscal_cifar100_m{i}/test", 100, 8000, "a") for i in range(20)] + \
        [model(f"wasscal_cifar10_m{i}/test", 10, 8000, "b") for i in range(15)] + \
        [model(f"calpaper_cifar10_m{i}/test", 10, 8000, "b") for i in range(20)]
    made = boards(zoo55)
    assert [(b.label, b.heading, len(b.models)) for b in made] == [
        ("K = 100", "K = 100: 20 models on the same 8,000 rows", 20),
        ("K = 10", "K = 10: 35 models on the same 8,000 rows", 35)]
    assert "2 groups, 20 models with K = 100" in leaderboard_warning(zoo55)
    fewer = [model("a", 10, 100, "x"), model("c", 10, 90, "y"), model("b", 10, 100, "x")]
    assert [(b.label, [m["name"] for m in b.models]) for b in boards(fewer)] == [("100 rows", ["a", "b"]),
                                                                                ("90 rows", ["c"])]
    # the same K and number of rows, other labels (another order, no ids): one board, and the warning
    same = [model("a", 3, 3, "01"), model("b", 3, 3, "02")]
    assert len(boards(same)) == 1 and board_warning(same) == leaderboard_warning(same) is not None
    assert board_warning(zoo55) is None and board_warning(fewer) is None
    for one in (zoo55[:20], zoo55[20:], zoo55[:1], [{**zoo55[0], "fingerprint": None}, zoo55[-1]]):
        assert len(boards(one)) == 1 and boards(one)[0].label == "" and leaderboard_warning(one) is None


def test_one_language_models_tasks_stay_one_board_and_two_models_get_a_board_per_task():
    result = selcal.evaluate(str(LM))
    assert [b.label for b in boards(result.models)] == [
        f"task {t}" for t in dict.fromkeys(m.name.split("/", 1)[1] for m in result.models)]
    one = selcal.EvaluationResult(models=[m for m in result.models if m.name.startswith("synthetic__llm-large/")],
                                  options=result.options)
    assert len(one.models) == 4 and len(boards(one.models)) == 1
    assert not any("board" in row for row in leaderboard(one))


def test_a_zoo_of_one_group_shows_no_board_heading_and_no_board_column(cli, dumps, tmp_path):
    md, board_csv = tmp_path / "board.md", tmp_path / "board.csv"
    paths = mixed_zoo(dumps, ks=(5,))
    result = cli("evaluate", *paths, "--markdown", md, "--csv", board_csv)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("model ") and "board" not in result.stdout and "K = 5" not in result.stdout
    assert md.read_text().startswith("| model |") and md.read_text().count("| model |") == 1
    assert board_csv.read_text().startswith("model,") and "board" not in board_csv.read_text().splitlines()[0]
    assert not any("board" in row for row in leaderboard(selcal.evaluate(paths)))


def test_the_report_has_a_summary_table_per_board(dumps):
    mixed = selcal.evaluate(mixed_zoo(dumps))
    page = render_report(mixed)
    assert page.count("<table class='summary'>") == 2 and SPLIT.capitalize() + "." in page
    page = page[page.index("id='summary'"):]  # (the warnings above link to the models too)
    first, second = page.index("K = 4: 3 models on the same 240 rows"), page.index("K = 6: 3 models")
    assert first < page.index("href='#model-k4-m") < second < page.index("href='#model-k6-m")
    single = render_report(selcal.EvaluationResult(models=[m for m in mixed.models if m.num_classes == 4],
                                                   options=mixed.options))
    assert single.count("<table class='summary'>") == 1 and "class='board'" not in single
    assert "Summary</h2><p class='note'>In the leaderboard's order; click a column's header to sort by it. " \
           "evaluated: evaluation rows, (h) a random hold-out of the file.</p><div class='scroll'>" in single


def test_the_board_column_is_in_the_csv_of_the_rows_only_with_several_boards(dumps):
    result = selcal.evaluate(mixed_zoo(dumps))
    board = leaderboard(result)
    assert leaderboard_csv(board).startswith("board,model,")
    assert leaderboard_markdown(board).startswith(SPLIT.capitalize())
    assert [row["board"] for row in board] == ["K = 4"] * 3 + ["K = 6"] * 3


def test_a_board_heading_is_printed_escaped_for_the_terminal(dumps):
    # a task's name comes from the user's log: a control character in it is written as an escape
    import io

    from rich.console import Console

    from selcal.report import render_leaderboard

    rows = leaderboard(selcal.evaluate(mixed_zoo(dumps)))
    for row in rows:
        row["board_heading"] = row["board_heading"].replace("K = 4", "K = 4\x1b[2J")
    out = io.StringIO()
    render_leaderboard(rows, Console(file=out, width=100, color_system=None))
    assert "\x1b[2J" not in out.getvalue() and "K = 4\\x1b[2J" in out.getvalue()
