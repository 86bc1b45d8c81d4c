"""Options and settings: everything a user sets, each default and each list of choices typed once.

:class:`Options` holds what changes a number; beside it, :class:`ReadSettings` (how the inputs are
read), :class:`RunSettings` (where the models run, the bootstrap, the sweep, the leaderboard's
order) and :class:`FigureSettings` (the figures and the report). They are shared by the Python API
(``selcal.evaluate(..., bins=20, engine="ray")``) and the command line, whose flags, metavars,
help and completion are built from the defaults and :data:`CHOICES` here (:mod:`selcal.cli`);
values are checked here, once, and the messages name the Python argument (the CLI renames them
to its flags). A choice list's first value is the default.
"""

from __future__ import annotations

import math
import os
from decimal import Decimal, InvalidOperation
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from .errors import OptionError, SelcalError, said
from .metrics.calibration import AECE_ESTIMATORS, DEFAULT_BINS
from .metrics.selective import AURC_ESTIMATORS
from .pipeline.engines import ENGINES
from .scores.calibrators import DEFAULT_ODIR_LAMBDA, DEFAULT_ODIR_MU
from .scores.fits import PNORM_OBJECTIVES, TEMPERATURE_OBJECTIVES
from .scores.registry import REGISTRY, fitted, score_names
from .scores.registry import choices as score_choices

__all__ = ["Options", "DEFAULTS", "ReadSettings", "RunSettings", "FigureSettings", "CHOICES", "COMMAND_CHOICES",
           "DEFAULT_SCORES",
           "DEFAULT_RISKS", "DEFAULT_COVERAGES", "DEFAULT_P_GRID", "split_items", "parse_floats", "parse_p_grid",
           "parse_figures", "MAX_BINS", "MAX_P_GRID_VALUES", "MAX_P", "MIN_NULL_DRAWS", "MAX_NULL_DRAWS",
           "check_calibration_test", "DEFAULT_TOP"]

DEFAULT_SCORES = ("msp", "max_logit", "pnorm", "temp")  # --scores; every name: selcal.scores.REGISTRY
DEFAULT_RISKS = (0.01, 0.05, 0.1)
DEFAULT_COVERAGES = (0.5, 0.8, 0.9)
DEFAULT_P_GRID = tuple(range(1, 11))
DEFAULT_TOP = 8  # --top: a zoo's figures across models draw the best 8 of the leaderboard (changes no number)
DEFAULT_ERRORS_TOP = 20  # rows of the most-confident-errors table, per score and model
# The defaults of the settings beside Options and of the other commands.
DEFAULT_CONFIDENCE = 0.95  # level of the bootstrap intervals (evaluate --bootstrap, compare)
DEFAULT_RESAMPLES = 1000  # bootstrap resamples: compare's paired bootstrap, the library's intervals
DEFAULT_BATCH_SIZE = 64  # dump: images per forward pass
DEFAULT_DEVICE = "auto"  # dump: cuda when available, else cpu
DEFAULT_SEED = 0  # every seeded draw: the hold-out, the bootstrap, the pixels of a segmentation folder
# Bytes of logits above which a TEST file is streamed (read by row batches, never whole): the same
# numbers, read and reduced concurrently, in a third less memory for an ImageNet-size file.
DEFAULT_MEMORY_BUDGET = 1 << 26
DEFAULT_PIXELS_PER_IMAGE = 5000  # labelled pixels drawn per image of a segmentation folder
DEFAULT_SEGMENTATION_IGNORE = 255  # the void label of a segmentation folder (never drawn)
DEFAULT_AT_COVERAGE = 0.1  # the coverage of the errors-by-group figure
DEFAULT_RANK_MAPS = 3  # uncertainty-rank maps of a segmentation folder's most confident errors
DEFAULT_SORT = "aurc_best_score"  # the leaderboard's order without --sweep (--sort-by)
DEFAULT_RISK = 0.05  # threshold: the target selective risk
DEFAULT_DELTA = 0.1  # threshold: the guarantee holds with probability at least 1 - delta

# Every fixed set of values an option takes, the default first: the checks, the CLI's metavars, help
# and shell completion, and the docs read these. (The estimators and objectives are defined where
# they are computed; the engines are the keys of their registry.)
INPUT_KINDS = ("logits", "probs", "logprobs")  # --input: what the logit columns hold
LM_NORMS = ("none", "chars", "bytes")  # --lm-norm: lm-evaluation-harness logs' length normalisation
PLOT_FORMATS = ("png", "svg", "pdf")  # --plot-format
THRESHOLD_METHODS = ("sgr", "ltt")  # threshold --method
THRESHOLD_DTYPES = ("float64", "float32")  # threshold --dtype: the precision the confidences are computed at
DUMP_DTYPES = ("float32", "float16")  # dump --dtype: the logits' type in the file
# The names --figures takes, each with the kinds of figure it selects (a family's overlay across
# models comes with it).
FIGURE_FAMILIES = {
    "rc": ("rc", "overlay_rc"),
    "reliability": ("reliability",),
    "smooth": ("smooth",),
    "vmax_msp": ("vmax_msp", "overlay_vmax_msp"),
    "pnorm_search": ("pnorm_search",),
    "errors_by_group": ("errors_by_group",),
    "logit_profile": ("logit_profile", "overlay_logit_profile"),
    "pnorm_vmax": ("pnorm_vmax",),
    "sweep": ("sweep",),
}
CHOICES = {  # by the name of the parameter (of Options, a settings record or a command; COMMAND_CHOICES first)
    "aurc_estimator": AURC_ESTIMATORS,
    "aece_estimator": AECE_ESTIMATORS,
    "pnorm_objective": PNORM_OBJECTIVES,
    "temp_objective": TEMPERATURE_OBJECTIVES,
    "input_kind": INPUT_KINDS,
    "lm_norm": LM_NORMS,
    "engine": tuple(ENGINES),
    "plot_format": PLOT_FORMATS,
}
COMMAND_CHOICES = {"threshold": {"method": THRESHOLD_METHODS, "dtype": THRESHOLD_DTYPES}, "dump": {"dtype": DUMP_DTYPES}}



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


def fraction(value) -> float:
    """A number given as a fraction (``0.05``) or in percent (``"5%"``), as a float; ValueError otherwise.

    A percent is divided exactly and rounded once, so ``"0.1%"`` is the float ``0.001`` (0.1 / 100 in
    floating point is not).

    >>> fraction("5%"), fraction("0.1%"), fraction(0.25), fraction(" 2.5 % ")
    (0.05, 0.001, 0.25, 0.025)
    """
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(Decimal(value.strip()[:-1].strip()) / 100)
        except InvalidOperation:
            raise ValueError(f"not a percent: {value!r}") from None
    return float(value)


def parse_floats(value, option: str = "value") -> tuple[float, ...]:
    """Numbers from a list or from comma-separated text (``"0.01,0.05"``; a percent, ``"5%"``, is a
    fraction: these options all take fractions)."""
    if isinstance(value, str):
        parts = split_items(value, option)
    elif np.ndim(value) == 0:
        parts = [value]
    else:
        parts = list(value)
    try:
        values = tuple(fraction(v) for v in parts)
    except (TypeError, ValueError):
        raise OptionError(option, "{option} takes numbers, e.g. 0.01,0.05 or 1%,5%; got " + repr(value)) from None
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
    bins: int = DEFAULT_BINS
    risks: tuple[float, ...] = DEFAULT_RISKS
    coverages: tuple[float, ...] = DEFAULT_COVERAGES
    aurc_estimator: str = CHOICES["aurc_estimator"][0]
    aece_estimator: str = CHOICES["aece_estimator"][0]
    val_fraction: float = 0.2
    seed: int = DEFAULT_SEED
    center: bool = True
    p_grid: tuple[int, ...] = DEFAULT_P_GRID
    pnorm_objective: str = CHOICES["pnorm_objective"][0]
    temp_objective: str = CHOICES["temp_objective"][0]
    score_cols: tuple[str, ...] = ()
    uncertainty_cols: tuple[str, ...] = ()
    errors_top: int = DEFAULT_ERRORS_TOP
    logit_profile: bool = False
    odir_lambda: float = DEFAULT_ODIR_LAMBDA
    odir_mu: float = DEFAULT_ODIR_MU
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
                                  f"({said('score_cols')}, {said('uncertainty_cols')})")
            if column in names:
                raise SelcalError(f"score column '{column}' has the name of a chosen score; rename the column "
                                  f"or leave '{column}' out of the scores")
        if any(not 0 <= r <= 1 for r in self.risks):
            raise OptionError("risks", "{option} must be fractions between 0 and 1, e.g. 0.01,0.05")
        if any(not 0 < c <= 1 for c in self.coverages):
            raise OptionError("coverages", "{option} must be fractions in (0, 1], e.g. 0.5,0.8")
        if self.aurc_estimator not in AURC_ESTIMATORS:
            raise OptionError("aurc_estimator", f"{{option}} must be one of {', '.join(AURC_ESTIMATORS)}")
        if self.aece_estimator not in AECE_ESTIMATORS:
            raise OptionError("aece_estimator", f"{{option}} must be one of {', '.join(AECE_ESTIMATORS)}")
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


@dataclass(frozen=True)
class ReadSettings:
    """How the inputs are read: which columns hold the labels, the logits and the groups, which rows
    are dropped or out of distribution, what the logit columns hold, whether a file is streamed. No
    metric is computed otherwise for them (that is :class:`Options`'); each reader checks the values it
    reads. ``pixels_per_image``: None for the default (:data:`DEFAULT_PIXELS_PER_IMAGE`); ``stream``:
    None to stream a file whose logits take more than ``memory_budget`` bytes.
    """

    label_col: str | None = None
    logits_col: str | None = None
    ignore_label: int | None = None
    group_col: str | None = None
    pixels_per_image: int | None = None
    input_kind: str | None = None
    lm_norm: str | None = None
    ood_label: int | None = None
    stream: bool | None = None
    memory_budget: int = DEFAULT_MEMORY_BUDGET

    def __post_init__(self):
        if self.input_kind is not None and self.input_kind not in INPUT_KINDS:  # refused before any file is read
            raise OptionError("input_kind", f"{{option}} must be one of {', '.join(INPUT_KINDS)}, got {self.input_kind!r}")


@dataclass(frozen=True)
class RunSettings:
    """How a run goes beside what it computes: where the models are evaluated (``engine``), the
    bootstrap intervals (``bootstrap`` resamples, 0 for none; ``bootstrap_refit``; ``confidence``),
    the swept hyperparameter (``sweep``) and the leaderboard's order (``sort_by``, a column; None for
    the default: the swept value, else :data:`DEFAULT_SORT`).
    """

    engine: str = CHOICES["engine"][0]
    bootstrap: int = 0
    bootstrap_refit: bool = False
    confidence: float = DEFAULT_CONFIDENCE
    sweep: str | None = None
    sort_by: str | None = None

    def __post_init__(self):
        if self.engine not in CHOICES["engine"]:
            raise OptionError("engine", f"{{option}} must be {_either(CHOICES['engine'])}; got {self.engine!r}")


@dataclass(frozen=True)
class FigureSettings:
    """The figures (``plots``: a folder), the HTML report (``report``: a file) and the figures logged to
    MLflow (``mlflow``); None and False: not drawn.

    ``plot_format``: one of :data:`PLOT_FORMATS`; ``figures``: the families to draw (names of
    :data:`FIGURE_FAMILIES`, comma-separated or a list; None or ``all``: every one); ``ls_alpha``: the
    models' label-smoothing alpha, one value or one per TEST file, in [0, 1); ``at_coverage``: the
    coverage of the errors-by-group figure, in (0, 1]; ``rank_maps``: uncertainty-rank maps of the
    segmentation images with the most confident errors (``rank_maps_of``: of these images instead);
    ``top``: a zoo (more models than ``top``) draws the ``top`` best of the leaderboard and the
    ``baselines`` (model names or TEST files) in its figures across models.
    Checked here, before any work; after the checks ``figures`` is a frozenset (or None),
    ``ls_alpha`` and ``rank_maps_of`` tuples (or None).
    """

    plots: str | os.PathLike | None = None
    report: str | os.PathLike | None = None
    plot_format: str = PLOT_FORMATS[0]
    figures: str | Sequence[str] | frozenset[str] | None = None
    ls_alpha: str | float | Sequence[float] | None = None
    at_coverage: float = DEFAULT_AT_COVERAGE
    rank_maps: int = DEFAULT_RANK_MAPS
    rank_maps_of: str | Sequence[str] | None = None
    mlflow: bool = False
    top: int = DEFAULT_TOP
    baselines: Sequence[str] | None = None

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        if isinstance(self.top, bool) or not isinstance(self.top, int) or self.top < 0:
            raise OptionError("top", f"{{option}} takes a number of models, 0 or more (e.g. 8); got {self.top!r}")
        set_("baselines", tuple(self.baselines or ()))
        if self.plot_format not in PLOT_FORMATS:
            raise OptionError("plot_format", f"{{option}} must be {_either(PLOT_FORMATS)}; got {self.plot_format!r}")
        if not 0 < self.at_coverage <= 1:
            raise OptionError("at_coverage", "{option} must be a fraction in (0, 1], e.g. 0.1; got "
                              + f"{self.at_coverage:g}")
        if self.ls_alpha is not None:
            alphas = parse_floats(self.ls_alpha, "ls_alpha")
            if any(not 0 <= a < 1 for a in alphas):
                raise OptionError("ls_alpha", "{option} must be in [0, 1), e.g. 0.1; got " + repr(self.ls_alpha))
            set_("ls_alpha", alphas)
        set_("figures", parse_figures(self.figures))
        if self.rank_maps < 0:
            raise OptionError("rank_maps", f"{{option}} takes a number of images, 0 or more; got {self.rank_maps}")
        if isinstance(self.rank_maps_of, str):
            set_("rank_maps_of", tuple(split_items(self.rank_maps_of, "rank_maps_of")))

    @property
    def drawn(self) -> bool:
        """Whether a figure or the report is asked for."""
        return self.plots is not None or self.report is not None or self.mlflow

    @property
    def logit_profile(self) -> bool:
        """Whether a figure drawn from the sorted-logit profile is asked for (its data are kept in the
        evaluation's pass only then: :attr:`Options.logit_profile`)."""
        figures = self.figures
        return self.drawn and (figures is None or bool(set(figures) & {"logit_profile", "pnorm_vmax"}))

    def check_models(self, count: int) -> None:
        """Refuse ``ls_alpha`` unless it gives one value, or one per TEST file (``count``)."""
        alphas = self.ls_alpha
        if isinstance(alphas, tuple) and len(alphas) not in (1, count):
            raise OptionError("ls_alpha", f"{{option}} takes one value or one per TEST file ({count}); "
                                          f"got {len(alphas)}")


def parse_figures(text, option: str = "figures") -> frozenset[str] | None:
    """The families of ``--figures`` (comma-separated, or a list; ``all``) as a set; None for all.

    >>> sorted(parse_figures("rc, reliability"))
    ['rc', 'reliability']
    >>> parse_figures("all") is None
    True
    """
    if text is None:
        return None
    if isinstance(text, frozenset):
        return text
    names = split_items(text, option) if isinstance(text, str) else [str(n).strip() for n in text]
    if not all(names):
        raise OptionError(option, "{option} needs at least one kind, and no empty one; got " + repr(list(text)))
    if "all" in names:
        return None
    unknown = [n for n in names if n not in FIGURE_FAMILIES]
    if unknown:
        raise OptionError(option, f"{{option}}: no figure kind {unknown[0]!r}; choose from all, "
                          + ", ".join(FIGURE_FAMILIES) + " (comma-separated), e.g. --figures rc,reliability")
    return frozenset(names)


def _either(choices) -> str:
    """``png, svg or pdf``."""
    return ", ".join(choices[:-1]) + " or " + choices[-1] if len(choices) > 1 else choices[0]


SETTINGS = {"options": Options, "read": ReadSettings, "run": RunSettings}


def settings(caller: str, options: Options | None = None, read: ReadSettings | None = None,
             run: RunSettings | None = None, **values) -> tuple[Options, ReadSettings, RunSettings]:
    """(Options, ReadSettings, RunSettings) from the records given, with ``values`` (keyword arguments
    named as their fields) applied; an unknown keyword is a TypeError naming ``caller``, as Python's."""
    names = {name: kind for kind, cls in SETTINGS.items() for name in (f.name for f in fields(cls))}
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}; the settings are "
                        f"{', '.join(sorted(names))}")
    given = {kind: {name: value for name, value in values.items() if names[name] == kind} for kind in SETTINGS}
    return (replace(options or DEFAULTS, **given["options"]), replace(read or ReadSettings(), **given["read"]),
            replace(run or RunSettings(), **given["run"]))


def default(name: str):
    """The default of the field ``name`` of :class:`Options`."""
    return {f.name: f.default for f in fields(Options)}[name]
