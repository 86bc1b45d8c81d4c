"""Hostile and careless use, round three (issue 22): one test per category, each failing on the
code before the fix. Injection into what people open or paste, bombs and lying metadata,
loops, misaligned inputs, leftovers and noise."""

from __future__ import annotations

import json
import os
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
    pq.write_table(pa.table(columns), path)
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
    from selcal.io import output

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
