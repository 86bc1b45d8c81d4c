"""selcal: how well does a classifier know when it is wrong?

Selective-classification and calibration metrics from saved logits, exactly as
defined in CONVENTIONS.md. The public API mirrors the ``selcal evaluate`` command:

>>> import selcal
>>> result = selcal.evaluate("sample_logits/markus93_densenet40_c10.parquet")  # doctest: +SKIP
>>> result.models[0].scores["msp"]["aurc"]  # doctest: +SKIP
"""

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
