"""The certified deployment threshold (``selcal threshold``; CONVENTIONS.md, "Deployment thresholds
with a guarantee"):

    guarantee.py  the statistics: the lowest threshold whose selective risk is certified (pure, arrays)
    run.py        as a library: read, split, score, certify on the calibration rows, measure on the rest
    render.py     its terminal text, table and HTML page

``selcal.threshold`` is this package, and calling it calls :func:`selcal.threshold.run.threshold`
(``selcal.threshold("model.parquet", risk=0.01)``): the documented function and the package's
modules are both reached by attribute, neither hides the other.
"""

from __future__ import annotations

import sys
import types

from . import run


class CallablePackage(types.ModuleType):
    """This package's type: ``selcal.threshold(...)`` is :func:`selcal.threshold.run.threshold`."""

    def __call__(self, *args, **kwargs):
        return run.threshold(*args, **kwargs)


sys.modules[__name__].__class__ = CallablePackage
