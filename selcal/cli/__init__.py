"""The ``selcal`` command: Typer commands only, each a thin skin over the library.

One module per command group; what they share, once:

- ``evaluate.py``: selcal evaluate; ``check.py``: selcal check and compare;
  ``threshold.py``: selcal threshold; ``dumps.py``: selcal pixels, ensemble and dump;
  ``study.py``: selcal study;
- ``groups.py``: the option groups the commands share (flags built from :data:`selcal.options.DEFAULTS`)
  and :func:`~selcal.cli.groups.build_options`, which turns a command's parameters into Options;
- ``common.py``: one-line messages, output checks, notes on ignored options, the data's warnings;
- ``progress.py``: the bars on a terminal; ``signals.py``: Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import os
import sys

from .._version import __version__
from ..errors import OUT_OF_MEMORY, OUT_OF_MEMORY_LOADING, command_line, out_of_memory

try:
    import typer

    from . import check, dumps, evaluate, study, threshold  # (one module per command group)
    from .common import OUT_OF_MEMORY_SAID, say, show_warnings
    from .groups import Command, Group, dress_help
    from .signals import SIGNAL_LINES, Signalled, catch_signals
except (MemoryError, ImportError, OSError) as _error:  # the command's libraries do not fit in its memory limit
    if not out_of_memory(_error) or os.path.basename(sys.argv[0] if sys.argv else "") not in ("selcal", "-m"):
        raise
    os.write(2, f"selcal: error: {OUT_OF_MEMORY_LOADING.format(what='its libraries')}\n".encode())
    os._exit(2)

__all__ = ["app", "run", "show_warnings"]

app = typer.Typer(
    cls=Group,
    add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # (--help in panels: cli/help.py draws them, without Typer's heavier renderer)
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How well does a classifier know when it is wrong? Selective classification and calibration from saved logits.",
)


def _version(value: bool):
    if value:
        typer.echo(f"selcal {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    """selcal: selective classification and calibration metrics from saved logits."""
    ctx.with_resource(command_line())  # the command's messages name its flags (--input), not Python's arguments


# The commands in a user's order (the order of --help and of the CLI reference), in two panels.
COMMAND_PANELS = {
    "Commands": (evaluate.evaluate, check.compare, check.check, study.study, threshold.threshold),
    "Make dumps": (dumps.dump, dumps.pixels, dumps.ensemble),
}
for _panel, _commands in COMMAND_PANELS.items():
    for _command in _commands:
        app.command(cls=Command, rich_help_panel=_panel)(_command)
dress_help(app)


def _command_path(error) -> str:
    """The command a usage error is about (``selcal evaluate``), whose ``--help`` says what it takes;
    from the error's context, else from the command line (the parser's errors have no context)."""
    context = getattr(error, "ctx", None)
    if context is not None:
        return context.command_path
    names = [command.name or command.callback.__name__ for command in app.registered_commands]
    return " ".join(["selcal", *[word for word in sys.argv[1:] if word in names][:1]])


def run() -> None:
    """Console entry point: usage errors as one ``selcal: error:`` line, exit status 2.

    Ctrl-C prints ``selcal: aborted`` and exits 130, SIGTERM ``selcal: terminated`` and 143, after
    the temporary files of the outputs are removed; also when the signal comes while an error is
    being reported. Once the status is known, a signal ends the exit at once with that status
    (never Python's default action, which died by the signal while the interpreter shut down).
    """
    catch_signals()
    try:
        try:
            code = _invoke()
        except Signalled as exc:
            code = _stopped(exc)
    except Signalled as exc:  # a second signal while the first one's line was printed
        code = _stopped(exc)
    _exit_with(code if isinstance(code, int) else 0)


def _invoke():
    """Run the command: its status, or the status of its one-line error."""
    try:
        return app(standalone_mode=False, prog_name="selcal")  # (also as python -m selcal.cli)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        say("selcal: aborted")
        return 130
    except MemoryError:  # the readers bound what they decode; what is left (e.g. many huge inputs at once)
        say(f"selcal: error: {OUT_OF_MEMORY}")
        return 2
    except Exception as exc:  # Click's usage errors (vendored by Typer): one line, not a box
        if out_of_memory(exc):  # a library loaded on first use (scipy) that no longer fits, an OSError ENOMEM
            say(f"selcal: error: {OUT_OF_MEMORY_LOADING.format(what=_library(exc))}" if isinstance(exc, ImportError)
                else f"selcal: error: {OUT_OF_MEMORY}")
            return 2
        signalled = _signal_behind(exc)
        if signalled is not None:  # a signal inside a C extension's import came back as its ImportError
            raise signalled from None
        if not hasattr(exc, "format_message"):
            raise
        message = exc.format_message().strip()
        if message:  # (no arguments at all: the help was printed, nothing to add)
            say(f"selcal: error: {message} (see {_command_path(exc)} --help)")
        return getattr(exc, "exit_code", 2)


def _library(exc: ImportError) -> str:
    """The library an ImportError names (``libscipy_openblas.so``, ``scipy.stats``), for the one line."""
    text = str(exc).split(":", 1)[0].rsplit("/", 1)[-1]
    name = text.split(".cpython")[0] if text.endswith(".so") or ".so." in text else getattr(exc, "name", None)
    return name or "a library"


def _signal_behind(exc: BaseException):
    """The Signalled that ``exc`` was raised from, if any (scipy.optimize's ``_core`` extension, importing
    when SIGTERM came, reported the handler's Signalled as "ImportError: initialization failed")."""
    from .signals import Signalled

    seen = 0
    cause = exc.__cause__ or exc.__context__
    while cause is not None and seen < 10:
        if isinstance(cause, Signalled):
            return cause
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


def _stopped(exc: Signalled) -> int:
    """The one line of a signal, and its status (128 + the signal's number)."""
    import signal

    for name in SIGNAL_LINES:  # a second signal now would cut the line short
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    typer.echo(SIGNAL_LINES.get(signal.Signals(exc.signum).name, "selcal: aborted"), err=True)
    return 128 + exc.signum


def _exit_with(code: int) -> None:
    """Exit with ``code``. From now on a signal ends the process at once with that status, saying
    nothing more: while the streams are flushed (a pipe nobody reads blocks) by a handler that exits;
    then, through the interpreter's shutdown (which resets a Python handler to the default action part
    of the way through: the process then died by the signal, status -15), by ignoring it."""
    import signal

    def end(signum, frame):
        os._exit(code)

    signals = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGALRM", None)) if s is not None]
    for signum in signals:  # (SIGALRM: a signal re-raised by rearm_dropped_signal)
        try:
            signal.signal(signum, end)
        except Signalled:  # (one that came between two of these lines: the run is over all the same)
            signal.signal(signum, end)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # (a closed pipe: said by the command already, or nothing to say)
            pass
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)
    if OUT_OF_MEMORY_SAID:  # the interpreter's shutdown runs the destructors of half-loaded native libraries
        os._exit(code)      # (pyarrow's, whose module failed to map: a segfault, status 139, after the line)
    sys.exit(code)
