"""Shared helpers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from helpers import ROOT

_SIGNAL_IN_A_FINALIZER = '''
import os, signal, sys, time, weakref
import selcal.cli as cli

class Thing:
    pass

def app(standalone_mode=False, **kwargs):  # selcal.cli.run passes prog_name too
    thing = Thing()
    def callback(ref):  # the handler runs at the next line, here, where Python drops what it raises
        os.kill(os.getpid(), signal.SIG{name})
        for _ in range(1000):
            pass
    ref = weakref.ref(thing, callback)
    del thing
    start = time.time()
    while time.time() - start < 3:
        pass
    print("finished")
    return 0

cli.app = app
cli.run()
'''


@pytest.mark.slow
@pytest.mark.parametrize("name,code,line", [("INT", 130, "selcal: aborted"), ("TERM", 143, "selcal: terminated")])
def test_a_signal_that_lands_in_a_finalizer_still_ends_the_run(name, code, line):
    """Ctrl-C during 'selcal evaluate --plots --report' (4 models, at 7 s) printed 'Exception ignored in
    ... _weakrefset.py ... selcal.cli._Signalled: 2', then wrote every output and exited 0: the signal
    handler had raised inside a weakref callback, where Python drops exceptions."""
    run = subprocess.run([sys.executable, "-c", _SIGNAL_IN_A_FINALIZER.replace("{name}", name)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == code, (run.stdout, run.stderr)
    assert "finished" not in run.stdout
    assert run.stderr.strip() == line, run.stderr


@pytest.mark.slow
def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path):
    """Ctrl-C during the second the command spends importing its libraries gave a KeyboardInterrupt
    traceback, SIGTERM a silent death (found in this round's own pass): now one line and 130/143.
    The signal is sent right after ``import selcal``, as the command would still be importing."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for signum, line in ((signal.SIGINT, "selcal: aborted"), (signal.SIGTERM, "selcal: terminated")):
        code = ("import os, sys, time; sys.argv = ['selcal', 'evaluate', 'x.parquet']; import selcal; "
                f"os.kill(os.getpid(), {int(signum)}); time.sleep(30); import selcal.cli")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=120)
        assert done.returncode == 128 + signum, done.stderr
        assert done.stderr.strip().splitlines() == [line], done.stderr


def test_a_caught_signal_is_raised_where_the_run_is_and_a_dropped_one_is_raised_again(monkeypatch):
    """In-process: catch_signals sends SIGTERM to raise_signal (a Signalled, not a KeyboardInterrupt),
    and a Signalled that Python dropped in a finalizer arms a timer that raises it again."""
    import time
    from types import SimpleNamespace

    from selcal.cli import signals

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    try:
        signals.catch_signals()
        assert signal.getsignal(signal.SIGTERM) is signals.raise_signal
        with pytest.raises(signals.Signalled) as caught:
            signal.raise_signal(signal.SIGTERM)
        assert caught.value.signum == signal.SIGTERM and not isinstance(caught.value, KeyboardInterrupt)
        with pytest.raises(signals.Signalled):
            signals.rearm_dropped_signal(SimpleNamespace(exc_value=signals.Signalled(signal.SIGINT)))
            time.sleep(1)  # the timer raises it 10 ms on
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in handlers.items():
            signal.signal(s, handler)


_SIGNAL_IN_AN_EXTENSIONS_IMPORT = '''
import os, signal
import selcal.cli as cli

def app(standalone_mode=False, **kwargs):
    try:  # as a C extension's module init reports what the signal handler raised in it
        os.kill(os.getpid(), signal.SIG{name})
        for _ in range(1000):
            pass
    except BaseException as exc:
        raise ImportError("initialization failed") from exc
    print("finished")
    return 0

cli.app = app
cli.run()
'''


@pytest.mark.parametrize("name,code,line", [("INT", 130, "selcal: aborted"), ("TERM", 143, "selcal: terminated")])
def test_a_signal_while_a_library_imports_is_the_signals_line_not_the_import_error(name, code, line):
    """SIGTERM 1.2 s into a report run, while scipy.optimize imported its ``_core`` extension, gave
    'ImportError: initialization failed' with a traceback and status 1 (seen on CI)."""
    run = subprocess.run([sys.executable, "-c", _SIGNAL_IN_AN_EXTENSIONS_IMPORT.replace("{name}", name)],
                         capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stderr.strip()) == (code, line), (run.stdout, run.stderr)
