"""The one exception type selcal raises for input a user must fix."""

from contextlib import contextmanager
from contextvars import ContextVar


class SelcalError(Exception):
    """Bad input or options: the message says what, where (file, column, row) and what to do.

    The CLI prints it as one line on stderr and exits with status 2.
    """


_COMMAND_LINE: ContextVar[bool] = ContextVar("selcal_command_line", default=False)


def naming_flags() -> bool:
    """Whether messages name the command line's flags (``--input probs``): True while a ``selcal`` command
    runs (:func:`command_line`); else they name the Python arguments (``input_kind='probs'``). Decided where
    the call enters (the command's callback; a Python call leaves the default) and carried to where its work
    runs: a pool's thread and a Ray task start with an empty context, so they run :func:`carried` functions
    (the engines and the pools of ``pipeline.reduce`` and ``scores.fits`` do)."""
    return _COMMAND_LINE.get()


@contextmanager
def command_line(flags: bool = True):
    """The messages of what runs inside name the command line's flags (:func:`naming_flags`); ``flags=False``:
    the Python arguments (a source opened for a Python caller inside a command's process, a job's own face)."""
    token = _COMMAND_LINE.set(flags)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def carried(fn):
    """``fn``, run in the face of the code that made it (:func:`naming_flags` there): for a thread of a pool,
    whose context starts empty (the Python face), whatever face made the work."""
    flags = naming_flags()

    def run(*args, **kwargs):
        with command_line(flags):
            return fn(*args, **kwargs)
    return run


#: The Python arguments whose command-line flag is not their name with dashes: the one table of the two faces
#: (``cli.groups`` declares the flags from it, ``cli.common.flag_error`` and :func:`said` rename by it).
FLAGS = {"input_kind": "--input", "score_cols": "--score-col", "uncertainty_cols": "--uncertainty-col",
         # (selcal.checks.compare_files' and check's)
         "resamples": "--bootstrap", "only": "--metric", "tolerances": "--tolerance", "all_metrics": "--all",
         "maxima": "--max", "minima": "--min",
         # (selcal.study's)
         "metrics": "--metric"}

_BARE = object()


def flag(argument: str) -> str:
    """The command-line flag of the Python argument ``argument``: ``label_col`` is ``--label-col``, ``input_kind``
    ``--input`` (:data:`FLAGS`)."""
    return FLAGS.get(argument, "--" + argument.replace("_", "-"))


def said(argument: str, value=_BARE, *, python: bool | None = None, metavar: str | None = None) -> str:
    """How a message names the argument ``argument`` (given ``value``) to its caller: ``input_kind='probs'``
    (``label_col``) to Python, ``--input probs`` (``--label-col``) on the command line; a switch given
    (``value`` True) is ``per_class=True``, ``--per-class``; ``metavar`` stands for a value to give
    (``val=FILE``, ``--val FILE``). ``python``: the face (a source's,
    :attr:`~selcal.io.base.DumpSource.python`); None: as :func:`naming_flags` says.

    >>> said("label_col", "y", python=True), said("label_col", "y", python=False), said("val", python=False)
    ("label_col='y'", '--label-col y', '--val')
    >>> said("val", metavar="FILE", python=True), said("per_class", True, python=True), said("per_class", True, python=False)
    ('val=FILE', 'per_class=True', '--per-class')
    """
    if python is None:
        python = not naming_flags()
    if metavar is not None:
        return f"{argument}={metavar}" if python else f"{flag(argument)} {metavar}"
    if python:
        return argument if value is _BARE else f"{argument}={value!r}"
    return flag(argument) if value is _BARE or value is True else f"{flag(argument)} {value}"


class OptionError(SelcalError):
    """A bad option value. The message names the option as its caller calls it: ``bins`` from
    Python, ``--bins`` from the command line (:meth:`named`), from one validation.
    """

    def __init__(self, option: str, template: str):
        self.option = option
        self.template = template  # holds "{option}" where the option's name goes; any other brace is text
        super().__init__(template.replace("{option}", option))

    def named(self, name: str) -> "OptionError":
        """The same error, naming the option ``name`` (e.g. the command-line flag)."""
        error = OptionError(self.option, self.template)
        error.args = (self.template.replace("{option}", name),)
        return error

    def __str__(self) -> str:
        return str(self.args[0])


class ModelsFailed(SelcalError):
    """Some models could not be evaluated; every other one was. ``messages``: one per failed model,
    naming its file (the message is those lines), each said once (the models of one lm-eval log, one
    per choice count, fail with the log's one message)."""

    def __init__(self, messages):
        self.messages = list(dict.fromkeys(messages))
        super().__init__("\n".join(self.messages))


# The one line of a run that ran out of memory (CONVENTIONS.md, "Out of memory"), and of a command whose
# libraries could not be loaded in the memory it was given.
OUT_OF_MEMORY = ("out of memory; evaluate fewer or smaller inputs at once, or give Parquet dumps (read by row "
                 "batches)")
OUT_OF_MEMORY_LOADING = "out of memory while loading {what}; give the process more memory (its limit: ulimit -v)"


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) says memory ran out: a MemoryError, an OSError ENOMEM, an
    ImportError of a library that could not be mapped into memory, or a thread that could not start (under
    an address-space limit; Arrow's too).

    >>> out_of_memory(ImportError("libx.so: failed to map segment from shared object")), out_of_memory(ImportError("no x"))
    (True, False)
    """
    import errno

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
            return True
        if isinstance(exc, ImportError) and any(words in str(exc).lower() for words in
                                                ("failed to map segment", "cannot allocate memory")):
            return True
        if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):  # (its stack did not fit)
            return True
        if type(exc).__module__.startswith("pyarrow") and any(words in str(exc) for words in (
                "Failed to launch worker thread", "std::bad_alloc")):  # Arrow's thread pool, its allocator
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
