"""Hostile and careless use, round three (issue 22): one test per category, each failing on the
code before the fix. Injection into what people open or paste, bombs and lying metadata,
loops, misaligned inputs, leftovers and noise."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import make_data


def _parquet(path: Path, n: int = 200, k: int = 4, seed: int = 1, extra: dict | None = None) -> Path:
    logits, labels = make_data(n, k, seed)
    columns = {"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.astype(np.float32).ravel()), k),
               "label": pa.array(labels)}
    columns.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:  # (pyarrow cannot open a name that is not UTF-8)
        pq.write_table(pa.table(columns), out)
    return path


def _one_error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# ------------------------------------------------------------------ a folder read with each part once
def test_a_part_reached_twice_or_through_a_loop_is_read_once(tmp_path, cli):
    parts = tmp_path / "parts"
    _parquet(parts / "sub" / "part-0.parquet", n=300)
    _parquet(parts / "part-1.parquet", n=100, seed=2)
    os.symlink("..", parts / "sub" / "loop")  # parts/sub/loop/sub/loop/... reaches part-0 again and again
    os.symlink("part-1.parquet", parts / "same-as-1.parquet")  # a second name of one part
    os.link(parts / "sub" / "part-0.parquet", parts / "hard-0.parquet")  # and a hard link
    model = cli.json(parts, "--scores", "msp")["models"][0]
    assert model["n_eval"] == 400


# ------------------------------------------------------------------ staging files
def _host() -> str:
    return format(zlib.crc32(socket.gethostname().encode("utf-8", "surrogateescape")), "08x")


def test_stale_staging_of_a_dead_selcal_is_removed_and_nothing_else(tmp_path, cli):
    test = _parquet(tmp_path / "m.parquet")
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer exists
    stale = out / f".r.json.selcal-{dead.pid}-{_host()}.abcd_123.tmp"
    keep = [out / f".r.json.selcal-{os.getppid()}-{_host()}.abcd_123.tmp",  # a live process's
            out / f".r.json.selcal-{dead.pid}-00000000.abcd_123.tmp",  # another machine's
            out / f".other.json.selcal-{dead.pid}-{_host()}.abcd_123.tmp",  # another output's
            out / ".r.json.abcd_123.tmp", out / "notes.txt"]
    for path in [stale, *keep]:
        path.write_text("x")
    link = out / f".r.json.selcal-{dead.pid}-{_host()}.zzzzzzzz.tmp"
    os.symlink(tmp_path / "m.parquet", link)  # never followed, never removed
    result = cli("evaluate", test, "--scores", "msp", "--json", out / "r.json", "-q")
    assert result.exit_code == 0, result.stderr
    assert not stale.exists()
    assert all(path.exists() for path in keep) and link.is_symlink() and test.exists()
    assert sorted(p.name for p in out.iterdir()) == sorted([p.name for p in keep] + [link.name, "r.json"])


def test_a_signal_while_the_staging_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    """SIGTERM landing between the staging file's creation and its registration (the window
    where a run could leave one behind) is held until the file is registered, then discarded."""
    from selcal.writers import output

    class Stop(BaseException):
        pass

    real = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)  # arrives as the file exists, before the caller has it
        return made

    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(Stop()))
    monkeypatch.setattr(output.tempfile, "mkstemp", mkstemp_then_signal)
    try:
        with pytest.raises(Stop):
            with output.Outputs() as outputs:
                outputs.write(tmp_path / "a.json", "{}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ readers bound memory by what they decode
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _claim_rows(src: Path, dst: Path, true_rows: int, claimed: int, count: int = 1) -> Path:
    """``src`` with the first ``count`` i64 fields equal to ``true_rows`` of its footer (the
    file's num_rows first) claiming ``claimed`` instead (thrift compact: header 0x16, zigzag varint)."""
    import struct

    data = src.read_bytes()
    length = struct.unpack("<i", data[-8:-4])[0]
    footer = data[-8 - length:-8]
    old = b"\x16" + _varint(true_rows << 1)
    assert old in footer
    footer = footer.replace(old, b"\x16" + _varint(claimed << 1), count)
    dst.write_bytes(data[:-8 - length] + footer + struct.pack("<i", len(footer)) + b"PAR1")
    return dst


@pytest.mark.parametrize("count", [1, 3], ids=["file-rows", "row-group-rows"])
def test_a_parquet_footer_claiming_2_61_rows_is_one_line(tmp_path, cli, count):
    honest = _parquet(tmp_path / "m.parquet", n=1000)
    lying = _claim_rows(honest, tmp_path / "lying.parquet", 1000, 2 ** 61, count)
    line = _one_error_line(cli("evaluate", lying, "--scores", "msp"))
    assert "lying.parquet" in line and "corrupted" in line


def test_dictionary_pages_are_measured_decoded_and_streamed(tmp_path, monkeypatch):
    """A few KB of dictionary/RLE pages that decode to 8 MB of logits: streamed under a 4 MB
    budget (the decision is taken on the decoded size, not the encoded one)."""
    import selcal
    from selcal.io import open_dump
    from selcal.io.parquet import ParquetSource

    rows, k = 20_000, 100
    path = tmp_path / "rle.parquet"
    values = pa.array(np.full(rows * k, 0.5, np.float32))
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(values, k),
                             "label": pa.array(np.arange(rows) % k)}), path, use_dictionary=True,
                   compression="zstd")
    assert path.stat().st_size < 50_000
    assert open_dump(str(path)).logits_bytes == rows * k * 4

    def whole(self):
        raise AssertionError("read whole")

    monkeypatch.setattr(ParquetSource, "read_all", whole)
    result = selcal.evaluate([str(path)], scores="msp", memory_budget=4 << 20)
    assert result.models[0].n_eval == rows


def _zeros_npz(path: Path, rows: int, k: int) -> Path:
    np.savez_compressed(path, logits=np.zeros((rows, k), np.float32), labels=np.zeros(rows, np.int64))
    return path


def test_an_npz_bomb_is_checked_before_it_is_inflated(tmp_path, cli, monkeypatch):
    """A member that inflates beyond the bound (lowered here to 1 MB) is refused by its header;
    a header that claims more than its member holds (numpy would allocate it first) too."""
    import io
    import zipfile

    import selcal.io.base

    bomb = _zeros_npz(tmp_path / "bomb.npz", 100_000, 10)  # 4 MB of logits in a few KB
    assert bomb.stat().st_size < 100_000
    monkeypatch.setattr(selcal.io.base, "MAX_WHOLE_BYTES", 1 << 20)
    line = _one_error_line(cli("evaluate", bomb, "--scores", "msp"))
    assert "bomb.npz" in line and "4 MB" in line and "Parquet" in line
    monkeypatch.setattr(selcal.io.base, "MAX_WHOLE_BYTES", None)
    liar = tmp_path / "liar.npz"
    with zipfile.ZipFile(liar, "w") as archive:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 30, 1024)})
        archive.writestr("logits.npy", header.getvalue() + bytes(16))
        labels = io.BytesIO()
        np.save(labels, np.zeros(4, np.int64))
        archive.writestr("labels.npy", labels.getvalue())
    line = _one_error_line(cli("evaluate", liar, "--scores", "msp"))
    assert "liar.npz" in line and "logits" in line and "corrupted" in line


# ------------------------------------------------------------------ hostile names in every output
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
    _parquet(bad, n=n, extra=extra)
    good = _parquet(folder / "plain.parquet", n=n, extra=extra)
    return bad, good


def _assert_no_control(text: str) -> None:
    assert "\x1b" not in text and "\x00" not in text
    assert not any(0xDC80 <= ord(c) <= 0xDCFF for c in text)  # a non-UTF-8 byte as a lone surrogate


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


@pytest.mark.parametrize("hostile", ["not_utf8"], indirect=True)
def test_every_output_works_with_a_name_that_is_not_utf8(hostile, tmp_path, cli):
    bad, good = hostile
    out = tmp_path / "out"
    result = cli("evaluate", bad, good, "--scores", "msp", "--csv", out / "b.csv", "--markdown", out / "b.md",
                 "--errors-csv", out / "e.csv", "--report", out / "r.html", "--json", out / "r.json")
    _one_error_line(result)  # (the folder out/ does not exist: one line naming it, not a traceback)
    out.mkdir()
    result = cli("evaluate", bad, good, "--scores", "msp", "--csv", out / "b.csv", "--markdown", out / "b.md",
                 "--errors-csv", out / "e.csv", "--report", out / "r.html", "--json", out / "r.json")
    assert result.exit_code == 0, (result.stderr, result.exception)
    for name in ("b.csv", "b.md", "e.csv", "r.html"):
        text = (out / name).read_bytes().decode("utf-8")  # valid UTF-8
        assert "\\xff" in text, name
    json.loads((out / "r.json").read_text())


# ------------------------------------------------------------------ misaligned inputs
def test_ensemble_members_that_disagree_on_a_split_are_refused(tmp_path, cli):
    n = 200
    split = np.where(np.arange(n) % 4 == 0, "val", "test")
    other = split.copy()
    other[7] = "val"  # row id 7: test in the first member, val in the second
    a = _parquet(tmp_path / "a.parquet", n=n, extra={"split": pa.array(split), "id": pa.array(np.arange(n))})
    b = _parquet(tmp_path / "b.parquet", n=n, extra={"split": pa.array(other), "id": pa.array(np.arange(n))})
    pq.write_table(pq.read_table(b).take(np.arange(n)[::-1]), b)  # another row order: aligned by id
    line = _one_error_line(cli("ensemble", a, b, "--out", tmp_path / "ens.parquet"))
    assert "b.parquet" in line and "split" in line and "row 192" in line
    assert not (tmp_path / "ens.parquet").exists()


def test_ensemble_keeps_the_members_id_type(tmp_path, cli):
    n = 100
    ids = pa.array(np.arange(n, dtype=np.int64) * 3)
    a = _parquet(tmp_path / "a.parquet", n=n, extra={"id": ids})
    b = _parquet(tmp_path / "b.parquet", n=n, extra={"id": ids})
    result = cli("ensemble", a, b, "--out", tmp_path / "ens.parquet", "-q")
    assert result.exit_code == 0, result.stderr
    column = pq.read_table(tmp_path / "ens.parquet").column("id")
    assert column.type == pa.int64() and column.to_pylist() == ids.to_pylist()


@pytest.mark.parametrize("label_shape", [(64, 100), (4, 8), (20, 40)])
def test_a_label_map_not_an_integer_multiple_of_the_logits_is_refused(tmp_path, cli, label_shape):
    folder = tmp_path / "seg"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for index in range(3):
        shape = label_shape if index == 1 else (32, 64)
        np.savez(folder / f"img{index}.npz", logits=rng.normal(size=(3, 16, 32)).astype(np.float32),
                 label=rng.integers(0, 3, size=shape))
    line = _one_error_line(cli("evaluate", folder, "--scores", "msp"))
    assert "img1.npz" in line and "integer multiple" in line


# ------------------------------------------------------------------ a narrow terminal
def test_a_narrow_terminal_shows_every_value_whole(tmp_path, cli):
    """COLUMNS=20: the tables that do not fit become stacked tables or plain lines (wrapped by
    the terminal), never cells cut to '…'."""
    import io

    from rich.console import Console

    import selcal
    from selcal.checks import check

    path = _parquet(tmp_path / "m.parquet", n=400, extra={"source": pa.array(["a", "b"] * 200)})
    result = cli("evaluate", path, "--group-col", "source", "--no-warnings", env={"COLUMNS": "20"})
    assert result.exit_code == 0, result.stderr
    assert "…" not in result.stdout
    model = json.loads(cli("evaluate", path, "--json", "-", "--group-col", "source").stdout)["models"][0]
    for value in (model["scores"]["msp"]["aurc"], model["accuracy"]):
        assert f"{100 * value:.2f}" in result.stdout  # the values themselves, whole
    evaluated = json.loads(selcal.evaluate([str(path)]).to_json())
    worse = json.loads(json.dumps(evaluated))
    worse["models"][0]["scores"]["msp"]["aurc"] += 0.125
    out = io.StringIO()
    check(worse, evaluated).render(Console(file=out, width=20), show_all=True)
    assert "…" not in out.getvalue() and "REGRESSION" in out.getvalue()


# ------------------------------------------------------------------ adversarial pass: inputs that are not files
def test_a_fifo_or_a_device_as_input_is_one_line_not_a_hang(tmp_path):
    """A FIFO named like a dump blocked the Parquet library's open() for good, deaf to SIGTERM
    (found in this round's own pass); it is refused before any reading."""
    fifo = tmp_path / "dump.parquet"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    for path in (fifo, "/dev/zero"):
        done = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(path), "--scores", "msp"],
                              capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "regular files" in lines[0], done.stderr


def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path):
    """Ctrl-C during the second the command spends importing its libraries gave a KeyboardInterrupt
    traceback, SIGTERM a silent death (found in this round's own pass): now one line and 130/143.
    The signal is sent right after ``import selcal``, as the command would still be importing."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    for signum, line in ((signal.SIGINT, "selcal: aborted"), (signal.SIGTERM, "selcal: terminated")):
        code = ("import os, sys, time; sys.argv = ['selcal', 'evaluate', 'x.parquet']; import selcal; "
                f"os.kill(os.getpid(), {int(signum)}); time.sleep(30); import selcal.cli")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=120)
        assert done.returncode == 128 + signum, done.stderr
        assert done.stderr.strip().splitlines() == [line], done.stderr


@pytest.mark.parametrize("flag,value,said", [
    ("--risks", "{x}", "--risks takes numbers, e.g. 0.01,0.05; got '{x}'"),
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
