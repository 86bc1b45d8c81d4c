"""SIGTERM and SIGINT at any moment of ``selcal evaluate --report --plots --json`` (CONVENTIONS.md,
"Signals").

The run is stopped at many points spread over a whole run (start, reading, fits, the figures drawn
by worker processes, the report, the commit, the exit). At every point exactly one of two things
is true:

* it stopped: status 143 (SIGTERM) or 130 (SIGINT), one line on stderr, and no output and no
  staged file left (the outputs' folder is as before); or, when the signal came after the outputs
  were committed (renamed into place together), the one line after the run's own and every
  output whole;
* it had finished: status 0, every output complete, stderr as in a run left alone.

Never a status of death by the signal (-15), a traceback (the parent's or a worker's), a partial
output (figures without the JSON), or a worker left running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL") or sys.platform == "win32", reason="POSIX signals")

LINES = {signal.SIGTERM: "selcal: terminated", signal.SIGINT: "selcal: aborted"}


def selcal_command() -> list[str]:
    script = Path(sys.executable).with_name("selcal")
    return [str(script)] if script.exists() else [sys.executable, "-m", "selcal.cli"]


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    n, k = 3000, 10
    labels = rng.integers(0, k, n)
    logits = rng.normal(0.0, 2.0, (n, k))
    logits[np.arange(n), labels] += rng.gamma(2.0, 1.0, n)
    path = tmp_path_factory.mktemp("signals") / "m.npz"
    np.savez(path, logits=logits.astype(np.float32), labels=labels)
    return path


ARGS = ["--scores", "msp,temp", "--report", "r.html", "--plots", "figs", "--json", "out.json"]


def start(dump: Path, folder: Path) -> subprocess.Popen:
    folder.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([*selcal_command(), "evaluate", str(dump), *ARGS], cwd=folder, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def left_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def finish(process: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    # (the progress lines a pipe gets every 10 s, issue 34, depend on the machine's speed: left out)
    return process.returncode, "".join(line for line in err.decode().splitlines(keepends=True)
                                       if not PROGRESS_LINE.match(line))


PROGRESS_LINE = re.compile(r"^selcal: [a-z ,-]+ [\d,]+(/[\d,]+)?\n?$")


def no_process_left(group: int) -> bool:
    """No process of the run's session is left (the figure workers and their server included)."""
    for _ in range(50):
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def whole_run(dump, tmp_path_factory):
    """A run left alone: its duration, its stderr and what it writes."""
    folder = tmp_path_factory.mktemp("whole") / "run"
    began = time.monotonic()
    process = start(dump, folder)
    code, err = finish(process)
    assert code == 0, err
    return time.monotonic() - began, err, left_in(folder)


@pytest.mark.slow
@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGTERM to selcal", "SIGINT to the process group (Ctrl-C)"])
def test_a_signal_at_any_moment_stops_cleanly_or_finds_the_run_complete(dump, whole_run, tmp_path, signum, to_group):
    duration, whole_err, whole_outputs = whole_run
    assert {"out.json", "r.html", "figs"} <= set(whole_outputs)
    points = 14 if signum == signal.SIGTERM else 7
    outcomes = []
    for point in range(points):
        delay = duration * (0.03 + 1.05 * point / points)  # from the start to past the end
        folder = tmp_path / f"at_{point}"
        process = start(dump, folder)
        time.sleep(delay)
        try:
            (os.killpg if to_group else os.kill)(process.pid, signum)
        except ProcessLookupError:
            pass
        code, err = finish(process)
        left = left_in(folder)
        where = f"signal after {delay:.2f} s of a {duration:.2f} s run: status {code}, stderr {err!r}, left {left}"
        assert "Traceback" not in err and "Error" not in err.replace("selcal: error", ""), where
        if code == 0:  # it had finished: everything, as a run left alone
            assert left == whole_outputs and err == whole_err, where
        else:
            assert code == 128 + signum, where
            assert err.endswith(LINES[signum] + "\n") and whole_err.startswith(err[:-len(LINES[signum]) - 1]), where
            if left:  # stopped after the outputs were committed, together: they are whole
                assert left == whole_outputs, where
            else:
                assert err == LINES[signum] + "\n", where
        assert no_process_left(process.pid), where
        outcomes.append(code)
    assert outcomes.count(128 + signum) >= points // 2, outcomes  # (the points do stop most runs)


@pytest.mark.slow
def test_a_signal_while_the_interpreter_shuts_down_does_not_kill_it_by_the_signal(dump, tmp_path):
    """The output is written and the run is exiting: SIGTERM then gives the run's status (or, before its
    status was known, 143 and the line), never death by the signal (status -15: Python resets its handlers
    to the default action part of the way through its shutdown; 16 of 16 runs died so before)."""
    codes = []
    for attempt in range(8):
        folder = tmp_path / f"exit_{attempt}"
        folder.mkdir()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        process = subprocess.Popen([*selcal_command(), "ensemble", str(dump), str(dump), "--out", "e.parquet"],
                                   cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while not (folder / "e.parquet").exists() and process.poll() is None:
            time.sleep(0.005)
        time.sleep(0.01 * attempt)
        try:
            process.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        _, err = process.communicate(timeout=120)
        assert process.returncode in (0, 143), (process.returncode, err)
        assert b"Traceback" not in err
        codes.append(process.returncode)
    assert 0 in codes  # (the signal did come after the status was known)
