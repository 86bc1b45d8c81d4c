"""The tests the absent shared real data skips (``helpers.realdata``) are counted in one line at the end
of the run (conftest.py), and nothing is said when the data is there."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import ROOT

TESTS = '''
import pytest
from helpers import realdata


def test_a_model():
    realdata("some_model", "test.npz")


def test_another_model():
    realdata("other_model")


def test_skipped_for_another_reason():
    pytest.skip("no chromium on PATH")


def test_without_the_data():
    pass
'''


def run(tmp_path, data):
    """A pytest run of TESTS with tests/conftest.py as a plugin and the real data at ``data``."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_tiny.py").write_text(TESTS)
    env = dict(os.environ, SELCAL_REALDATA=str(data),
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
                           "test_tiny.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_tests_skipped_without_the_real_data_are_counted_at_the_end(tmp_path):
    nowhere = tmp_path / "nowhere" / "realdata"
    out = run(tmp_path, nowhere)
    assert "1 passed, 3 skipped" in out
    lines = [line for line in out.splitlines() if line.startswith("selcal:")]
    assert lines == [f"selcal: 2 tests skipped: the real data was not found at {nowhere} (clone the shared data "
                     "beside the repository, or set SELCAL_REALDATA to its folder, to run them)"], out
    assert out.rstrip().splitlines()[-2] == lines[0]  # in the summary, just above the counts


def test_nothing_is_said_when_the_real_data_is_there(tmp_path):
    data = tmp_path / "realdata"
    (data / "some_model").mkdir(parents=True)
    (data / "some_model" / "test.npz").write_bytes(b"")
    (data / "other_model").mkdir()
    out = run(tmp_path, data)
    assert "3 passed, 1 skipped" in out and "selcal:" not in out and "real data" not in out, out
