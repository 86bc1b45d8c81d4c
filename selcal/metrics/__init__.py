"""Metrics: the pure numerical functions, the catalog of every metric's facts, and the metric functions
in scikit-learn's convention.

    selective.py    the risk-coverage primitive (the only place that sorts) and the selective metrics
    calibration.py  binning and the calibration metrics
    smooth.py       smooth ECE and the smoothed reliability curve
    diagnostics.py  sweeps, logit profiles, the most confident errors
    exact_sums.py   sums that do not depend on the order or the chunking of the rows
    catalog.py      name, label, unit, direction, interval and options of every metric key
    functional.py   ``aurc(y_true, y_pred)`` and the others, loaded on first use (the catalog is imported
                    by the modules that :mod:`selcal.options` itself imports)
"""

from typing import TYPE_CHECKING

from . import catalog  # noqa: F401
from .catalog import CATALOG, Metric  # noqa: F401

FUNCTIONS = ("aurc", "eaurc", "augrc", "coverage_at_risk", "risk_at_coverage", "error_auroc", "fpr_at_95_tpr", "ece",
             "rmsce", "adaptive_ece", "mce", "classwise_ece", "smooth_ece", "nll", "brier", "risk_coverage_curve")

__all__ = ["catalog", "CATALOG", "Metric", "aurc", "eaurc", "augrc", "coverage_at_risk", "risk_at_coverage",
           "error_auroc", "fpr_at_95_tpr", "ece", "rmsce", "adaptive_ece", "mce", "classwise_ece", "smooth_ece", "nll",
           "brier", "risk_coverage_curve"]

if TYPE_CHECKING:  # what a type checker reads instead of the import on first use
    from .functional import (adaptive_ece, augrc, aurc, brier, classwise_ece, coverage_at_risk, eaurc, ece,
                             error_auroc, fpr_at_95_tpr, mce, nll, risk_at_coverage, risk_coverage_curve, rmsce,
                             smooth_ece)


def __getattr__(name: str):
    if name in FUNCTIONS or name == "functional":
        import importlib

        functional = importlib.import_module(f"{__name__}.functional")
        return functional if name == "functional" else getattr(functional, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *FUNCTIONS])
