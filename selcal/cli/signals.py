"""Ctrl-C and SIGTERM end a run through :class:`Signalled`, raised where the run is, so that every
``finally`` and every discard of a staged output runs (used by :func:`selcal.cli.run`)."""

from __future__ import annotations

import sys


class Signalled(BaseException):
    """SIGINT or SIGTERM, raised where the run is so that every ``finally`` and discard runs.

    Not a KeyboardInterrupt: Click would turn that into its own exit before selcal could say why.
    """

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


SIGNAL_LINES = {"SIGINT": "selcal: aborted", "SIGTERM": "selcal: terminated"}


def raise_signal(signum, frame) -> None:
    raise Signalled(signum)


def rearm_dropped_signal(unraisable) -> None:
    """``sys.unraisablehook``: a :class:`Signalled` raised while Python ran a finalizer or a weakref
    callback (the handler runs at whatever line is next, there too) is dropped by Python, which
    printed a traceback and let the run go on to exit 0. Raise it again 10 ms later, from a timer
    (raising it here would be dropped too): by then the run is back in its own code, and if not, this
    hook arms the timer again."""
    import signal

    if isinstance(unraisable.exc_value, Signalled) and hasattr(signal, "setitimer"):
        signum = unraisable.exc_value.signum
        signal.signal(signal.SIGALRM, lambda _alarm, frame: raise_signal(signum, frame))
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    sys.__unraisablehook__(unraisable)


def catch_signals() -> None:
    """SIGINT and SIGTERM end the run through :class:`Signalled` (only the main thread may set handlers)."""
    import signal

    for name in SIGNAL_LINES:
        try:
            signal.signal(getattr(signal, name), raise_signal)
        except (AttributeError, ValueError, OSError):
            pass
    sys.unraisablehook = rearm_dropped_signal
