"""``selcal evaluate BIG.parquet --json OUT.json`` killed mid-run: no partial output, ever.

CONVENTIONS.md ("Input": "no partial output files") and the README ("--json PATH" is written
atomically: a temporary file beside it, renamed onto it only when complete). A run killed
with SIGKILL cannot clean up after itself, so the guarantee must come from the order of
operations alone:

* killed while computing: neither OUT.json nor a temporary file exists;
* killed while writing (``os.fsync`` of the temporary file slowed to 5 s by a wrapper, the
  kill lands inside it): OUT.json does not exist; the temporary file may remain, but only
  under its own hidden name ``.OUT.json.*.tmp``, never as OUT.json;
* a previous OUT.json survives either kill byte for byte;
* interrupted with Ctrl-C (SIGINT) while writing: the temporary file is removed as well.

The runs are real subprocesses of this venv's ``selcal`` console script (or
``python -m selcal.cli``); CPU time is read from /proc (Linux).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import selcal_command

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc (Linux)")

BIG_ROWS, BIG_CLASSES = 200_000, 100  # 80 MB of float32 logits: a few seconds of work
TEMP_NAME = re.compile(r"^\.OUT\.json\..+\.tmp$")
PREVIOUS = '{"previous": "result"}\n'


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(args: list[str], folder: Path, prefix: list[str] | None = None) -> subprocess.Popen:
    log = open(folder / "stderr.log", "wb")
    return subprocess.Popen((prefix or selcal_command()) + args, cwd=folder, stdout=subprocess.DEVNULL, stderr=log,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def stop(process: subprocess.Popen) -> None:
    """SIGKILL our own process if it is still running (after a failed assertion)."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def outputs(folder: Path, inputs: set[str]) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name not in inputs)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """BIG.parquet: 200 000 x 100 float32 logits, labels right about 70 % of the time."""
    path = tmp_path_factory.mktemp("big") / "BIG.parquet"
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((BIG_ROWS, BIG_CLASSES), dtype=np.float32) * 3
    labels = np.where(rng.random(BIG_ROWS) < 0.7, logits.argmax(axis=1), rng.integers(0, BIG_CLASSES, BIG_ROWS))
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), BIG_CLASSES),
                             "label": pa.array(labels)}), path)
    return path


@pytest.fixture
def folder(tmp_path, big) -> Path:
    """A run folder holding (a link to) BIG.parquet."""
    (tmp_path / "BIG.parquet").symlink_to(big)
    return tmp_path


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, big) -> dict:
    """One uninterrupted run: its CPU time (to place the kills) and the JSON it writes."""
    folder = tmp_path_factory.mktemp("full")
    (folder / "BIG.parquet").symlink_to(big)
    process = start(["evaluate", "BIG.parquet", "--json", "OUT.json"], folder)
    cpu = 0.0
    try:
        while process.poll() is None:
            cpu = max(cpu, cpu_seconds(process.pid))
            time.sleep(0.02)
    finally:
        stop(process)
    assert process.returncode == 0, (folder / "stderr.log").read_text()
    assert outputs(folder, {"BIG.parquet", "stderr.log"}) == ["OUT.json"], "temporary file left by a complete run"
    return {"cpu": cpu, "json": (folder / "OUT.json").read_text()}


def kill_after_cpu(process: subprocess.Popen, seconds: float, timeout: float = 120.0,
                   may_finish: bool = False) -> float | None:
    """Poll until the process has used ``seconds`` of CPU, then SIGKILL it; its CPU time at the kill
    (None when it finished first and ``may_finish``)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            if may_finish:
                return None
            pytest.fail(f"the run ended (exit {process.returncode}) before using {seconds:.2f} s of CPU: "
                        "make BIG.parquet larger")
        used = cpu_seconds(process.pid)
        if used >= seconds:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            return used
        if time.monotonic() > deadline:
            pytest.fail(f"the run used only {used:.2f} s of CPU in {timeout:.0f} s")
        time.sleep(0.005)


# ------------------------------------------------------------------ killed while computing
@pytest.mark.slow
@pytest.mark.parametrize("previous", [False, True], ids=["no previous OUT.json", "previous OUT.json"])
def test_sigkill_after_one_cpu_second_leaves_nothing(folder, previous):
    if previous:
        (folder / "OUT.json").write_text(PREVIOUS)
    process = start(["evaluate", "BIG.parquet", "--json", "OUT.json"], folder)
    try:
        kill_after_cpu(process, 1.0)
    finally:
        stop(process)
    assert process.returncode == -signal.SIGKILL, f"not killed mid-run (exit {process.returncode})"
    left = outputs(folder, {"BIG.parquet", "stderr.log"})
    if previous:
        assert left == ["OUT.json"], f"left behind: {left}"
        assert (folder / "OUT.json").read_text() == PREVIOUS, "the previous OUT.json was changed"
    else:
        assert left == [], f"left behind: {left}"


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9])
def test_sigkill_at_any_point_leaves_no_partial_out_json(folder, full_run, fraction):
    """Killed at 30 %, 60 % or 90 % of a complete run's CPU time (reading, fitting, reducing, measuring).

    OUT.json is either absent or the complete result; a temporary file only under its own name.
    """
    process = start(["evaluate", "BIG.parquet", "--json", "OUT.json"], folder)
    try:
        used = kill_after_cpu(process, fraction * full_run["cpu"], may_finish=True)
    finally:
        stop(process)
    left = outputs(folder, {"BIG.parquet", "stderr.log"})
    assert all(name == "OUT.json" or TEMP_NAME.match(name) for name in left), f"left behind: {left}"
    if used is None:  # the run finished before the kill: a complete result, no temporary file
        assert process.returncode == 0 and left == ["OUT.json"], (process.returncode, left)
    if "OUT.json" in left:
        assert (folder / "OUT.json").read_text() == full_run["json"], (
            f"killed after {used} s of CPU: OUT.json exists but is not the complete result")


# ------------------------------------------------------------------ killed while writing
# Runs the real CLI with os.fsync (as used by selcal.writers.output.atomic_write) made slow: it first
# creates MARKER (the temporary file is written and flushed by then), then sleeps 5 s.
SLOW_FSYNC = r"""
import os, sys, time
import selcal.io

marker = sys.argv[1]
real_fsync = selcal.io.os.fsync

def slow_fsync(fd):
    open(marker, "w").close()
    time.sleep(5)
    real_fsync(fd)

selcal.io.os.fsync = slow_fsync
from selcal.cli import run

sys.argv = ["selcal"] + sys.argv[2:]
run()
"""


@pytest.fixture
def small(tmp_path) -> Path:
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3000, 10)).astype(np.float32)
    labels = np.where(rng.random(3000) < 0.7, logits.argmax(axis=1), rng.integers(0, 10, 3000))
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 10),
                             "label": pa.array(labels)}), tmp_path / "small.parquet")
    return tmp_path


def start_slow_write(folder: Path) -> subprocess.Popen:
    return start(["MARKER", "evaluate", "small.parquet", "--json", "OUT.json", "-q"], folder,
                 prefix=[sys.executable, "-c", SLOW_FSYNC])


def wait_for_marker(process: subprocess.Popen, folder: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not (folder / "MARKER").exists():
        if process.poll() is not None:
            pytest.fail(f"the run ended (exit {process.returncode}) before writing: "
                        f"{(folder / 'stderr.log').read_text()}")
        if time.monotonic() > deadline:
            pytest.fail("the run did not reach the write within 60 s")
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.parametrize("previous", [False, True], ids=["no previous OUT.json", "previous OUT.json"])
def test_sigkill_during_the_write_never_leaves_out_json(small, previous):
    if previous:
        (small / "OUT.json").write_text(PREVIOUS)
    process = start_slow_write(small)
    try:
        wait_for_marker(process, small)
        temp = [name for name in os.listdir(small) if TEMP_NAME.match(name)]
        assert len(temp) == 1, f"no temporary file beside OUT.json while writing: {os.listdir(small)}"
        json.loads((small / temp[0]).read_text())  # the kill lands after the whole JSON went to the temp file
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        stop(process)
    assert process.returncode == -signal.SIGKILL
    left = outputs(small, {"small.parquet", "stderr.log", "MARKER"})
    assert all(name == "OUT.json" or TEMP_NAME.match(name) for name in left), f"left behind: {left}"
    if previous:
        assert (small / "OUT.json").read_text() == PREVIOUS, "the previous OUT.json was changed by the killed run"
    else:
        assert not (small / "OUT.json").exists(), "OUT.json exists although the run was killed before renaming"


@pytest.mark.slow
def test_ctrl_c_during_the_write_removes_the_temporary_file(small):
    process = start_slow_write(small)
    try:
        wait_for_marker(process, small)
        os.kill(process.pid, signal.SIGINT)
        process.wait(timeout=30)
    finally:
        stop(process)
    stderr = (small / "stderr.log").read_text()
    assert process.returncode != 0, "an interrupted run reported success"
    assert "Traceback" not in stderr, stderr
    assert outputs(small, {"small.parquet", "stderr.log", "MARKER"}) == [], (
        f"left behind after Ctrl-C: {outputs(small, {'small.parquet', 'stderr.log', 'MARKER'})}; stderr: {stderr!r}")
