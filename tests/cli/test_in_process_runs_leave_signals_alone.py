"""A test that runs ``selcal.cli.run()`` in-process leaves the test process's signal handlers as it found
them (tests/conftest.py): the run ends by ignoring SIGINT, SIGTERM and SIGALRM (a real process is exiting
then), and left so, every later subprocess inherited SIGTERM ignored (a pool's ``terminate()`` hung)."""

from __future__ import annotations

import signal
import subprocess
import sys


def test_a_run_in_process_ends_by_ignoring_signals(monkeypatch):
    import selcal.cli

    monkeypatch.setattr(selcal.cli, "catch_signals", lambda: None)
    monkeypatch.setattr(sys, "argv", ["selcal", "--version"])
    try:
        selcal.cli.run()
    except SystemExit:
        pass
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # (what the next test must not inherit)


def test_the_next_test_and_its_subprocesses_have_the_default_handlers_again():
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    child = "import signal; print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)"
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out
