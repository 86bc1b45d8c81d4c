"""selcal: how well does a classifier know when it is wrong?

Selective-classification and calibration metrics from saved logits, exactly as
defined in CONVENTIONS.md. The public API mirrors the ``selcal evaluate`` command:

>>> import selcal
>>> result = selcal.evaluate("sample_logits/markus93_densenet40_c10.parquet")  # doctest: +SKIP
>>> result.models[0].scores["msp"]["aurc"]  # doctest: +SKIP

The modules that moved into their rooms in 0.2 still import under their old names
(the keys of :data:`MOVED`) for this release, with a DeprecationWarning naming the new place.
"""

import os as _os
import sys as _sys
import typing as _typing


def _quiet_start() -> None:
    """While the ``selcal`` command imports its libraries (about a second), Ctrl-C or SIGTERM ends it
    with the one line and the status of a stopped run (nothing is written yet), not a traceback;
    :func:`selcal.cli.run` then installs the handlers that also clean up. Only for the command."""
    import signal

    lines = {signal.SIGINT: "selcal: aborted\n", signal.SIGTERM: "selcal: terminated\n"}

    def stop(signum, frame):
        _os.write(2, lines[signum].encode())
        _os._exit(128 + signum)

    for signum in lines:
        try:
            signal.signal(signum, stop)
        except (ValueError, OSError):  # not the main thread
            pass


def _bounded_blas() -> None:
    """Under an address-space limit (``ulimit -v``): OpenBLAS (numpy's, scipy's) reserves 32 MB of
    buffers per thread when it loads, and one whose reservation fails loops for good inside its start-up,
    deaf to signals (seen at 300 and 400 MB, when scipy loaded late in a run). So it starts one thread
    (a value the user set is kept), and numpy and scipy's BLAS load first, while the most memory is free;
    if they do not fit, one line and status 2. Only for the command, and only under such a limit."""
    import resource

    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        return
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        _room(112 << 20)  # numpy takes about 84 MB of address space with its BLAS; scipy.linalg 94 MB more
        import numpy  # noqa: F401
        _room(128 << 20)  # (scipy's BLAS reservation failed at 150 MB and looped for good, deaf to SIGTERM)
        import scipy.linalg  # noqa: F401
    except (MemoryError, ImportError, OSError, RuntimeError) as exc:
        from .errors import OUT_OF_MEMORY_LOADING, out_of_memory

        if not out_of_memory(exc):
            raise
        _os.write(2, f"selcal: error: {OUT_OF_MEMORY_LOADING.format(what='numpy and scipy')}\n".encode())
        _os._exit(2)


def _room(size: int) -> None:
    """A MemoryError unless ``size`` bytes of address space are free (mapped and given back): a BLAS
    whose start-up would not fit is never loaded."""
    import mmap

    try:
        mmap.mmap(-1, size).close()
    except OSError as exc:
        raise MemoryError(f"{size >> 20} MB of address space are not free") from exc


if _os.path.basename(_sys.argv[0] if _sys.argv else "") in ("selcal", "-m"):  # the command is starting
    _quiet_start()
    _bounded_blas()

from ._version import __version__  # noqa: E402
from .errors import SelcalError  # noqa: E402

# The public names, each imported where it lives on first use (``selcal.evaluate``, ``from selcal import
# Options``): ``import selcal``, and the command's start (``selcal --help``), load only what they use.
_PUBLIC = {"evaluate": "api", "evaluate_arrays": "api", "evaluate_dump": "api", "threshold": "threshold",
           "ThresholdResult": "threshold.run", "read_dump": "io", "Options": "options",
           "EvaluationResult": "results", "ModelResult": "results", "register_score": "scores",
           "log_to_mlflow": "writers.trackers", "DumpWriter": "writers.training", "study": "study",
           "StudyResult": "study"}

if _typing.TYPE_CHECKING:  # what a type checker reads instead of the imports on first use (py.typed)
    from . import threshold
    from .api import evaluate, evaluate_arrays, evaluate_dump
    from .io import read_dump
    from .options import Options
    from .results import EvaluationResult, ModelResult
    from .scores import register_score
    from .threshold.run import ThresholdResult
    from .writers.trackers import log_to_mlflow
    from .writers.training import DumpWriter

__all__ = [
    "__version__",
    "SelcalError",
    "Options",
    "evaluate",
    "evaluate_arrays",
    "evaluate_dump",
    "threshold",
    "ThresholdResult",
    "read_dump",
    "EvaluationResult",
    "ModelResult",
    "register_score",
    "log_to_mlflow",
    "DumpWriter",
    "study",
    "StudyResult",
]


# Old module -> its place since 0.2. The old names import the same module object, with a
# DeprecationWarning; they go in the next release. (selcal.evaluate was a module too: the name is
# the function, the module is selcal.api.) scripts/rewrite_imports.py reads this table.
# rewrite_imports: off
MOVED = {
    "selcal.selective": "selcal.metrics.selective",
    "selcal.calibration": "selcal.metrics.calibration",
    "selcal.smooth": "selcal.metrics.smooth",
    "selcal.diagnostics": "selcal.metrics.diagnostics",
    "selcal.exact_sums": "selcal.metrics.exact_sums",
    "selcal.calibrators": "selcal.scores.calibrators",
    "selcal.deployment": "selcal.threshold.run",
    "selcal.guarantee": "selcal.threshold.guarantee",
    "selcal.render_threshold": "selcal.threshold.render",
    "selcal.gate": "selcal.checks.gate",
    "selcal.common_ground": "selcal.checks.common_ground",
    "selcal.html_report": "selcal.report.html",
    "selcal.io.output": "selcal.writers.output",
    "selcal.dump": "selcal.writers.dump",
    "selcal.ensemble": "selcal.writers.ensemble",
    "selcal.engines": "selcal.pipeline.engines",
    "selcal.identity": "selcal.pipeline.identity",
    "selcal.arrays": "selcal.io.objects",
}


def _new_name(name: str) -> str | None:
    """The module's name since 0.2 if ``name`` (or a package above it) is in :data:`MOVED`."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _MovedModules:
    """A meta-path finder: ``import selcal.OLD`` gives the module at its new place (the same object,
    so a monkeypatch through either name acts on both) and warns where the import is written."""

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("selcal.") or _new_name(name) is None:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import importlib
        import warnings

        old = module.__name__
        new = _new_name(old)
        frame, level = _sys._getframe(0), 1  # the first frame outside this file and the import system
        while frame is not None:
            where = frame.f_code.co_filename
            if not ("importlib" in where and "_bootstrap" in where):
                if where != __file__:
                    break
                level += 1
            frame = frame.f_back
        warnings.warn(f"{old} has moved to {new}; import it from there (the old name goes in the next release)",
                      DeprecationWarning, stacklevel=level)
        _sys.modules[old] = importlib.import_module(new)  # the import system returns what is here


if not any(isinstance(finder, _MovedModules) for finder in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedModules())


def __getattr__(name: str):
    """A public name (:data:`_PUBLIC`), imported on first use; ``selcal.html_report`` after a plain
    ``import selcal``: the moved module, with the warning."""
    if name in _PUBLIC:
        import importlib

        module = importlib.import_module(f"{__name__}.{_PUBLIC[name]}")
        value = module if _PUBLIC[name] == name else getattr(module, name)  # (selcal.threshold: the package)
        globals()[name] = value
        return value
    if f"{__name__}.{name}" in MOVED:
        __import__(f"{__name__}.{name}")
        return _sys.modules[f"{__name__}.{name}"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
# rewrite_imports: on
