"""Shared helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, one_error_line, write_parquet


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
    honest = write_parquet(tmp_path / "m.parquet", n=1000)
    lying = _claim_rows(honest, tmp_path / "lying.parquet", 1000, 2 ** 61, count)
    line = one_error_line(cli("evaluate", lying, "--scores", "msp"))
    assert "lying.parquet" in line and "corrupted" in line


@pytest.mark.slow
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
    line = one_error_line(cli("evaluate", bomb, "--scores", "msp"))
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
    line = one_error_line(cli("evaluate", liar, "--scores", "msp"))
    assert "liar.npz" in line and "logits" in line and "corrupted" in line


@pytest.mark.slow
def test_a_fifo_or_a_device_as_input_is_one_line_not_a_hang(tmp_path):
    """A FIFO named like a dump blocked the Parquet library's open() for good, deaf to SIGTERM
    (found in this round's own pass); it is refused before any reading."""
    fifo = tmp_path / "dump.parquet"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for path in (fifo, "/dev/zero"):
        done = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(path), "--scores", "msp"],
                              capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "regular files" in lines[0], done.stderr


@pytest.mark.parametrize("value_type", [pa.int8(), pa.int64(), pa.uint8()])
@pytest.mark.parametrize("layout", ["list", "fixed_size_list", "wide"])
def test_integer_logits_are_refused_saying_to_cast_and_scale_them(tmp_path, cli, value_type, layout):
    # Quantised models emit int8 codes: a softmax of the raw codes (without their scale) is a wrong number.
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 100, size=(20, 3))
    labels = pa.array(rng.integers(0, 3, 20))
    if layout == "wide":
        table = pa.table({"label": labels, **{f"logit_{k}": pa.array(codes[:, k], type=value_type) for k in range(3)}})
    else:
        values = pa.array(codes.ravel(), type=value_type)
        column = (pa.FixedSizeListArray.from_arrays(values, 3) if layout == "fixed_size_list"
                  else pa.ListArray.from_arrays(np.arange(0, 61, 3, dtype=np.int32), values))
        table = pa.table({"label": labels, "logits": column})
    pq.write_table(table, tmp_path / "q.parquet")
    one_error_line(cli("evaluate", tmp_path / "q.parquet"), "q.parquet", "cast integer logits to float",
                   "multiplied by their scale")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64])
@pytest.mark.parametrize("suffix", [".npz", ".npy"])
def test_integer_logit_arrays_are_refused_with_the_words_of_parquet(tmp_path, cli, dtype, suffix):
    # was: "has dtype int8; save float16, float32 or float64 logits", without why (the scale) or how (cast)
    rng = np.random.default_rng(0)
    codes, labels = rng.integers(0, 100, size=(20, 3)).astype(dtype), rng.integers(0, 3, 20)
    if suffix == ".npz":
        np.savez(tmp_path / "q.npz", logits=codes, labels=labels)
    else:
        np.save(tmp_path / "q.npy", codes)
        np.save(tmp_path / "q_labels.npy", labels)
    one_error_line(cli("evaluate", tmp_path / f"q{suffix}"), f"q{suffix}: column 'logits': has dtype "
                   f"{np.dtype(dtype).name}; logits must be float16, float32 or float64: cast integer logits to float "
                   "(quantised ones multiplied by their scale first")


def _boolean_logits(tmp_path, layout: str):
    """A dump whose logits (or one of their columns) are true/false, in ``layout``; (its path, the column named)."""
    rng = np.random.default_rng(0)
    flags, labels = rng.random((20, 3)) > 0.5, rng.integers(0, 3, 20)
    floats = rng.normal(size=(20, 3))
    if layout in ("list", "fixed_size_list"):
        values = pa.array(flags.ravel())
        column = (pa.FixedSizeListArray.from_arrays(values, 3) if layout == "fixed_size_list"
                  else pa.ListArray.from_arrays(np.arange(0, 61, 3, dtype=np.int32), values))
        table, column_name = pa.table({"label": labels, "logits": column}), "logits"
    elif layout == "wide":  # one bool column among float ones
        table = pa.table({"label": labels, "logit_0": floats[:, 0], "logit_1": flags[:, 1], "logit_2": floats[:, 2]})
        column_name = "logit_1"
    elif layout == "binary":
        table, column_name = pa.table({"label": labels % 2, "logit": flags[:, 0]}), "logit"
    if layout in ("list", "fixed_size_list", "wide", "binary"):
        pq.write_table(table, tmp_path / "b.parquet")
        return tmp_path / "b.parquet", column_name
    if layout == "csv":
        path = tmp_path / "b.csv"
        path.write_text("label,logit_0,logit_1\n" + "".join(f"{y % 2},{str(a).lower()},{str(b).lower()}\n"
                                                          for y, (a, b, _) in zip(labels, flags)))
        return path, "logit_0"
    if layout == "jsonl":
        path = tmp_path / "b.jsonl"
        path.write_text("".join(f'{{"label": {y}, "logits": [{", ".join(str(v).lower() for v in row)}]}}\n'
                                for y, row in zip(labels, flags)))
        return path, "logits"
    np.savez(tmp_path / "b.npz", logits=flags, labels=labels)
    return tmp_path / "b.npz", "logits"


@pytest.mark.parametrize("layout", ["list", "fixed_size_list", "wide", "binary", "csv", "jsonl", "npz"])
def test_boolean_logits_are_refused_not_read_as_0_and_1(tmp_path, cli, layout):
    # true/false per class is a decision, not a logit: read as 0/1 it would give a softmax, and numbers, of nothing.
    path, column = _boolean_logits(tmp_path, layout)
    one_error_line(cli("evaluate", path), f"{path.name}: column '{column}': holds true/false values; "
                                          "logits must be numbers", "not read as 0 and 1")
