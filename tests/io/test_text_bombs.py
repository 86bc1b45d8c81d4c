"""CSV and JSON Lines files built to hurt (CONVENTIONS.md, "Text files: bounds and compression").

selcal hands polars blocks of whole lines, never the file: the header's width, a line's length
and what a compressed file inflates to are bounded before polars sees them, a gzip, bzip2 or xz
file is read as a stream, another compressed or binary file is refused by its magic bytes, and
every error names its line (a JSON Lines ``NaN`` included). No input makes the process abort.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import selcal
from selcal.errors import SelcalError
from selcal.io import read_dump
from selcal.io import text as text_io
from helpers import one_error_line

ROWS = [json.dumps({"logits": [0.5 + i % 3, -1.0], "label": i % 2}) for i in range(40)]
CSV_LINES = ["label,logit_0,logit_1"] + [f"{i % 2},{i % 5}.5,-1" for i in range(40)]


def jsonl(tmp_path, bad: str, at: int, name="bad.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(ROWS[:at - 1] + [bad] + ROWS[at - 1:]) + "\n")
    return path


def refused(path) -> str:
    with pytest.raises(SelcalError) as error:
        read_dump(path)
    text = str(error.value)
    assert "\n" not in text
    return text


# --------------------------------------------------------------------------- JSON Lines: every error names its line
@pytest.mark.parametrize("bad, words", [
    ('{"logits": [NaN, -1.0], "label": 1}', "holds NaN, which JSON has no literal for"),
    ('{"logits": [Infinity, -1.0], "label": 1}', "holds Infinity"),
    ('{"logits": [1e999, -1.0], "label": 1}', "holds 1e999, a number beyond float64's range"),
    ('{"logits": [0.5, -1.0], "label": "cat"}', "column 'label', line 12: holds \"cat\" (a string), not a number"),
    ('[0.5, -1.0]', "holds a JSON list, not an object"),
    ('{"logits": [0.5, -1.0], "label": 1', "is not valid JSON"),
    ('{"logits": ' + "[" * 5000 + "]" * 5000 + ', "label": 1}', "line 12"),
])
@pytest.mark.parametrize("at", [1, 12, 40])
def test_every_json_lines_error_names_its_line(tmp_path, bad, words, at):
    path = jsonl(tmp_path, bad, at)
    text = refused(path)
    assert text.startswith(f"{path}: line {at}: " if "column" not in words else f"{path}: column"), text
    assert words.replace("line 12", f"line {at}") in text


def test_a_nan_on_a_line_of_a_later_block_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(text_io, "BLOCK_BYTES", 256)  # many blocks: the line is counted across them
    path = jsonl(tmp_path, '{"logits": [NaN, -1.0], "label": 1}', 33)
    assert refused(path).startswith(f"{path}: line 33: holds NaN")


# --------------------------------------------------------------------------- JSON Lines: a logits list of numbers only
BAD_LISTS = [
    ('{"logits": [1.5, true], "label": 1}', "column 'logits', line {at}: holds true (a boolean) for class 1 of its "
                                            "list, where a number belongs; write the model's logit for each class "
                                            "(true and false are not read as 1 and 0)"),
    ('{"logits": [true, 1.5], "label": 1}', "column 'logits', line {at}: holds true (a boolean) for class 0"),
    ('{"logits": [1.5, "2"], "label": 1}', "column 'logits', line {at}: holds \"2\" (a string) for class 1 of its "
                                           "list, where a number belongs; write the number 2 without quotes"),
    ('{"logits": ["a", "b"], "label": 1}', "column 'logits', line {at}: holds \"a\" (a string) for class 0 of its "
                                           "list, where a number belongs; write numbers only"),
    ('{"logits": [1.5, [2.5]], "label": 1}', "column 'logits', line {at}: holds [2.5] (a list) for class 1 of its "
                                             "list, where a number belongs; write one flat list of K numbers per line"),
    ('{"logits": [1.5, {"a": 1}], "label": 1}', "column 'logits', line {at}: holds {{\"a\": 1}} (an object) for class 1"),
    ('{"logits": [1.5, null], "label": 1}', "column 'logits', line {at}: holds a null logit; store finite numbers"),
]


@pytest.mark.parametrize("bad, words", BAD_LISTS)
@pytest.mark.parametrize("at", [1, 12, 40])
def test_a_logits_list_holding_what_is_not_a_number_is_named_with_its_line_and_class(tmp_path, cli, bad, words, at):
    # [1.5, true] was read as a list of strings and refused with the hint for integer logits ("cast
    # integer logits to float"): the wrong problem, and no line
    path = jsonl(tmp_path, bad, at)
    line = one_error_line(cli("evaluate", path, "--scores", "msp"), f"selcal: error: {path}: {words.format(at=at)}")
    assert "integer" not in line


def test_a_logits_list_holding_a_boolean_past_the_inferred_rows_is_named(tmp_path, cli):
    path = tmp_path / "late.jsonl"  # the first 10 000 lines say the logits are floats
    rows = [json.dumps({"logits": [0.5 + i % 3, -1.0], "label": i % 2}) for i in range(10_050)]
    rows[10_020] = '{"logits": [1.5, true], "label": 1}'
    path.write_text("\n".join(rows) + "\n")
    one_error_line(cli("evaluate", path, "--scores", "msp"), "line 10021: holds true (a boolean) for class 1")


def test_a_logit_column_holding_a_boolean_on_one_line_and_numbers_on_another_names_both(tmp_path, cli):
    path = tmp_path / "wide.jsonl"
    path.write_text('{"label": 0, "logit_0": 1.5, "logit_1": true}\n{"label": 1, "logit_0": 0.5, "logit_1": 2.5}\n')
    one_error_line(cli("evaluate", path, "--scores", "msp"),
                   f"{path}: column 'logit_1', line 2: holds 2.5 (a number) where line 1 holds true (a boolean); "
                   "write numbers on every line")


@pytest.mark.parametrize("logits", ["[1, 2]", "[1, 2.5]"])
def test_whole_numbers_in_a_logits_list_are_the_numbers_they_are(tmp_path, logits):
    # JSON has one kind of number: 2 and 2.0 are the same logit (a writer may drop the ".0")
    path = tmp_path / "whole.jsonl"
    path.write_text(f'{{"label": 0, "logits": {logits}}}\n{{"label": 1, "logits": [0, 3]}}\n')
    floats = tmp_path / "floats.jsonl"
    floats.write_text(f'{{"label": 0, "logits": {json.dumps([float(v) for v in json.loads(logits)])}}}\n'
                      '{"label": 1, "logits": [0.0, 3.0]}\n')
    assert np.array_equal(read_dump(path).logits, read_dump(floats).logits)


def test_a_list_of_strings_in_parquet_is_not_told_to_cast_integers(tmp_path, cli):
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"label": [0, 1], "logits": [["1.5", "2"], ["0.5", "1"]]}), path)
    one_error_line(cli("evaluate", path, "--scores", "msp"), "column 'logits': holds string values; logits must be "
                   "numbers (float16, float32 or float64): store the model's logits as floats")


# --------------------------------------------------------------------------- bounds before polars
def _run(args, timeout=120):
    """The command in a subprocess: an abort (a Rust panic) or a hang fails the test, not the run."""
    return subprocess.run([sys.executable, "-m", "selcal.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.mark.slow
def test_a_header_of_a_million_columns_is_refused_before_polars_reads_it(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text("label," + ",".join(f"logit_{i}" for i in range(1_000_000)) + "\n0," + "0," * 9 + "0\n")
    done = _run(["evaluate", str(path), "--scores", "msp"], timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"selcal: error: {path}: line 1: the header has 1000001 columns, more than the "
                                   f"{text_io.MAX_COLUMNS} selcal reads from a text file; write the logits as one "
                                   "list column of a Parquet file, or as .npy")


@pytest.mark.slow
def test_a_gzip_bomb_named_csv_is_refused_after_64_mb(tmp_path):
    path = tmp_path / "bomb.csv"  # 128 MB of zeros, no line break, in about 130 KB
    with gzip.open(path, "wb", compresslevel=9) as handle:
        for _ in range(8):
            handle.write(b"0" * (16 << 20))
    assert path.stat().st_size < 1 << 20
    done = _run(["evaluate", str(path), "--scores", "msp"], timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"selcal: error: {path}: line 1: the header is longer than 64 MB; no dump's header "
                                   "is: is this a CSV file?")


@pytest.mark.slow
def test_a_small_gzip_of_valid_rows_inflating_to_560_mb_is_refused_in_seconds(tmp_path):
    """1 MB of gzip, 560 MB of well-formed rows: read to the end, it ran for minutes; refused at the inflation bound."""
    path = tmp_path / "rows.csv.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b"label,logit_0,logit_1\n")
        for _ in range(45):
            handle.write(b"1,0.5,-1.25\n" * (1 << 20))
    assert path.stat().st_size < 2 << 20
    started = time.monotonic()
    done = _run(["evaluate", str(path), "--scores", "msp"], timeout=60)
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - started < 30
    assert done.stderr.strip() == (f"selcal: error: {path}: inflates to more than 128 MB, the most selcal inflates (100 "
                                   "times the file's size, at least 128 MB; a dump's text compresses 2 to 20 times): a "
                                   "compression bomb? If not, decompress it and give the plain file, which is read at "
                                   "any size")


@pytest.mark.parametrize("opener, suffix", [(gzip.open, ".jsonl.gz"), (bz2.open, ".csv.bz2"), (lzma.open, ".csv")])
def test_what_a_compressed_file_inflates_to_is_bounded_by_its_size(tmp_path, monkeypatch, opener, suffix):
    monkeypatch.setattr(text_io, "INFLATE_FLOOR", 1 << 16)
    lines = ROWS if suffix.startswith(".jsonl") else CSV_LINES
    path = tmp_path / f"m{suffix}"
    with opener(path, "wb") as handle:  # a few KB of ordinary rows: read
        handle.write(("\n".join(lines) + "\n").encode())
    assert read_dump(path).labels.size == 40
    with opener(path, "wb") as handle:  # the same rows a thousand times over: past 100 times the file's size
        handle.write(("\n".join(lines) + "\n").encode() + ("\n".join(lines[-40:]) + "\n").encode() * 1000)
    assert path.stat().st_size * 100 < 1000 * len("\n".join(lines))
    text = refused(path)
    assert text.startswith(f"{path}: inflates to more than 0 MB, the most selcal inflates (100 times"), text
    plain = tmp_path / "plain.csv"  # the plain file has no such bound
    plain.write_text(("\n".join(CSV_LINES) + "\n") + ("\n".join(CSV_LINES[1:]) + "\n") * 1000)
    assert read_dump(plain).labels.size == 40 * 1001


def test_a_line_longer_than_the_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(text_io, "MAX_LINE_BYTES", 4096)
    monkeypatch.setattr(text_io, "BLOCK_BYTES", 1000)
    path = tmp_path / "long.csv"
    path.write_text("\n".join(CSV_LINES[:5] + ["1," + "1" * 5000 + ",2"] + CSV_LINES[5:]) + "\n")
    assert refused(path) == f"{path}: line 6: is longer than 0 MB; no row of a dump is: is this a text file of rows?"


def test_the_header_count_uses_the_separator_of_the_format(tmp_path, monkeypatch):
    monkeypatch.setattr(text_io, "MAX_COLUMNS", 3)
    path = tmp_path / "m.tsv"
    path.write_text("label\tlogit_0\tlogit_1\n0\t1.5\t2\n")  # 3 columns: read
    assert read_dump(path).logits.shape == (1, 2)
    path.write_text("label\tlogit_0\tlogit_1\tlogit_2\n0\t1.5\t2\t3\n")
    assert "the header has 4 columns" in refused(path)


# --------------------------------------------------------------------------- compression
@pytest.mark.parametrize("opener, suffix", [(gzip.open, ".csv.gz"), (bz2.open, ".csv.bz2"), (lzma.open, ".csv.xz"),
                                            (gzip.open, ".csv")])
def test_a_compressed_csv_is_read_as_a_stream_with_the_numbers_of_the_plain_one(tmp_path, opener, suffix):
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(CSV_LINES) + "\n")
    packed = tmp_path / f"packed{suffix}"
    with opener(packed, "wb") as handle:
        handle.write(plain.read_bytes())
    a, b = read_dump(plain), read_dump(packed)
    assert np.array_equal(a.logits, b.logits) and np.array_equal(a.labels, b.labels)
    result = selcal.evaluate(str(packed), scores="msp")
    assert result.models[0].name == "packed"
    assert result.scores["msp"]["aurc"] == selcal.evaluate(str(plain), scores="msp").scores["msp"]["aurc"]


def test_a_compressed_file_is_read_block_by_block(tmp_path, monkeypatch):
    monkeypatch.setattr(text_io, "BLOCK_BYTES", 64)
    path = tmp_path / "m.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(("\n".join(ROWS) + "\n").encode())
    dump = read_dump(path)
    assert dump.labels.tolist() == [i % 2 for i in range(40)]


def test_a_truncated_gzip_is_one_line(tmp_path):
    path = tmp_path / "cut.csv.gz"
    data = gzip.compress(("\n".join(CSV_LINES * 50) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])
    assert "its gzip stream is truncated or corrupted" in refused(path)


@pytest.mark.parametrize("head, words", [
    (b"\x28\xb5\x2f\xfd" + b"\0" * 64, "is zstd-compressed; decompress it (zstd -d)"),
    (b"\x04\x22\x4d\x18" + b"\0" * 64, "is lz4-compressed"),
    (b"\xff\xfel\0a\0b\0", "is UTF-16 text; save it as UTF-8"),
    (b"\x93NUMPY" + b"\0" * 64, "is a NumPy .npy array: give it a .npy name"),
])
def test_a_file_of_another_kind_is_refused_by_its_magic_bytes(tmp_path, head, words):
    path = tmp_path / "m.csv"
    path.write_bytes(head)
    assert refused(path) == f"{path}: {words}" or refused(path).startswith(f"{path}: {words}")


def test_a_parquet_or_npz_file_named_csv_is_named_for_what_it_is(tmp_path):
    path = tmp_path / "m.csv"
    pq.write_table(pa.table({"label": [0, 1]}), path)
    assert refused(path) == f"{path}: is a Parquet file: give it a .parquet name"
    np.savez(tmp_path / "x.npz", logits=np.zeros((2, 2)), labels=[0, 1])
    os.replace(tmp_path / "x.npz", path)
    assert "is a zip archive (an .npz is one)" in refused(path)


# --------------------------------------------------------------------------- text encodings and shapes
def test_a_utf8_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + ("\n".join(CSV_LINES) + "\n").encode())
    assert read_dump(path).labels.size == 40


def test_a_ragged_line_is_named(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("\n".join(CSV_LINES[:7] + ["1,2.5,3,4"] + CSV_LINES[7:]) + "\n")
    assert refused(path).startswith(f"{path}: line 8: has more values than the header has columns")


def test_a_bad_value_in_a_later_block_is_named_and_cut_short(tmp_path, monkeypatch):
    monkeypatch.setattr(text_io, "BLOCK_BYTES", 100)
    path = tmp_path / "late.csv"
    path.write_text("\n".join(CSV_LINES[:30] + ["1," + "x" * 500 + ",2"] + CSV_LINES[30:]) + "\n")
    assert refused(path) == (f"{path}: column 'logit_0', line 31: holds '{'x' * 37}...', which is not a number; "
                             "store numbers only")


@pytest.mark.slow
def test_reading_a_large_csv_holds_a_block_not_the_file(tmp_path):
    """Peak resident memory of reading a 200 MB CSV by batches stays far below its size (polars was given
    the file and mapped it whole)."""
    path = tmp_path / "big.csv"
    rng = np.random.default_rng(0)
    with open(path, "w") as handle:
        handle.write("label," + ",".join(f"logit_{k}" for k in range(20)) + "\n")
        for _ in range(20):
            block = np.column_stack([rng.integers(0, 20, 50_000), rng.normal(0, 2, (50_000, 20))])
            np.savetxt(handle, block, fmt=["%d"] + ["%.6f"] * 20, delimiter=",")
    size = path.stat().st_size
    code = f"""
import resource
from selcal.io import open_dump
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
source = open_dump({str(path)!r})
rows = sum(batch["labels"].size for batch, _ in source.raw_batches(65536))
print(rows, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    rows, grown = map(int, done.stdout.split())
    assert rows == 1_000_000
    assert grown < size / 2, (grown, size)
