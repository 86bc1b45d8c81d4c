"""What every command says and checks the same way: one-line messages on stderr, the output
paths checked before the work, the options given to no effect, the warnings about the data."""

from __future__ import annotations

import sys

import typer

from ..errors import OptionError, SelcalError, flag
from ..escape import printable


OUT_OF_MEMORY_SAID = []  # not empty once the run's out-of-memory line is printed: the process ends without its shutdown


def say(line: str) -> None:
    """One line on stderr (an error, a warning or a note), always one line."""
    from ..errors import OUT_OF_MEMORY, OUT_OF_MEMORY_LOADING

    if line.startswith("selcal: error:") and (OUT_OF_MEMORY in line or OUT_OF_MEMORY_LOADING.split("{")[0] in line):
        OUT_OF_MEMORY_SAID.append(line)
    typer.echo(printable(line), err=True)


def fail(message: str):
    """``selcal: error: message`` on stderr, exit status 2."""
    say(f"selcal: error: {message}")
    raise typer.Exit(2)


def flag_error(exc: OptionError) -> OptionError:
    """The error of a Python argument (``p_grid``), naming its command-line flag (``--p-grid``; ``input_kind``:
    ``--input``, :data:`selcal.errors.FLAGS`); an error that names a flag already is kept."""
    if exc.option.startswith("-"):
        return exc
    return exc.named(flag(exc.option))


def fail_on(exc: SelcalError):
    """:func:`fail` with the message of ``exc``; a Python argument's error names its flag."""
    fail(str(flag_error(exc) if isinstance(exc, OptionError) else exc))


def write_error(exc: OSError, path=None) -> str:
    """The message of an OSError while writing (a full disk, a vanished folder); ENOMEM, wherever it came
    from (a reader's allocation), is the run's out-of-memory line."""
    from ..errors import OUT_OF_MEMORY, out_of_memory

    if out_of_memory(exc):
        return OUT_OF_MEMORY
    from ..writers.output import cannot_write

    where = exc.filename or path
    return cannot_write(f"{where}: " if where else "", exc)


def check_outputs(outputs, paths: dict, already: list[str] = (), make_parents: bool = False) -> list[str]:
    """Check the output paths before any work; the options among them that write to stdout (one at most)."""
    to_stdout = []
    for option, path in paths.items():
        target = outputs.check(None if path is None else str(path), make_parents=make_parents)
        if target is not None and target.is_stdout:
            to_stdout.append(option)
    if len(to_stdout) + len(already) > 1:
        names = ", ".join([*already, *to_stdout])
        raise SelcalError(f"only one output can go to stdout ('-' or /dev/stdout); got {names}")
    return to_stdout


def check_writable(path) -> None:
    """Refuse an output path that cannot or must not be written (selcal.writers.output.classify), before the work."""
    from ..writers.output import classify

    classify(str(path))


def note_ignored(ctx: typer.Context, rules) -> None:
    """Name, in one ``selcal: note:`` line on stderr, every option the user gave that has no
    effect with these inputs (rules: (parameter, flag, has an effect, why not)), rather than
    ignore it silently. Printed whatever -q or --no-warnings say: it is about the command, not the data."""
    given = [(flag, why) for name, flag, effect, why in rules
             if not effect and ctx.get_parameter_source(name) is not None
             and ctx.get_parameter_source(name).name not in ("DEFAULT", "DEFAULT_MAP")]
    if given:
        sys.stdout.flush()
        say("selcal: note: ignored, no effect with these inputs: "
            + "; ".join(f"{flag} ({why})" for flag, why in given))


def show_warnings(warnings, silenced: bool = False, width: int | None = None, of: int | None = None) -> None:
    """The one rule for what selcal knows about the data: every warning goes to stderr, always
    (also with -q, with an output to '-', under a leaderboard and in check/compare), as
    ``selcal: warning: MODEL: text``, after whatever went to stdout; ``--no-warnings`` silences it.

    ``warnings``: (model name, text) pairs. A warning of one kind about several models is one
    line (``selcal: warning: 14 models (calpaper_*/test): text``; :mod:`selcal.report.warning_groups`);
    ``of``: how many models there are in all (every one of them: "all 55 models").
    """
    if silenced or not warnings:
        return
    from ..report.warning_groups import warning_lines

    sys.stdout.flush()  # a CI log interleaves the two streams: the warnings come under the tables
    for grouped in warning_lines(warnings, of):
        line = f"selcal: warning: {grouped}"
        if width is None or len(line) <= width:
            say(line)
            continue
        import textwrap  # check and compare: a CI log shows 100 columns

        for part in textwrap.wrap(printable(line), width=width, subsequent_indent="  ", break_long_words=False):
            typer.echo(part, err=True)
