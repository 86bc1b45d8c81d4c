"""Options: everything that changes a number, each default typed once.

:class:`Options` is shared by the Python API (``selcal.evaluate(..., bins=20)``) and the
command line, whose flags are built from its defaults (:mod:`selcal.cli`); values are
checked here, once, and the messages name the Python argument (the CLI renames them to
its flags).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .metrics import calibration, selective
from .scores import calibrators
from .errors import OptionError, SelcalError
from .scores import REGISTRY, fitted, score_names
from .scores.registry import choices as score_choices
from .scores.fits import PNORM_OBJECTIVES, TEMPERATURE_OBJECTIVES

__all__ = ["Options", "DEFAULTS", "DEFAULT_SCORES", "DEFAULT_RISKS", "DEFAULT_COVERAGES", "DEFAULT_P_GRID",
           "split_items", "parse_floats", "parse_p_grid", "MAX_BINS", "MAX_P_GRID_VALUES", "MAX_P",
           "MIN_NULL_DRAWS", "MAX_NULL_DRAWS", "check_calibration_test"]

DEFAULT_SCORES = ("msp", "max_logit", "pnorm", "temp")  # --scores; every name: selcal.scores.REGISTRY
DEFAULT_RISKS = (0.01, 0.05, 0.1)
DEFAULT_COVERAGES = (0.5, 0.8, 0.9)
DEFAULT_P_GRID = tuple(range(1, 11))
DEFAULT_ERRORS_TOP = 20  # rows of the most-confident-errors table, per score and model


# Limits of the options that set the size of the work (CONVENTIONS.md, "Numerical safeguards
# and bounded work"): above them the memory or the time would run out, so they are refused.
MAX_BINS = 100_000  # per-bin arrays: a few MB per metric; class-wise bins are sparse (calibration.py)
MAX_P_GRID_VALUES = 1000  # one pass over the validation logits per 16 values of p
MAX_P = 1_000_000  # beyond it the score no longer changes: max x / max |x| to float64 precision
MIN_NULL_DRAWS = 20  # --calibration-test: the smallest p-value is 1/(M + 1), below 0.05 from M = 20 on
MAX_NULL_DRAWS = 100_000  # each draw costs about one evaluation of every tested metric


def split_items(text: str, option: str = "value") -> list[str]:
    """The items of comma-separated text, stripped of spaces; an empty item (``"0.05,,0.1"``, a
    trailing comma, ``""``) is refused, never dropped: the one rule of every list option.

    >>> split_items("msp, temp")
    ['msp', 'temp']
    >>> split_items("0.05,,0.1", "risks")
    Traceback (most recent call last):
    ...
    selcal.errors.OptionError: risks has an empty item in '0.05,,0.1'; remove the extra comma
    """
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise OptionError(option, "{option} needs at least one value; got " + repr(text))
    if not all(items):
        raise OptionError(option, "{option} has an empty item in " + repr(text) + "; remove the extra comma")
    return items


def parse_floats(value, option: str = "value") -> tuple[float, ...]:
    """Numbers from a list or from comma-separated text (``"0.01,0.05"``)."""
    if isinstance(value, str):
        parts = split_items(value, option)
    elif np.ndim(value) == 0:
        parts = [value]
    else:
        parts = list(value)
    try:
        values = tuple(float(v) for v in parts)
    except (TypeError, ValueError):
        raise OptionError(option, "{option} takes numbers, e.g. 0.01,0.05; got " + repr(value)) from None
    if not values:
        raise OptionError(option, "{option} needs at least one value")
    return values


def parse_p_grid(value, option: str = "p_grid") -> tuple[int, ...]:
    """Values of p from a list, or text such as ``"1-10"``, ``"1,2,4"`` or ``"1-4,8"``."""
    values: list = []
    try:
        if isinstance(value, str):
            for part in split_items(value, option):
                if "-" in part[1:]:
                    low, high = (int(x) for x in part.split("-", 1))
                    if high - low >= MAX_P_GRID_VALUES:
                        break  # refused below, without building a huge range
                    values.extend(range(low, high + 1))
                else:
                    values.append(int(part))
            else:
                return _check_p_grid(tuple(values), option)
            raise OptionError(option, f"{{option}} may hold at most {MAX_P_GRID_VALUES} values of p; got {value!r}")
        values = list(value) if np.ndim(value) else [value]
        values = [int(v) if float(v) == int(v) else float(v) for v in values]
    except (TypeError, ValueError, OverflowError):
        raise OptionError(option, "{option} takes positive integers such as 1-10 or 1,2,4; got " + repr(value)) from None
    return _check_p_grid(tuple(values), option)


def _check_p_grid(values: tuple, option: str) -> tuple:
    if not values or any(not isinstance(p, int) or p < 1 for p in values):
        raise OptionError(option, "{option} must list positive integers, e.g. 1,2,4 or 1-10")
    if len(set(values)) > MAX_P_GRID_VALUES:
        raise OptionError(option, f"{{option}} may hold at most {MAX_P_GRID_VALUES} values of p (one pass over the "
                                  f"validation logits per 16); got {len(set(values))}")
    if max(values) > MAX_P:
        raise OptionError(option, f"{{option}} takes p up to {MAX_P} (the score no longer changes beyond); "
                                  f"got {max(values)}")
    return values


def check_calibration_test(value, option: str = "calibration_test") -> int:
    """``--calibration-test M``: 0 (off) or a whole number of draws from MIN_NULL_DRAWS to MAX_NULL_DRAWS."""
    if isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, bool) and value == 0:
        return 0
    if isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, bool) \
            and 0 < value < MIN_NULL_DRAWS:
        raise OptionError(option, f"{{option}} takes 0 (off) or at least {MIN_NULL_DRAWS} draws (the smallest "
                                  f"p-value is 1/(M + 1)), e.g. 1000; got {value!r}")
    return _whole(value, option, MIN_NULL_DRAWS, MAX_NULL_DRAWS)


def _whole(value, option: str, at_least: int, limit: int | None = None) -> int:
    """An integer option: ``value`` must be a whole number in [at_least, limit]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)) \
            or not float(value).is_integer():
        raise OptionError(option, "{option} takes a whole number; got " + repr(value))
    value = int(value)
    if value < at_least:
        raise OptionError(option, f"{{option}} must be at least {at_least}, got {value}")
    if limit is not None and value > limit:
        raise OptionError(option, f"{{option}} must be at most {limit:,} (memory and time grow with it), got {value:,}")
    return value


@dataclass(frozen=True)
class Options:
    """Everything that changes a number, defaults as in CONVENTIONS.md; and two settings that
    change none (``chunk_rows``, ``workers``: rows per chunk and threads, by default chosen
    from K and the CPU count).

    Values are checked here, once, for the Python API and the command line alike; the
    messages name the Python argument (``bins``), and the CLI renames them to its flags.
    ``scores`` may be a comma string (``"msp,temp"``), ``risks``/``coverages`` lists or comma
    strings, ``p_grid`` a list or text such as ``"1-10"``. ``errors_top``: rows of the
    most-confident-errors table per score; ``logit_profile``: also keep the data of the
    sorted-logit profile and p-norm-given-v_max figures (the 20 largest logits of up to
    100,000 evaluation rows, and the p-norm score at the chosen p even when it falls back
    to MSP). ``calibration_test``: draws of the calibration test (``--calibration-test M``; 0: none).
    """

    scores: tuple[str, ...] = DEFAULT_SCORES
    bins: int = calibration.DEFAULT_BINS
    risks: tuple[float, ...] = DEFAULT_RISKS
    coverages: tuple[float, ...] = DEFAULT_COVERAGES
    aurc_estimator: str = "mean"
    aece_estimator: str = "equal-mass"
    val_fraction: float = 0.2
    seed: int = 0
    center: bool = True
    p_grid: tuple[int, ...] = DEFAULT_P_GRID
    pnorm_objective: str = "aurc"
    temp_objective: str = "nll"
    score_cols: tuple[str, ...] = ()
    uncertainty_cols: tuple[str, ...] = ()
    errors_top: int = DEFAULT_ERRORS_TOP
    logit_profile: bool = False
    odir_lambda: float = calibrators.DEFAULT_ODIR_LAMBDA
    odir_mu: float = calibrators.DEFAULT_ODIR_MU
    calibration_test: int = 0
    chunk_rows: int | None = None
    workers: int | None = None

    def __post_init__(self):
        names = self.scores
        if isinstance(names, str):
            names = split_items(names, "scores")
        names = score_names(names)  # "all", and registry order
        unknown = [s for s in names if s not in REGISTRY]
        if unknown or not names:
            raise OptionError("scores", f"unknown score {unknown[0] if unknown else '(none)'}; "
                                        f"choose from {score_choices()}")
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("scores", names)
        set_("bins", _whole(self.bins, "bins", 1, MAX_BINS))
        set_("risks", parse_floats(self.risks, "risks"))
        set_("coverages", parse_floats(self.coverages, "coverages"))
        set_("score_cols", tuple(self.score_cols))
        set_("uncertainty_cols", tuple(self.uncertainty_cols))
        columns = self.score_cols + self.uncertainty_cols
        for index, column in enumerate(columns):
            if not column or column in columns[:index]:
                raise SelcalError(f"score column {column!r}: give each column once, by its name "
                                  "(--score-col, --uncertainty-col)")
            if column in names:
                raise SelcalError(f"score column '{column}' has the name of a chosen score; rename the column "
                                  f"or leave '{column}' out of the scores")
        if any(not 0 <= r <= 1 for r in self.risks):
            raise OptionError("risks", "{option} must be fractions between 0 and 1, e.g. 0.01,0.05")
        if any(not 0 < c <= 1 for c in self.coverages):
            raise OptionError("coverages", "{option} must be fractions in (0, 1], e.g. 0.5,0.8")
        if self.aurc_estimator not in selective.AURC_ESTIMATORS:
            raise OptionError("aurc_estimator", f"{{option}} must be one of {', '.join(selective.AURC_ESTIMATORS)}")
        if self.aece_estimator not in calibration.AECE_ESTIMATORS:
            raise OptionError("aece_estimator", f"{{option}} must be one of {', '.join(calibration.AECE_ESTIMATORS)}")
        try:
            fraction = float(self.val_fraction)
        except (TypeError, ValueError):
            fraction = math.nan
        if not 0 < fraction < 1:
            raise OptionError("val_fraction", f"{{option}} must be between 0 and 1, got {self.val_fraction}")
        set_("val_fraction", fraction)
        set_("seed", _whole(self.seed, "seed", 0))
        set_("center", bool(self.center))
        set_("p_grid", parse_p_grid(self.p_grid, "p_grid"))
        if self.temp_objective not in TEMPERATURE_OBJECTIVES:
            raise OptionError("temp_objective",
                              f"{{option}} must be one of {', '.join(TEMPERATURE_OBJECTIVES)}")
        set_("errors_top", _whole(self.errors_top, "errors_top", 0))
        set_("logit_profile", bool(self.logit_profile))
        if self.pnorm_objective not in PNORM_OBJECTIVES:
            raise OptionError("pnorm_objective", f"{{option}} must be one of {', '.join(PNORM_OBJECTIVES)}")
        for field_name in ("odir_lambda", "odir_mu"):
            try:
                value = float(getattr(self, field_name))
            except (TypeError, ValueError):
                value = math.nan
            if not (math.isfinite(value) and value >= 0):
                raise OptionError(field_name, "{option} must be a number >= 0, got " + repr(getattr(self, field_name)))
            set_(field_name, value)
        set_("calibration_test", check_calibration_test(self.calibration_test))
        if self.chunk_rows is not None:
            set_("chunk_rows", _whole(self.chunk_rows, "chunk_rows", 1))
        if self.workers is not None:
            set_("workers", _whole(self.workers, "workers", 1))

    @property
    def fitted(self) -> tuple[str, ...]:
        """The chosen scores that are fitted on validation rows."""
        return fitted(self.scores)

    @property
    def needs_validation(self) -> bool:
        return any(REGISTRY[name].needs_fit for name in self.scores)


DEFAULTS = Options()
"""The default options: the CLI's flags show these values."""


def default(name: str):
    """The default of the field ``name`` of :class:`Options`."""
    return {f.name: f.default for f in fields(Options)}[name]
