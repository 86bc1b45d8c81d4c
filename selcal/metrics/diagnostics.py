"""The seed papers' remaining diagnostics, as pure functions of arrays (no files, no drawing).

* :func:`confident_errors`: the most confident errors of a score (Xia et al. 2024, fig. 5);
* :func:`sweep_value`: a model's hyperparameter read from its file (sweeps across runs);
* :func:`sorted_logit_profile` and :func:`pnorm_given_vmax`: the data of Xia et al.'s
  figs. 18 and 19.

Definitions and the decisions taken are in docs/CONVENTIONS.md, "Diagnostics".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import SelcalError
from . import catalog
from ..scores import REGISTRY

__all__ = [
    "ConfidentErrors",
    "confident_errors",
    "rank_percentile",
    "sweep_value_from_name",
    "sweep_value",
]



# ------------------------------------------------------------------ confident errors
@dataclass(frozen=True)
class ConfidentErrors:
    """The ``top`` most confident errors of one score, most confident first.

    ``position``: index of the row among the evaluation rows; ``id``: its id (or its row
    number in the file when the dump has no id column); ``confidence``: the score's value
    (a probability for probability scores); ``rank_percentile``: see :func:`rank_percentile`.
    """

    position: np.ndarray
    id: np.ndarray
    label: np.ndarray
    prediction: np.ndarray
    confidence: np.ndarray
    rank_percentile: np.ndarray
    image: np.ndarray | None = None  # segmentation: the image of each pixel row

    def __len__(self) -> int:
        return int(self.position.size)


def rank_percentile(curve, values) -> np.ndarray:
    """Percent of the evaluation rows ranked at or above each score value, ties at mid-rank.

    For a score value v shared by m rows with g rows scoring higher, the rank is
    g + (m + 1) / 2 (its expected position when the tied rows are taken in a random
    order, the tie rule of the risk-coverage curve), and the percentile is 100 * rank / N:
    a row at 0.1% is among the 0.1% most confident. Read from the tie groups of
    ``curve`` (a :class:`~selcal.metrics.selective.RiskCoverage`), without another sort.

    Examples
    --------
    >>> from selcal.metrics.selective import risk_coverage
    >>> curve = risk_coverage(np.array([0.9, 0.8, 0.8, 0.1]), np.array([1, 0, 1, 1], dtype=bool))
    >>> rank_percentile(curve, [0.9, 0.8, 0.1]).tolist()
    [25.0, 62.5, 100.0]
    """
    values = np.asarray(values, dtype=np.float64)
    descending = np.asarray(curve.thresholds, dtype=np.float64)
    group = np.searchsorted(-descending, -values, side="left")
    if np.any(group >= descending.size) or np.any(descending[np.minimum(group, descending.size - 1)] != values):
        raise ValueError("every value must be the score of an evaluation row")
    accepted = np.asarray(curve.accepted, dtype=np.float64)
    above = np.where(group > 0, accepted[np.maximum(group - 1, 0)], 0.0)
    tied = accepted[group] - above
    return 100.0 * (above + (tied + 1.0) / 2.0) / curve.n


def confident_errors(score, correct, top: int, *, curve, ids_of, labels, predictions,
                     probability: bool = False, images_of=None) -> ConfidentErrors:
    """The ``top`` errors with the highest score, most confident first.

    Errors with equal scores are ordered by id (by row number when there are no ids), so
    the list does not depend on the order of the rows; ``ids_of(positions)`` gives the ids
    of evaluation rows (asked only for the errors at or above the cut). ``probability``:
    the score is a log-probability (msp, temp), reported as a probability. ``images_of``
    (segmentation): the image of each pixel row, given its evaluation position.
    """
    score = np.asarray(score, dtype=np.float64)
    errors = np.flatnonzero(~np.asarray(correct, dtype=bool))
    if top <= 0 or errors.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return ConfidentErrors(empty, np.empty(0, dtype=object), empty, empty, np.empty(0), np.empty(0))
    error_scores = score[errors]
    if errors.size > top:
        cut = np.partition(error_scores, errors.size - top)[errors.size - top]  # the top-th largest
        keep = error_scores >= cut  # every error tied with the cut, so ties are settled by id
        errors, error_scores = errors[keep], error_scores[keep]
    ids = np.asarray(ids_of(errors))
    order = np.lexsort((ids, -error_scores))[:top]
    errors, error_scores, ids = errors[order], error_scores[order], ids[order]
    return ConfidentErrors(
        position=errors,
        id=ids,
        label=np.asarray(labels)[errors].astype(np.int64),
        prediction=np.asarray(predictions)[errors].astype(np.int64),
        confidence=np.exp(error_scores) if probability else error_scores,
        rank_percentile=rank_percentile(curve, error_scores),
        image=None if images_of is None else np.asarray(images_of(errors)),
    )


# -------------------------------------------------------------------------- sweeps
_NUMBER = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def sweep_value_from_name(path: str, name: str) -> float | None:
    """The value of ``name`` written in a file's path: ``NAME=VALUE``, ``NAME_VALUE`` or
    ``NAMEVALUE`` (also ``NAME-VALUE``) as one part of the path (parts end at ``/``, ``_``,
    ``-`` or ``,``), the file's extension left out; a sign only after ``=``. None when absent; a SelcalError when two parts disagree.

    Examples
    --------
    >>> sweep_value_from_name("runs/lspair_alpha0.1.parquet", "alpha")
    0.1
    >>> sweep_value_from_name("runs/wd=5e-4/seed_1.parquet", "wd"), sweep_value_from_name("a/seed_1.npz", "seed")
    (0.0005, 1.0)
    >>> sweep_value_from_name("runs/alphabet3.parquet", "alpha") is None
    True
    """
    text = str(path).replace("\\", "/")
    text = re.sub(r"\.(parquet|pq|npz)$", "", text)
    pattern = (r"(?:^|(?<=[/_,\-]))" + re.escape(name) + r"(?:=([-+]?" + _NUMBER + r")|[_\-]?(" + _NUMBER
               + r"))(?=$|[/_,\-])")
    found = {float(m.group(1) or m.group(2)) for m in re.finditer(pattern, text)}
    if len(found) > 1:
        raise SelcalError(f"{path}: the file name gives {name} = " + " and ".join(f"{v:g}" for v in sorted(found))
                          + f"; give one value, or store it in the Parquet metadata key '{name}'")
    return found.pop() if found else None


def sweep_value(path: str, name: str, metadata: dict | None) -> float:
    """A model's value of the swept hyperparameter ``name``: the Parquet metadata key
    ``name``, else a part of the file name (:func:`sweep_value_from_name`); refused in one
    line when neither gives a number."""
    if not name or not name.strip() or name != name.strip():
        raise SelcalError(f"--sweep needs the name of a hyperparameter, e.g. --sweep alpha; got {name!r}")
    metadata = metadata or {}
    raw = metadata.get(name)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if raw is not None:
        try:
            value = float(str(raw).strip())
        except ValueError:
            raise SelcalError(f"{path}: the metadata key '{name}' holds {str(raw)[:40]!r}, not a number; "
                              "store the hyperparameter as a number") from None
        if not math.isfinite(value):
            raise SelcalError(f"{path}: the metadata key '{name}' is {value}; store a finite number")
        return value
    value = sweep_value_from_name(path, name)
    if value is None:
        raise SelcalError(f"{path}: --sweep {name}: no metadata key '{name}' and no '{name}=VALUE' or "
                          f"'{name}_VALUE' in the file name; add one of them")
    return value


@dataclass(frozen=True)
class SweepPanel:
    """One headline metric against the swept value: ``lines`` maps a label (a score, or the
    entry's ``sweep_label``: "before T (msp)") to one value per model (NaN where the model lacks
    it); ``scores`` maps a label that is not a score's name to its score (for its colour)."""

    key: str
    title: str
    lines: dict
    scores: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSeries:
    """Every model's swept value ``x`` (sorted, ties by model name) and the panels."""

    name: str
    x: np.ndarray
    models: list
    panels: list
    log_x: str | None  # None (linear), "log" or "symlog"


def sweep_axis(x) -> str | None:
    """How to draw the swept values: "log" when they are positive and span more than a factor
    10, "symlog" when they include 0 (or negatives) and their nonzero magnitudes span more than
    a factor 10, else None (linear).

    Examples
    --------
    >>> sweep_axis([0.01, 0.1, 1.0]), sweep_axis([0, 0.05, 0.1, 0.2]), sweep_axis([0, 0.001, 0.1])
    ('log', None, 'symlog')
    """
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.abs(x[x != 0])
    if magnitude.size < 2 or magnitude.max() <= 10 * magnitude.min():
        return None
    return "log" if np.all(x > 0) else "symlog"


def sweep_series(models, name: str) -> SweepSeries:
    """The data of the ``sweep_NAME`` figure from models whose ``extra["sweep"][name]`` is set:
    accuracy; AURC and every cov@r of every score; ECE and adaptive ECE of the scores whose
    registry entry has a ``sweep_label`` (e.g. msp "before T", temp "after T"). Values are the
    fractions of the JSON."""
    models = sorted(models, key=lambda m: (m.extra["sweep"][name], m.name))
    x = np.array([m.extra["sweep"][name] for m in models], dtype=np.float64)
    score_names = [s for s in dict.fromkeys(s for m in models for s in m.scores)]

    def value(model, score, key):
        v = model.scores.get(score, {}).get(key)
        return np.nan if v is None or isinstance(v, bool) else float(v)

    panels = [SweepPanel("accuracy", "accuracy", {"accuracy": np.array([m.accuracy for m in models])})]
    panels.append(SweepPanel("aurc", catalog.name("aurc"), {s: np.array([value(m, s, "aurc") for m in models])
                                                            for s in score_names}))
    risks = list(dict.fromkeys(k for m in models for s in m.scores.values() for k in s if k.startswith("cov@")))
    for key in risks:
        panels.append(SweepPanel(key, f"coverage at {100 * float(key[4:]):g}% risk",
                                 {s: np.array([value(m, s, key) for m in models]) for s in score_names}))
    shown = [(name, entry.display.sweep_label) for name, entry in REGISTRY.items() if entry.display.sweep_label]
    for key, title in ((k, catalog.name(k)) for k in ("ece", "aece")):
        drawn = [(s, label) for s, label in shown if any(key in m.scores.get(s, {}) for m in models)]
        if drawn:
            panels.append(SweepPanel(key, title, {label: np.array([value(m, s, key) for m in models])
                                                  for s, label in drawn}, {label: s for s, label in drawn}))
    return SweepSeries(name=name, x=x, models=[m.name for m in models], panels=panels, log_x=sweep_axis(x))


# ------------------------------------------------------------ sorted-logit profile
PROFILE_RANKS = 20  # sorted logits kept per sampled row
PROFILE_ROWS = 100_000  # rows sampled (by content hash) when there are more evaluation rows


@dataclass(frozen=True)
class ProfileSeries:
    """Mean and (population) std of a transform of the sorted logits at each rank."""

    mean: np.ndarray
    std: np.ndarray
    count: int


@dataclass(frozen=True)
class LogitProfile:
    """Xia et al. fig. 18: per transform ("v", "v^p", "exp(v)"), the correct and incorrect series."""

    ranks: np.ndarray
    p: int
    correct: dict
    incorrect: dict


def profile_transforms(p: int) -> dict:
    """The three transforms of fig. 18: v, the integer power v^p (signed for odd p, as
    ``v ** p``), and exp(v) (inf beyond float64's range)."""
    return {"v": lambda v: v, f"v^{p}": lambda v: v ** p, "exp(v)": np.exp}


def sorted_logit_profile(top_sorted, correct, p: int) -> LogitProfile:
    """Mean ± std of v, v^p and exp(v) at each rank of the logits sorted high to low.

    ``top_sorted`` (n, R): each row's R largest logits, highest first; ``correct`` (n,).
    A subset with no rows gets NaN series (count 0).
    """
    top_sorted = np.asarray(top_sorted, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    out = {}
    for subset_name, subset in (("correct", correct), ("incorrect", ~correct)):
        rows = top_sorted[subset]
        series = {}
        for label, transform in profile_transforms(p).items():
            with np.errstate(over="ignore", invalid="ignore"):
                values = transform(rows)
                if rows.shape[0]:
                    mean = values.mean(axis=0)
                    std = np.sqrt(np.mean((values - mean) ** 2, axis=0))
                else:
                    mean = std = np.full(top_sorted.shape[1], np.nan)
            series[label] = ProfileSeries(mean, std, int(rows.shape[0]))
        out[subset_name] = series
    return LogitProfile(np.arange(1, top_sorted.shape[1] + 1), int(p), out["correct"], out["incorrect"])


def top_sorted_logits(logits: np.ndarray, ranks: int = PROFILE_RANKS) -> np.ndarray:
    """Each row's ``ranks`` largest logits (all when K is smaller), highest first.

    Examples
    --------
    >>> top_sorted_logits(np.array([[0.0, 3.0, 1.0, 2.0]]), 3).tolist()
    [[3.0, 2.0, 1.0]]
    """
    k = logits.shape[1]
    r = min(ranks, k)
    top = np.partition(logits, k - r, axis=1)[:, k - r:] if r < k else logits.copy()
    return -np.sort(-top, axis=1)


# ------------------------------------------------- p-norm given v_max in MSP bins
MSP_BINS = ((0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 0.99))
VMAX_WINDOW = 0.2
VMAX_STEP = 0.05
MIN_WINDOW_COUNT = 10


@dataclass(frozen=True)
class BinProfile:
    """One MSP bin (lo, hi]: the rows kept (v_max within mean ± 2 std of the bin's) and the
    sliding-window mean ± std of the p-norm score over v_max (NaN where < min_count rows)."""

    lo: float
    hi: float
    n_bin: int
    n_kept: int
    centre: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    count: np.ndarray


def pnorm_given_vmax(msp, vmax, pnorm, bins=MSP_BINS, width: float = VMAX_WINDOW, step: float = VMAX_STEP,
                     min_count: int = MIN_WINDOW_COUNT) -> list:
    """Xia et al. fig. 19: the p-norm score given v_max, within bins of similar MSP.

    For each MSP bin (lo, hi], the rows whose v_max lies within mean ± 2 std of the bin's
    v_max (population std) are kept; windows [a, a + width) of v_max start at the smallest
    kept v_max and slide by ``step`` until one reaches the largest (the last window is closed
    on the right); in each, the mean and population std of the p-norm score, NaN when it
    holds fewer than ``min_count`` rows. A bin with no rows has empty arrays.
    """
    msp = np.asarray(msp, dtype=np.float64)
    vmax = np.asarray(vmax, dtype=np.float64)
    pnorm = np.asarray(pnorm, dtype=np.float64)
    out = []
    for lo, hi in bins:
        inside = (msp > lo) & (msp <= hi)
        v, s = vmax[inside], pnorm[inside]
        if v.size == 0:
            empty = np.empty(0)
            out.append(BinProfile(lo, hi, 0, 0, empty, empty, empty, np.empty(0, dtype=np.int64)))
            continue
        centre, spread = v.mean(), v.std()
        keep = np.abs(v - centre) <= 2 * spread
        v, s = v[keep], s[keep]
        n_windows = max(1, int(math.ceil((v.max() - v.min() - width) / step - 1e-9)) + 1)
        starts = v.min() + step * np.arange(n_windows)
        order = np.argsort(v, kind="stable")
        v, s = v[order], s[order]
        first = np.searchsorted(v, starts, side="left")
        last = np.searchsorted(v, starts + width, side="left")
        last[-1] = v.size  # the last window is closed on the right
        count = last - first
        mean = np.full(n_windows, np.nan)
        std = np.full(n_windows, np.nan)
        for i in np.flatnonzero(count >= min_count):
            window = s[first[i]:last[i]]
            mean[i] = window.mean()
            std[i] = window.std()
        out.append(BinProfile(lo, hi, int(inside.sum()), int(v.size), starts + width / 2, mean, std, count))
    return out
