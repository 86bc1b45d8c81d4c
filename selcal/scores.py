"""Confidence scores from logits (CONVENTIONS.md, "Scores"). Pure functions of arrays.

All functions take a float64 logit matrix of shape (N, K) with K >= 2 and return one
float64 value per row (higher = more confident).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "row_chunks",
    "SCORE_NAMES",
    "PROBABILITY_SCORES",
    "softmax_terms",
    "log_msp",
    "max_logit",
    "pnorm",
    "pnorm_grid",
]

SCORE_NAMES = ("msp", "max_logit", "pnorm", "temp")

# Up to this many classes, per-row sums run over the terms sorted ascending: rows that are
# permutations of one another then get bit-identical scores (and tie, as they do exactly),
# for a negligible cost. Beyond it a sort would cost more than the rest of the pass, and
# permuted duplicate rows are vanishingly rare, so sums run in class order.
SORTED_SUM_MAX_CLASSES = 64


CHUNK_ELEMENTS = 1 << 19  # logits per row chunk: each float64 temporary is 4 MB


def row_chunks(n_rows: int, n_classes: int, rows_per_chunk: int | None = None):
    """Slices of at most ``rows_per_chunk`` rows (default: about CHUNK_ELEMENTS logits each)."""
    step = rows_per_chunk or max(1, CHUNK_ELEMENTS // max(n_classes, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def exact_mean(values: np.ndarray) -> float:
    """The mean of float64 values from their exact (correctly rounded) sum, ``math.fsum``.

    Independent of the order of the values. Values near float64's largest are first
    scaled by a power of two (exact), so the sum cannot overflow.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    try:
        return math.fsum(values) / values.size
    except OverflowError:
        shift = values.size.bit_length()
        return math.ldexp(math.fsum(np.ldexp(values, -shift)) / values.size, shift)


def row_sums(terms: np.ndarray) -> np.ndarray:
    """Sum over each row; in sorted order when K <= SORTED_SUM_MAX_CLASSES."""
    if terms.shape[1] <= SORTED_SUM_MAX_CLASSES:
        return np.sort(terms, axis=1).sum(axis=1)
    return terms.sum(axis=1)
PROBABILITY_SCORES = ("msp", "temp")


def softmax_terms(logits: np.ndarray, inverse_temperature: float = 1.0, pred: np.ndarray | None = None):
    """Shifted exponentials of a softmax, kept apart from the top class.

    Returns ``(pred, exps, rest)`` where ``pred`` is argmax_k v_k (first index on ties),
    ``exps[i, k] = exp(beta (v_ik - v_i,max))`` with the entry of ``pred`` set to 0, and
    ``rest[i] = sum_k exps[i, k]`` = S, so that softmax_k = exps_k / (1 + S) off the top
    class and 1 / (1 + S) on it. Keeping S apart from the 1 of the top class is what
    preserves the precision of confidences within 1e-16 of 1. ``pred`` may be passed when
    already known (it does not depend on the temperature).
    """
    if pred is None:
        pred = np.argmax(logits, axis=1)
    rows = np.arange(logits.shape[0])
    shifted = logits - logits[rows, pred][:, None]
    if inverse_temperature != 1.0:
        shifted *= inverse_temperature
    exps = np.exp(shifted, out=shifted)
    exps[rows, pred] = 0.0
    return pred, exps, row_sums(exps)


def log_msp(logits: np.ndarray, inverse_temperature: float = 1.0) -> np.ndarray:
    """log of the maximum softmax probability, -log1p(S) with S = sum_{k != pred} exp(v_k - v_max).

    Examples
    --------
    >>> float(np.exp(log_msp(np.array([[0.0, 0.0]]))[0]))
    0.5
    """
    return -np.log1p(softmax_terms(logits, inverse_temperature)[2])


def max_logit(logits: np.ndarray) -> np.ndarray:
    """v_max, the largest logit of each row."""
    return logits.max(axis=1)


def _scale_to_unit(values: np.ndarray) -> np.ndarray:
    """Divide each row by the power of two just above its largest |value|: exact, and |result| < 1."""
    exponent = np.maximum(np.frexp(np.abs(values).max(axis=1))[1], -1020)  # 2**1020 is finite
    values *= np.ldexp(1.0, -exponent)[:, None]  # a power of two: the product is exact
    return values


def _normalised_magnitudes(logits: np.ndarray, center: bool):
    """(top, |x| / m, positive part of x / m) for x = v - mu, m a power of two above max_k |x_k|.

    Scaling by powers of two is exact, so the terms keep every bit of x and no power
    |x / m|^p overflows whatever the logits' scale. Centred, x is computed as
    K d - sum_k d with d = v - v_max (scale-free, so the same score as v - mean(v)),
    which is exact for logits on a coarse grid (float16 dumps): rows whose scores are
    equal in exact arithmetic then get equal float64 scores. A row of equal logits gives
    x = 0 and scores 0.
    """
    if center:
        shifted = _scale_to_unit(logits - logits.max(axis=1, keepdims=True))
        centred = shifted * logits.shape[1]
        centred -= row_sums(shifted)[:, None]
    else:
        centred = logits.copy()
    centred = _scale_to_unit(centred)
    top = centred.max(axis=1)
    magnitudes = np.abs(centred)
    positive = np.maximum(centred, 0.0, out=centred)
    return top, magnitudes, positive


def pnorm_grid(logits: np.ndarray, ps, center: bool = True) -> np.ndarray:
    """The p-norm score for every p in ``ps`` (positive integers), shape (N, len(ps)).

    s_p = max_k (v_k - mu) / ||v - mu||_p, computed for all p in one pass: the powers
    |x|^p are built by repeated multiplication, never recomputed per p. A row whose
    centred logits are all zero (every logit equal) scores 0. For the centred p = 1 the
    norm is taken as 2 sum_k max(x_k, 0), equal to sum_k |x_k| because x sums to 0, so
    that rows tied in exact arithmetic are tied in float64 too.

    References
    ----------
    Cattelan & Silva, "How to fix a broken confidence estimator", 2023 (MaxLogit-pNorm);
    Xia et al., "Towards understanding why label smoothing degrades selective
    classification", ICLR 2025, eq. 17 (``center=False``).
    """
    ps = [int(p) for p in ps]
    if any(p < 1 for p in ps):
        raise ValueError("p must be a positive integer")
    top, base, positive = _normalised_magnitudes(np.asarray(logits, dtype=np.float64), center)
    sums = {}
    power = base.copy() if max(ps) > 1 else base
    for p in range(1, max(ps) + 1):
        if p in ps:
            sums[p] = row_sums(power)
        if p < max(ps):
            power *= base
    if center and 1 in sums:
        # Centred x sums to 0, so ||x||_1 = 2 sum_k max(x_k, 0): the usual one-class-above-
        # the-mean row then scores exactly 1/2, and such rows tie, as they do exactly.
        sums[1] = 2.0 * row_sums(positive)
    out = np.empty((top.size, len(ps)))
    for j, p in enumerate(ps):
        norm = sums[p] ** (1.0 / p)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, j] = np.where(norm > 0, top / norm, 0.0)
    return out


def pnorm(logits: np.ndarray, p: int, center: bool = True) -> np.ndarray:
    """max_k (v_k - mu) / ||v - mu||_p for one p (see :func:`pnorm_grid`).

    Examples
    --------
    >>> pnorm(np.array([[3.0, 0.0, -3.0]]), p=2).round(6).tolist()
    [0.707107]
    """
    return pnorm_grid(logits, [p], center)[:, 0]
