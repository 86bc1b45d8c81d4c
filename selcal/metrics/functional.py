"""Metric functions in scikit-learn's convention: ``metric(y_true, y_pred) -> float``.

Each function is a thin wrapper: the rows go through the reduction ``selcal evaluate`` uses
(:func:`selcal.pipeline.reduce.reduce_rows`: the same softmax terms, confidences, NLL, Brier and
class-wise bins per row), then through the same pure function (:mod:`selcal.metrics.selective`,
:mod:`selcal.metrics.calibration`) or catalog entry (:mod:`selcal.metrics.catalog`). A number is
therefore the one ``evaluate`` reports for the same rows and options, bit for bit: ``ece(y,
p)`` is ``evaluate_arrays(p, y, scores="msp").scores["msp"]["ece"]``.

What ``y_pred`` holds, ``input_kind`` says:

* ``"probs"``, ``"logits"``, ``"logprobs"``: N x K numbers per row, ``y_true`` the labels
  0 .. K-1 (as ``selcal evaluate --input``); N x K with no ``input_kind``: probabilities are
  detected as in a file (rows in [0, 1] summing to 1), anything else is logits. One number per
  row is a binary model: p(class 1), its logit or its log-probability, and needs ``input_kind``
  (a 1-D array would otherwise be ambiguous).
* ``"confidence"``: one confidence per row, ``y_true`` whether each prediction is correct
  (bool or 0/1), as a file of confidences (``--score-col``). The metrics that need every
  class's probability (NLL, Brier, class-wise ECE) refuse it; the calibration metrics need a
  confidence in [0, 1].

The rows are ranked by ``score`` (``msp`` by default; any score of the registry that needs no
fit). Arrays may be numpy, lists, pandas or polars objects, or torch tensors (any device and
float dtype), as for :func:`selcal.evaluate_arrays`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from . import calibration, selective
from ..errors import SelcalError
from ..options import DEFAULTS, Options
from . import catalog

__all__ = ["aurc", "eaurc", "augrc", "coverage_at_risk", "risk_at_coverage", "error_auroc", "fpr_at_95_tpr", "ece",
           "rmsce", "adaptive_ece", "mce", "classwise_ece", "smooth_ece", "nll", "brier", "risk_coverage_curve",
           "INPUT_KINDS"]

INPUT_KINDS = ("logits", "probs", "logprobs", "confidence")

_PARAMETERS = """y_true : array-like of shape (N,)
        The labels 0 .. K-1; with ``input_kind="confidence"``, whether each prediction is correct.
    y_pred : array-like of shape (N, K) or (N,)
        Probabilities, logits or log-probabilities of the K classes (a binary model: one
        number per row), or one confidence per row, as ``input_kind`` says.
    input_kind : {"probs", "logits", "logprobs", "confidence"}, optional
        What ``y_pred`` holds. By default N x K probabilities are detected (every row in
        [0, 1], summing to 1) and anything else is logits; one number per row needs it."""
_SCORE = """
    score : str, default "msp"
        The confidence score the rows are ranked by (a score of ``selcal.scores.REGISTRY``
        that needs no fit: ``msp``, ``max_logit``, ...); not used with ``input_kind="confidence"``."""
_BINS = f"""
    bins : int, default {DEFAULTS.bins}
        Number of bins."""
_RETURNS = """float
        The value ``selcal.evaluate`` reports as ``{key}``{where}."""


_SECTIONS = """
    Parameters
    ----------
    {parameters}

    Returns
    -------
    {returns}
"""


F = TypeVar("F", bound=Callable[..., Any])


def _doc(key: str, *, score: bool = True, bins: bool = False, extra: str = "",
         where: str | None = None) -> Callable[[F], F]:
    """Give a metric function's docstring its Parameters and Returns sections (one text for all),
    before its Examples."""
    where = where if where is not None else " (in each score's metrics)" if score else " (at the model level)"

    def decorate(function: F) -> F:
        head, examples = (function.__doc__ or "").split("\n    Examples\n", 1)
        sections = _SECTIONS.format(parameters=_PARAMETERS + (_SCORE if score else "") + (_BINS if bins else "") + extra,
                                    returns=_RETURNS.format(key=key, where=where))
        function.__doc__ = f"{head.rstrip()}\n{sections}\n    Examples\n{examples}"
        return function

    return decorate


@dataclass(frozen=True)
class _Rows:
    """The per-row numbers a metric reads: the score as ranked, whether each prediction is
    right, its top-label probability (None: the score has none) and, for N x K input, the
    model's reduction (NLL, Brier, class-wise bins)."""

    values: np.ndarray
    correct: np.ndarray
    confidence: np.ndarray | None
    model: object | None = None


def _options(**values) -> Options:
    """Options checked as ``evaluate`` checks them (the messages name the Python argument)."""
    return Options(**values)


def _vector(value, name: str) -> np.ndarray:
    from ..io.objects import to_numpy

    array = to_numpy(value, name)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise SelcalError(f"{name}: has shape {array.shape}; pass one value per row")
    if array.size == 0:
        raise SelcalError(f"{name}: has no rows")
    return array


def _confidence_rows(y_true, y_pred) -> _Rows:
    """(confidence, correctness) given as they are: the rows of a file of confidences."""
    correct = _vector(y_true, "y_true")
    if correct.dtype.kind != "b":
        try:
            numbers = correct.astype(np.float64)
        except (TypeError, ValueError):
            numbers = np.full(correct.shape, np.nan)
        bad = ~((numbers == 0) | (numbers == 1))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise SelcalError(f"y_true: row {row} holds {correct.tolist()[row]!r}; with input_kind='confidence' y_true says "
                              "whether each prediction is correct (bool, or 0 and 1)")
        correct = numbers == 1
    confidence = _vector(y_pred, "y_pred")
    if confidence.size != correct.size:
        raise SelcalError(f"y_pred: has {confidence.size} values but y_true has {correct.size}; pass one per row")
    try:
        confidence = confidence.astype(np.float64)  # as a column of a file is read (evaluate_confidences)
    except (TypeError, ValueError):
        raise SelcalError("y_pred: holds values that are not numbers; pass one confidence per row") from None
    nonfinite = ~np.isfinite(confidence)
    if nonfinite.any():
        row = int(np.flatnonzero(nonfinite)[0])
        raise SelcalError(f"y_pred: row {row} holds {confidence[row]}; a confidence must be finite")
    probability = bool(confidence.min() >= 0.0 and confidence.max() <= 1.0)
    return _Rows(confidence, correct, confidence if probability else None)


def _rows(y_true, y_pred, input_kind: str | None, options: Options) -> _Rows:
    """The per-row numbers of ``options.scores[0]``, as ``evaluate`` reduces them."""
    if input_kind is not None and input_kind not in INPUT_KINDS:
        raise SelcalError(f"input_kind must be one of {', '.join(INPUT_KINDS)}, got {input_kind!r}")
    if input_kind == "confidence":
        return _confidence_rows(y_true, y_pred)
    from ..io.objects import array_dump, to_numpy
    from ..pipeline.reduce import array_chunks, reduce_rows, rows_per_chunk
    from ..scores import REGISTRY

    if input_kind is None and np.ndim(to_numpy(y_pred, "y_pred")) == 1:
        raise SelcalError("y_pred: has one number per row; say what it is: input_kind='probs' (p of class 1), "
                          "'logits' (a binary logit), 'logprobs', or 'confidence' (y_true then says whether "
                          "each prediction is correct)")
    name = options.scores[0]
    entry = REGISTRY[name]
    if entry.needs_fit:
        raise SelcalError(f"score {name!r} is fitted on validation rows; use selcal.evaluate_arrays(..., "
                          f"val_logits=..., val_labels=...) for it, or a score with no fit (msp, max_logit, ...)")
    dump = array_dump(y_pred, y_true, ("y_pred", "y_true"), input_kind=input_kind)
    if not entry.available_on(dump.input, options):
        raise SelcalError(f"score {name!r} needs raw logits and y_pred holds {dump.input}; "
                          "pass logits (input_kind='logits') or choose another score")
    n, k = dump.logits.shape
    rows = reduce_rows(array_chunks(dump.logits, dump.labels, rows_per_chunk(k, options)), k, options=options,
                       total=n)
    own = rows.scores[name]
    return _Rows(own.values, rows.correct if own.correct is None else own.correct, own.confidence, rows)


def _curve(y_true, y_pred, input_kind, options) -> selective.RiskCoverage:
    rows = _rows(y_true, y_pred, input_kind, options)
    return selective.risk_coverage(rows.values, rows.correct)


def _confidence(y_true, y_pred, input_kind, options, metric: str) -> _Rows:
    rows = _rows(y_true, y_pred, input_kind, options)
    if rows.confidence is None:
        what = ("the confidences are not all in [0, 1]" if input_kind == "confidence"
                else f"the score {options.scores[0]!r} has no probabilities")
        raise SelcalError(f"{metric} needs a probability that the prediction is correct, and {what}")
    return rows


def _model_rows(y_true, y_pred, input_kind, options, metric: str):
    if input_kind == "confidence":
        raise SelcalError(f"{metric} needs every class's probability: pass N x K probabilities or logits, "
                          "not a confidence")
    return _rows(y_true, y_pred, input_kind, options).model


def _number(value) -> float:
    """A metric's value as a float: undefined (None in the JSON) is NaN."""
    return float("nan") if value is None else float(value)


# ------------------------------------------------------------------------------ selective
@_doc("aurc", extra="""
    estimator : {"mean", "trapz"}, default "mean"
        ``--aurc-estimator``: the mean of the selective risks over k = 1..N, or the trapezoid.""")
def aurc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp",
         estimator: str = DEFAULTS.aurc_estimator) -> float:
    """Area under the risk-coverage curve (Geifman et al., ICLR 2019).

    Examples
    --------
    >>> aurc([0, 1, 1, 0], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    0.20833333333333331
    >>> aurc([True, True, False, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.20833333333333331
    """
    options = _options(scores=(score,), aurc_estimator=estimator)
    return selective.aurc(_curve(y_true, y_pred, input_kind, options), options.aurc_estimator)


@_doc("eaurc", extra="""
    estimator : {"mean", "trapz"}, default "mean"
        As for :func:`aurc`.""")
def eaurc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp",
          estimator: str = DEFAULTS.aurc_estimator) -> float:
    """Excess AURC: AURC minus that of the oracle ordering (every correct row first).

    Examples
    --------
    >>> eaurc([True, True, False, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.0
    """
    options = _options(scores=(score,), aurc_estimator=estimator)
    return selective.eaurc(_curve(y_true, y_pred, input_kind, options), options.aurc_estimator)


@_doc("augrc")
def augrc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """Area under the generalised risk-coverage curve (Traub et al., NeurIPS 2024).

    Examples
    --------
    >>> augrc([False, True, True, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.3125
    """
    return selective.augrc(_curve(y_true, y_pred, input_kind, _options(scores=(score,))))


@_doc("cov@RISK", extra="""
    risk : float
        The largest selective risk allowed, a fraction in [0, 1] (``--risks``).""")
def coverage_at_risk(y_true, y_pred, risk: float, *, input_kind: str | None = None, score: str = "msp") -> float:
    """The largest coverage at an operating point whose selective risk is at most ``risk`` (0 if none).

    Examples
    --------
    >>> coverage_at_risk([True, True, False, True], [0.9, 0.8, 0.6, 0.3], 0.3, input_kind="confidence")
    1.0
    >>> coverage_at_risk([True, True, False, True], [0.9, 0.8, 0.6, 0.3], 0.2, input_kind="confidence")
    0.5
    """
    options = _options(scores=(score,), risks=(risk,))
    return selective.coverage_at_risk(_curve(y_true, y_pred, input_kind, options), options.risks[0])


@_doc("risk@COVERAGE", extra="""
    coverage : float
        The coverage to reach, a fraction in (0, 1] (``--coverages``).""")
def risk_at_coverage(y_true, y_pred, coverage: float, *, input_kind: str | None = None, score: str = "msp") -> float:
    """The selective risk at the first operating point whose coverage is at least ``coverage``.

    Examples
    --------
    >>> risk_at_coverage([True, True, False, True], [0.9, 0.8, 0.6, 0.3], 0.75, input_kind="confidence")
    0.3333333333333333
    """
    options = _options(scores=(score,), coverages=(coverage,))
    return selective.risk_at_coverage(_curve(y_true, y_pred, input_kind, options), options.coverages[0])


@_doc("auroc")
def error_auroc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """AUROC of telling correct predictions from errors by the score; ties count one half.

    NaN when there is no error or no correct prediction (``null`` in the JSON).

    Examples
    --------
    >>> error_auroc([True, False, True, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.75
    """
    return _number(selective.error_auroc(_curve(y_true, y_pred, input_kind, _options(scores=(score,)))))


@_doc("fpr95")
def fpr_at_95_tpr(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """The fraction of errors accepted at the highest threshold that accepts 95% of the correct predictions.

    NaN when there is no error or no correct prediction (``null`` in the JSON).

    Examples
    --------
    >>> fpr_at_95_tpr([True, False, True, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.5
    """
    return _number(selective.fpr_at_tpr(_curve(y_true, y_pred, input_kind, _options(scores=(score,))), 0.95))


def risk_coverage_curve(y_true, y_pred, *, input_kind: str | None = None,
                        score: str = "msp") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operating points of the risk-coverage curve, one per group of equal scores.

    The curve AURC and every selective metric read (:func:`selcal.metrics.selective.risk_coverage`).

    Parameters
    ----------
    {parameters}

    Returns
    -------
    coverage : ndarray of shape (G,)
        The fraction of rows accepted at each operating point (increasing, the last is 1).
    risk : ndarray of shape (G,)
        The fraction of errors among the accepted rows; inside a group of equal scores, the
        expectation under a random order.
    thresholds : ndarray of shape (G,)
        Operating point g accepts the rows whose score is at least ``thresholds[g]``: the
        score's probability when it has one (MSP: the top-label probability), else its value
        (``max_logit``: the largest logit).

    Examples
    --------
    >>> coverage, risk, thresholds = risk_coverage_curve([True, True, False, False], [0.9, 0.6, 0.6, 0.3],
    ...                                                  input_kind="confidence")
    >>> coverage.tolist(), risk.tolist(), thresholds.tolist()
    ([0.25, 0.75, 1.0], [0.0, 0.3333333333333333, 0.5], [0.9, 0.6, 0.3])
    """
    rows = _rows(y_true, y_pred, input_kind, _options(scores=(score,)))
    curve = selective.risk_coverage(rows.values, rows.correct)
    thresholds = curve.thresholds
    if rows.confidence is not None and rows.confidence is not rows.values:  # ranked by its logarithm
        thresholds = selective.thresholds_on(curve, rows.values, rows.confidence)
    return curve.coverage, curve.risk, thresholds


risk_coverage_curve.__doc__ = (risk_coverage_curve.__doc__ or "").format(parameters=_PARAMETERS + _SCORE)


# ---------------------------------------------------------------------- calibration (top label)
def _catalog_value(key: str, y_true, y_pred, input_kind, options: Options) -> float:
    """The catalog entry's value of ``key`` on the score's top-label probability."""
    rows = _confidence(y_true, y_pred, input_kind, options, catalog.name(key))
    return _number(catalog.CATALOG[key].values(rows.confidence, rows.correct, options)[key])


@_doc("ece", bins=True)
def ece(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins) -> float:
    """Expected calibration error of the top-label probability, equal-width bins (Guo et al., 2017).

    Examples
    --------
    >>> ece([0, 1, 1, 0], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    0.4
    """
    return _catalog_value("ece", y_true, y_pred, input_kind, _options(scores=(score,), bins=bins))


@_doc("rmsce", bins=True)
def rmsce(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins) -> float:
    """RMS calibration error: ECE's bins, the root of the weighted mean squared gap (torchmetrics' ``norm="l2"``).

    Examples
    --------
    >>> round(rmsce([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence", bins=2), 12)
    0.360555127546
    """
    return _catalog_value("rmsce", y_true, y_pred, input_kind, _options(scores=(score,), bins=bins))


@_doc("aece", bins=True, extra="""
    estimator : {"equal-mass", "mbls"}, default "equal-mass"
        ``--aece-estimator``: equal-mass bins, or the bins of the MBLS code.""")
def adaptive_ece(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins,
                 estimator: str = DEFAULTS.aece_estimator) -> float:
    """Adaptive ECE: the calibration error over bins of equal mass.

    Examples
    --------
    >>> adaptive_ece([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence", bins=2)
    0.45000000000000007
    """
    options = _options(scores=(score,), bins=bins, aece_estimator=estimator)
    return _catalog_value("aece", y_true, y_pred, input_kind, options)


@_doc("mce", bins=True)
def mce(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins) -> float:
    """Maximum calibration error: the largest gap between accuracy and confidence of a non-empty bin.

    Examples
    --------
    >>> mce([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence", bins=2)
    0.7
    """
    return _catalog_value("mce", y_true, y_pred, input_kind, _options(scores=(score,), bins=bins))


@_doc("smece")
def smooth_ece(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """Smooth ECE at its own bandwidth σ* (Błasiok & Nakkiran, 2023; the fixed point of ``relplot``).

    Examples
    --------
    >>> round(smooth_ece([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence"), 4)
    0.2397
    """
    return _catalog_value("smece", y_true, y_pred, input_kind, _options(scores=(score,)))


# ---------------------------------------------------------------------- of every class's probability
@_doc("nll", score=False)
def nll(y_true, y_pred, *, input_kind: str | None = None) -> float:
    """Negative log-likelihood of the labels, the mean over the rows (natural logarithm).

    Examples
    --------
    >>> round(nll([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 6)
    0.458145
    """
    from ..pipeline.measure import _known_mean

    return _known_mean(_model_rows(y_true, y_pred, input_kind, _options(scores=("msp",)), "NLL").nll)


@_doc("brier", score=False)
def brier(y_true, y_pred, *, input_kind: str | None = None) -> float:
    """Brier score: the mean over the rows of sum_k (p_k - [y = k])^2 (from 0 to 2).

    Examples
    --------
    >>> round(brier([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 6)
    0.29
    """
    from ..pipeline.measure import _known_mean

    return _known_mean(_model_rows(y_true, y_pred, input_kind, _options(scores=("msp",)), "Brier").brier)


@_doc("cece", score=False, bins=True)
def classwise_ece(y_true, y_pred, *, input_kind: str | None = None, bins: int = DEFAULTS.bins) -> float:
    """Class-wise ECE: the mean over the classes of each class's binned calibration error.

    Examples
    --------
    >>> round(classwise_ece([0, 1, 1, 0], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]), 6)
    0.4
    """
    options = _options(scores=("msp",), bins=bins)
    rows = _model_rows(y_true, y_pred, input_kind, options, "class-wise ECE")
    return calibration.classwise_calibration_error(rows.classwise)

