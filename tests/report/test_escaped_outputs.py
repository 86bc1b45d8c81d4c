"""Shared helpers."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pytest
from helpers import one_error_line, write_parquet

HOSTILE = b'=HYPERLINK("evil")\x1b[2J\x1b[31m<img src=x onerror=alert(1)>|a`b\nc\xe2\x80\xae'  # and U+202E


GROUPS = ["\x1b[41mred", "+cmd|' /C calc'!A0", "<details open>"]


@pytest.fixture
def hostile(tmp_path, request):
    """Two dumps, one with a hostile file name (escape sequences, a formula, HTML, a pipe, a
    backtick, a newline, a bidirectional override; with ``not_utf8`` a byte that is not UTF-8)
    and hostile group values and ids."""
    folder = tmp_path / "in"
    name = HOSTILE + (b"\xff" if getattr(request, "param", None) == "not_utf8" else b"")
    n = 200
    extra = {"source": pa.array([GROUPS[i % 3] for i in range(n)]),
             "id": pa.array([f"@SUM(A{i})" if i % 2 else f"-{i}" for i in range(n)])}
    bad = Path(os.fsdecode(os.fsencode(str(folder)) + b"/" + name + b".parquet"))
    write_parquet(bad, n=n, extra=extra)
    good = write_parquet(folder / "plain.parquet", n=n, extra=extra)
    return bad, good


def _assert_no_control(text: str) -> None:
    assert "\x1b" not in text and "\x00" not in text
    assert not any(0xDC80 <= ord(c) <= 0xDCFF for c in text)  # a non-UTF-8 byte as a lone surrogate


@pytest.mark.slow
def test_terminal_outputs_escape_control_characters(hostile, tmp_path, cli):
    bad, good = hostile
    board = cli("evaluate", bad, good, "--scores", "msp,temp", "--details", "--group-col", "source")
    assert board.exit_code == 0, board.stderr
    one = cli("evaluate", bad, "--scores", "msp,temp", "--group-col", "source", "--bootstrap", "20")
    assert one.exit_code == 0, one.stderr
    for result in (board, one):
        _assert_no_control(result.stdout)
        _assert_no_control(result.stderr)
        assert "\\x1b[2J" in result.stdout and "\\u202e" in result.stdout  # shown, as escapes
        assert "\\x1b[41mred" in result.stdout  # the group value too
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, out in ((bad, a), (good, b)):
        assert cli("evaluate", path, "--scores", "msp", "--json", out).exit_code == 0
    check = cli("check", a, "--baseline", b, "--all")
    compare = cli("compare", bad, good, "--scores", "msp", "--all")
    for result in (check, compare):
        assert result.exit_code in (0, 1), result.stderr
        _assert_no_control(result.stdout)
        _assert_no_control(result.stderr)
    assert "\\x1b[2J" in check.stdout


def test_csv_outputs_neutralise_formulas_and_keep_numbers(hostile, tmp_path, cli):
    import csv

    bad, good = hostile
    board, errors = tmp_path / "board.csv", tmp_path / "errors.csv"
    result = cli("evaluate", bad, good, "--scores", "msp", "--csv", board, "--errors-csv", errors)
    assert result.exit_code == 0, result.stderr
    for path in (board, errors):
        text = path.read_text(encoding="utf-8")  # UTF-8, whatever the file names
        _assert_no_control(text)
        rows = list(csv.DictReader(text.splitlines()))
        assert rows
        for row in rows:
            for column, cell in row.items():
                if cell and cell[0] in "=+-@\t\r":
                    float(cell)  # only a number may start so (a negative number stays a number)
    rows = list(csv.DictReader(errors.read_text(encoding="utf-8").splitlines()))
    assert {row["model"] for row in rows} >= {"'" + os.fsdecode(HOSTILE).replace("\x1b", "\\x1b")
                                             .replace("\n", "\\n").replace("\u202e", "\\u202e")}
    ids = {row["id"] for row in rows}
    assert all(i.startswith("'@SUM(") or float(i) <= 0 for i in ids)  # "-4" is a number, kept
    assert any(i.startswith("-") for i in ids)
    float(list(csv.DictReader(board.read_text().splitlines()))[0]["aurc_msp"])


def test_markdown_outputs_escape_html_pipes_backticks_and_newlines(hostile, tmp_path, cli):
    bad, good = hostile
    board = tmp_path / "board.md"
    assert cli("evaluate", bad, good, "--scores", "msp", "--markdown", board).exit_code == 0
    a, b = tmp_path / "a`x|<b>.json", tmp_path / "b.json"
    for path, out in ((bad, a), (good, b)):
        assert cli("evaluate", path, "--scores", "msp", "--json", out).exit_code == 0
    report = tmp_path / "check.md"
    result = cli("check", a, "--baseline", b, "--markdown", report)
    assert result.exit_code in (0, 1), result.stderr
    for path in (board, report):
        text = path.read_text(encoding="utf-8")
        _assert_no_control(text)
        assert not re.search(r"(?<!\\)<(img|details open)", text), text  # only as \<img: text, not HTML
        table = [line for line in text.splitlines() if line.startswith("|")]
        widths = {line.replace("\\|", "").count("|") for line in table}
        assert len(widths) <= 2, table  # every row of a table has its header's cells (one or two tables)
    text = report.read_text(encoding="utf-8")
    source = next(line for line in text.splitlines() if line.startswith("- current:"))
    span = source[len("- current: "):]
    fence = span[:len(span) - len(span.lstrip("`"))]
    assert len(fence) >= 2 and span.endswith(fence) and fence not in span[len(fence):-len(fence)]


def test_junit_is_well_formed_xml_whatever_the_names(hostile, tmp_path, cli):
    from xml.etree import ElementTree

    bad, good = hostile
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, out in ((bad, a), (good, b)):
        assert cli("evaluate", path, "--scores", "msp", "--json", out).exit_code == 0
    junit = tmp_path / "j.xml"
    result = cli("check", a, "--baseline", b, "--junit", junit, "--max", "msp.aurc=0")
    assert result.exit_code == 1, result.stderr
    tree = ElementTree.fromstring(junit.read_bytes())  # expat: XML 1.0, refuses control characters
    assert tree.find("testsuite").get("failures") != "0"


@pytest.mark.slow
@pytest.mark.parametrize("hostile", ["not_utf8"], indirect=True)
def test_every_output_works_with_a_name_that_is_not_utf8(hostile, tmp_path, cli):
    bad, good = hostile
    out = tmp_path / "out"
    result = cli("evaluate", bad, good, "--scores", "msp", "--csv", out / "b.csv", "--markdown", out / "b.md",
                 "--errors-csv", out / "e.csv", "--report", out / "r.html", "--json", out / "r.json")
    one_error_line(result)  # (the folder out/ does not exist: one line naming it, not a traceback)
    out.mkdir()
    result = cli("evaluate", bad, good, "--scores", "msp", "--csv", out / "b.csv", "--markdown", out / "b.md",
                 "--errors-csv", out / "e.csv", "--report", out / "r.html", "--json", out / "r.json")
    assert result.exit_code == 0, (result.stderr, result.exception)
    for name in ("b.csv", "b.md", "e.csv", "r.html"):
        text = (out / name).read_bytes().decode("utf-8")  # valid UTF-8
        assert "\\xff" in text, name
    json.loads((out / "r.json").read_text())
