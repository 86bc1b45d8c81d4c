"""Confidence scores: the pure functions, the fits on validation rows, and the registry.

``selcal.scores.REGISTRY`` answers every question asked of a score by name (see
:mod:`selcal.scores.registry`); :func:`register_score` adds one from your own code.
"""

from . import builtin  # noqa: F401  (fills the registry)
from .functions import *  # noqa: F401,F403
from .functions import __all__ as _functions
from .plugins import load_entry_points  # noqa: F401
from .registry import REGISTRY, BoardColumn, Score, add, fitted, get, register_score, score_names  # noqa: F401

__all__ = [*_functions, "REGISTRY", "BoardColumn", "Score", "add", "fitted", "get", "load_entry_points",
           "register_score", "score_names"]
