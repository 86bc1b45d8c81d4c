"""Metrics: the catalog of every metric's facts (:mod:`selcal.metrics.catalog`).

The numerical functions live in :mod:`selcal.selective` (the risk-coverage primitive and
the selective metrics) and :mod:`selcal.calibration` (binning and calibration metrics).
"""

from . import catalog  # noqa: F401
from .catalog import CATALOG, Metric  # noqa: F401

__all__ = ["catalog", "CATALOG", "Metric"]
