"""Metrics: the catalog of every metric's facts (:mod:`selcal.metrics.catalog`) and the metric
functions in scikit-learn's convention (:mod:`selcal.metrics.functional`: ``aurc(y_true, y_pred)``).

The numerical functions live in :mod:`selcal.selective` (the risk-coverage primitive and
the selective metrics) and :mod:`selcal.calibration` (binning and calibration metrics). The
metric functions are loaded on first use (the catalog is imported by the modules that
:mod:`selcal.options` itself imports).
"""

from . import catalog  # noqa: F401
from .catalog import CATALOG, Metric  # noqa: F401

FUNCTIONS = ("aurc", "eaurc", "augrc", "coverage_at_risk", "risk_at_coverage", "error_auroc", "fpr_at_95_tpr", "ece",
             "rmsce", "adaptive_ece", "mce", "classwise_ece", "smooth_ece", "nll", "brier", "risk_coverage_curve")

__all__ = ["catalog", "CATALOG", "Metric", *FUNCTIONS]


def __getattr__(name: str):
    if name in FUNCTIONS or name == "functional":
        import importlib

        functional = importlib.import_module(f"{__name__}.functional")
        return functional if name == "functional" else getattr(functional, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *FUNCTIONS])
