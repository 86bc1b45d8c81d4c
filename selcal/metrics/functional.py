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

The parameters every function shares:

* ``y_true`` (N,): the labels 0 .. K-1; with ``input_kind="confidence"``, whether each
  prediction is correct.
* ``y_pred`` (N, K) or (N,): probabilities, logits or log-probabilities of the K classes (a binary
  model: one number per row), or one confidence per row, as ``input_kind`` says.
* ``input_kind``: ``"probs"``, ``"logits"``, ``"logprobs"`` or ``"confidence"``; None (the
  default) detects N x K probabilities and reads anything else as logits.
* ``score``: the confidence score that ranks the rows, ``"msp"`` by default; any score of
  ``selcal.scores.REGISTRY`` that needs no fit (``max_logit``, ``energy``, ...). Not used with
  ``input_kind="confidence"``.
* ``bins``: the number of bins of a binned calibration metric (``--bins``): equal-width bins
  (:func:`ece`, :func:`rmsce`, :func:`mce`, :func:`classwise_ece`), equal-mass for :func:`adaptive_ece`.

Arrays may be numpy, lists, pandas or polars objects, or torch tensors (any device and float
dtype), as for :func:`selcal.evaluate_arrays`. Each function returns a float, the number
``selcal evaluate`` reports under the key its description names; a value the JSON writes as null
is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import calibration, selective
from ..errors import SelcalError
from ..options import DEFAULTS, Options
from ..options import INPUT_KINDS as FILE_INPUT_KINDS
from . import catalog

__all__ = ["aurc", "eaurc", "augrc", "coverage_at_risk", "risk_at_coverage", "error_auroc", "fpr_at_95_tpr", "ece",
           "rmsce", "adaptive_ece", "mce", "classwise_ece", "smooth_ece", "nll", "brier", "risk_coverage_curve",
           "INPUT_KINDS"]

INPUT_KINDS = (*FILE_INPUT_KINDS, "confidence")  # a file's kinds, and a vector of confidences

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
def aurc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp",
         estimator: str = DEFAULTS.aurc_estimator) -> float:
    """Area under the risk-coverage curve (Geifman et al., ICLR 2019).

    ``selcal evaluate`` reports it as each score's ``aurc``.

    Parameters
    ----------
    estimator : {"mean", "trapz"}, default "mean"
        ``--aurc-estimator``: the mean of the selective risks over k = 1..N, or the trapezoid.

    Examples
    --------
    >>> aurc([0, 1, 1, 0], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    0.20833333333333331
    >>> aurc([True, True, False, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.20833333333333331
    """
    options = _options(scores=(score,), aurc_estimator=estimator)
    return selective.aurc(_curve(y_true, y_pred, input_kind, options), options.aurc_estimator)


def eaurc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp",
          estimator: str = DEFAULTS.aurc_estimator) -> float:
    """Excess AURC: AURC minus that of the oracle ordering (every correct row first), both by the
    ``estimator`` of :func:`aurc`.

    ``selcal evaluate`` reports it as each score's ``eaurc``.

    Examples
    --------
    >>> eaurc([True, True, False, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.0
    """
    options = _options(scores=(score,), aurc_estimator=estimator)
    return selective.eaurc(_curve(y_true, y_pred, input_kind, options), options.aurc_estimator)


def augrc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """Area under the generalised risk-coverage curve (Traub et al., NeurIPS 2024).

    ``selcal evaluate`` reports it as each score's ``augrc``.

    Examples
    --------
    >>> augrc([False, True, True, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.3125
    """
    return selective.augrc(_curve(y_true, y_pred, input_kind, _options(scores=(score,))))


def coverage_at_risk(y_true, y_pred, risk: float, *, input_kind: str | None = None, score: str = "msp") -> float:
    """The largest coverage at an operating point whose selective risk is at most ``risk`` (0 if none).

    ``selcal evaluate`` reports it as each score's ``cov@RISK``.

    Parameters
    ----------
    risk : float
        The largest selective risk allowed, a fraction in [0, 1] (``--risks``).

    Examples
    --------
    >>> coverage_at_risk([True, True, False, True], [0.9, 0.8, 0.6, 0.3], 0.3, input_kind="confidence")
    1.0
    >>> coverage_at_risk([True, True, False, True], [0.9, 0.8, 0.6, 0.3], 0.2, input_kind="confidence")
    0.5
    """
    options = _options(scores=(score,), risks=(risk,))
    return selective.coverage_at_risk(_curve(y_true, y_pred, input_kind, options), options.risks[0])


def risk_at_coverage(y_true, y_pred, coverage: float, *, input_kind: str | None = None, score: str = "msp") -> float:
    """The selective risk at the first operating point whose coverage is at least ``coverage``.

    ``selcal evaluate`` reports it as each score's ``risk@COVERAGE``.

    Parameters
    ----------
    coverage : float
        The coverage to reach, a fraction in (0, 1] (``--coverages``).

    Examples
    --------
    >>> risk_at_coverage([True, True, False, True], [0.9, 0.8, 0.6, 0.3], 0.75, input_kind="confidence")
    0.3333333333333333
    """
    options = _options(scores=(score,), coverages=(coverage,))
    return selective.risk_at_coverage(_curve(y_true, y_pred, input_kind, options), options.coverages[0])


def error_auroc(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """AUROC of telling correct predictions from errors by the score (ties count one half), NaN when
    there is no error or no correct prediction (``null`` in the JSON): each score's ``auroc``.

    Examples
    --------
    >>> error_auroc([True, False, True, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.75
    """
    return _number(selective.error_auroc(_curve(y_true, y_pred, input_kind, _options(scores=(score,)))))


def fpr_at_95_tpr(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """The fraction of errors accepted at the highest threshold that accepts 95% of the correct predictions.

    ``selcal evaluate`` reports it as each score's ``fpr95``; NaN when there is no error or no correct
    prediction (``null`` in the JSON).

    Examples
    --------
    >>> fpr_at_95_tpr([True, False, True, False], [0.9, 0.8, 0.6, 0.3], input_kind="confidence")
    0.5
    >>> fpr_at_95_tpr([True, True], [0.9, 0.8], input_kind="confidence")  # no error
    nan
    """
    return _number(selective.fpr_at_tpr(_curve(y_true, y_pred, input_kind, _options(scores=(score,))), 0.95))


def risk_coverage_curve(y_true, y_pred, *, input_kind: str | None = None,
                        score: str = "msp") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operating points of the risk-coverage curve, one per group of equal scores.

    The curve AURC and every selective metric read (:func:`selcal.metrics.selective.risk_coverage`).

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



# ---------------------------------------------------------------------- calibration (top label)
def _catalog_value(key: str, y_true, y_pred, input_kind, options: Options) -> float:
    """The catalog entry's value of ``key`` on the score's top-label probability."""
    rows = _confidence(y_true, y_pred, input_kind, options, catalog.name(key))
    return _number(catalog.CATALOG[key].values(rows.confidence, rows.correct, options)[key])


def ece(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins) -> float:
    """Expected calibration error of the top-label probability, equal-width bins (Guo et al., 2017).

    ``selcal evaluate`` reports it as each score's ``ece``.

    Examples
    --------
    >>> ece([0, 1, 1, 0], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    0.4
    """
    return _catalog_value("ece", y_true, y_pred, input_kind, _options(scores=(score,), bins=bins))


def rmsce(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins) -> float:
    """RMS calibration error: ECE's bins, the root of the weighted mean squared gap (torchmetrics' ``norm="l2"``).

    ``selcal evaluate`` reports it as each score's ``rmsce``.

    Examples
    --------
    >>> round(rmsce([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence", bins=2), 12)
    0.360555127546
    """
    return _catalog_value("rmsce", y_true, y_pred, input_kind, _options(scores=(score,), bins=bins))


def adaptive_ece(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins,
                 estimator: str = DEFAULTS.aece_estimator) -> float:
    """Adaptive ECE: the calibration error over bins of equal mass.

    ``selcal evaluate`` reports it as each score's ``aece``.

    Parameters
    ----------
    estimator : {"equal-mass", "mbls"}, default "equal-mass"
        ``--aece-estimator``: equal-mass bins, or the bins of the MBLS code.

    Examples
    --------
    >>> adaptive_ece([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence", bins=2)
    0.45000000000000007
    """
    options = _options(scores=(score,), bins=bins, aece_estimator=estimator)
    return _catalog_value("aece", y_true, y_pred, input_kind, options)


def mce(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp", bins: int = DEFAULTS.bins) -> float:
    """Maximum calibration error: the largest gap between accuracy and confidence of a non-empty bin.

    ``selcal evaluate`` reports it as each score's ``mce``.

    Examples
    --------
    >>> mce([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence", bins=2)
    0.7
    """
    return _catalog_value("mce", y_true, y_pred, input_kind, _options(scores=(score,), bins=bins))


def smooth_ece(y_true, y_pred, *, input_kind: str | None = None, score: str = "msp") -> float:
    """Smooth ECE at its own bandwidth σ* (Błasiok & Nakkiran, 2023; the fixed point of ``relplot``).

    ``selcal evaluate`` reports it as each score's ``smece``.

    Examples
    --------
    >>> round(smooth_ece([True, False, True, True], [0.9, 0.8, 0.6, 0.3], input_kind="confidence"), 4)
    0.2397
    """
    return _catalog_value("smece", y_true, y_pred, input_kind, _options(scores=(score,)))


# ---------------------------------------------------------------------- of every class's probability
def _row_mean(y_true, y_pred, input_kind, metric: str, field: str) -> float:
    """The mean over the rows of the model's per-row ``field`` (``nll``, ``brier``), as ``evaluate`` takes it."""
    from ..pipeline.measure import known_mean

    return known_mean(getattr(_model_rows(y_true, y_pred, input_kind, _options(scores=("msp",)), metric), field))


def nll(y_true, y_pred, *, input_kind: str | None = None) -> float:
    """Negative log-likelihood of the labels, the mean over the rows (natural logarithm).

    ``selcal evaluate`` reports it as the model's ``nll``.

    Examples
    --------
    >>> round(nll([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 6)
    0.458145
    >>> round(nll([0, 1], [[0.0, 0.0], [0.0, 1.0]], input_kind="logits"), 6)  # -(log 1/2 + log e/(1+e)) / 2
    0.503204
    """
    return _row_mean(y_true, y_pred, input_kind, "NLL", "nll")


def brier(y_true, y_pred, *, input_kind: str | None = None) -> float:
    """Brier score: the mean over the rows of sum_k (p_k - [y = k])^2 (from 0 to 2).

    ``selcal evaluate`` reports it as the model's ``brier``.

    Examples
    --------
    >>> brier([0, 1], [[0.5, 0.5], [0.2, 0.8]])  # ((0.5² + 0.5²) + (0.2² + 0.2²)) / 2
    0.29
    """
    return _row_mean(y_true, y_pred, input_kind, "Brier", "brier")


def classwise_ece(y_true, y_pred, *, input_kind: str | None = None, bins: int = DEFAULTS.bins) -> float:
    """Class-wise ECE: the mean over the classes of each class's binned calibration error.

    ``selcal evaluate`` reports it as the model's ``cece``.

    Examples
    --------
    >>> round(classwise_ece([0, 1, 1, 0], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]), 6)
    0.4
    """
    options = _options(scores=("msp",), bins=bins)
    rows = _model_rows(y_true, y_pred, input_kind, options, "class-wise ECE")
    return calibration.classwise_calibration_error(rows.classwise)

