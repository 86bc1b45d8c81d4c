"""Preloaded by the forkserver of the drawing workers (:func:`selcal.figures.render._context`), and
imported by nothing else: the workers it forks inherit what it sets here, from their first instruction.

- SIGINT is ignored: Ctrl-C reaches the whole process group, and it is for the ``selcal`` process,
  which ends the workers (a worker still starting would otherwise print a KeyboardInterrupt traceback).
- A worker that fails before it runs selcal's code prints nothing: that happens only when its parent
  stopped while it started (the pool's semaphores were already gone), and the parent has said why in
  its one line. An error while drawing is not affected: it goes back to the parent, which reports it.
"""

from __future__ import annotations

import signal
import sys


def _quiet(kind, value, traceback) -> None:
    """``sys.excepthook`` of the forkserver and its workers: a failed start says nothing."""


def _in_forkserver() -> bool:
    """This process is multiprocessing's forkserver (started as ``python -c 'from multiprocessing.forkserver
    import main; ...'``), not a process that imports selcal's modules (a test collecting them)."""
    return sys.argv[:1] == ["-c"] and "multiprocessing.forkserver" in sys.modules


if _in_forkserver():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.excepthook = _quiet
