"""selcal: how well does a classifier know when it is wrong?

Selective-classification and calibration metrics from saved logits, exactly as
defined in CONVENTIONS.md. The public API mirrors the ``selcal evaluate`` command:

>>> import selcal
>>> result = selcal.evaluate("sample_logits/markus93_densenet40_c10.parquet")  # doctest: +SKIP
>>> result.models[0].scores["msp"]["aurc"]  # doctest: +SKIP
"""

import os as _os
import sys as _sys


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


if _os.path.basename(_sys.argv[0] if _sys.argv else "") in ("selcal", "-m"):  # the command is starting
    _quiet_start()

from ._version import __version__  # noqa: E402

from .errors import SelcalError  # noqa: E402
from .evaluate import evaluate, evaluate_arrays, evaluate_dump  # noqa: E402
from .deployment import ThresholdResult, threshold  # noqa: E402
from .io import read_dump  # noqa: E402
from .options import Options  # noqa: E402
from .results import EvaluationResult, ModelResult  # noqa: E402
from .scores import register_score  # noqa: E402

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
]
